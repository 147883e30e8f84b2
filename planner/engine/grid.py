"""Candidate grids: a struct of NumPy arrays, one entry per configuration."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from .chips import policy_for
from .dtypes import default_kv_dtype
from .layouts import DEFAULT_TENSOR_PARALLEL
from .specs import ChipSpec, ModelSpec
from .units import DTYPE_CODE, DTYPES

DEFAULT_BATCHES = tuple(2**i for i in range(11))  # 1 .. 1024


@dataclass(frozen=True, kw_only=True)
class CandidateGrid:
    """Every array has the same length n; codes index DTYPES and the chips tuple."""

    chip_index: np.ndarray
    chip_count: np.ndarray
    tensor_parallel: np.ndarray
    pipeline_parallel: np.ndarray
    weight_dtype: np.ndarray
    kv_dtype: np.ndarray
    batch: np.ndarray  # concurrent sequences of the whole deployment (all replicas)
    decoding_index: np.ndarray
    # Attention replicas per replica, each with its own KV cache and batch share, the experts
    # spread over all of them (expert parallelism); None: 1 everywhere.
    attention_data_parallel: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.chip_index)
        if self.attention_data_parallel is None:
            object.__setattr__(self, "attention_data_parallel", np.ones(n, dtype=np.int64))
        for f in fields(self):
            value = np.asarray(getattr(self, f.name), dtype=np.int64)
            if value.shape != (n,):
                raise ValueError(f"grid field {f.name} has shape {value.shape}, expected ({n},)")
            object.__setattr__(self, f.name, value)

    def __len__(self) -> int:
        return len(self.chip_index)

    def take(self, index: np.ndarray) -> CandidateGrid:
        return CandidateGrid(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    @classmethod
    def single(
        cls,
        *,
        chip_index: int = 0,
        chip_count: int = 1,
        tensor_parallel: int = 1,
        pipeline_parallel: int = 1,
        weight_dtype: str = "bf16",
        kv_dtype: str = "bf16",
        batch: int = 1,
        decoding_index: int = 0,
        attention_data_parallel: int = 1,
    ) -> CandidateGrid:
        return cls(
            chip_index=np.array([chip_index]),
            chip_count=np.array([chip_count]),
            tensor_parallel=np.array([tensor_parallel]),
            pipeline_parallel=np.array([pipeline_parallel]),
            weight_dtype=np.array([DTYPE_CODE[weight_dtype]]),
            kv_dtype=np.array([DTYPE_CODE[kv_dtype]]),
            batch=np.array([batch]),
            decoding_index=np.array([decoding_index]),
            attention_data_parallel=np.array([attention_data_parallel]),
        )


def cartesian_grid(
    model: ModelSpec,
    chips: Sequence[ChipSpec],
    *,
    weight_dtypes: Sequence[str] = ("bf16", "fp8", "int8", "int4"),
    kv_dtypes: Sequence[str] | None = None,
    batches: Sequence[int] = DEFAULT_BATCHES,
    decoding_count: int = 1,
    max_chip_count: int = 64,
    tensor_parallel_options: Sequence[int] = DEFAULT_TENSOR_PARALLEL,
) -> CandidateGrid:
    """Every chip x layout x weight dtype x KV dtype x batch x decoding setting.

    kv_dtypes=None uses default_kv_dtype(weight dtype, chip) for each pair.
    A Python loop runs over chips only; the product itself is array broadcasting.
    """
    w_codes = np.array([DTYPE_CODE[d] for d in weight_dtypes])
    parts = []
    for chip_index, chip in enumerate(chips):
        layouts = policy_for(chip).layouts(
            chip, model, weight_dtypes, max_chip_count=max_chip_count, tensor_parallel_options=tensor_parallel_options
        )
        if kv_dtypes is None:
            pairs = np.array([(w, DTYPE_CODE[default_kv_dtype(DTYPES[w], chip)]) for w in w_codes])
        else:
            pairs = np.array([(w, DTYPE_CODE[k]) for w in w_codes for k in kv_dtypes])
        lay = np.array(layouts, dtype=np.int64).reshape(-1, 3)
        li, pi, bi = (a.ravel() for a in np.meshgrid(np.arange(len(lay)), np.arange(len(pairs)), np.arange(len(batches)), indexing="ij"))
        parts.append(
            (np.full(li.shape, chip_index), lay[li, 0], lay[li, 1], lay[li, 2], pairs[pi, 0], pairs[pi, 1],
             np.asarray(batches, dtype=np.int64)[bi])  # fmt: skip
        )
    base = [np.concatenate(col) for col in zip(*parts)] if parts else [np.zeros(0, dtype=np.int64)] * 7
    # Decoding settings outermost: each one is a contiguous block, which lets
    # evaluate() work on slices (views) instead of copies.
    names = ("chip_index", "chip_count", "tensor_parallel", "pipeline_parallel", "weight_dtype", "kv_dtype", "batch")
    columns = {name: np.tile(col, decoding_count) for name, col in zip(names, base)}
    return CandidateGrid(**columns, decoding_index=np.repeat(np.arange(decoding_count), len(base[0])))
