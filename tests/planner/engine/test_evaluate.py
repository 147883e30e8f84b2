"""One vectorised path: evaluate() over a grid agrees with estimate() per config."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engine import (
    Autoregressive,
    BlockDiffusion,
    CandidateGrid,
    Deployment,
    Efficiency,
    Speculative,
    Workload,
    cartesian_grid,
    estimate,
    evaluate,
)
from planner.engine.units import DTYPES

from .factories import a100_sxm_80gb, epyc_9654, h100_sxm, llama_2_7b, llama_2_70b, tpu_v5e

CHIPS = (h100_sxm(), a100_sxm_80gb(), tpu_v5e(), epyc_9654())
DECODINGS = (
    Autoregressive(),
    Speculative(draft=llama_2_7b(), draft_tokens=4, mean_accepted_tokens=3.0),
    BlockDiffusion(block_size=32, steps_per_block=8, expected_answer_tokens=100),
)


def test_vectorised_evaluate_equals_estimate_for_the_same_config():
    model, work = llama_2_70b(), Workload(prompt_tokens=300, output_tokens=200)
    grid = cartesian_grid(model, CHIPS, weight_dtypes=("bf16", "fp8", "int4"), batches=(1, 8, 64), decoding_count=len(DECODINGS))
    results = evaluate(model, CHIPS, grid, work, DECODINGS)
    rng = np.random.default_rng(1)
    for i in rng.choice(len(grid), size=40, replace=False):
        deployment = Deployment(
            chip=CHIPS[grid.chip_index[i]], chip_count=int(grid.chip_count[i]), tensor_parallel=int(grid.tensor_parallel[i]),
            pipeline_parallel=int(grid.pipeline_parallel[i]), weight_dtype=DTYPES[grid.weight_dtype[i]],
            kv_dtype=DTYPES[grid.kv_dtype[i]], decoding=DECODINGS[grid.decoding_index[i]],
        )  # fmt: skip
        one = estimate(model, deployment, work, batch=int(grid.batch[i]))
        assert one.fits == bool(results.fits[i])
        assert one.ttft_s == pytest.approx(results.ttft_s[i], rel=1e-12)
        assert one.tpot_s == pytest.approx(results.tpot_s[i], rel=1e-12)
        assert one.memory.max_concurrency == results.max_concurrency[i]
        assert one.decode.bound == ("compute", "memory", "interconnect")[results.decode.bound[i]]


def test_evaluate_handles_a_grid_in_any_order_of_decoding_settings():
    model, work = llama_2_70b(), Workload(prompt_tokens=128, output_tokens=128)
    grid = cartesian_grid(model, CHIPS[:2], weight_dtypes=("fp8",), batches=(4,), decoding_count=3)
    shuffled = grid.take(np.random.default_rng(2).permutation(len(grid)))
    a, b = evaluate(model, CHIPS[:2], grid, work, DECODINGS), evaluate(model, CHIPS[:2], shuffled, work, DECODINGS)
    keys = ("batch", "kv_dtype", "weight_dtype", "pipeline_parallel", "tensor_parallel", "chip_count", "chip_index", "decoding_index")
    order = np.lexsort([getattr(shuffled, f) for f in keys])
    base = np.lexsort([getattr(grid, f) for f in keys])
    np.testing.assert_allclose(a.tpot_s[base], b.tpot_s[order])


def test_max_batch_is_the_largest_that_fits_and_meets_the_tpot_slo():
    model, chip = llama_2_7b(), h100_sxm()
    free = estimate(model, Deployment(chip=chip), Workload(prompt_tokens=128, output_tokens=128), batch="max")
    assert free.batch == free.memory.max_concurrency
    slo = estimate(model, Deployment(chip=chip), Workload(prompt_tokens=128, output_tokens=128, tpot_slo_s=0.02), batch="max")
    assert slo.feasible and slo.tpot_s <= 0.02 and slo.batch < free.batch


def test_slo_misses_are_reported_with_the_numbers():
    e = estimate(llama_2_70b(), Deployment(chip=h100_sxm(), chip_count=2, tensor_parallel=2), Workload(prompt_tokens=128, output_tokens=128, tpot_slo_s=0.001))
    assert e.fits and not e.feasible
    assert e.reasons[0].startswith("TPOT") and "exceeds the SLO of 1.00 ms" in e.reasons[0]


def test_a_request_rate_adds_md1_queueing_to_ttft_and_overload_is_infeasible():
    model, chip = llama_2_7b(), h100_sxm()
    calm = estimate(model, Deployment(chip=chip), Workload(prompt_tokens=2048, output_tokens=128, request_rate_per_s=1.0), batch=32)
    busy = estimate(model, Deployment(chip=chip), Workload(prompt_tokens=2048, output_tokens=128, request_rate_per_s=20.0), batch=32)
    assert 0 < calm.queue_wait_s < busy.queue_wait_s
    assert busy.ttft_s > calm.ttft_s
    overloaded = estimate(model, Deployment(chip=chip), Workload(prompt_tokens=2048, output_tokens=128, request_rate_per_s=1000.0), batch=32)
    assert overloaded.fits and not overloaded.feasible
    assert "cannot keep up" in overloaded.reasons[0]


def test_disaggregated_prefill_adds_a_prefill_pool_and_removes_prefill_from_tpot():
    model, chip, work = llama_2_7b(), h100_sxm(), Workload(prompt_tokens=2048, output_tokens=128, request_rate_per_s=10.0)
    colocated = estimate(model, Deployment(chip=chip), work, batch=64)
    split = estimate(model, Deployment(chip=chip), work, batch=64, disaggregated=True)
    assert split.total_chips > split.chip_count == 1
    assert split.tpot_s < colocated.tpot_s
    assert split.tpot_s == pytest.approx(split.decode_token_time_s)


def test_overriding_efficiency_changes_the_source_and_the_numbers():
    model, chip, work = llama_2_7b(), h100_sxm(), Workload(prompt_tokens=128, output_tokens=128)
    slow = Efficiency(compute_fraction=0.5, bandwidth_fraction=0.4, step_overhead_s=1e-3, link_bandwidth_fraction=0.5, source="override")
    default = estimate(model, Deployment(chip=chip), work)
    override = estimate(model, Deployment(chip=chip), work, efficiency=slow)
    fitted = Efficiency(compute_fraction=0.6, bandwidth_fraction=0.6, step_overhead_s=2e-4, link_bandwidth_fraction=0.8, source="calibration v3 (12 runs)")
    calibrated = estimate(model, Deployment(chip=chip), work, calibration={(chip.slug, "bf16"): fitted})
    assert default.efficiency_source == "spec defaults"
    assert override.efficiency_source == "override" and override.tpot_s > default.tpot_s
    assert calibrated.efficiency_source == "calibration v3 (12 runs)"


def test_a_single_candidate_grid_round_trips_through_evaluate():
    grid = CandidateGrid.single(weight_dtype="bf16", kv_dtype="bf16", batch=4)
    results = evaluate(llama_2_7b(), (h100_sxm(),), grid, Workload(prompt_tokens=64, output_tokens=64))
    assert len(results) == 1 and results.feasible[0]
    # throughput carries all four sequences' prefills; a user's TPOT only the other three
    cycle = results.decode_token_time_s[0] + 4 * results.prefill_batched_s_per_prompt[0] / 64
    assert results.output_tokens_per_s_total[0] == pytest.approx(4 / cycle)
    assert results.tpot_s[0] == pytest.approx(results.decode_token_time_s[0] + 3 * results.prefill_batched_s_per_prompt[0] / 64)
