"""Efficiency factors: how much of a chip's peak a real serving stack reaches.

The roofline (Williams et al., CACM 2009) is an upper bound; achievable FLOP/s and
bandwidth are below it. One set of factors per chip kind (and vendor where public
numbers differ), never per model or per measured row. A calibration fitted from
measured runs, keyed by (chip slug, weight dtype), replaces these defaults; an
explicit override replaces both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .specs import ChipSpec
from .units import DTYPES

SOURCES = ("spec defaults", "override")  # calibrations name themselves, e.g. "calibration v3 (12 runs)"


@dataclass(frozen=True, kw_only=True)
class Efficiency:
    compute_fraction: float  # eta_c: achieved / dense peak FLOP/s
    bandwidth_fraction: float  # eta_m: achieved / peak memory bandwidth
    step_overhead_s: float  # fixed cost per forward: launches, scheduler, sampling
    link_bandwidth_fraction: float  # achieved bus bandwidth / link bandwidth
    source: str = "spec defaults"
    # Software cost of one collective or pipeline send beyond the link latency
    # (kernel launch, synchronisation); added to alpha in the all-reduce formula.
    collective_overhead_s: float = 0.0
    # Prefill is not graph-captured in serving engines (its shape changes with the
    # prompt): each layer pays its kernel launches and synchronisation once more.
    prefill_layer_overhead_s: float = 0.0
    # Time a request spends before its first token beyond the prefill itself: tokenisation,
    # scheduling, the HTTP path of a serving engine. 0 in the spec defaults; fitted per serving
    # engine from measured TTFT (planner/engine/fit.py).
    request_overhead_s: float = 0.0
    # The share of the dense GEMMs' compute efficiency that the routed experts' GEMMs reach: a MoE layer
    # runs grouped GEMMs over many experts, dispatches its tokens to them and waits on the busiest, which
    # tells in prefill (compute-bound); their weights stream like any other. 1 in the spec defaults;
    # fitted per serving engine (planner/engine/fit.py).
    expert_efficiency: float = 1.0
    # Of the time before the first token, the part that grows with the routed experts a prefill passes
    # through: seconds per routed expert per MoE layer (DeepSeek-V3: 256 x 58). On the silicon rows at low
    # concurrency it separates DeepSeek (about 150 ms) from gpt-oss (about 40 ms) on the same engine and
    # chips, which one constant per engine cannot (docs/accuracy.md). 0 in the spec defaults; fitted
    # once over every engine's rows (planner/engine/fit.py).
    request_overhead_per_expert_layer_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("compute_fraction", "bandwidth_fraction", "link_bandwidth_fraction", "expert_efficiency"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must lie in (0, 1], got {value}")
        overheads = ("step_overhead_s", "collective_overhead_s", "prefill_layer_overhead_s", "request_overhead_s",
                     "request_overhead_per_expert_layer_s")  # fmt: skip
        if min(getattr(self, name) for name in overheads) < 0:
            raise ValueError(f"{', '.join(overheads)} must be >= 0")


# Calibration: (chip slug, weight dtype or "*") -> fitted Efficiency. The caller
# (the planner app) stores and supplies it; the engine only reads it.
Calibration = Mapping[tuple[str, str], Efficiency]

# The defaults per chip kind (and vendor where public numbers differ) live with each
# kind's policy, each with its evidence: chips/gpu.py, tpu.py, cpu.py, lpu.py, other.py.


# Weight-only quantised decode streams fewer bytes but dequantises them on the
# fly, so it reaches a smaller share of peak bandwidth. gpt-fast on A100
# (README @32971d3): Llama-2-7B bf16 104.9 tok/s x 13.5 GB = 69% of 2.04 TB/s,
# int8 155.6 x 6.7 GB = 51% (x0.75), int4 g32 196.8 x 4.1 GB = 40% (x0.59: its
# bf16 group scales and zeros make 5 bits a weight; the engine counts the int4
# format's group-128 4.16, architecture.WEIGHT_FORMAT_BITS). llama.cpp Q4_K_M
# shows a milder drop; we take x0.75 for int8 and x0.6 for int4 for every chip.
_WEIGHT_ONLY_BANDWIDTH_SCALE = {"int8": 0.75, "int4": 0.6}
# A weight format whose kernels dequantise at another rate than its dtype's default replaces that
# dtype's scale (ModelSpec.weight_layout, hardware.candidate_hardware). llama.cpp's Q4_K_M: Llama-3.1-8B
# generates 71.93 tokens/s from 4.6 GB streamed against F16's 29.17 from 15.0 GB on the same GPU
# (tools/quantize/README.md; the input embedding is gathered, not streamed): x0.75 of F16's share.
FORMAT_BANDWIDTH_SCALE = {"q4_k_m": 0.75}


def format_bandwidth_ratio(weight_format: str, dtype: str) -> float:
    """The format's weight-only bandwidth scale over its dtype's default one (1 for most formats)."""
    default = _WEIGHT_ONLY_BANDWIDTH_SCALE.get(dtype, 1.0)
    return FORMAT_BANDWIDTH_SCALE.get(weight_format, default) / default


# FP8 tensor-core GEMMs reach a smaller share of their doubled peak than bf16 ones
# (scaling and casting kernels around each GEMM, less mature kernels): TensorRT-LLM
# v0.5 FP8 prefill of Llama-2-7B at 2,048 tokens on H100 runs at ~47% of the FP8
# peak against ~72% of the FP16 peak for the same prefill on A100
# (tests/fixtures/measured_dev.csv, trt-*-ttft-in2048). One factor per dtype, on every chip with FP8 math, also where
# the FP8 peak is no higher than the bf16 one (Gaudi 3, TPU v5p, Inferentia2, Trainium: there an fp8 prefill runs 0.7x
# as fast as a bf16 one): keeping the bf16 share there was tried and fitted other_chips.csv's Gaudi rows, all fp8,
# worse (Gaudi 2 19% to 31%, Gaudi 3 13% to 20% in-sample; docs/accuracy_history.md, thirty-first session).
_FP8_COMPUTE_SCALE = 0.7


def default_efficiency(chip: ChipSpec, weight_dtype: str = "bf16") -> Efficiency:
    """Spec default for a chip: its kind's policy, by vendor where known; weight-only
    int8/int4 reach a smaller share of bandwidth; FP8 math a smaller share of its peak."""
    from .chips import policy_for  # the policies import Efficiency from here

    base = policy_for(chip).default_efficiency(chip)
    scale = _WEIGHT_ONLY_BANDWIDTH_SCALE.get(weight_dtype)
    if scale:
        base = replace(base, bandwidth_fraction=base.bandwidth_fraction * scale)
    if weight_dtype == "fp8" and chip.has_math("fp8"):
        base = replace(base, compute_fraction=base.compute_fraction * _FP8_COMPUTE_SCALE)
    return base


# The factors an Efficiency carries (every field but its source label): what a calibration stores
# and an override may set. One list, so a new factor cannot be dropped on the way (planner/models.py).
FACTORS: tuple[str, ...] = ("compute_fraction", "bandwidth_fraction", "step_overhead_s", "link_bandwidth_fraction",
                            "collective_overhead_s", "prefill_layer_overhead_s", "request_overhead_s", "expert_efficiency",
                            "request_overhead_per_expert_layer_s")  # fmt: skip

Override = Efficiency | Mapping[str, float]


def resolve_efficiency(
    chip: ChipSpec,
    weight_dtype: str,
    *,
    calibration: Calibration | None = None,
    override: Override | None = None,
) -> Efficiency:
    """Override > calibration (chip, dtype) > calibration (chip, "*") > default.

    An override given as a mapping replaces only the factors it names, on top of what the chip
    would otherwise use; a whole Efficiency replaces everything."""
    if isinstance(override, Efficiency):
        return override
    resolved = None
    if calibration:
        for key in ((chip.slug, weight_dtype), (chip.slug, "*")):
            if key in calibration:
                resolved = calibration[key]
                break
    resolved = resolved or default_efficiency(chip, weight_dtype)
    if override:
        unknown = set(override) - set(FACTORS)
        if unknown:
            raise ValueError(f"unknown efficiency factors: {sorted(unknown)}; expected some of {', '.join(FACTORS)}")
        resolved = replace(resolved, **override, source="override")
    return resolved


@dataclass(frozen=True, kw_only=True)
class EfficiencyTable:
    """Factors for every (chip index, weight dtype code), for array lookups."""

    compute_fraction: np.ndarray  # [n_chips, n_dtypes]
    bandwidth_fraction: np.ndarray
    step_overhead_s: np.ndarray
    link_bandwidth_fraction: np.ndarray
    collective_overhead_s: np.ndarray
    request_overhead_s: np.ndarray
    prefill_layer_overhead_s: np.ndarray
    expert_efficiency: np.ndarray
    request_overhead_per_expert_layer_s: np.ndarray
    sources: tuple[tuple[str, ...], ...]  # [chip][dtype] -> source label


def efficiency_table(
    chips: Sequence[ChipSpec],
    *,
    calibration: Calibration | None = None,
    override: Override | None = None,
) -> EfficiencyTable:
    shape = (len(chips), len(DTYPES))
    fields = {name: np.empty(shape) for name in FACTORS}
    sources = []
    for i, chip in enumerate(chips):
        row = []
        for j, dtype in enumerate(DTYPES):
            eff = resolve_efficiency(chip, dtype, calibration=calibration, override=override)
            for name, table in fields.items():
                table[i, j] = getattr(eff, name)
            row.append(eff.source)
        sources.append(tuple(row))
    return EfficiencyTable(**fields, sources=tuple(sources))
