from __future__ import annotations

import pytest

from planner.engine.calibration import Observation, fit_efficiency
from planner.engine.efficiency import Efficiency

PRIOR = Efficiency(compute_fraction=0.4, bandwidth_fraction=0.6, step_overhead_s=1e-3, link_bandwidth_fraction=0.6)
BW, PEAK = 100e9, 1e12


def _run(decode_bytes: float, *, eta_m: float, overhead: float, prefill_flops: float = 1e12, eta_c: float = 0.5) -> Observation:
    return Observation(
        decode_bytes=decode_bytes, decode_flops=decode_bytes, tpot_s=decode_bytes / (eta_m * BW) + overhead,
        prefill_bytes=decode_bytes, prefill_flops=prefill_flops, ttft_s=prefill_flops / (eta_c * PEAK) + overhead,
        peak_flops_per_s=PEAK, bandwidth_bytes_per_s=BW,
    )  # fmt: skip


def test_runs_of_several_sizes_recover_bandwidth_fraction_and_overhead_exactly():
    runs = [_run(b, eta_m=0.8, overhead=2e-3) for b in (1e9, 2e9, 4e9)]
    fit = fit_efficiency(runs, PRIOR, source="calibration v1 (3 runs)")
    assert fit.separated_overhead
    assert fit.efficiency.bandwidth_fraction == pytest.approx(0.8, rel=1e-6)
    assert fit.efficiency.step_overhead_s == pytest.approx(2e-3, rel=1e-6)
    assert fit.efficiency.compute_fraction == pytest.approx(0.5, rel=1e-6)
    assert fit.residual_rms_s == pytest.approx(0.0, abs=1e-12)


def test_one_size_keeps_the_prior_overhead_and_fits_bandwidth():
    fit = fit_efficiency([_run(1e9, eta_m=0.5, overhead=1e-3)], PRIOR, source="calibration v1 (1 runs)")
    assert not fit.separated_overhead
    assert fit.efficiency.step_overhead_s == pytest.approx(1e-3)
    assert fit.efficiency.bandwidth_fraction == pytest.approx(0.5, rel=1e-6)
    assert fit.efficiency.source == "calibration v1 (1 runs)"


def test_fractions_stay_within_zero_and_one():
    fit = fit_efficiency([_run(1e9, eta_m=3.0, overhead=0.0)], PRIOR, source="x")
    assert fit.efficiency.bandwidth_fraction == 1.0


def test_no_runs_is_an_error():
    with pytest.raises(ValueError):
        fit_efficiency([], PRIOR, source="x")
