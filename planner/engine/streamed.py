"""A search in chunks of fixed size: memory is bounded by the chunk, not by the grid.

Each chunk of the grid (grid.grid_chunks) is evaluated, priced and ranked; only the candidates
that can still matter are kept: the `keep` best of each chunk by cost (within a budget, if given)
and by an optional second key, each chunk's Pareto fronts, and the first candidate of each
infeasibility reason. The kept candidates (a few thousand at most) are searched once more, so the
answer is the same SearchResult shape as `search`, over them, with the whole grid's counts beside it.

Why it is exact: a candidate among the `keep` best of the whole grid is among the `keep` best of
its own chunk (fewer candidates of that chunk rank before it), and a point on the whole grid's
Pareto front is on its chunk's front; both orders break ties by grid index, and the kept candidates
are searched in grid order, so ranking, fronts and reasons' examples come out as one pass would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from . import reasons
from .grid import CandidateGrid, grid_chunks, grid_size, join_grids
from .search import InfeasibleGroup, SearchOptions, SearchResult, grid_spec, search_grid
from .specs import ChipSpec, ModelSpec, OfferingSpec, Workload

# Rows per chunk. A candidate being evaluated holds ~1.7 KiB of result arrays and temporaries, so
# a chunk of 2**15 adds ~55 MiB to the process whatever the grid's size; what is kept between
# chunks is at most 2 x keep + the fronts + one per reason per chunk, searched again at the end
# (5 M candidates: 153 chunks, < 40 k kept). Measured in docs/benchmarks.md; smaller chunks are
# no faster (more Python per candidate) and bigger ones grow memory with no gain.
CHUNK_CANDIDATES = 1 << 15

RankKey = Callable[[SearchResult], np.ndarray]  # per candidate, lower first; inf: never ranked


@dataclass(frozen=True, kw_only=True)
class StreamedSearch:
    result: SearchResult  # over the kept candidates only (their indices below)
    kept: np.ndarray  # each kept candidate's index in the whole grid, ascending
    candidates: int  # the whole grid
    feasible: int  # feasible candidates of the whole grid
    within_budget: int  # feasible ones priced within the budget (all feasible ones without a budget)
    infeasible: tuple[InfeasibleGroup, ...]  # whole-grid counts; example_index into `result`
    chunks: int
    chunk_candidates: int
    seconds: float

    @property
    def over_budget(self) -> int:
        return self.feasible - self.within_budget

    @property
    def candidates_per_s(self) -> float:
        return self.candidates / max(self.seconds, 1e-12)


def _ordered(result: SearchResult, key: RankKey | None) -> np.ndarray:
    """The chunk's feasible candidates in the order the caller ranks them (cost, then its key)."""
    ranked = result.ranked
    if key is not None:
        ranked = ranked[np.argsort(key(result)[ranked], kind="stable")]
    return ranked


def search_streamed(
    model: ModelSpec,
    chips: Sequence[ChipSpec],
    offerings: Mapping[str, Sequence[OfferingSpec]],
    workload: Workload,
    options: SearchOptions = SearchOptions(),
    *,
    keep: int,
    rank_key: RankKey | None = None,
    budget_usd_per_million_output_tokens: float | None = None,
    chunk_candidates: int = CHUNK_CANDIDATES,
    on_progress: Callable[[int, int], None] | None = None,
) -> StreamedSearch:
    """Search the grid chunk by chunk, keeping the running top-`keep` and Pareto state only.

    `rank_key` is a second order the caller ranks by (the cost order is always kept); the budget
    drops candidates priced above it from both. `on_progress(done, total)` runs after each chunk."""
    started = time.perf_counter()
    chips = tuple(chips)
    spec = grid_spec(model, chips, workload, options)
    total = grid_size(spec)
    kept_grids: list[CandidateGrid] = []
    kept_index: list[np.ndarray] = []
    counts: dict[int, int] = {}
    first_of: dict[int, int] = {}  # reason code -> its first candidate's index in the whole grid
    feasible = within = 0
    offset = chunks = 0
    for chunk in grid_chunks(spec, chunk_candidates=chunk_candidates):
        r = search_grid(model, chips, offerings, workload, options, grid=chunk)
        cost = r.usd_per_million_output_tokens
        feasible += len(r.ranked)
        keepers = [r.pareto_cost_tpot, r.pareto_cost_ttft]
        for key in (None, rank_key) if rank_key is not None else (None,):
            ordered = _ordered(r, key)
            if budget_usd_per_million_output_tokens is not None:
                ordered = ordered[cost[ordered] <= budget_usd_per_million_output_tokens]
            keepers.append(ordered[:keep])
        within += len(r.ranked) if budget_usd_per_million_output_tokens is None else int(np.sum(cost[r.ranked] <= budget_usd_per_million_output_tokens))
        for group in r.infeasible:
            counts[group.code] = counts.get(group.code, 0) + group.count
            if group.code not in first_of:
                first_of[group.code] = offset + group.example_index
                keepers.append(np.array([group.example_index]))
        local = np.unique(np.concatenate(keepers).astype(np.int64))
        kept_grids.append(chunk.take(local))
        kept_index.append(local + offset)
        offset += len(chunk)
        chunks += 1
        if on_progress is not None:
            on_progress(offset, total)
    kept = np.concatenate(kept_index)  # grid_chunks yields at least one (maybe empty) chunk
    result = search_grid(model, chips, offerings, workload, options, grid=join_grids(kept_grids), started=started)
    local_of = {int(g): i for i, g in enumerate(kept)}
    examples = {group.code: group for group in result.infeasible}
    infeasible = tuple(
        InfeasibleGroup(code=code, name=reasons.REASON_NAMES[code], count=count, example=examples[code].example,
                        example_index=local_of[first_of[code]])
        for code, count in sorted(sorted(counts.items()), key=lambda kv: -kv[1])  # as infeasible_groups orders them
    )  # fmt: skip
    return StreamedSearch(
        result=result, kept=kept, candidates=offset, feasible=feasible, within_budget=within, infeasible=infeasible,
        chunks=chunks, chunk_candidates=chunk_candidates, seconds=time.perf_counter() - started,
    )  # fmt: skip
