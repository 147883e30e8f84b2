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


@dataclass(frozen=True)
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

    def __post_init__(self) -> None:
        for name in ("compute_fraction", "bandwidth_fraction", "link_bandwidth_fraction"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must lie in (0, 1], got {value}")
        if min(self.step_overhead_s, self.collective_overhead_s, self.prefill_layer_overhead_s) < 0:
            raise ValueError("step_overhead_s, collective_overhead_s and prefill_layer_overhead_s must be >= 0")


# Calibration: (chip slug, weight dtype or "*") -> fitted Efficiency. The caller
# (the planner app) stores and supplies it; the engine only reads it.
Calibration = Mapping[tuple[str, str], Efficiency]

# NVIDIA GPUs.
# - compute 0.7: llm-analysis's examples use flops_efficiency = 0.7, about what
#   large bf16 GEMMs reach on A100/H100 under cuBLAS.
# - bandwidth 0.75: gpt-fast Llama-2-7B bf16 batch 1 on A100-80GB reaches
#   104.9 tok/s x 13.5 GB = 1.41 TB/s = 69% of 2.04 TB/s (README @32971d3);
#   Llama-3.1-8B 93.9 tok/s x 16.1 GB = 74%. llm-analysis's examples use 0.9,
#   which is the ceiling of a streaming copy, not of a decode step.
# - overhead 0.3 ms: CUDA-graph decode steps still pay for sampling, the
#   scheduler and kernel tails (the gap between gpt-fast's 69% and a pure
#   copy's ~90%). An assumption of the right order, to be calibrated.
# - link 0.8: nccl-tests all-reduce bus bandwidth on NVLink reaches roughly
#   80% of the per-direction link rate at large messages.
# - collective overhead 15 us: gpt-fast's TP rows (Llama-2-7B bf16, A100, TP
#   2/4/8) leave ~20 us per all-reduce once weights are streamed, of which the
#   5 us alpha of GenZ is the link; the rest is launch and synchronisation.
_NVIDIA_GPU = Efficiency(0.7, 0.75, 3e-4, 0.8, collective_overhead_s=15e-6, prefill_layer_overhead_s=150e-6)
# AMD GPUs: no public measurement in our reference set; assume a less mature
# kernel stack than CUDA (lower compute fraction). Calibrate before trusting.
_AMD_GPU = Efficiency(0.5, 0.7, 4e-4, 0.7, collective_overhead_s=15e-6, prefill_layer_overhead_s=150e-6)
# Other GPUs: the NVIDIA numbers are the best-documented stand-in.
_GPU = _NVIDIA_GPU
# TPUs: XLA-compiled static graphs keep launch overhead small; bandwidth as on
# GPUs. Assumption pending calibration (JetStream publishes no MBU figure).
_TPU = Efficiency(0.6, 0.75, 2e-4, 0.8, collective_overhead_s=5e-6, prefill_layer_overhead_s=30e-6)
# CPUs (one socket is one chip): llama.cpp and IPEX decode reach roughly half
# to two-thirds of theoretical DDR bandwidth; AMX/AVX-512 GEMMs fall well short
# of the peak instruction rate. Assumption pending calibration.
_CPU = Efficiency(0.4, 0.6, 1e-3, 0.6, collective_overhead_s=20e-6)
# LPU (Groq): statically scheduled by the compiler, so the per-step overhead is
# small and deterministic; SRAM streaming is not the limit, links are.
_LPU = Efficiency(0.5, 0.5, 5e-5, 0.8)
# Everything else (Apple unified memory, Gaudi, Inferentia): llama.cpp Metal
# Llama-3.1-8B f16 on M2 Ultra runs 36.3 tok/s x 16.1 GB = 0.58 TB/s = 73% of
# 800 GB/s (measured_dev.csv, lcpp-m2u-l3-8b-f16).
_OTHER = Efficiency(0.5, 0.7, 5e-4, 0.7, collective_overhead_s=15e-6, prefill_layer_overhead_s=150e-6)

_BY_KIND: dict[str, Efficiency] = {"gpu": _GPU, "tpu": _TPU, "cpu": _CPU, "lpu": _LPU, "other": _OTHER}
_BY_KIND_VENDOR: dict[tuple[str, str], Efficiency] = {("gpu", "nvidia"): _NVIDIA_GPU, ("gpu", "amd"): _AMD_GPU}


# Weight-only quantised decode streams fewer bytes but dequantises them on the
# fly, so it reaches a smaller share of peak bandwidth. gpt-fast on A100
# (README @32971d3): Llama-2-7B bf16 104.9 tok/s x 13.5 GB = 69% of 2.04 TB/s,
# int8 155.6 x 6.7 GB = 51% (x0.75), int4 g32 196.8 x 3.4 GB = 33% (x0.5; the
# group scales add ~1 bit per weight on top). llama.cpp Q4_K_M shows a milder
# drop; we take x0.75 for int8 and x0.6 for int4 as defaults for every chip.
_WEIGHT_ONLY_BANDWIDTH_SCALE = {"int8": 0.75, "int4": 0.6}


# FP8 tensor-core GEMMs reach a smaller share of their doubled peak than bf16 ones
# (scaling and casting kernels around each GEMM, less mature kernels): TensorRT-LLM
# v0.5 FP8 prefill of Llama-2-7B at 2,048 tokens on H100 runs at ~47% of the FP8
# peak against ~72% of the FP16 peak for the same prefill on A100
# (shared/reference/measured_dev.csv, trt-*-ttft-in2048). One factor per dtype.
_FP8_COMPUTE_SCALE = 0.7


def default_efficiency(chip: ChipSpec, weight_dtype: str = "bf16") -> Efficiency:
    """Spec default for a chip: by (kind, vendor) where known, else by kind;
    weight-only int8/int4 reach a smaller share of bandwidth; FP8 math a smaller
    share of its peak."""
    base = _BY_KIND_VENDOR.get((chip.kind, chip.vendor.strip().lower()), _BY_KIND[chip.kind])
    scale = _WEIGHT_ONLY_BANDWIDTH_SCALE.get(weight_dtype)
    if scale:
        base = replace(base, bandwidth_fraction=base.bandwidth_fraction * scale)
    if weight_dtype == "fp8" and chip.has_math("fp8"):
        base = replace(base, compute_fraction=base.compute_fraction * _FP8_COMPUTE_SCALE)
    return base


def resolve_efficiency(
    chip: ChipSpec,
    weight_dtype: str,
    *,
    calibration: Calibration | None = None,
    override: Efficiency | None = None,
) -> Efficiency:
    """Override > calibration (chip, dtype) > calibration (chip, "*") > default."""
    if override is not None:
        return override
    if calibration:
        for key in ((chip.slug, weight_dtype), (chip.slug, "*")):
            if key in calibration:
                return calibration[key]
    return default_efficiency(chip, weight_dtype)


@dataclass(frozen=True)
class EfficiencyTable:
    """Factors for every (chip index, weight dtype code), for array lookups."""

    compute_fraction: np.ndarray  # [n_chips, n_dtypes]
    bandwidth_fraction: np.ndarray
    step_overhead_s: np.ndarray
    link_bandwidth_fraction: np.ndarray
    collective_overhead_s: np.ndarray
    prefill_layer_overhead_s: np.ndarray
    sources: tuple[tuple[str, ...], ...]  # [chip][dtype] -> source label


def efficiency_table(
    chips: Sequence[ChipSpec],
    *,
    calibration: Calibration | None = None,
    override: Efficiency | None = None,
) -> EfficiencyTable:
    shape = (len(chips), len(DTYPES))
    names = ("compute_fraction", "bandwidth_fraction", "step_overhead_s", "link_bandwidth_fraction", "collective_overhead_s",
             "prefill_layer_overhead_s")
    fields = {name: np.empty(shape) for name in names}
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
