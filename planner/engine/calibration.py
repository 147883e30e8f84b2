"""Fit efficiency factors to measured runs (least squares), replacing spec defaults.

The roofline time of a memory-bound decode step is bytes / (eta_m * BW) + overhead; over
runs with different bytes per step, TPOT = a * bytes + overhead is a straight line, so
ordinary least squares gives both a (hence eta_m = 1 / (a * BW)) and the per-step overhead.
With runs of a single size the two cannot be separated: the overhead keeps its prior and
only eta_m is fitted. A compute-bound prefill gives eta_c = FLOPs / ((TTFT - overhead) * peak).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

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


@dataclass(frozen=True, kw_only=True)
class Fit:
    efficiency: Efficiency
    residual_rms_s: float
    runs: int
    separated_overhead: bool  # True when bytes varied enough to fit the overhead too


def _clip(value: float) -> float:
    return float(min(max(value, MIN_FRACTION), 1.0))


def _fit_decode(obs: Sequence[Observation], prior_overhead_s: float) -> tuple[float, float, float, bool]:
    """(eta_m, overhead_s, residual_rms_s, separated)."""
    x = np.array([o.decode_bytes / o.bandwidth_bytes_per_s for o in obs])  # seconds at eta_m = 1
    y = np.array([o.tpot_s for o in obs])
    separated = len(np.unique(np.round(x, 12))) >= 2 and np.ptp(x) > 0.1 * np.mean(x)
    if separated:
        (slope, overhead), *_ = np.linalg.lstsq(np.stack([x, np.ones_like(x)], axis=1), y, rcond=None)
        if overhead < 0 or slope <= 0:
            overhead, slope = 0.0, float(np.dot(x, y) / np.dot(x, x))
    else:
        overhead = min(prior_overhead_s, 0.5 * float(y.min()))
        slope = float(np.mean((y - overhead) / x))
    residual = y - (slope * x + overhead)
    return _clip(1.0 / slope), float(overhead), float(np.sqrt(np.mean(residual**2))), bool(separated)


def _fit_compute(obs: Sequence[Observation], overhead_s: float, prior: float) -> float:
    """Median eta_c over runs whose prefill the roofline calls compute-bound."""
    fractions = [
        o.prefill_flops / (max(o.ttft_s - overhead_s, 1e-9) * o.peak_flops_per_s)
        for o in obs
        if o.prefill_flops / o.peak_flops_per_s > o.prefill_bytes / o.bandwidth_bytes_per_s and o.ttft_s > overhead_s
    ]
    return _clip(float(np.median(fractions))) if fractions else prior


def fit_efficiency(observations: Sequence[Observation], prior: Efficiency, *, source: str) -> Fit:
    if not observations:
        raise ValueError("a calibration needs at least one measured run")
    eta_m, overhead, rms, separated = _fit_decode(observations, prior.step_overhead_s)
    eta_c = _fit_compute(observations, overhead, prior.compute_fraction)
    fitted = replace(prior, compute_fraction=eta_c, bandwidth_fraction=eta_m, step_overhead_s=overhead, source=source)
    return Fit(efficiency=fitted, residual_rms_s=rms, runs=len(observations), separated_overhead=separated)
