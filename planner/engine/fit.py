"""Serving-engine profiles fitted to measured TTFT and TPOT, and cross-validated
(docs/accuracy.md, "The fit"; docs/planner_math.md#efficiency-factors).

Six physically meaningful parameters per serving engine and one shared by all of them, no more:
- compute_fraction: the share of the dense peak its prefill GEMMs reach;
- bandwidth_fraction: the share of peak memory bandwidth its decode steps reach;
- step_overhead_s: the fixed cost of one forward (launches, scheduler, sampling);
- request_overhead_s: what a request spends before its first token beyond the prefill
  (tokenisation, scheduling, the HTTP path);
- expert_efficiency: the share of the dense GEMMs' compute efficiency its routed-expert GEMMs reach
  (grouped GEMMs over many experts, their token dispatch and imbalance), which tells in prefill;
- in_step_share: the share of a closed loop's requests that arrive in one wave with all the
  others (a benchmark's first round) rather than staggered (serving.py). It acts only where the
  clients can drift apart: an engine that runs its prefills alone (SGLang: the catalog's
  prefill_runs_alone) keeps a colocated loop in step, every round a wave, so those values come with
  `staggered` equal to `in_step` (planner/accuracy.py) and the share speaks for the rest (its
  disaggregated deployments, whose decodes never wait for a prefill, and every engine that lets
  prefill chunks share steps with the decodes);
- request_overhead_per_expert_layer_s, shared: what a request's time before its first token adds per
  routed expert per MoE layer of its model. One value for every engine, fitted jointly with each
  engine's own six parameters: the engines run the same kind of grouped MoE kernels, and each engine's
  rows cover too few models to tell the term from its constant (SGLang's are DeepSeek and Qwen3 only).
  The pooled profile is fitted around the joint value.
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

PARAMETERS = ("compute_fraction", "bandwidth_fraction", "step_overhead_s", "request_overhead_s", "expert_efficiency", "in_step_share",
              "request_overhead_per_expert_layer_s")  # fmt: skip
# The efficiency factors among them (efficiency.FACTORS); in_step_share belongs to the workload.
EFFICIENCY_PARAMETERS = (*PARAMETERS[:5], PARAMETERS[6])
SHARED = PARAMETERS.index("request_overhead_per_expert_layer_s")
LOWER = np.array([0.05, 0.05, 0.0, 0.0, 0.05, 0.0, 0.0])
# Ceilings a serving stack can reach: no GEMM or stream runs at the full datasheet peak; 100 us per
# routed expert and layer would put 1.5 s before DeepSeek-V3's first token.
UPPER = np.array([0.95, 0.95, 0.05, 2.0, 1.0, 1.0, 1e-4])
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
    request_overhead_per_expert_layer_s: float
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
    staggered: np.ndarray  # the prediction with no request in step (in_step_share 0, or 1 for a loop read in step; TPOT: as predicted)
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
    expert_layers: np.ndarray  # the model's routed experts summed over its MoE layers (ModelSpec.routed_expert_layers)

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
    compute_fraction, bandwidth_fraction, step_overhead, request_overhead, expert_efficiency, in_step_share, per_expert_layer = theta
    c, m = p.compute_fraction0 / compute_fraction, p.bandwidth_fraction0 / bandwidth_fraction
    x = p.expert_efficiency0 / expert_efficiency - 1.0  # the experts' parts grow by this much more

    def phase(compute, memory, expert_compute, fixed):
        return np.maximum((compute + x * expert_compute) * c, memory * m) + fixed + step_overhead

    decode = phase(p.decode_compute_s, p.decode_memory_s, p.decode_expert_compute_s, p.decode_fixed_s)
    prefill = phase(p.prefill_compute_s, p.prefill_memory_s, p.prefill_expert_compute_s, p.prefill_fixed_s)
    scale = prefill / np.maximum(p.prefill_s, 1e-12)
    tpot = decode + (p.predicted - p.decode_s) * scale
    ttft = (p.staggered + in_step_share * (p.in_step - p.staggered)) * scale + request_overhead + per_expert_layer * p.expert_layers
    return np.where(p.metric == "ttft_s", ttft, tpot)


OWN = np.array([i != SHARED for i in range(len(PARAMETERS))])  # each engine's own parameters


def _start(p: Parts) -> np.ndarray:
    return np.array([float(np.median(p.compute_fraction0)), float(np.median(p.bandwidth_fraction0)),
                     float(np.median(p.step_overhead0)), 0.01, 0.9, 0.1, 1e-6])  # fmt: skip


def _unevidenced(theta: np.ndarray, p: Parts) -> np.ndarray:
    """Which of theta's parameters no value of p responds to (a mask over PARAMETERS), moved to either bound: an
    engine's in-step share where every one of its loops is read in step, the experts' efficiency and the time per
    routed expert where it ran no MoE model. Fitted, such a parameter would take whatever value the floating-point
    noise of the machine favoured."""
    base = surrogate(theta, p)

    def unmoved(i: int) -> bool:
        return all(np.array_equal(surrogate(np.where(np.arange(len(theta)) == i, bound[i], theta), p), base) for bound in (LOWER, UPPER))

    return np.array([unmoved(i) for i in range(len(PARAMETERS))])


def _held(starts: list[np.ndarray], groups: list[Parts], free_shared: bool) -> tuple[list[np.ndarray], np.ndarray]:
    """The starts with every parameter no value responds to set to its spec default (NEUTRAL; else the start), and the
    mask of the parameters left to fit in _fit's layout (each group's own, then the shared one where it is free)."""
    held = [_unevidenced(start, group) for start, group in zip(starts, groups)]
    shared_held = free_shared and all(h[SHARED] for h in held)  # no group responds to the time per routed expert
    starts = [start.copy() for start in starts]
    for start, h in zip(starts, held):
        for i in np.flatnonzero(h & (OWN | shared_held)):
            start[i] = NEUTRAL.get(PARAMETERS[i], start[i])
    free = [~h[OWN] for h in held] + ([np.array([not shared_held])] if free_shared else [])
    return starts, np.concatenate(free)


def _fit(groups: list[Parts], shared: float | None) -> tuple[list[np.ndarray], float]:
    """Each group's own parameters and the shared one, minimising the robust loss of log(predicted /
    measured) over every group's values at once; with `shared`, that one is held at the value. A parameter
    that none of its values responds to (_unevidenced) is held at its spec default, not fitted."""
    free_shared = shared is None
    starts, free = _held([_start(g) for g in groups], groups, free_shared)
    lower = np.concatenate([LOWER[OWN]] * len(groups) + ([LOWER[[SHARED]]] if free_shared else []))
    upper = np.concatenate([UPPER[OWN]] * len(groups) + ([UPPER[[SHARED]]] if free_shared else []))
    x0 = np.clip(np.concatenate([s[OWN] for s in starts] + ([starts[0][[SHARED]]] if free_shared else [])), lower, upper)
    own = int(OWN.sum())

    def thetas(x_free: np.ndarray) -> list[np.ndarray]:
        x = x0.copy()
        x[free] = x_free
        common = x[-1] if free_shared else shared
        return [np.insert(x[i * own:(i + 1) * own], SHARED, common) for i in range(len(groups))]

    def residuals(x_free: np.ndarray) -> np.ndarray:
        return np.concatenate([np.log(np.maximum(surrogate(t, g), 1e-12) / g.measured) for t, g in zip(thetas(x_free), groups)])

    # The parameters span five orders of magnitude (fractions near 1, seconds per routed expert near 1e-5): steps
    # scaled by the Jacobian's columns (x_scale="jac") let the small ones move. Without DeepSeek, the silicon file's
    # SGLang rows are all colocated, each loop read in step: nothing tells its in-step share, which had gone to
    # 0.005 on a machine with AVX-512 and to 0.995 on one without (DeepSeek's TTFT held out 46.4% against 44.1%)
    # until such a parameter was held at its default.
    result = least_squares(residuals, x0[free], bounds=(lower[free], upper[free]), loss="soft_l1", f_scale=0.3, x_scale="jac")
    fitted = thetas(result.x)
    return fitted, float(fitted[0][SHARED])


def _profile(theta: np.ndarray, values: int) -> EngineProfile:
    return EngineProfile(**dict(zip(PARAMETERS, (float(v) for v in theta))), values=values)


def fit_profile(p: Parts, shared: float | None = None) -> EngineProfile:
    """The parameters that minimise the robust loss on p's values; with `shared`, the shared parameter
    is held at that value and the others fitted around it."""
    (theta,), _ = _fit([p], shared)
    return _profile(theta, len(p))


def fit_profiles(p: Parts, engines: np.ndarray) -> dict[str, EngineProfile]:
    """A profile per engine with at least MIN_VALUES values, fitted together for the shared parameter,
    and the pooled one ("*") fitted to every value around it."""
    own = [engine for engine in sorted(set(engines.tolist())) if (engines == engine).sum() >= MIN_VALUES]
    groups = [p.take(engines == engine) for engine in own]
    thetas, shared = _fit(groups, None) if groups else ([], None)
    profiles = {POOLED: fit_profile(p, shared=shared)}
    profiles.update({engine: _profile(theta, len(g)) for engine, theta, g in zip(own, thetas, groups)})
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
NEUTRAL = {"expert_efficiency": 1.0, "in_step_share": 0.1, "request_overhead_per_expert_layer_s": 0.0}


def load_profiles(path: Path) -> tuple[dict[str, EngineProfile], str]:
    """The stored profiles and their source line; ({}, "") when there is no file."""
    if not path.is_file():
        return {}, ""
    body = json.loads(path.read_text())
    return {engine: EngineProfile(**{**NEUTRAL, **values}) for engine, values in body["profiles"].items()}, body["source"]
