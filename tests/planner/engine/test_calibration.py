from __future__ import annotations

import pytest

import math

import numpy as np

from planner.engine.calibration import PRIOR_LOG_SIGMA, RUN_NOISE_FLOOR, NoisyRuns, Observation, fit_efficiency
from planner.engine.efficiency import Efficiency

PRIOR = Efficiency(compute_fraction=0.4, bandwidth_fraction=0.6, step_overhead_s=1e-3, link_bandwidth_fraction=0.6)
BW, PEAK = 100e9, 1e12


def _run(decode_bytes: float, *, eta_m: float, overhead: float, prefill_flops: float = 1e12, eta_c: float = 0.5, spread: float = 0.0) -> Observation:
    return Observation(
        decode_bytes=decode_bytes, decode_flops=decode_bytes, tpot_s=decode_bytes / (eta_m * BW) + overhead,
        prefill_bytes=decode_bytes, prefill_flops=prefill_flops, ttft_s=prefill_flops / (eta_c * PEAK) + overhead,
        peak_flops_per_s=PEAK, bandwidth_bytes_per_s=BW, tpot_spread=spread,
    )  # fmt: skip


def _combined(prior: float, measured: float, runs: int, sigma: float = RUN_NOISE_FLOOR) -> float:
    """The prior and `runs` agreeing runs combined in log space, each weighted by its inverse variance."""
    w0, w = PRIOR_LOG_SIGMA**-2, runs * sigma**-2
    return math.exp((w0 * math.log(prior) + w * math.log(measured)) / (w0 + w))


def test_runs_of_several_sizes_recover_the_overhead_exactly_and_the_bandwidth_fraction_as_far_as_three_runs_outweigh_the_prior():
    runs = [_run(b, eta_m=0.8, overhead=2e-3) for b in (1e9, 2e9, 4e9)]
    fit = fit_efficiency(runs, PRIOR, source="calibration v1 (3 runs)")
    assert fit.separated_overhead
    assert fit.efficiency.step_overhead_s == pytest.approx(2e-3, rel=1e-6)
    assert fit.efficiency.bandwidth_fraction == pytest.approx(_combined(0.6, 0.8, 3), rel=1e-9)
    assert 0.79 < fit.efficiency.bandwidth_fraction < 0.8  # three steady runs outweigh the prior 28 to 1
    assert fit.efficiency.compute_fraction == pytest.approx(0.5, rel=1e-6)
    assert fit.residual_rms_s < 0.01 * max(r.tpot_s for r in runs)  # what the prior's weight leaves


def test_one_size_keeps_the_prior_overhead_and_fits_bandwidth():
    fit = fit_efficiency([_run(1e9, eta_m=0.5, overhead=1e-3)], PRIOR, source="calibration v1 (1 runs)")
    assert not fit.separated_overhead
    assert fit.efficiency.step_overhead_s == pytest.approx(1e-3)
    assert fit.efficiency.bandwidth_fraction == pytest.approx(_combined(0.6, 0.5, 1), rel=1e-9)
    assert fit.efficiency.source == "calibration v1 (1 runs)"


def test_fractions_stay_within_zero_and_one():
    fit = fit_efficiency([_run(1e9, eta_m=3.0, overhead=0.0)], PRIOR, source="x")
    assert fit.efficiency.bandwidth_fraction == 1.0


def test_no_runs_is_an_error():
    with pytest.raises(ValueError):
        fit_efficiency([], PRIOR, source="x")


def test_a_run_whose_repetitions_spread_too_much_is_left_out_and_said_why():
    steady, busy = _run(1e9, eta_m=0.5, overhead=1e-3, spread=0.05), _run(1e9, eta_m=0.2, overhead=1e-3, spread=0.6)
    fit = fit_efficiency([steady, busy], PRIOR, source="x")
    assert fit.runs == 1 and fit.left_out == ((1, "its repetitions spread 60% (over 25%)"),)
    assert fit.efficiency.bandwidth_fraction == pytest.approx(_combined(0.6, 0.5, 1), rel=1e-9)


def test_only_noisy_runs_refuse_to_calibrate():
    with pytest.raises(NoisyRuns, match="busy machine"):
        fit_efficiency([_run(1e9, eta_m=0.5, overhead=1e-3, spread=0.4)], PRIOR, source="x")


def test_one_run_far_from_the_others_is_left_out_as_an_outlier():
    runs = [_run(1e9, eta_m=eta, overhead=1e-3) for eta in (0.50, 0.52, 0.49, 0.51, 0.15)]
    fit = fit_efficiency(runs, PRIOR, source="x")
    assert [i for i, _ in fit.left_out] == [4] and fit.runs == 4
    assert fit.efficiency.bandwidth_fraction == pytest.approx(0.5, rel=0.03)


def test_calibrating_on_noisy_runs_is_never_worse_than_the_prior_beyond_the_noise():
    """Synthetic campaigns: a chip whose true eta_m is 0.5 under a prior of 0.6 (20% high), measured in runs
    whose noise varies run by run (log-sd 0.05 to 0.6, as a shared CPU gives: 355, 191 and 406 ms for one
    trial). Each run's five repetitions carry its noise, so its spread shows it. After every run of 200
    campaigns of six, the fit's error (|log eta_fit / eta_true|) stays within the prior's error plus 0.05, the
    noise of a steady run's median (without the safeguards, a plain fit on every run, the worst is +0.57)."""
    rng = np.random.default_rng(14)
    truth, prior_error, allowance = 0.5, abs(math.log(0.6 / 0.5)), 0.05
    worst = -math.inf
    for _ in range(200):
        runs = []
        for _ in range(6):
            noise = rng.uniform(0.05, 0.6)
            reps = truth * np.exp(rng.normal(0.0, noise, 5))  # each repetition's eta_m
            tpots = 1e9 / (reps * BW) + 1e-3
            spread = float((tpots.max() - tpots.min()) / np.median(tpots))
            runs.append(_run(1e9, eta_m=float(1e9 / ((np.median(tpots) - 1e-3) * BW)), overhead=1e-3, spread=spread))
            try:
                fit = fit_efficiency(runs, PRIOR, source="x")
            except NoisyRuns:
                continue  # nothing stored: the prior stands
            worst = max(worst, abs(math.log(fit.efficiency.bandwidth_fraction / truth)) - prior_error)
    assert worst <= allowance
