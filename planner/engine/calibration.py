"""Fit efficiency factors to measured runs, replacing spec defaults only as far as the evidence goes.

The roofline time of a memory-bound decode step is bytes / (eta_m * BW) + overhead; over runs with
different bytes per step, TPOT = a * bytes + overhead is a straight line: a robust line (Theil-Sen: the
median of the pairwise slopes) gives a (hence eta_m = 1 / (a * BW)) and the per-step overhead. With runs
of a single size the two cannot be separated: the overhead keeps its prior and only eta_m is fitted. A
compute-bound prefill gives eta_c = FLOPs / ((TTFT - overhead) * peak).

Only good evidence counts (issue 14): a run whose timed repetitions spread by more than MAX_RUN_SPREAD of
their median measured a busy machine and is left out; with three or more runs, one whose implied eta_m
lies more than OUTLIER_SDS robust deviations from the others' median is left out too; and the fitted
eta_m is the prior and the runs combined in log space, each weighted by the inverse of its variance (the
prior's from the spec defaults' cross-validated TPOT errors, a run's from its spread, never below
RUN_NOISE_FLOOR), so one run moves the factor most of the way and a noisy one much less.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import theilslopes

from .efficiency import Efficiency

MIN_FRACTION = 0.01


@dataclass(frozen=True, kw_only=True)
class Observation:
    """One measured trial, with the work the engine predicts for it (per chip)."""

    decode_bytes: float
    decode_flops: float
    tpot_s: float
    prefill_bytes: float
    prefill_flops: float
    ttft_s: float
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    tpot_spread: float = 0.0  # (max - min) / median of the run's timed repetitions; 0: one repetition or unknown
    ttft_spread: float = 0.0


# A run whose repetitions differ by more than a quarter of their median was measured on a busy machine.
MAX_RUN_SPREAD = 0.25
# A run's log-sd is never taken below this, however well its repetitions agree: what a single run cannot
# show (the machine's state from one run to the next) caps its weight, so one steady run moves eta_m about
# 95% of the way from the prior (1/0.1**2 against 1/0.42**2), never all of it. A choice, not a measurement.
RUN_NOISE_FLOOR = 0.1
# An 80% interval spans +-1.2816 standard deviations of a normal (its 90th percentile).
Z_80 = 1.2816
# The prior's log-sd when no error band is given: the shipped spec defaults' cross-validated TPOT band,
# [-0.31, +0.77] in log ratio (planner/data/error_bands.json, 2,633 silicon rows), is 1.08 / (2 x 1.2816).
PRIOR_LOG_SIGMA = 0.42
OUTLIER_SDS = 3.0


def log_sigma_of_80_interval(low_ratio: float, high_ratio: float) -> float:
    """The log-sd a normal error in log space has when its 80% interval is [low, high] x the prediction."""
    return float(np.log(high_ratio / low_ratio)) / (2.0 * Z_80)


class NoisyRuns(ValueError):
    """Every run was left out as noisy: the calibration keeps what it had."""


@dataclass(frozen=True, kw_only=True)
class Fit:
    efficiency: Efficiency
    residual_rms_s: float
    runs: int  # runs the fit used
    separated_overhead: bool  # True when bytes varied enough to fit the overhead too
    left_out: tuple[tuple[int, str], ...] = ()  # (index into the observations, why)


def _clip(value: float) -> float:
    return float(min(max(value, MIN_FRACTION), 1.0))


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(slope, intercept): Theil-Sen for three or more points, the line through two."""
    if len(x) >= 3:
        slope, intercept, _, _ = theilslopes(y, x)
        return float(slope), float(intercept)
    slope = float((y[1] - y[0]) / (x[1] - x[0]))
    return slope, float(y[0] - slope * x[0])


