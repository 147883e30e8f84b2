"""The fleet benchmark: 20 request classes over a synthetic 60-chip catalog, each class's candidates from the
planner's own search, then the program solved with the two chips the cheapest fleet uses most supplied at half
of that and a power cap at 110% of its draw (the mix, its pessimistic twin, every limit lifted in turn and
each single-chip fleet beside it). One core; the figure is the best of `repeats` solves after a warm-up.

Run: PYTHONPATH=. python -m planner.engine.fleet.bench
"""

from __future__ import annotations

import time

from ..bench import _model, synthetic_chips
from ..search import SearchOptions
from ..specs import OfferingSpec
from .candidates import class_candidates
from .milp import solve
from .plan import fleet_plan
from .specs import Limits, RequestClass

BENCH_CHIPS = 60
BENCH_CLASSES = 20


def bench_classes(count: int = BENCH_CLASSES) -> tuple[RequestClass, ...]:
    """Chat, RAG and batch shapes at rates from 0.5 to 40 requests/s, SLOs from strict to none."""
    shapes = [(500, 150, 0.5, 0.04), (2000, 300, 1.0, 0.05), (8000, 400, 3.0, 0.08), (1000, 1000, None, None), (300, 50, 0.3, 0.03)]
    classes = []
    for i in range(count):
        prompt, output, ttft, tpot = shapes[i % len(shapes)]
        classes.append(RequestClass(name=f"class-{i:02d}", prompt_tokens=prompt, output_tokens=output, requests_per_s=0.5 + 2.0 * i,
                                    ttft_slo_s=ttft, tpot_slo_s=tpot, interruptible=ttft is None))  # fmt: skip
    return tuple(classes)


def benchmark_fleet(chip_count: int = BENCH_CHIPS, class_count: int = BENCH_CLASSES, repeats: int = 3) -> dict:
    chips = synthetic_chips(chip_count)
    model = _model("bench-8b", 8.03e9, 32, 4096, 32, 8)
    offerings = {c.slug: (OfferingSpec(slug=f"{c.slug}-on-demand", pricing_model="on_demand", usd_per_chip_hour=0.5 + i / 20),
                          OfferingSpec(slug=f"{c.slug}-reserved", pricing_model="reserved", usd_per_chip_hour=0.35 + i / 30))
                 for i, c in enumerate(chips)}  # fmt: skip
    options = SearchOptions(max_chip_count=8)
    classes = bench_classes(class_count)
    started = time.perf_counter()
    candidates = []
    for i, rc in enumerate(classes):
        found = class_candidates(model, chips, offerings, rc, i, options, catalog_slugs=[c.slug for c in chips],
                                 throughput_low_ratio=[0.8] * len(chips))  # fmt: skip
        candidates += found.candidates
    candidate_seconds = time.perf_counter() - started
    # The two chips the cheapest fleet uses most, supplied at half of that, and power at the wall at 110% of its
    # draw: the program has to move traffic to other chips within the power it has.
    free = solve(classes, candidates, Limits(apply_to="all"))
    used: dict[str, int] = {}
    for a in free.allocations:
        c = candidates[a.candidate]
        used[c.chip_slug] = used.get(c.chip_slug, 0) + c.billed_chips * a.committed[0]
    peak_kw = sum((candidates[a.candidate].wall_kw or 0.0) * a.committed[0] for a in free.allocations)
    supplied = sorted(used, key=lambda slug: -used[slug])[:2]
    limits = Limits(wall_kw_max=1.1 * peak_kw, apply_to="all", chips_max={slug: used[slug] // 2 for slug in supplied})
    fleet_plan(classes, candidates, limits)  # warm-up, discarded
    best, main, result = float("inf"), float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        result = fleet_plan(classes, candidates, limits)
        best = min(best, time.perf_counter() - t)
        main = min(main, result.solution.seconds)
    return {
        "chips": chip_count, "classes": class_count, "candidates": len(candidates), "candidate_seconds": candidate_seconds,
        "seconds": best, "main_solve_seconds": main, "status": result.solution.status,
        "variables": result.solution.variables, "constraints": result.solution.constraints,
        "usd_per_month": result.solution.usd_total, "best_single_usd_per_month": result.best_single.usd_total if result.best_single else None,
        "binding": [c.group for c in result.limit_costs if c.binding], "wall_kw_max": limits.wall_kw_max,
    }  # fmt: skip


def fleet_line(figures: dict) -> str:
    single = figures["best_single_usd_per_month"]
    saving = f", {100 * (1 - figures['usd_per_month'] / single):.1f}% below the best single-chip fleet" if single else ""
    return (f"fleet: solved in {figures['main_solve_seconds']:.2f} s ({figures['classes']} classes x {figures['chips']} chips, "
            f"{figures['candidates']:,} candidates, {figures['variables']:,} integer variables, {figures['status']}{saving}, "
            f"binding: {', '.join(figures['binding']) or 'none'}); "
            f"with its pessimistic twin, each limit lifted and every single-chip fleet {figures['seconds']:.2f} s; "
            f"candidates searched in {figures['candidate_seconds']:.1f} s")  # fmt: skip


if __name__ == "__main__":
    print(fleet_line(benchmark_fleet()))
