"""Search: build the cartesian grid, evaluate it in one pass, price it, rank it."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from . import reasons
from .cost import cheapest_offering, offering_table, usd_per_million_input_tokens, usd_per_million_tokens
from .efficiency import Calibration, Override
from .estimate import Estimate, estimate_from_results
from .evaluate import evaluate
from .grid import DEFAULT_BATCHES, DEFAULT_TENSOR_PARALLEL, CandidateGrid, GridSpec, cartesian_grid
from .results import Results, group_reasons
from .decoding import Autoregressive, Decoding
from .specs import ChipSpec, ModelSpec, OfferingSpec, Workload


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    weight_dtypes: tuple[str, ...] = ("bf16", "fp8", "int8", "int4")
    kv_dtypes: tuple[str, ...] | None = None  # None: default_kv_dtype per chip and weight dtype
    batches: tuple[int, ...] | None = None  # None: the workload's concurrency, else 1..1024
    decodings: tuple[Decoding, ...] = field(default_factory=lambda: (Autoregressive(),))
    max_chip_count: int = 64
    tensor_parallel_options: tuple[int, ...] = DEFAULT_TENSOR_PARALLEL
    pricing_models: tuple[str, ...] | None = None  # e.g. ("on_demand",); None: all
    efficiency: Override | None = None
    calibration: Calibration | None = None
    disaggregated: bool = False


@dataclass(frozen=True, kw_only=True)
class InfeasibleGroup:
    code: int
    name: str
    count: int
    example: str  # one candidate's reason, in words
    example_index: int


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    results: Results
    usd_per_chip_hour: np.ndarray
    offering_column: np.ndarray  # -1: no priced offering for the chip
    billed_chips: np.ndarray  # the chips paid for: whole units of the chosen offering (NaN: unpriced)
    usd_per_million_output_tokens: np.ndarray
    usd_per_million_input_tokens: np.ndarray
    ranked: np.ndarray  # feasible candidates, cheapest first (unpriced last, by TPOT)
    pareto_cost_tpot: np.ndarray  # cost vs TPOT front, cheapest first
    pareto_cost_ttft: np.ndarray
    infeasible: tuple[InfeasibleGroup, ...]
    offerings: tuple[tuple[OfferingSpec, ...], ...]  # per chip, after the pricing filter
    seconds: float

    @property
    def candidates(self) -> int:
        return len(self.results)

    @property
    def candidates_per_s(self) -> float:
        return self.candidates / max(self.seconds, 1e-12)

    def offering_of(self, i: int) -> OfferingSpec | None:
        column = int(self.offering_column[i])
        return None if column < 0 else self.offerings[int(self.results.grid.chip_index[i])][column]

    def estimate(self, i: int) -> Estimate:
        return estimate_from_results(self.results, i, self.offering_of(i))

    def top(self, n: int = 10) -> list[Estimate]:
        return [self.estimate(int(i)) for i in self.ranked[:n]]


def grid_spec(model: ModelSpec, chips: Sequence[ChipSpec], workload: Workload, options: SearchOptions = SearchOptions()) -> GridSpec:
    """The candidate grid a search with these options evaluates (grid_size counts it exactly)."""
    batches = options.batches or ((workload.concurrency,) if workload.concurrency else DEFAULT_BATCHES)
    return GridSpec(
        model=model, chips=tuple(chips), weight_dtypes=tuple(options.weight_dtypes), kv_dtypes=options.kv_dtypes,
        batches=tuple(batches), decoding_count=len(options.decodings), max_chip_count=options.max_chip_count,
        tensor_parallel_options=tuple(options.tensor_parallel_options),
    )  # fmt: skip


def search(
    model: ModelSpec,
    chips: Sequence[ChipSpec],
    offerings: Mapping[str, Sequence[OfferingSpec]],
    workload: Workload,
    options: SearchOptions = SearchOptions(),
) -> SearchResult:
    """Every chip x chip count x TP x PP x dtype x batch x decoding setting, in one pass
    (memory grows with the grid: `search_streamed` bounds it)."""
    started = time.perf_counter()
    spec = grid_spec(model, chips, workload, options)
    grid = cartesian_grid(
        model, spec.chips, weight_dtypes=spec.weight_dtypes, kv_dtypes=spec.kv_dtypes, batches=spec.batches,
        decoding_count=spec.decoding_count, max_chip_count=spec.max_chip_count, tensor_parallel_options=spec.tensor_parallel_options,
    )  # fmt: skip
    return search_grid(model, spec.chips, offerings, workload, options, grid=grid, started=started)


def search_grid(
    model: ModelSpec,
    chips: Sequence[ChipSpec],
    offerings: Mapping[str, Sequence[OfferingSpec]],
    workload: Workload,
    options: SearchOptions,
    *,
    grid: CandidateGrid,
    started: float | None = None,
) -> SearchResult:
    """Evaluate, price and rank the candidates of `grid` (any part of a search's grid)."""
    started = time.perf_counter() if started is None else started
    chips = tuple(chips)
    results = evaluate(
        model, chips, grid, workload, options.decodings, efficiency=options.efficiency, calibration=options.calibration,
        disaggregated=options.disaggregated,
    )  # fmt: skip
    table = offering_table(chips, offerings, options.pricing_models)
    with np.errstate(divide="ignore", invalid="ignore"):
        fraction = results.power_w_per_chip / np.array([c.tdp_watts or np.nan for c in chips])[grid.chip_index]
    priced = cheapest_offering(table, grid.chip_index, fraction, results.total_chips)
    hourly, column = priced.usd_per_chip_hour, priced.column
    # Charged to the tokens the workload asks for: under a request rate, idle capacity is paid for too.
    per_output = usd_per_million_tokens(priced.billed_chips, hourly, results.served_output_tokens_per_s)
    # A prompt's prefill is charged at the rate of the chips paid for, idle ones of a whole unit included.
    with np.errstate(divide="ignore", invalid="ignore"):
        billed_rate = hourly * priced.billed_chips / results.total_chips
    per_input = usd_per_million_input_tokens(
        grid.tensor_parallel * grid.pipeline_parallel * grid.attention_data_parallel, billed_rate, results.prefill_batched_s_per_prompt,
        workload.prompt_tokens,
    )
    ok = np.flatnonzero(results.feasible)
    # One stable sort by cost serves the ranking and both Pareto fronts; equal costs go to the shorter TPOT, then the
    # shorter TTFT, then keep grid order. Every batch of a layout that serves a request rate costs the hour over the
    # rate's tokens: the smallest that holds the sequences the rate keeps in flight comes first, and its TPOT, computed
    # at its full batch, is close to what that occupancy decodes at. Unpriced candidates (NaN) sort last.
    def key(values: np.ndarray) -> np.ndarray:
        return np.nan_to_num(values[ok], nan=np.inf)

    ranked = ok[np.lexsort((key(results.ttft_s), key(results.tpot_s), key(per_output)))]
    chosen = tuple(
        tuple(o for o in offerings.get(c.slug, ()) if options.pricing_models is None or o.pricing_model in options.pricing_models)
        for c in chips
    )
    return SearchResult(
        results=results,
        usd_per_chip_hour=hourly,
        offering_column=column,
        billed_chips=priced.billed_chips,
        usd_per_million_output_tokens=per_output,
        usd_per_million_input_tokens=per_input,
        ranked=ranked,
        pareto_cost_tpot=pareto_front(per_output, results.tpot_s, ranked),
        pareto_cost_ttft=pareto_front(per_output, results.ttft_s, ranked),
        infeasible=infeasible_groups(results),
        offerings=chosen,
        seconds=time.perf_counter() - started,
    )


def pareto_front(cost: np.ndarray, latency: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Candidates no other beats on both cost and latency, cheapest first.

    `candidates` sorted by cost (as `ranked` is) skips the sort. A running
    minimum of latency finds the front; a final exact pass over that short list
    drops points tied on cost with a faster twin.
    """
    priced = candidates[np.isfinite(cost[candidates])]
    if len(priced) > 1 and np.any(np.diff(cost[priced]) < 0):
        priced = priced[np.argsort(cost[priced], kind="stable")]
    lat = latency[priced]
    previous = np.concatenate(([np.inf], np.minimum.accumulate(lat)[:-1])) if len(lat) else lat
    front = priced[lat < previous]
    c, t = cost[front], latency[front]
    dominated = np.array([np.any((c <= c[i]) & (t <= t[i]) & ((c < c[i]) | (t < t[i]))) for i in range(len(front))], dtype=bool)
    return front[~dominated]


def infeasible_groups(results: Results) -> tuple[InfeasibleGroup, ...]:
    groups = []
    for code, index in sorted(group_reasons(results).items(), key=lambda kv: -len(kv[1])):
        example = int(index[0])
        groups.append(InfeasibleGroup(code=code, name=reasons.REASON_NAMES[code], count=len(index), example=results.reason_text(example),
                                     example_index=example))  # fmt: skip
    return tuple(groups)
