"""The memory wall in numbers: hand-checked roofline figures and ridge points (docs/planner_math.md#forward-cost)."""

from __future__ import annotations

import pytest

from planner.engine import Deployment, Efficiency, Workload, estimate

from .factories import dense_8b_textbook, h100_sxm, llama_3_1_8b, textbook_h100

PEAK = Efficiency(compute_fraction=1.0, bandwidth_fraction=1.0, step_overhead_s=0.0, link_bandwidth_fraction=1.0, source="override")


def _tiny_decode():
    return estimate(dense_8b_textbook(), Deployment(chip=textbook_h100()), Workload(prompt_tokens=1, output_tokens=1), efficiency=PEAK)


def test_dense_8b_bf16_on_textbook_h100_is_compute_bound_at_62500_tokens_per_s():
    decode = _tiny_decode().decode
    assert 1.0 / decode.compute_s == pytest.approx(62_500, rel=0.01)


def test_dense_8b_bf16_on_textbook_h100_is_memory_bound_at_206_tokens_per_s():
    e = _tiny_decode()
    assert 1.0 / e.decode.memory_s == pytest.approx(206.25, rel=0.01)
    assert e.decode.bound == "memory"
    assert e.decode_token_time_s == pytest.approx(1 / 206.25, rel=0.01)


def test_h100_bf16_ridge_is_about_295_flop_per_byte():
    e = estimate(llama_3_1_8b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=128, output_tokens=128))
    assert e.decode.ridge_flop_per_byte == pytest.approx(989.4e12 / 3.35e12, rel=1e-9)
    assert e.decode.ridge_flop_per_byte == pytest.approx(295, abs=1)


def test_batch_one_bf16_decode_sits_near_one_flop_per_byte():
    assert _tiny_decode().decode.intensity_flop_per_byte == pytest.approx(1.0, rel=0.01)


def test_large_batch_prefill_is_compute_bound_and_batch_one_decode_is_memory_bound():
    e = estimate(llama_3_1_8b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=4096, output_tokens=128))
    assert e.prefill.bound == "compute"
    assert e.decode.bound == "memory"
    assert e.prefill.intensity_flop_per_byte > e.prefill.ridge_flop_per_byte > e.decode.intensity_flop_per_byte


def test_decode_intensity_grows_about_linearly_with_batch_below_the_ridge():
    model, chip, work = llama_3_1_8b(), h100_sxm(), Workload(prompt_tokens=16, output_tokens=16)
    one = estimate(model, Deployment(chip=chip), work, batch=1, efficiency=PEAK).decode.intensity_flop_per_byte
    many = estimate(model, Deployment(chip=chip), work, batch=32, efficiency=PEAK).decode.intensity_flop_per_byte
    assert many / one == pytest.approx(32, rel=0.1)
