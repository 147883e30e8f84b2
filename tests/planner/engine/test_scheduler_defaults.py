"""A serving engine's scheduler defaults (specs.Scheduler) cap what a configuration may assume on it."""

from __future__ import annotations

import dataclasses

import pytest

from planner.engine import Deployment, Workload, estimate
from planner.engine.specs import Scheduler

from .factories import epyc_9654, h100_sxm, llama_3_1_8b, llama_3_1_70b, mixtral_8x7b, xeon_8480plus

VLLM_LIKE = Scheduler(engine="vLLM", kv_memory_fraction=0.9)  # of the whole GPU
TRT_LIKE = Scheduler(engine="TensorRT-LLM", kv_memory_fraction=0.9, kv_memory_of_free=True)  # of what the weights leave


def _run(scheduler, *, model=None, batch=1, weight_dtype="fp8", prompt_tokens=1024, memory_bytes=80e9):
    chip = dataclasses.replace(h100_sxm(), scheduler=scheduler, memory_capacity_bytes=memory_bytes)
    return estimate(model or llama_3_1_70b(), Deployment(chip=chip, weight_dtype=weight_dtype),
                    Workload(prompt_tokens=prompt_tokens, output_tokens=128), batch=batch)  # fmt: skip


def test_a_free_fraction_scheduler_lets_the_weights_fill_the_gpu():
    # Llama-3.1-70B at fp8, 70 GB of weights: over 90% of a 76 GB GPU, under all of it.
    assert not _run(VLLM_LIKE, memory_bytes=76e9).fits
    trt = _run(TRT_LIKE, memory_bytes=76e9)
    assert trt.fits and trt.memory.max_concurrency >= 1
    assert trt.memory.usable_bytes_per_chip == pytest.approx(76e9)


def test_the_kv_cache_gets_the_fraction_of_what_the_weights_leave():
    small = llama_3_1_8b()
    free, total = _run(TRT_LIKE, model=small, weight_dtype="bf16"), _run(VLLM_LIKE, model=small, weight_dtype="bf16")
    # 0.9 x (80 - w - a) against 0.9 x 80 - w - a: the free fraction leaves 10% of the weights' room more.
    left = 80e9 - free.memory.weights_bytes_per_chip - free.memory.activation_bytes_per_chip
    per_sequence = free.memory.kv_bytes_per_sequence_per_chip
    assert free.memory.max_concurrency == pytest.approx(0.9 * left / per_sequence, abs=1)
    assert free.memory.max_concurrency > total.memory.max_concurrency


def test_the_batch_cap_bounds_the_sequences_a_replica_runs():
    capped = dataclasses.replace(VLLM_LIKE, max_batch_sequences=8)
    e = _run(capped, model=llama_3_1_8b(), weight_dtype="bf16", batch=16)
    assert e.memory.max_concurrency == 8 and not e.fits
    assert "batch cap" in " ".join(e.reasons)


def test_a_smaller_prefill_budget_reserves_a_smaller_activation_workspace():
    wide = _run(dataclasses.replace(VLLM_LIKE, prefill_token_budget=8192), model=llama_3_1_8b(), weight_dtype="bf16", prompt_tokens=8000)
    narrow = _run(dataclasses.replace(VLLM_LIKE, prefill_token_budget=2048), model=llama_3_1_8b(), weight_dtype="bf16", prompt_tokens=8000)
    assert narrow.memory.activation_bytes_per_chip == pytest.approx(wide.memory.activation_bytes_per_chip * 2048 / 8000)


def test_scheduler_defaults_out_of_range_are_refused():
    with pytest.raises(ValueError, match="kv_memory_fraction"):
        Scheduler(engine="x", kv_memory_fraction=1.5)
    with pytest.raises(ValueError, match="max_batch_sequences"):
        Scheduler(engine="x", kv_memory_fraction=0.9, max_batch_sequences=0)


# llama.cpp on a CPU: ggml's AMX kernels take its quantised GGUF types only (ggml-cpu/amx/common.h); 16-bit weights run on AVX-512.
LLAMA_CPP_LIKE = Scheduler(engine="llama.cpp", kv_memory_fraction=1.0, kv_memory_of_free=True, cpu_matrix_dtypes=("int8", "int4"),
                           cpu_matrix_experts=False)  # fmt: skip
# An engine that runs every dtype and expert on a CPU's matrix units where it has them (SGLang's CPU backend: the catalog's default).
AMX_LIKE = Scheduler(engine="SGLang", kv_memory_fraction=0.9)


