"""Chip-family profiles: the efficiency a chip family reaches in published measurements, fitted to
this project's CSV format (benchmarks/measurements/other_chips.csv; docs/accuracy.md#chip-family-profiles).

A chip family is a vendor's chips of one kind ("AMD gpu", "Intel other" for Gaudi, "Intel cpu"). Three
physically meaningful parameters per family, no more:
- compute_fraction: the share of the dense peak its prefill GEMMs reach;
- bandwidth_fraction: the share of peak memory bandwidth its decode steps reach;
- step_overhead_s: the fixed cost of one forward.
They are fitted as the bf16 values; a row of another weight dtype keeps the dtype's scale on top
(efficiency.default_efficiency: weight-only int4 at 0.6 of the bandwidth share, FP8 math at 0.7 of
the compute share), so a family profile replaces the spec default the way a calibration does.
Families of NVIDIA GPUs are left to the serving-engine profiles fitted on NVIDIA's own measurements
(fit.py), except under a serving engine that has none (llama.cpp): those rows form a family of their own, the NVIDIA
GPUs under that engine ("NVIDIA gpu under llama.cpp", engine_family), whose profile speaks for an NVIDIA GPU only
when a request or row names that engine (a calibration keyed by the chip's variant slug, catalog_specs.family_calibration).
Only autoregressive rows are fitted (a speculative or diffusion row's token time is not
the surrogate's decode step); every row is predicted with the profile.

A chip whose family has no profile that speaks for it (a new vendor, or a new architecture of a family whose
profile does not transfer) takes its kind's pooled profile ("pooled gpu", pooled_family), as an engine with no
profile of its own takes the pooled serving-engine profile (fit.py): the same three parameters fitted to every
fitted value on chips of that kind, each family weighing the same however many values it has (one with fewer than
MIN_VALUES in proportion to them; stratum_weights). It speaks for a chip outside its own fit only where it transfers
(with each architecture held out in turn, fitted on the rest, it predicts the held-out values better than the spec
defaults do; planner/accuracy.py), only for a vendor it measured (`vendors`: a chip's efficiency is its vendor's
software stack's) and only for a chip whose architecture the catalog states (a new architecture, not a device a worker
probed; planner/catalog_specs.py). The spec defaults stay for a vendor or a kind measured on no chip (Cerebras, Groq's
LPU), and such a chip's intervals are the widest (uncertainty.interval, UNMEASURED). A kind whose chips hold one fitted
family has no pool: it would be that family's profile under another name (planner/accuracy.py fits none).

As in fit.py, SciPy's least_squares minimises a soft-L1 loss of log(predicted / measured) on a surrogate
that rescales each prediction's own parts; every error reported comes from the real engine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

FAMILY_PARAMETERS = ("compute_fraction", "bandwidth_fraction", "step_overhead_s")
LOWER = np.array([0.02, 0.05, 0.0])
UPPER = np.array([0.95, 0.95, 0.05])
# How an efficiency taken from a chip-family profile names its source (catalog_specs.family_calibration).
FAMILY_SOURCE = "fitted chip-family profile"
# At least this many autoregressive values before a family gets a profile of its own.
MIN_VALUES = 8
FITTED_METRICS = frozenset({"ttft_s", "tpot_s", "decode_tokens_per_s_per_user", "output_tokens_per_s"})


def family_of(vendor: str, kind: str) -> str:
    return f"{vendor} {kind}"


def vendor_and_kind(family: str) -> tuple[str, str]:
    """The vendor and chip kind a family name (family_of) is made of; a vendor's name may hold spaces, a kind none."""
    vendor, _, kind = family.rpartition(" ")
    return vendor, kind


def serving_engine_family(vendor: str, kind: str) -> bool:
    """NVIDIA GPUs: the serving-engine profiles speak for them (fitted on NVIDIA's silicon measurements,
    planner/engine/fit.py); every other family has a chip-family profile here."""
    return (vendor or "").strip().lower() == "nvidia" and kind == "gpu"


def fitted_family(vendor: str, kind: str) -> bool:
    """Whether a family's profile is fitted here (NVIDIA GPUs have the serving-engine profiles)."""
    return not serving_engine_family(vendor, kind)


ENGINE_FAMILY = " under "


def engine_family(vendor: str, kind: str, engine: str) -> str:
    """The family of a vendor's chips under one serving engine ("NVIDIA gpu under llama.cpp"): NVIDIA GPUs under an engine
    with no serving-engine profile of its own, whose published rows are fitted here (planner/accuracy.py)."""
    return f"{family_of(vendor, kind)}{ENGINE_FAMILY}{engine}"


def fitted_family_under(vendor: str, kind: str, engine: str | None, profiled_engines) -> str | None:
    """The family whose profile is fitted to a chip's rows under `engine` (a name, or None) and speaks for it there: the
    chip's own family; for an NVIDIA GPU, the NVIDIA GPUs under an engine with no serving-engine profile
    (`profiled_engines`: those that have one); None where a serving-engine profile (or the spec defaults) speaks."""
    if fitted_family(vendor, kind):
        return family_of(vendor, kind)
    return engine_family(vendor, kind, engine) if engine and engine not in profiled_engines else None


