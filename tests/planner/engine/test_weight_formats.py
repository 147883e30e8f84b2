"""The engine stores and streams weights in their format: block scales counted, the 16-bit parts at 16 bits."""

from __future__ import annotations

import dataclasses

import pytest

from planner.engine import ChipSpec, Deployment, Workload, estimate

from .factories import h100_sxm, llama_3_1_8b

NVFP4_BYTES = 4.5 / 8


def b200() -> ChipSpec:
    # NVIDIA B200 datasheet (HGX B200): 180 GB HBM3e at 8 TB/s; dense peaks 2.25 PFLOP/s bf16, 4.5 fp8, 9 fp4.
    return ChipSpec(slug="b200", kind="gpu", vendor="NVIDIA", memory_capacity_bytes=180e9, memory_bandwidth_bytes_per_s=8e12,
                    peak_flops_per_s={"bf16": 2.25e15, "fp8": 4.5e15, "fp4": 9e15}, chips_per_node=8)  # fmt: skip


def test_nvfp4_weights_take_their_scales_and_a_16_bit_head_and_embedding():
    model = llama_3_1_8b()
    head = model.lm_head_params
    e = estimate(model, Deployment(chip=b200(), weight_dtype="fp4"), Workload(prompt_tokens=128, output_tokens=128))
    expected = model.total_params * NVFP4_BYTES + 2 * head * (2.0 - NVFP4_BYTES)
    assert e.memory.weights_bytes_per_chip == pytest.approx(expected, rel=1e-9)
    assert e.memory.weights_bytes_per_chip == pytest.approx(model.weight_bytes("fp4"), rel=1e-9)


def test_a_decode_step_streams_the_head_at_16_bits_and_the_rest_at_the_format():
    model, chip = llama_3_1_8b(), b200()
    work = Workload(prompt_tokens=128, output_tokens=128)
    fp4 = estimate(model, Deployment(chip=chip, weight_dtype="fp4", kv_dtype="bf16"), work).decode.bytes_per_chip
    bf16 = estimate(model, Deployment(chip=chip, weight_dtype="bf16", kv_dtype="bf16"), work).decode.bytes_per_chip
    # The same cache and activations: only the weights read differ, and the head reads 2 bytes either way.
    assert bf16 - fp4 == pytest.approx((model.matmul_params - model.lm_head_params) * (2.0 - NVFP4_BYTES), rel=1e-9)


def test_keeping_more_modules_in_16_bits_never_makes_weights_smaller_or_decode_faster():
    base = llama_3_1_8b()
    kept = dataclasses.replace(base, checkpoint_format="nvfp4", sixteen_bit_modules={"nvfp4": ("attention",)})
    deployment, work = Deployment(chip=b200(), weight_dtype="fp4"), Workload(prompt_tokens=512, output_tokens=256)
    plain, more = estimate(base, deployment, work), estimate(kept, deployment, work)
    assert more.memory.weights_bytes_per_chip > plain.memory.weights_bytes_per_chip
    assert more.tpot_s >= plain.tpot_s and more.ttft_s >= plain.ttft_s
    # At bf16 nothing is kept apart: the listed modules change nothing.
    at_bf16 = Deployment(chip=b200(), weight_dtype="bf16")
    assert estimate(kept, at_bf16, work).tpot_s == estimate(base, at_bf16, work).tpot_s


def test_a_checkpoints_own_format_of_the_dtype_is_used():
    model = dataclasses.replace(llama_3_1_8b(), checkpoint_format="mxfp4")
    assert model.weight_layout("fp4").weight_format == "mxfp4" and model.weight_layout("fp4").bytes_per_param == 4.25 / 8
    assert model.weight_layout("fp8").weight_format == "fp8"
    assert llama_3_1_8b().weight_layout("fp4").weight_format == "nvfp4"


def test_weight_only_int4_keeps_nothing_in_16_bits_and_counts_its_group_scales():
    model = llama_3_1_8b()
    layout = model.weight_layout("int4")
    assert (layout.sixteen_bit_stored_params, layout.sixteen_bit_streamed_params) == (0.0, 0.0)
    e = estimate(model, Deployment(chip=h100_sxm(), weight_dtype="int4"), Workload(prompt_tokens=128, output_tokens=128))
    assert e.memory.weights_bytes_per_chip == pytest.approx(model.total_params * (4 + 20 / 128) / 8, rel=1e-9)
