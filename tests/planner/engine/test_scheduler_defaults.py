"""A serving engine's scheduler defaults (specs.Scheduler) cap what a configuration may assume on it."""

from __future__ import annotations

import dataclasses

import pytest

from planner.engine import Deployment, Workload, estimate
from planner.engine.specs import Scheduler

from .factories import h100_sxm, llama_3_1_8b, llama_3_1_70b

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
