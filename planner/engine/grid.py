"""Candidate grids: a struct of NumPy arrays, one entry per configuration."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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
    # Ranks that hold whole experts (expert parallelism), the busiest of which sets a MoE layer's time;
    # None: every tp x attention-DP rank where attention DP is on, else 1 (each expert sharded over the
    # tensor-parallel ranks, which all read the same share).
    expert_parallel: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.chip_index)
        if self.attention_data_parallel is None:
            object.__setattr__(self, "attention_data_parallel", np.ones(n, dtype=np.int64))
        if self.expert_parallel is None:
            adp = np.asarray(self.attention_data_parallel)
            object.__setattr__(self, "expert_parallel", np.where(adp > 1, np.asarray(self.tensor_parallel) * adp, 1))
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
        expert_parallel: int | None = None,
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
            expert_parallel=None if expert_parallel is None else np.array([expert_parallel]),
        )


@dataclass(frozen=True, kw_only=True)
class GridSpec:
    """What a cartesian grid is made of; `grid_size` counts it and `grid_chunks` builds it
    from the same per-chip blocks, so the count is exact before anything is built."""

    model: ModelSpec
    chips: tuple[ChipSpec, ...]
    weight_dtypes: tuple[str, ...] = ("bf16", "fp8", "int8", "int4")
    kv_dtypes: tuple[str, ...] | None = None  # None: default_kv_dtype(weight dtype, chip) for each pair
    batches: tuple[int, ...] = DEFAULT_BATCHES
    decoding_count: int = 1
    max_chip_count: int = 64
    tensor_parallel_options: tuple[int, ...] = DEFAULT_TENSOR_PARALLEL


@dataclass(frozen=True, kw_only=True)
class _ChipBlock:
    """One chip's layouts x dtype pairs x batches (a single decoding setting), not yet expanded."""

    chip_index: int
    layouts: np.ndarray  # [L, 3]: chip_count, tp, pp
    pairs: np.ndarray  # [P, 2]: weight, kv dtype codes
    batches: np.ndarray  # [B]

    def __len__(self) -> int:
        return len(self.layouts) * len(self.pairs) * len(self.batches)

    def columns(self, start: int, stop: int, decoding_index: int) -> dict[str, np.ndarray]:
        """Rows [start, stop) of this block in grid order (layout, then pair, then batch)."""
        flat = np.arange(start, stop, dtype=np.int64)
        per_layout = len(self.pairs) * len(self.batches)
        li, rest = np.divmod(flat, per_layout)
        pi, bi = np.divmod(rest, len(self.batches))
        return {
            "chip_index": np.full(len(flat), self.chip_index, dtype=np.int64), "chip_count": self.layouts[li, 0],
            "tensor_parallel": self.layouts[li, 1], "pipeline_parallel": self.layouts[li, 2], "weight_dtype": self.pairs[pi, 0],
            "kv_dtype": self.pairs[pi, 1], "batch": self.batches[bi], "decoding_index": np.full(len(flat), decoding_index, dtype=np.int64),
        }  # fmt: skip


def _chip_blocks(spec: GridSpec) -> list[_ChipBlock]:
    blocks = []
    for chip_index, chip in enumerate(spec.chips):
        # A chip under a serving engine is searched at the weight dtypes the engine serves only.
        served = chip.scheduler.weight_dtypes if chip.scheduler is not None else None
        w_codes = [DTYPE_CODE[d] for d in spec.weight_dtypes if served is None or d in served]
        layouts = policy_for(chip).layouts(
            chip, spec.model, spec.weight_dtypes, max_chip_count=spec.max_chip_count, tensor_parallel_options=spec.tensor_parallel_options
        )
        if spec.kv_dtypes is None:
            pairs = [(w, DTYPE_CODE[default_kv_dtype(DTYPES[w], chip)]) for w in w_codes]
        else:
            pairs = [(w, DTYPE_CODE[k]) for w in w_codes for k in spec.kv_dtypes]
        blocks.append(_ChipBlock(
            chip_index=chip_index, layouts=np.array(layouts, dtype=np.int64).reshape(-1, 3),
            pairs=np.array(pairs, dtype=np.int64).reshape(-1, 2), batches=np.asarray(spec.batches, dtype=np.int64),
        ))  # fmt: skip
    return blocks


def grid_size(spec: GridSpec) -> int:
    """The exact number of candidates `grid_chunks(spec)` yields (and `cartesian_grid` builds),
    computed from the same per-chip layouts without building a single row."""
    return spec.decoding_count * sum(len(block) for block in _chip_blocks(spec))


def grid_chunks(spec: GridSpec, *, chunk_candidates: int) -> Iterator[CandidateGrid]:
    """The grid in order, as consecutive CandidateGrids of at most `chunk_candidates` rows each:
    memory for the rows is bounded by the chunk, whatever the grid's size.

    Decoding settings are outermost (each one a contiguous run, which lets evaluate() work on
    slices), then chips, layouts, dtype pairs and batches."""
    if chunk_candidates < 1:
        raise ValueError("chunk_candidates must be at least 1")
    blocks = _chip_blocks(spec)
    pending: list[dict[str, np.ndarray]] = []
    filled, yielded = 0, False
    for decoding_index in range(spec.decoding_count):
        for block in blocks:
            start = 0
            while start < len(block):
                stop = min(len(block), start + chunk_candidates - filled)
                pending.append(block.columns(start, stop, decoding_index))
                filled += stop - start
                start = stop
                if filled == chunk_candidates:
                    yield _joined(pending)
                    pending, filled, yielded = [], 0, True
    if pending or not yielded:  # an empty grid is one empty chunk
        yield _joined(pending)


def _joined(parts: list[dict[str, np.ndarray]]) -> CandidateGrid:
    names = ("chip_index", "chip_count", "tensor_parallel", "pipeline_parallel", "weight_dtype", "kv_dtype", "batch", "decoding_index")
    if not parts:
        return CandidateGrid(**{name: np.zeros(0, dtype=np.int64) for name in names})
    return CandidateGrid(**{name: np.concatenate([p[name] for p in parts]) for name in names})


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
    """Every chip x layout x weight dtype x KV dtype x batch x decoding setting, in one grid
    (`grid_chunks` of the same GridSpec, joined).

    kv_dtypes=None uses default_kv_dtype(weight dtype, chip) for each pair.
    """
    spec = GridSpec(
        model=model, chips=tuple(chips), weight_dtypes=tuple(weight_dtypes), kv_dtypes=None if kv_dtypes is None else tuple(kv_dtypes),
        batches=tuple(batches), decoding_count=decoding_count, max_chip_count=max_chip_count,
        tensor_parallel_options=tuple(tensor_parallel_options),
    )  # fmt: skip
    return join_grids(list(grid_chunks(spec, chunk_candidates=max(1, grid_size(spec)))))


def join_grids(grids: list[CandidateGrid]) -> CandidateGrid:
    """Grids end to end, as one."""
    if len(grids) == 1:
        return grids[0]
    return CandidateGrid(**{f.name: np.concatenate([getattr(g, f.name) for g in grids]) for f in fields(CandidateGrid)})
