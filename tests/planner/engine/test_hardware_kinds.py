"""Dtype fallbacks, TPU prompt buckets, LPU SRAM-only weights, CPU sockets."""

from __future__ import annotations

import pytest

from planner.engine import Deployment, Workload, choose_compute_dtype, default_kv_dtype, estimate, lpu_min_chips

from .factories import a100_sxm_80gb, epyc_9654, groq_lpu, h100_sxm, llama_2_70b, llama_3_1_8b, tpu_v5e


def test_fp8_weights_on_an_a100_fall_back_to_bf16_compute_with_a_warning():
    e = estimate(llama_3_1_8b(), Deployment(chip=a100_sxm_80gb(), weight_dtype="fp8"), Workload(prompt_tokens=128, output_tokens=128))
    assert e.compute_dtype == "bf16"
    assert any("nvidia-a100-sxm-80gb has no fp8 math path" in w for w in e.warnings)
    # Still stored in 1 byte, the LM head and embeddings in 2 as the fp8 format keeps them (2 x 0.525e9 of the 8.03e9).
    model = llama_3_1_8b()
    assert e.memory.weights_bytes_per_chip == pytest.approx(8.03e9 + 2 * model.lm_head_params)


def test_fp8_weights_on_an_h100_compute_in_fp8_without_a_warning():
    choice = choose_compute_dtype(h100_sxm(), "fp8")
    assert choice.compute_dtype == "fp8" and choice.warning is None


def test_weight_only_int4_dequantises_to_bf16_without_a_warning():
    choice = choose_compute_dtype(h100_sxm(), "int4")
    assert choice.compute_dtype == "bf16" and choice.warning is None


def test_fp4_weights_without_an_fp4_path_fall_back_with_a_warning():
    choice = choose_compute_dtype(h100_sxm(), "fp4")
    assert choice.compute_dtype == "bf16" and "no fp4 math path" in choice.warning


def test_default_kv_dtype_is_fp8_only_for_fp8_weights_on_fp8_chips():
    assert default_kv_dtype("fp8", h100_sxm()) == "fp8"
    assert default_kv_dtype("fp8", a100_sxm_80gb()) == "bf16"
    assert default_kv_dtype("int4", h100_sxm()) == "bf16"


def test_lpu_needs_enough_chips_to_hold_every_weight_in_sram():
    model, chip = llama_2_70b(), groq_lpu()
    minimum = lpu_min_chips(model, chip, "bf16")
    assert minimum == 600  # 137.96 GB / 230 MB
    e = estimate(model, Deployment(chip=chip, chip_count=64, tensor_parallel=8, pipeline_parallel=8), Workload(prompt_tokens=128, output_tokens=128))
    assert not e.fits
    assert e.reasons[0].startswith("groq-lpu keeps weights in on-chip SRAM only: llama-2-70b at bf16 (138 GB) needs at least 600 chips")


def test_lpu_with_room_for_weights_and_kv_runs_with_small_deterministic_overhead():
    model, chip = llama_2_70b(), groq_lpu()
    e = estimate(model, Deployment(chip=chip, chip_count=720, tensor_parallel=16, pipeline_parallel=45), Workload(prompt_tokens=128, output_tokens=128))
    assert e.feasible, e.reasons
    assert e.decode.overhead_s < 1e-4
    assert any("deterministic" in w for w in e.warnings)


def test_tpu_pads_the_prompt_to_a_power_of_two_bucket_and_pays_for_it():
    model, tpu = llama_3_1_8b(), tpu_v5e()
    e = estimate(model, Deployment(chip=tpu, chip_count=2, tensor_parallel=2), Workload(prompt_tokens=600, output_tokens=16))
    assert e.prefill_tokens == 1024 and e.prefill_padded_tokens == 424
    exact = estimate(model, Deployment(chip=tpu, chip_count=2, tensor_parallel=2), Workload(prompt_tokens=1024, output_tokens=16))
    assert e.prefill.time_s == pytest.approx(exact.prefill.time_s)
    assert any("424 padded tokens" in w for w in e.warnings)


def test_gpus_do_not_pad_prompts():
    e = estimate(llama_3_1_8b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=600, output_tokens=16))
    assert e.prefill_tokens == 600 and e.prefill_padded_tokens == 0


def test_a_cpu_socket_is_a_chip_bounded_by_ddr_bandwidth():
    e = estimate(llama_3_1_8b(), Deployment(chip=epyc_9654()), Workload(prompt_tokens=16, output_tokens=64))
    assert e.feasible
    assert e.decode.bound == "memory"
    streamed = e.decode.bytes_per_chip / (460.8e9 * 0.6)  # CPU default: 60% of DDR bandwidth
    assert e.decode.memory_s == pytest.approx(streamed, rel=1e-9)
    two_sockets = estimate(llama_3_1_8b(), Deployment(chip=epyc_9654(), chip_count=2, tensor_parallel=2), Workload(prompt_tokens=16, output_tokens=64))
    assert two_sockets.tokens_per_s_per_user > e.tokens_per_s_per_user