POOLED_FAMILY = "pooled "


def pooled_family(kind: str) -> str:
    """The pooled profile of one chip kind ("pooled gpu"): fitted to every fitted family's values on chips of that kind."""
    return f"{POOLED_FAMILY}{kind}"


def pooled_kind(family: str) -> str | None:
    """The chip kind a pooled profile speaks for, None for a family's own profile."""
    return family.removeprefix(POOLED_FAMILY) if family.startswith(POOLED_FAMILY) else None


def family_engine(family: str) -> str | None:
    """The serving engine an engine family's profile speaks under (engine_family), None for a plain chip family."""
    _, under, engine = family.partition(ENGINE_FAMILY)
    return engine if under else None


@dataclass(frozen=True, kw_only=True)
class FamilyProfile:
    compute_fraction: float  # bf16
    bandwidth_fraction: float  # bf16
    step_overhead_s: float
    values: int  # measured values it was fitted to
    chips: tuple[str, ...]  # the chips behind them
    # Whether it speaks for the family's other chips too: holding out each of its chips in turn and fitting
    # on the rest predicted the held-out chip better than the spec defaults did (at least two chips).
    transfers: bool = False
    # A pooled profile's vendors: those with values in its fit, the only ones it speaks for beyond the chips it was fitted
    # on (catalog_specs.family_calibration); () for a family's own profile.
    vendors: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.values} published measurements on {', '.join(self.chips)}"

    def speaks_for(self, chip_slug: str, *, architecture_peers: Sequence[str] = ()) -> bool:
        """Whether the profile speaks for a chip: one it was fitted on, any of the family's where it transfers, or one
        sharing its compute architecture with a fitted chip (`architecture_peers`, from same_architecture): one
        architecture runs one software stack's kernels alike, which a single fitted chip cannot show by holding out."""
        return chip_slug in self.chips or self.transfers or bool(architecture_peers)


def architecture_key(architecture: str | None) -> str:
    """An architecture as compared: case and spacing aside ("CDNA 3" and "cdna  3" are one)."""
    return " ".join((architecture or "").split()).casefold()


def same_architecture(profile: FamilyProfile, architecture: str, architectures: Mapping[str, str]) -> tuple[str, ...]:
    """The chips the profile was fitted on whose compute architecture (`architectures`: slug -> architecture) is
    `architecture`; none for an architecture not stated."""
    key = architecture_key(architecture)
    if not key:
        return ()
    return tuple(slug for slug in profile.chips if architecture_key(architectures.get(slug)) == key)


@dataclass(frozen=True, kw_only=True)
class FamilyParts:
    """One predicted value split into what the parameters scale, at the factors the engine used.
    Arrays of one entry per value; `*_bf16_0` are the bf16 spec defaults of the row's chip."""

    metric: np.ndarray
    measured: np.ndarray
    predicted: np.ndarray
    compute_fraction0: np.ndarray  # the row's dtype's
    bandwidth_fraction0: np.ndarray
    step_overhead0: np.ndarray
    request_overhead0: np.ndarray  # what its serving engine's request overhead adds to a TTFT (0 elsewhere), held as it is
    compute_fraction_bf16_0: np.ndarray
    bandwidth_fraction_bf16_0: np.ndarray
    decode_compute_s: np.ndarray
    decode_memory_s: np.ndarray
    decode_fixed_s: np.ndarray  # communication and overhead other than the step overhead
    prefill_compute_s: np.ndarray
    prefill_memory_s: np.ndarray
    prefill_fixed_s: np.ndarray
    decode_s: np.ndarray
    prefill_s: np.ndarray
    cycle_s: np.ndarray  # a replica's time per token of every sequence: batch / total tokens/s

    def take(self, mask: np.ndarray) -> FamilyParts:
        return FamilyParts(**{f.name: getattr(self, f.name)[mask] for f in fields(self)})

    def __len__(self) -> int:
        return len(self.measured)


