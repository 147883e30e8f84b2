"""Which math path a chip uses for a weight dtype, and the warnings it earns.

Rules (kept simple on purpose):
- fp32, bf16, fp16: native if the chip has that path, else the nearest 16/32-bit
  path, with a warning.
- fp8: fp8 compute (W8A8, as TensorRT-LLM FP8 engines do) if the chip has fp8,
  else 16-bit compute with a warning (e.g. A100 has no fp8 tensor cores).
- int8, int4: weight-only quantisation (gpt-fast `quantize.py`, llama.cpp
  Q4_K_M): weights are dequantised and multiplied in bf16. Not a fallback.
- fp4: fp4 compute if the chip has fp4 (Blackwell), else 16-bit with a warning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .specs import ChipSpec
from .units import DTYPE_CODE, DTYPES

_SIXTEEN_BIT_CHAIN = ("bf16", "fp16", "fp32")
_PREFERRED: dict[str, tuple[str, ...]] = {
    "fp32": ("fp32", "bf16", "fp16"),
    "bf16": ("bf16", "fp16", "fp32"),
    "fp16": ("fp16", "bf16", "fp32"),
    "fp8": ("fp8", *_SIXTEEN_BIT_CHAIN),
    "int8": _SIXTEEN_BIT_CHAIN,
    "int4": _SIXTEEN_BIT_CHAIN,
    "fp4": ("fp4", *_SIXTEEN_BIT_CHAIN),
}
# Weight-only formats compute in 16 bits by design: no warning when they do.
_WEIGHT_ONLY = ("int8", "int4")

NO_MATH_PATH = -1


@dataclass(frozen=True, kw_only=True)
class ComputeChoice:
    compute_dtype: str | None  # None: the chip has no usable floating-point path
    warning: str | None


def choose_compute_dtype(chip: ChipSpec, weight_dtype: str) -> ComputeChoice:
    """The math path used for `weight_dtype` weights on `chip`, with a warning in words."""
    chain = _PREFERRED[weight_dtype]
    for dtype in chain:
        if chip.has_math(dtype):
            expected = "bf16" if weight_dtype in _WEIGHT_ONLY else weight_dtype
            if dtype == expected or (weight_dtype in _WEIGHT_ONLY and dtype == "fp16"):
                return ComputeChoice(compute_dtype=dtype, warning=None)
            return ComputeChoice(
                compute_dtype=dtype,
                warning=f"{chip.slug} has no {expected} math path; {weight_dtype} weights are computed in "
                f"{dtype} (dequantised), so compute-bound phases run at the {dtype} peak",
            )
    return ComputeChoice(compute_dtype=None, warning=f"{chip.slug} lists no floating-point peak usable for {weight_dtype} weights")


def default_kv_dtype(weight_dtype: str, chip: ChipSpec) -> str:
    """KV dtype when a measurement or request does not state one.

    Quantised checkpoints served in fp8/fp4 usually ship an fp8 KV cache where
    the chip supports fp8 (TensorRT-LLM `--fp8_kv_cache`, vLLM `kv_cache_dtype=fp8`);
    everything else keeps a 16-bit cache.
    """
    if weight_dtype in ("fp8", "fp4") and chip.has_math("fp8"):
        return "fp8"
    if weight_dtype == "fp32":
        return "fp32"
    return "bf16" if chip.has_math("bf16") or not chip.has_math("fp16") else "fp16"


@dataclass(frozen=True, kw_only=True)
class ComputeTable:
    """compute dtype code and warning text for every (chip index, weight dtype code)."""

    compute_code: np.ndarray  # [n_chips, n_dtypes] int, NO_MATH_PATH where none
    peak_flops_per_s: np.ndarray  # [n_chips, n_dtypes] peak of the chosen path under the chip's engine (0 if none)
    expert_peak_flops_per_s: np.ndarray  # [n_chips, n_dtypes] the same for a MoE model's routed experts
    warnings: tuple[tuple[str | None, ...], ...]


def compute_table(chips: Sequence[ChipSpec]) -> ComputeTable:
    codes = np.full((len(chips), len(DTYPES)), NO_MATH_PATH, dtype=np.int64)
    peaks, expert_peaks = np.zeros((len(chips), len(DTYPES))), np.zeros((len(chips), len(DTYPES)))
    warnings = []
    for i, chip in enumerate(chips):
        row = []
        for j, weight_dtype in enumerate(DTYPES):
            choice = choose_compute_dtype(chip, weight_dtype)
            warning = choice.warning
            if choice.compute_dtype is not None:
                codes[i, j] = DTYPE_CODE[choice.compute_dtype]
                peaks[i, j] = chip.math_peak_flops_per_s(choice.compute_dtype, weight_dtype)
                expert_peaks[i, j] = chip.math_peak_flops_per_s(choice.compute_dtype, weight_dtype, experts=True)
                said = (warning, vector_units_warning(chip, choice.compute_dtype, weight_dtype, peaks[i, j]))
                warning = "; ".join(w for w in said if w) or None
            row.append(warning)
        warnings.append(tuple(row))
    return ComputeTable(compute_code=codes, peak_flops_per_s=peaks, expert_peak_flops_per_s=expert_peaks, warnings=tuple(warnings))


def vector_units_warning(chip: ChipSpec, compute_dtype: str, weight_dtype: str, peak: float, *, experts: bool = False) -> str | None:
    """Said where the chip's serving engine multiplies these weights (`experts`: a MoE model's routed experts) on a
    CPU's vector units, at `peak`, below the datasheet's."""
    datasheet = chip.peak_flops_per_s.get(compute_dtype, 0.0)
    if peak >= datasheet:
        return None
    engine = (chip.scheduler.engine if chip.scheduler is not None else "") or "the engine"
    what = "a MoE model's routed experts" if experts else f"{weight_dtype} weights' GEMMs"
    return (f"{engine} runs {what} on the vector units of {chip.slug}, not its matrix units: {peak / 1e12:.3g} TFLOP/s, "
            f"not the datasheet's {datasheet / 1e12:.3g}")  # fmt: skip
