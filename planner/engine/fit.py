"""Serving-engine profiles fitted to measured TTFT and TPOT, and cross-validated
(docs/accuracy.md, "The fit"; docs/planner_math.md#efficiency-factors).

Six physically meaningful parameters per serving engine, no more:
- compute_fraction: the share of the dense peak its prefill GEMMs reach;
- bandwidth_fraction: the share of peak memory bandwidth its decode steps reach;
- step_overhead_s: the fixed cost of one forward (launches, scheduler, sampling);
- request_overhead_s: what a request spends before its first token beyond the prefill
  (tokenisation, scheduling, the HTTP path);
- expert_efficiency: the share of the dense GEMMs' compute efficiency its routed-expert GEMMs reach
  (grouped GEMMs over many experts, their token dispatch and imbalance), which tells in prefill;
- in_step_share: the share of a closed loop's requests that arrive in one wave with all the
  others (a benchmark's first round; its scheduler can keep waves together) rather than
  staggered (serving.py).
They replace the spec defaults for every chip the engine runs on (one profile per engine,
never per row). A pooled profile, fitted to every engine's rows at once, stands in for an
engine with no rows of its own, as in leave-one-engine-out cross-validation.

The fit minimises a robust loss (soft L1) of log(predicted / measured) with SciPy's
least_squares. Re-running the engine for every trial parameter would take seconds each, so the
optimiser works on a surrogate that rescales each prediction's own parts (compute, memory,
communication, overhead, queueing) to the trial parameters. Every error this module reports
comes from the real engine run with the fitted profile, never from the surrogate.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

PARAMETERS = ("compute_fraction", "bandwidth_fraction", "step_overhead_s", "request_overhead_s", "expert_efficiency", "in_step_share")
# The efficiency factors among them (efficiency.FACTORS); in_step_share belongs to the workload.
EFFICIENCY_PARAMETERS = PARAMETERS[:5]
LOWER = np.array([0.05, 0.05, 0.0, 0.0, 0.05, 0.0])
# Ceilings a serving stack can reach: no GEMM or stream runs at the full datasheet peak.
UPPER = np.array([0.95, 0.95, 0.05, 2.0, 1.0, 1.0])
POOLED = "*"
# At least this many measured values before an engine gets a profile of its own.
MIN_VALUES = 20


@dataclass(frozen=True, kw_only=True)
class EngineProfile:
    compute_fraction: float
    bandwidth_fraction: float
    step_overhead_s: float
    request_overhead_s: float
    expert_efficiency: float
    in_step_share: float
    values: int  # measured values it was fitted to

    def factors(self) -> dict[str, float]:
        """The efficiency factors it overrides (efficiency.resolve_efficiency)."""
        return {name: getattr(self, name) for name in EFFICIENCY_PARAMETERS}


@dataclass(frozen=True, kw_only=True)
class Parts:
    """One predicted value split into the parts the parameters scale, as the engine computed it
    at the spec defaults (`compute_fraction0` ...). Arrays of one entry per value."""

    metric: np.ndarray  # "ttft_s" | "tpot_s"
    measured: np.ndarray
    predicted: np.ndarray
    staggered: np.ndarray  # the prediction with no request in step (in_step_share 0; TPOT: as predicted)
    in_step: np.ndarray  # ... with every request in step (in_step_share 1)
    compute_fraction0: np.ndarray
    bandwidth_fraction0: np.ndarray
    step_overhead0: np.ndarray
    expert_efficiency0: np.ndarray
    decode_compute_s: np.ndarray
    decode_memory_s: np.ndarray
    decode_expert_compute_s: np.ndarray  # of decode_compute_s, the routed experts' part
    decode_fixed_s: np.ndarray  # communication and overhead other than the step overhead
    prefill_compute_s: np.ndarray
    prefill_memory_s: np.ndarray
    prefill_expert_compute_s: np.ndarray
    prefill_fixed_s: np.ndarray
    decode_s: np.ndarray  # the decode step as computed
    prefill_s: np.ndarray  # one prefill as computed

    def take(self, mask: np.ndarray) -> Parts:
        return Parts(**{f.name: getattr(self, f.name)[mask] for f in fields(self)})

    def __len__(self) -> int:
        return len(self.measured)


def surrogate(theta: np.ndarray, p: Parts) -> np.ndarray:
    """The values the engine would predict with parameters theta, from the parts it computed at the
    defaults: compute terms scale with compute_fraction0 / compute_fraction, memory terms with the
    bandwidth ratio, the step overhead is replaced; whatever rides on the prefill (interleaved
    prefills in TPOT, waves and queues in TTFT) scales with the prefill; TTFT is linear in the
    in-step share between its staggered and its in-step value."""
    compute_fraction, bandwidth_fraction, step_overhead, request_overhead, expert_efficiency, in_step_share = theta
    c, m = p.compute_fraction0 / compute_fraction, p.bandwidth_fraction0 / bandwidth_fraction
    x = p.expert_efficiency0 / expert_efficiency - 1.0  # the experts' parts grow by this much more

    def phase(compute, memory, expert_compute, fixed):
        return np.maximum((compute + x * expert_compute) * c, memory * m) + fixed + step_overhead

    decode = phase(p.decode_compute_s, p.decode_memory_s, p.decode_expert_compute_s, p.decode_fixed_s)
    prefill = phase(p.prefill_compute_s, p.prefill_memory_s, p.prefill_expert_compute_s, p.prefill_fixed_s)
    scale = prefill / np.maximum(p.prefill_s, 1e-12)
    tpot = decode + (p.predicted - p.decode_s) * scale
    ttft = (p.staggered + in_step_share * (p.in_step - p.staggered)) * scale + request_overhead
    return np.where(p.metric == "ttft_s", ttft, tpot)


def _residuals(theta: np.ndarray, p: Parts) -> np.ndarray:
    return np.log(np.maximum(surrogate(theta, p), 1e-12) / p.measured)


def fit_profile(p: Parts) -> EngineProfile:
    start = np.array([float(np.median(p.compute_fraction0)), float(np.median(p.bandwidth_fraction0)),
                      float(np.median(p.step_overhead0)), 0.01, 0.9, 0.1])  # fmt: skip
    result = least_squares(_residuals, np.clip(start, LOWER, UPPER), args=(p,), bounds=(LOWER, UPPER), loss="soft_l1", f_scale=0.3)
    return EngineProfile(**dict(zip(PARAMETERS, (float(v) for v in result.x))), values=len(p))


def fit_profiles(p: Parts, engines: np.ndarray) -> dict[str, EngineProfile]:
    """A profile per engine with at least MIN_VALUES values, and the pooled one ("*")."""
    profiles = {POOLED: fit_profile(p)}
    for engine in sorted(set(engines.tolist())):
        mask = engines == engine
        if mask.sum() >= MIN_VALUES:
            profiles[engine] = fit_profile(p.take(mask))
    return profiles


def profile_for(profiles: dict[str, EngineProfile], engine: str) -> EngineProfile:
    return profiles.get(engine) or profiles[POOLED]


def cv_folds(groups: Sequence[str]) -> list[tuple[str, np.ndarray]]:
    """Leave-one-group-out: (held-out group, mask of its values) for each group."""
    groups = np.asarray(groups)
    return [(g, groups == g) for g in sorted(set(groups.tolist()))]


def profiles_table(profiles: dict[str, EngineProfile]) -> list[dict]:
    return [{"engine": engine, **{name: getattr(profile, name) for name in PARAMETERS}, "values": profile.values} for engine, profile in sorted(profiles.items())]


def save_profiles(profiles: dict[str, EngineProfile], path: Path, *, source: str) -> None:
    """Write fitted profiles with the command and data that produced them (planner/data/engine_profiles.json)."""
    body = {"source": source, "profiles": {engine: asdict(profile) for engine, profile in sorted(profiles.items())}}
    path.write_text(json.dumps(body, indent=1) + "\n")


# What a parameter is when a stored profile predates it: its spec default (as for a calibration).
NEUTRAL = {"expert_efficiency": 1.0, "in_step_share": 0.1}


def load_profiles(path: Path) -> tuple[dict[str, EngineProfile], str]:
    """The stored profiles and their source line; ({}, "") when there is no file."""
    if not path.is_file():
        return {}, ""
    body = json.loads(path.read_text())
    return {engine: EngineProfile(**{**NEUTRAL, **values}) for engine, values in body["profiles"].items()}, body["source"]