def surrogate(theta: np.ndarray, p: FamilyParts) -> np.ndarray:
    """The values the engine would predict at theta (bf16 fractions, the row's dtype scale kept): decode
    and prefill rescaled; what rides on the prefill (other sequences' prefills in TPOT and throughput, waves
    in TTFT) scales with it."""
    compute_fraction, bandwidth_fraction, step_overhead = theta
    c = p.compute_fraction_bf16_0 / compute_fraction  # = cf0_dtype / (theta x dtype scale)
    m = p.bandwidth_fraction_bf16_0 / bandwidth_fraction

    def phase(compute, memory, fixed):
        return np.maximum(compute * c, memory * m) + fixed + step_overhead

    decode = phase(p.decode_compute_s, p.decode_memory_s, p.decode_fixed_s)
    prefill = phase(p.prefill_compute_s, p.prefill_memory_s, p.prefill_fixed_s)
    scale = prefill / np.maximum(p.prefill_s, 1e-12)
    tpot0 = np.where(p.metric == "decode_tokens_per_s_per_user", 1.0 / np.maximum(p.predicted, 1e-30), p.predicted)
    tpot = decode + (tpot0 - p.decode_s) * scale
    cycle = decode + (p.cycle_s - p.decode_s) * scale
    return np.select(
        [p.metric == "ttft_s", p.metric == "tpot_s", p.metric == "decode_tokens_per_s_per_user", p.metric == "output_tokens_per_s"],
        [(p.predicted - p.request_overhead0) * scale + p.request_overhead0, tpot, 1.0 / np.maximum(tpot, 1e-30), p.predicted * p.cycle_s / np.maximum(cycle, 1e-30)],
        default=p.predicted,
    )  # fmt: skip


def _weighted_soft_l1(weights: np.ndarray):
    """SciPy's soft-L1 loss with each residual's term times its weight (a callable loss returns rho, rho' and rho'')."""

    def loss(z: np.ndarray) -> np.ndarray:
        t = 1.0 + z
        return weights * np.vstack([2.0 * (np.sqrt(t) - 1.0), t**-0.5, -0.5 * t**-1.5])

    return loss


def fit_family(p: FamilyParts, chips: Sequence[str], *, weights: np.ndarray | None = None, vendors: Sequence[str] = ()) -> FamilyProfile:
    """The family's three parameters fitted to its values; `weights` (mean 1) weigh each value's term of the loss."""
    start = np.array([float(np.median(p.compute_fraction_bf16_0)), float(np.median(p.bandwidth_fraction_bf16_0)),
                      float(np.median(p.step_overhead0))])  # fmt: skip

    def residuals(theta):
        return np.log(np.maximum(surrogate(theta, p), 1e-30) / p.measured)

    loss = "soft_l1" if weights is None else _weighted_soft_l1(weights)
    result = least_squares(residuals, np.clip(start, LOWER, UPPER), bounds=(LOWER, UPPER), loss=loss, f_scale=0.3)
    return FamilyProfile(**dict(zip(FAMILY_PARAMETERS, (float(v) for v in result.x))), values=len(p), chips=tuple(sorted(set(chips))),
                         vendors=tuple(vendors))  # fmt: skip


def stratum_weights(strata: np.ndarray) -> np.ndarray:
    """Per-value weights (mean 1) under which each stratum weighs the same, one of fewer than MIN_VALUES values in
    proportion to them (a family's single published value does not weigh as much as another's dozens)."""
    _, index, counts = np.unique(strata, return_inverse=True, return_counts=True)
    weights = np.minimum(counts, MIN_VALUES)[index] / counts[index]
    return weights / weights.mean()


def fit_families(p: FamilyParts, families: np.ndarray, chips: np.ndarray, fittable: np.ndarray,
                 strata: np.ndarray | None = None, only: str | None = None) -> dict[str, FamilyProfile]:  # fmt: skip
    """A profile per family (or the family `only`) with at least MIN_VALUES fittable values. With `strata` (a pooled
    profile's values by the family they belong to, "AMD gpu"), each stratum weighs the same in its profile's fit
    (stratum_weights), and the profile names the vendors of its strata: a pooled profile stands for a typical family of
    its kind, not for the one published most, and for the vendors it measured."""
    out = {}
    for family in sorted(set(families[fittable].tolist())):
        if only is not None and family != only:
            continue
        mask = fittable & (families == family)
        if mask.sum() >= MIN_VALUES:
            weights, vendors = None, ()
            if strata is not None:
                weights = stratum_weights(strata[mask])
                names = np.unique(strata[mask])
                vendors = sorted({vendor_and_kind(str(name))[0] for name in names})
            out[family] = fit_family(p.take(mask), chips[mask].tolist(), weights=weights, vendors=vendors)
    return out


def save_family_profiles(profiles: dict[str, FamilyProfile], path: Path, *, source: str) -> None:
    body = {"source": source, "profiles": {family: {**asdict(p), "chips": list(p.chips), "vendors": list(p.vendors)}
                                           for family, p in sorted(profiles.items())}}  # fmt: skip
    path.write_text(json.dumps(body, indent=1) + "\n")


def load_family_profiles(path: Path) -> tuple[dict[str, FamilyProfile], str]:
    """The stored profiles and their source line; ({}, "") when there is no file."""
    if not path.is_file():
        return {}, ""
    body = json.loads(path.read_text())
    return {family: FamilyProfile(**{**values, "chips": tuple(values["chips"]), "vendors": tuple(values.get("vendors", ()))})
            for family, values in body["profiles"].items()}, body["source"]  # fmt: skip


def median_ape(predicted: np.ndarray, measured: np.ndarray) -> float:
    return float(np.median(np.abs(predicted / measured - 1.0))) if len(measured) else float("nan")
