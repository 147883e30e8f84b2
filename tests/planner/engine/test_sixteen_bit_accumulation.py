"""An engine that accumulates its 16-bit prompt GEMMs in 16 bits (llama.cpp's cuBLAS path, CUBLAS_COMPUTE_16F) runs them
at a GeForce card's 16-bit-accumulate peak, twice the FP32-accumulate rate the catalog gives as its fp16 peak."""

from __future__ import annotations

import dataclasses

import pytest

from planner.engine import Deployment, Workload, estimate
from planner.engine.specs import ChipSpec, Scheduler

from .factories import llama_3_1_8b

# An RTX 4090 as the catalog gives it: 165.15 TFLOP/s dense FP16 with FP32 accumulation, 330.3 with FP16 accumulation.
GEFORCE = ChipSpec(slug="geforce", kind="gpu", vendor="NVIDIA", memory_capacity_bytes=24 * 2**30, memory_bandwidth_bytes_per_s=1.008e12,
                   peak_flops_per_s={"fp32": 82.6e12, "bf16": 165.15e12, "fp16": 165.15e12, "fp8": 330.3e12},
                   peak_fp16_acc16_flops_per_s=330.3e12)  # fmt: skip
LLAMA_CPP = Scheduler(engine="llama.cpp", kv_memory_fraction=1.0, kv_memory_of_free=True, accumulates_in_16_bits=True)
VLLM = Scheduler(engine="vLLM", kv_memory_fraction=0.9)


def _under(scheduler, chip=GEFORCE):
    return dataclasses.replace(chip, scheduler=scheduler)


def test_a_sixteen_bit_accumulating_engine_runs_16_bit_math_at_the_16_bit_accumulate_peak():
    assert _under(LLAMA_CPP).math_peak_flops_per_s("fp16", "fp16") == 330.3e12
    assert _under(LLAMA_CPP).math_peak_flops_per_s("bf16", "int4") == 330.3e12  # quantised weights dequantised to fp16
    # ... not BF16 weights (llama.cpp multiplies them with 32-bit accumulation), not FP8 math, not an engine that
    # accumulates in 32 bits, not a chip without a 16-bit-accumulate figure.
    assert _under(LLAMA_CPP).math_peak_flops_per_s("bf16", "bf16") == 165.15e12
    fp8_apart = dataclasses.replace(GEFORCE, peak_flops_per_s={**GEFORCE.peak_flops_per_s, "fp8": 660.6e12})
    assert _under(LLAMA_CPP, fp8_apart).math_peak_flops_per_s("fp8", "fp8") == 660.6e12
    assert _under(VLLM).math_peak_flops_per_s("fp16", "fp16") == 165.15e12
    assert _under(LLAMA_CPP, dataclasses.replace(GEFORCE, peak_fp16_acc16_flops_per_s=None)).math_peak_flops_per_s("fp16", "fp16") == 165.15e12


def test_its_prompt_is_prefilled_twice_as_fast_where_compute_binds():
    work = Workload(prompt_tokens=4096, output_tokens=16)
    fast = estimate(llama_3_1_8b(), Deployment(chip=_under(LLAMA_CPP), weight_dtype="fp16"), work, batch=1)
    slow = estimate(llama_3_1_8b(), Deployment(chip=_under(VLLM), weight_dtype="fp16"), work, batch=1)
    # Its GEMMs at twice the rate; what the planner multiplies as 16-bit activations (attention) at the fp16 peak.
    assert 1.5 < slow.prefill.compute_s / fast.prefill.compute_s <= 2.0
    assert fast.ttft_s < slow.ttft_s