def _fit_decode(obs: Sequence[Observation], prior: Efficiency, prior_log_sigma: float) -> tuple[float, float, float, bool, list[int]]:
    """(eta_m, overhead_s, residual_rms_s, separated, indices of outliers left out)."""
    x = np.array([o.decode_bytes / o.bandwidth_bytes_per_s for o in obs])  # seconds at eta_m = 1
    y = np.array([o.tpot_s for o in obs])
    separated = len(np.unique(np.round(x, 12))) >= 2 and np.ptp(x) > 0.1 * np.mean(x)
    overhead = min(prior.step_overhead_s, 0.5 * float(y.min()))
    if separated:
        slope, intercept = _line(x, y)
        if intercept >= 0 and slope > 0:
            overhead = intercept
        else:
            separated = False
    implied = np.log(np.clip(x / np.maximum(y - overhead, 1e-12), MIN_FRACTION, None))  # each run's own log eta_m
    keep = np.ones(len(obs), dtype=bool)
    if len(obs) >= 3:
        centre = np.median(implied)
        sd = max(1.4826 * float(np.median(np.abs(implied - centre))), RUN_NOISE_FLOOR)
        keep = np.abs(implied - centre) <= OUTLIER_SDS * sd
    sigma = np.maximum(np.array([o.tpot_spread for o in obs]), RUN_NOISE_FLOOR)
    weights = np.where(keep, 1.0 / sigma**2, 0.0)
    prior_weight = 1.0 / prior_log_sigma**2
    log_eta = (prior_weight * np.log(prior.bandwidth_fraction) + float(np.dot(weights, implied))) / (prior_weight + float(weights.sum()))
    eta_m = _clip(float(np.exp(log_eta)))
    residual = (y - (x / eta_m + overhead))[keep]
    return eta_m, float(overhead), float(np.sqrt(np.mean(residual**2))), bool(separated), [int(i) for i in np.flatnonzero(~keep)]


def _fit_compute(obs: Sequence[Observation], overhead_s: float, prior: float) -> float:
    """Median eta_c over runs whose prefill the roofline calls compute-bound."""
    fractions = [
        o.prefill_flops / (max(o.ttft_s - overhead_s, 1e-9) * o.peak_flops_per_s)
        for o in obs
        if o.prefill_flops / o.peak_flops_per_s > o.prefill_bytes / o.bandwidth_bytes_per_s and o.ttft_s > overhead_s
    ]
    return _clip(float(np.median(fractions))) if fractions else prior


def fit_efficiency(observations: Sequence[Observation], prior: Efficiency, *, source: str, prior_log_sigma: float = PRIOR_LOG_SIGMA) -> Fit:
    """`prior_log_sigma`: how far the prior is trusted (log-sd of its TPOT errors; log_sigma_of_80_interval of its band)."""
    if not observations:
        raise ValueError("a calibration needs at least one measured run")
    steady = [i for i, o in enumerate(observations) if o.tpot_spread <= MAX_RUN_SPREAD]
    left_out = [(i, f"its repetitions spread {o.tpot_spread:.0%} (over {MAX_RUN_SPREAD:.0%})") for i, o in enumerate(observations)
                if o.tpot_spread > MAX_RUN_SPREAD]  # fmt: skip
    if not steady:
        raise NoisyRuns(f"every run's timed repetitions spread more than {MAX_RUN_SPREAD:.0%}: a busy machine; measure again on a quiet one")
    used = [observations[i] for i in steady]
    eta_m, overhead, rms, separated, outliers = _fit_decode(used, prior, prior_log_sigma)
    left_out += [(steady[i], "an outlier among the runs") for i in outliers]
    kept = [o for i, o in enumerate(used) if i not in set(outliers)]
    eta_c = _fit_compute(kept, overhead, prior.compute_fraction)
    fitted = replace(prior, compute_fraction=eta_c, bandwidth_fraction=eta_m, step_overhead_s=overhead, source=source)
    return Fit(efficiency=fitted, residual_rms_s=rms, runs=len(kept), separated_overhead=separated, left_out=tuple(sorted(left_out)))
