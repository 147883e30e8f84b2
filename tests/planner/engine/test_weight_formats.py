"""The engine stores and streams weights in their format: block scales counted, the 16-bit parts at 16 bits."""

from __future__ import annotations

import dataclasses

import numpy as np
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


def test_a_deployment_may_name_its_weights_format_and_q4_k_m_weighs_what_llama_cpp_says():
    # llama.cpp tools/quantize/README.md: Llama-3.1-8B at Q4_K_M is 4.8944 bits a weight, 4.58 GiB.
    model, work = llama_3_1_8b(), Workload(prompt_tokens=128, output_tokens=128)
    q4 = estimate(model, Deployment(chip=h100_sxm(), weight_dtype="int4", weight_format="q4_k_m"), work)
    assert q4.memory.weights_bytes_per_chip / 2**30 == pytest.approx(4.58, rel=0.005)
    plain = estimate(model, Deployment(chip=h100_sxm(), weight_dtype="int4"), work)
    assert plain.memory.weights_bytes_per_chip < q4.memory.weights_bytes_per_chip
    # llama.cpp's kernels stream Q4_K_M at 0.75 of F16's share (the same table), against 0.6 for group-scaled int4.
    assert q4.decode.memory_s == pytest.approx(plain.decode.memory_s * (4.8944 / (4 + 20 / 128)) * 0.6 / 0.75, rel=0.02)


def test_q8_0_weighs_34_bytes_a_block_of_32_weights_as_ggml_stores_it():
    # ggml/src/ggml-common.h: block_q8_0 is an fp16 scale and 32 int8 weights, 8.5 bits a weight; the head too.
    model, work = llama_3_1_8b(), Workload(prompt_tokens=128, output_tokens=128)
    q8 = estimate(model, Deployment(chip=h100_sxm(), weight_dtype="int8", weight_format="q8_0"), work)
    assert q8.memory.weights_bytes_per_chip == pytest.approx(model.total_params * 34 / 32, rel=1e-9)


@pytest.mark.parametrize(("weight_dtype", "weight_format"), [("fp8", "q4_k_m"), ("fp4", "int4"), ("int4", "gguf")])
def test_a_weight_format_of_another_dtype_is_refused_in_words(weight_dtype, weight_format):
    with pytest.raises(ValueError, match="weight_format"):
        Deployment(chip=h100_sxm(), weight_dtype=weight_dtype, weight_format=weight_format)


def test_a_prefill_multiplies_the_lm_head_by_its_last_position_only():
    # Serving engines gather each prompt's last position before the head (vLLM's logits indices; TensorRT-LLM
    # without gather_context_logits): a 2,000-token prompt does 1,999 fewer head products than it has tokens.
    model, work = llama_3_1_8b(), Workload(prompt_tokens=2000, output_tokens=16)
    e = estimate(model, Deployment(chip=h100_sxm()), work)
    attention_flops = e.prefill.flops_per_chip - 2.0 * (2000 * (model.matmul_params - model.lm_head_params) + model.lm_head_params)
    assert attention_flops == pytest.approx(model.attention.causal_pairs(2000.0) * model.attention.prefill_flops_per_pair, rel=1e-6)
    # A decode step still multiplies every sequence's position.
    decode_flops = estimate(model, Deployment(chip=h100_sxm()), work, batch=4).decode.flops_per_chip
    assert decode_flops > 4 * 2.0 * model.matmul_params


@pytest.mark.parametrize("kind", ["mtp", "medusa"])
def test_a_draft_head_streams_its_own_16_bit_parts_not_the_targets(kind):
    # The target keeps every attention projection in 16 bits; a one-layer head (or Medusa's residual
    # blocks) must not carry the target's 32 layers of them.
    from planner.engine import DraftHeads
    from planner.engine.forward import forward_cost
    from planner.engine.simulation.arrays import deployment_arrays

    plain = llama_3_1_8b()
    kept = dataclasses.replace(plain, checkpoint_format="nvfp4", sixteen_bit_modules={"nvfp4": ("attention",)})
    heads = DraftHeads(head_kind=kind, draft_tokens=2, acceptance_rate=0.7)
    deployment = Deployment(chip=b200(), weight_dtype="fp4")

    def head_step_bytes(target) -> float:
        head, _ = heads.head_model(target)
        hw = deployment_arrays(target, deployment)[2]
        return float(forward_cost(head, hw, sequences=np.ones(1), new_tokens=1.0, attention_pairs=0.0, kv_read_tokens=0.0,
                                  kv_write_tokens=0.0).bytes_per_chip[0])  # fmt: skip

    assert head_step_bytes(kept) == pytest.approx(head_step_bytes(plain), rel=1e-12)
