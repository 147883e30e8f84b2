"""Each class's candidate replicas, from the planner's own search.

For one request class the grid a plan would search (every chip, layout, dtype and batch) is evaluated in
chunks under the class's SLOs; every feasible configuration is priced on every offering of its chip, and
for each (chip, offering) two are kept: the one with the lowest $/hour per request/s served (what a large
fleet wants) and the one with the lowest $/hour (the smallest step a small class can buy). A class then
keeps its `keep` cheapest per request/s, and the cheapest of each chip (so a single-chip fleet can
always be priced beside the mix).

A replica's capacity is its closed-loop throughput at that batch (output tokens/s / output tokens per
request), loaded to `target_utilisation` so that arrivals find room; its pessimistic capacity uses the
low end of the throughput's 80% interval (planner/engine/uncertainty.py), given per chip by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..cost import DEFAULT_PUE, billed_chips, offering_table
from ..estimate import estimate_from_results
from ..evaluate import evaluate
from ..grid import CandidateGrid, grid_chunks, join_grids
from ..search import SearchOptions, grid_spec
from ..specs import ChipSpec, ModelSpec, OfferingSpec, Workload
from ..streamed import CHUNK_CANDIDATES
from .specs import Candidate, RequestClass

DEFAULT_TARGET_UTILISATION = 0.85  # a replica loaded to 85% of its capacity: arrivals are not one steady stream
DEFAULT_KEEP_PER_CLASS = 60


@dataclass(frozen=True, kw_only=True)
class ClassCandidates:
    candidates: tuple[Candidate, ...]
    searched: int  # configurations evaluated
    feasible: int  # within the class's SLOs


def class_workload(rc: RequestClass) -> Workload:
    return Workload(prompt_tokens=rc.prompt_tokens, output_tokens=rc.output_tokens, ttft_slo_s=rc.ttft_slo_s, tpot_slo_s=rc.tpot_slo_s)


def class_candidates(
    model: ModelSpec,
    chips: Sequence[ChipSpec],
    offerings: Mapping[str, Sequence[OfferingSpec]],
    rc: RequestClass,
    class_index: int,
    options: SearchOptions,
    *,
    catalog_slugs: Sequence[str],
    throughput_low_ratio: Sequence[float],
    target_utilisation: float = DEFAULT_TARGET_UTILISATION,
    keep: int = DEFAULT_KEEP_PER_CLASS,
    chunk_candidates: int = CHUNK_CANDIDATES,
) -> ClassCandidates:
    """`catalog_slugs[i]`: the catalog chip of chips[i] (a serving engine's variant searches a chip again);
    `throughput_low_ratio[i]`: the low end of its throughput interval as a ratio (0.8: 20% below)."""
    if not 0 < target_utilisation <= 1:
        raise ValueError("target_utilisation must be in (0, 1]")
    chips = tuple(chips)
    workload = class_workload(rc)
    spec = grid_spec(model, chips, workload, options)
    table = offering_table(chips, offerings, options.pricing_models)
    tdp = np.array([c.tdp_watts or np.nan for c in chips])
    width = table.fixed_usd_per_hour.shape[1]
    best: dict[tuple[int, int, int], tuple[float, int]] = {}  # (chip, column, which) -> (score, kept row)
    kept: list[CandidateGrid] = []
    offset = searched = feasible = 0
    for chunk in grid_chunks(spec, chunk_candidates=chunk_candidates):
        r = evaluate(model, chips, chunk, workload, options.decodings, efficiency=options.efficiency, calibration=options.calibration,
                     disaggregated=options.disaggregated)  # fmt: skip
        searched += len(chunk)
        ok = np.flatnonzero(r.feasible)
        feasible += len(ok)
        if not len(ok):
            continue
        ci = chunk.chip_index[ok]
        capacity = r.output_tokens_per_s_total[ok] / rc.output_tokens * target_utilisation
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = np.nan_to_num(r.power_w_per_chip[ok] / tdp[ci], nan=1.0)
        picks: dict[tuple[int, int, int], tuple[float, int]] = {}
        for j in range(width):
            hourly = table.fixed_usd_per_hour[ci, j] + table.power_usd_per_hour[ci, j] * fraction
            usd_per_hour = hourly * billed_chips(r.total_chips[ok], table.chips_per_unit[ci, j])
            valid = np.isfinite(usd_per_hour) & (capacity > 0)
            for which, score in ((0, usd_per_hour / np.where(capacity > 0, capacity, np.nan)), (1, usd_per_hour)):
                score = np.where(valid, score, np.inf)
                order = np.lexsort((score, ci))  # by chip, then score: the first row of each chip is its best
                first = order[np.r_[True, ci[order][1:] != ci[order][:-1]]]
                for row in first:
                    if np.isfinite(score[row]):
                        key = (int(ci[row]), j, which)
                        if key not in best or score[row] < best[key][0]:
                            picks[key] = (float(score[row]), int(ok[row]))
        if picks:
            local = sorted({row for _, row in picks.values()})
            position = {row: offset + n for n, row in enumerate(local)}
            kept.append(chunk.take(np.array(local)))
            for key, (score, row) in picks.items():
                best[key] = (score, position[row])
            offset += len(local)
    if not best:
        return ClassCandidates(candidates=(), searched=searched, feasible=feasible)
    grid = join_grids(kept)
    results = evaluate(model, chips, grid, workload, options.decodings, efficiency=options.efficiency, calibration=options.calibration,
                       disaggregated=options.disaggregated)  # fmt: skip
    chosen = [tuple(o for o in offerings.get(c.slug, ()) if options.pricing_models is None or o.pricing_model in options.pricing_models) for c in chips]
    out: dict[tuple[int, str], Candidate] = {}
    for (chip_i, j, _), (_, row) in sorted(best.items()):
        offering = chosen[chip_i][j]
        key = (row, offering.slug)
        if key not in out:
            out[key] = _candidate(results, row, chips[chip_i], offering, table, j, rc, class_index, catalog_slugs[chip_i],
                                  float(throughput_low_ratio[chip_i]), target_utilisation)  # fmt: skip
    ranked = sorted(out.values(), key=lambda c: (c.usd_per_request_capacity, c.usd_per_hour))
    keep_rows = ranked[:keep]
    seen = {c.chip_slug for c in keep_rows}
    for c in ranked[keep:]:
        if c.chip_slug not in seen:
            seen.add(c.chip_slug)
            keep_rows.append(c)
    # The smallest step of each chip too: a small class (or the last replicas of a big one) may want it. By slug, not
    # in the set's order: the program's columns follow this list, and a set of strings iterates in an order that
    # changes with each process's hash seed, which moved the solver to another plan within its gap.
    for slug in sorted(seen):
        smallest = min((c for c in ranked if c.chip_slug == slug), key=lambda c: (c.usd_per_hour, c.usd_per_request_capacity))
        if smallest not in keep_rows:
            keep_rows.append(smallest)
    return ClassCandidates(candidates=tuple(keep_rows), searched=searched, feasible=feasible)


def _candidate(results, row: int, chip: ChipSpec, offering: OfferingSpec, table, column: int, rc: RequestClass, class_index: int,
               catalog_slug: str, low_ratio: float, target_utilisation: float) -> Candidate:  # fmt: skip
    estimate = estimate_from_results(results, row, offering)
    chips = int(estimate.total_chips)
    billed = int(billed_chips(chips, offering.chips_per_unit))
    watts = estimate.power_w_per_chip if estimate.power_w_per_chip is not None and math.isfinite(estimate.power_w_per_chip) else None
    fraction = watts / chip.tdp_watts if chip.tdp_watts and watts is not None else 1.0
    chip_index = int(results.grid.chip_index[row])
    fixed = float(table.fixed_usd_per_hour[chip_index, column])
    power = float(table.power_usd_per_hour[chip_index, column]) * fraction
    capacity = estimate.output_tokens_per_s_total / rc.output_tokens * target_utilisation
    units = billed // offering.chips_per_unit
    chip_w = watts if watts is not None else chip.tdp_watts  # None: the catalog has no power figure for the chip
    wall_w = None if chip_w is None else chip_w * chips + (offering.host_watts_per_unit or 0.0) * units
    layout = f"TP{estimate.tensor_parallel} PP{estimate.pipeline_parallel}" + (
        f" x{estimate.replicas}" if estimate.replicas > 1 else "")  # fmt: skip
    return Candidate(
        class_index=class_index, chip_slug=catalog_slug, offering_slug=offering.slug, pricing_model=offering.pricing_model,
        chips=chips, billed_chips=billed, chips_per_unit=offering.chips_per_unit, requests_per_s=capacity,
        requests_per_s_low=capacity * low_ratio, usd_per_hour=(fixed + power) * billed,
        owned_fixed_usd_per_chip_hour=fixed if offering.owned else 0.0, owned_power_usd_per_hour=power * chips if offering.owned else 0.0,
        wall_kw=None if wall_w is None else wall_w * (offering.pue or DEFAULT_PUE) / 1000.0,
        label=f"{chips} x {chip.slug} {layout} {estimate.weight_dtype} batch {estimate.batch}",
        detail={
            "chip_variant": chip.slug, "tensor_parallel": estimate.tensor_parallel, "pipeline_parallel": estimate.pipeline_parallel,
            "data_parallel_replicas": estimate.replicas, "attention_data_parallel": estimate.attention_data_parallel, "weight_dtype": estimate.weight_dtype, "kv_dtype": estimate.kv_dtype, "batch": estimate.batch,
            "ttft_s": estimate.ttft_s, "tpot_s": estimate.tpot_s, "output_tokens_per_s_total": estimate.output_tokens_per_s_total,
            "power_w_per_chip": estimate.power_w_per_chip,
        },
    )  # fmt: skip