def test_an_engine_that_keeps_16_bit_weights_off_the_cpus_matrix_units_runs_them_at_the_vector_rate():
    xeon = dataclasses.replace(xeon_8480plus(), scheduler=LLAMA_CPP_LIKE)
    assert xeon.math_peak_flops_per_s("bf16", "bf16") == pytest.approx(2 * 7.168e12)  # AVX512_BF16: 2 products a fp32 lane
    assert xeon.math_peak_flops_per_s("bf16", "int4") == pytest.approx(114.688e12)  # Q4 weights: AMX tiles
    # a MoE model's experts off the tiles even in Q4: int8 dot products against Q8 activations, AVX512_VNNI's four a lane
    assert xeon.math_peak_flops_per_s("bf16", "int4", experts=True) == pytest.approx(4 * 7.168e12)
    assert xeon.math_peak_flops_per_s("bf16", "fp16") == pytest.approx(7.168e12)  # ggml's F16 kernels convert to fp32
    assert xeon_8480plus().math_peak_flops_per_s("bf16", "bf16") == pytest.approx(114.688e12)  # no engine named: the datasheet
    # A CPU without AMX (an EPYC: bf16 at twice fp32 already) and a GPU keep their peaks under the same engine.
    epyc = dataclasses.replace(epyc_9654(), scheduler=LLAMA_CPP_LIKE)
    assert epyc.math_peak_flops_per_s("bf16", "bf16") == epyc_9654().peak_flops_per_s["bf16"]
    gpu = dataclasses.replace(h100_sxm(), scheduler=LLAMA_CPP_LIKE)
    assert gpu.math_peak_flops_per_s("bf16", "bf16") == h100_sxm().peak_flops_per_s["bf16"]


def test_on_a_xeon_a_16_bit_prefill_under_llama_cpp_takes_eight_times_the_amx_engines_compute():
    model, workload = llama_3_1_8b(), Workload(prompt_tokens=4096, output_tokens=16)
    amx, vector = (dataclasses.replace(xeon_8480plus(), scheduler=scheduler) for scheduler in (AMX_LIKE, LLAMA_CPP_LIKE))
    on_amx, on_vector = (estimate(model, Deployment(chip=c, weight_dtype="bf16"), workload, batch=1) for c in (amx, vector))
    assert on_vector.prefill.compute_s == pytest.approx(8 * on_amx.prefill.compute_s, rel=1e-6)  # 16x fp32 against 2x
    assert any("llama.cpp runs bf16 weights' GEMMs on the vector units of xeon" in w for w in on_vector.warnings)
    assert not any("vector units" in w for w in on_amx.warnings)
    amx_q4, vector_q4 = (estimate(model, Deployment(chip=c, weight_dtype="int4"), workload, batch=1) for c in (amx, vector))
    # int4 weights: the GEMMs stay on AMX tiles under llama.cpp too; only its attention (QK^T, PV in 16 bits) runs on AVX-512.
    assert amx_q4.prefill.compute_s == pytest.approx(on_amx.prefill.compute_s)
    assert amx_q4.prefill.compute_s < vector_q4.prefill.compute_s < on_vector.prefill.compute_s / 4


def test_a_matrix_dtype_the_planner_does_not_know_is_refused():
    with pytest.raises(ValueError, match="cpu_matrix_dtypes"):
        Scheduler(engine="x", kv_memory_fraction=0.9, cpu_matrix_dtypes=("int3",))


def test_under_llama_cpp_a_moe_models_experts_prefill_on_a_xeons_vector_units_and_the_estimate_says_so():
    model, workload = mixtral_8x7b(), Workload(prompt_tokens=4096, output_tokens=16)
    amx, vector = (dataclasses.replace(xeon_8480plus(), scheduler=scheduler) for scheduler in (AMX_LIKE, LLAMA_CPP_LIKE))
    on_amx, on_vector = (estimate(model, Deployment(chip=c, weight_dtype="int4"), workload, batch=1) for c in (amx, vector))
    # AMX's 16x fp32 against VNNI's 4x: the experts' GEMMs take four times as long; the dense ones stay on the tiles
    assert on_vector.prefill.expert_compute_s == pytest.approx(4 * on_amx.prefill.expert_compute_s, rel=1e-6)
    assert any("routed experts on the vector units of xeon" in w for w in on_vector.warnings)
    assert not any("int4 weights' GEMMs" in w for w in on_vector.warnings)  # its dense int4 GEMMs stay on the tiles
    assert not any("vector units" in w for w in on_amx.warnings)
    dense = estimate(llama_3_1_8b(), Deployment(chip=vector, weight_dtype="int4"), workload, batch=1)
    assert not any("routed experts" in w for w in dense.warnings)  # said only of a MoE model
