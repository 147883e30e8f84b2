"""Fleet plans: validated inputs -> each class's candidates from the planner's search -> the mixed-integer
program (planner/engine/fleet/) -> a stored FleetPlan (docs/fleet.md)."""
from __future__ import annotations

import csv
import dataclasses
import io
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.ownership import ensure_may_manage
from planner import catalog_specs
from planner.engine import Deployment
from planner.engine.fleet import report
from planner.engine.fleet import (
    Candidate,
    FleetResult,
    Horizon,
    Limits,
    RequestClass,
    class_candidates,
    fleet_plan,
    rent_or_buy,
)
from planner.engine.uncertainty import interval, serving_for
from planner.engine_profiles import split_variant
from planner.models import FleetPlan
from planner.runs import create_done, queued_resend, run_claim, run_fail, run_send
from planner.services import PlanTooLarge, PreparedSearch, band_basis, error_bands, json_safe, plan_search_prepare

logger = logging.getLogger(__name__)

# A fleet searches each class's grid (a plan's, at the plan's limit per class); over all classes at most
# this many configurations (a worker evaluates ~0.5 M/s), and its program at most this many variables.
MAX_FLEET_CANDIDATES = 20_000_000
MAX_FLEET_VARIABLES = 250_000
FLEET_MAX_ATTEMPTS = 2
FLEET_STALE_AFTER_S = 60.0
SOLVER = "HiGHS (scipy.optimize.milp)"
# `simulate`: at most this many chosen configurations are checked, each with this many simulated requests.
FLEET_CHECK_MAX_ROWS = 20
FLEET_CHECK_REQUESTS = 1000
# The limit groups of the program, as the request names them.
LIMIT_FIELDS = {"power": "wall_kw_max", "racks": "racks_max", "supply": "chips", "minimum": "chips"}


class FleetRefused(ValueError):
    """A fleet that cannot be planned as asked: a 400 on `field`."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclasses.dataclass(frozen=True, kw_only=True)
class PreparedFleet:
    search: PreparedSearch
    classes: tuple[RequestClass, ...]
    limits: Limits
    horizon: Horizon
    target_utilisation: float
    candidates: int  # configurations over all classes
    chip_ownership: dict[str, str] = dataclasses.field(default_factory=dict)  # chip slug -> rent, own (absent: either)
    simulate: bool = False  # check each chosen configuration in the serving simulator


def _classes(data: dict[str, Any]) -> tuple[RequestClass, ...]:
    return tuple(RequestClass(name=c["name"], prompt_tokens=c["prompt_tokens"], output_tokens=c["output_tokens"], requests_per_s=c["requests_per_s"],
                              ttft_slo_s=c.get("ttft_slo_s"), tpot_slo_s=c.get("tpot_slo_s"), interruptible=c["interruptible"])
                 for c in data["classes"])  # fmt: skip


def _limits(data: dict[str, Any]) -> Limits:
    limits = data["limits"]
    chips = limits.get("chips") or {}
    return Limits(
        wall_kw_max=limits.get("wall_kw_max"), racks_max=limits.get("racks_max"), rack_kw_max=limits.get("rack_kw_max"),
        systems_per_rack=limits.get("systems_per_rack"), apply_to=limits["apply_to"],
        chips_max={slug: v["max"] for slug, v in chips.items() if "max" in v}, chips_min={slug: v["min"] for slug, v in chips.items() if "min" in v},
    )  # fmt: skip


def _horizon(data: dict[str, Any]) -> Horizon:
    h = data["horizon"]
    shape = tuple(h.get("hourly_shape") or (1.0,))
    if h.get("growth"):
        return Horizon(growth=tuple(h["growth"]), shape=shape)
    return Horizon.compound(months=h.get("months", 1), monthly_growth=h.get("monthly_growth", 0.0), shape=shape)


def fleet_prepare(*, data: dict[str, Any]) -> PreparedFleet:
    """Resolve a validated fleet request and count its work exactly (each class searches the grid a plan
    of that workload would). FleetRefused when nothing matches or it is too large."""
    classes = _classes(data)
    first = data["classes"][0]
    plan_like = {
        "model": data["model"], "workload": {"prompt_tokens": first["prompt_tokens"], "output_tokens": first["output_tokens"]},
        "hardware": data["hardware"], "decodings": [{"method": "ar"}], "disaggregated": False, "serving_engine": data.get("serving_engine"),
    }  # fmt: skip
    try:
        search = plan_search_prepare(data=plan_like)
    except PlanTooLarge as exc:
        raise FleetRefused(str(exc), field=exc.field) from None
    total = search.candidates * len(classes)  # no class gives a concurrency: every class searches the same grid
    if total > MAX_FLEET_CANDIDATES:
        raise FleetRefused(f"This fleet would search {total:,} configurations ({search.candidates:,} for each of {len(classes)} classes; "
                           f"limit {MAX_FLEET_CANDIDATES:,}): narrow hardware (chips, kinds, vendors, max_chips, weight_dtypes).",
                           field="hardware")  # fmt: skip
    horizon = _horizon(data)
    per_class = settings.FLEET_KEEP_PER_CLASS + 2 * len(search.specs)
    variables = len(classes) * per_class * horizon.months * horizon.hours
    if variables > MAX_FLEET_VARIABLES:
        raise FleetRefused(f"This fleet's program could hold {variables:,} variables ({len(classes)} classes x up to {per_class} candidates x "
                           f"{horizon.months} months x {horizon.hours} day slots; limit {MAX_FLEET_VARIABLES:,}): fewer months, a coarser "
                           "hourly_shape, fewer classes or chips.", field="horizon")  # fmt: skip
    chip_ownership = {slug: v["ownership"] for slug, v in (data["limits"].get("chips") or {}).items() if v.get("ownership", "any") != "any"}
    return PreparedFleet(search=search, classes=classes, limits=_limits(data), horizon=horizon, target_utilisation=data["target_utilisation"],
                         candidates=total, chip_ownership=chip_ownership, simulate=data.get("simulate", False))  # fmt: skip


def _throughput_low_ratios(search: PreparedSearch) -> list[float]:
    """Per searched chip (and engine variant): the low end of the 80% interval of its throughput, as a ratio."""
    chips = {c.slug: c for c in search.chips}
    ratios = []
    for spec in search.specs:
        slug, named = split_variant(spec.slug)
        engine, outside = band_basis(chips[slug], named)  # an engine's bands where its fitted profile was used
        band = interval(1.0, "output_tokens_per_s_total", chip_kind=chips[slug].kind, engine=engine, bands=error_bands(),
                        serving=serving_for(search.options.disaggregated), outside_silicon=outside)  # fmt: skip
        ratios.append(band.low if band else 1.0)
    return ratios


def _ownership_allowed(c: Candidate, chip_ownership: dict[str, str]) -> bool:
    wanted = chip_ownership.get(c.chip_slug, "any")
    return wanted == "any" or (wanted == "own") == c.owned


def fleet_candidates(prepared: PreparedFleet, *, on_progress: Callable[[int, int], None] | None = None) -> tuple[list[Candidate], dict[str, int]]:
    search = prepared.search
    model = catalog_specs.model_spec(search.model)
    catalog_slugs = [split_variant(s.slug)[0] for s in search.specs]
    low = _throughput_low_ratios(search)
    candidates: list[Candidate] = []
    counts = {"searched": 0, "feasible": 0}
    for i, rc in enumerate(prepared.classes):
        found = class_candidates(model, search.specs, search.offering_specs, rc, i, search.options, catalog_slugs=catalog_slugs,
                                 throughput_low_ratio=low, target_utilisation=prepared.target_utilisation,
                                 keep=settings.FLEET_KEEP_PER_CLASS)  # fmt: skip
        candidates += [c for c in found.candidates if _ownership_allowed(c, prepared.chip_ownership)]
        counts["searched"] += found.searched
        counts["feasible"] += found.feasible
        if on_progress is not None:
            on_progress(i + 1, len(prepared.classes))
    counts["kept"] = len(candidates)
    return candidates, counts


def _infeasible_message(result: FleetResult, limits: Limits) -> tuple[str, str]:
    """(field, message) for a fleet the limits do not allow."""
    solution = result.solution
    if not result.infeasible_because:
        if solution.message.startswith("no configuration can serve"):
            return "classes", solution.message[0].upper() + solution.message[1:] + " on the hardware allowed: relax its SLOs or widen hardware."
        return "limits", f"No fleet meets every class's rate within these limits ({solution.status}: {solution.message})."
    named = []
    for group in result.infeasible_because:
        if "+" in group:
            named.append("these limits together (" + ", ".join(_limit_words(g, limits) for g in group.split("+")) + ")")
        else:
            named.append(_limit_words(group, limits))
    field = LIMIT_FIELDS.get(result.infeasible_because[0].split(":")[0].split("+")[0], "limits")
    return field, f"No fleet serves every class's rate within the limits: the binding limit is {' or '.join(named)}; lifting it makes the fleet feasible."


def _limit_words(group: str, limits: Limits) -> str:
    kind, _, slug = group.partition(":")
    if kind == "power":
        return f"power (wall_kw_max {limits.wall_kw_max:g} kW)"
    if kind == "racks":
        return f"racks (racks_max {limits.racks_max})"
    if kind == "supply":
        return f"the supply of {slug} (at most {limits.chips_max[slug]} chips)"
    return f"the minimum of {slug} ({limits.chips_min[slug]} chips)"


def result_json(prepared: PreparedFleet, candidates: list[Candidate], result: FleetResult, counts: dict[str, int], *,
                candidate_seconds: float, providers: dict[str, str]) -> dict[str, Any]:  # fmt: skip
    """The stored results of a fleet plan (docs/fleet.md#results); the sums come from planner/engine/fleet/report.py."""
    s, horizon, classes = result.solution, prepared.horizon, prepared.classes
    months = horizon.months
    allocation = []
    class_usd = [[0.0] * months for _ in classes]
    for a in s.allocations:
        c = candidates[a.candidate]
        per_month = report.allocation_usd_per_month(a, c, horizon)
        class_usd[c.class_index] = [x + y for x, y in zip(class_usd[c.class_index], per_month)]
        allocation.append({
            **dict(c.detail), "candidate": a.candidate, "class": classes[c.class_index].name, "chip_slug": c.chip_slug, "configuration": c.label,
            "offering": c.offering_slug, "provider": providers.get(c.offering_slug), "pricing_model": c.pricing_model,
            "ownership": "own" if c.owned else "rent", "chips_per_replica": c.chips, "billed_chips_per_replica": c.billed_chips,
            "requests_per_s_per_replica": c.requests_per_s, "requests_per_s_per_replica_low": c.requests_per_s_low,
            "usd_per_hour_per_replica": c.usd_per_hour, "wall_kw_per_replica": c.wall_kw,
            "replicas": [a.peak(t) for t in range(months)], "committed_replicas": list(a.committed), "hourly_replicas": [list(row) for row in a.hourly],
            "usd_per_month": per_month,
        })  # fmt: skip
    allocation.sort(key=lambda row: (row["class"], -row["usd_per_month"][0], row["chip_slug"]))
    served = [sum(class_usd[i][t] for i in range(len(classes))) for t in range(months)]
    idle_owned = [max(total - used, 0.0) for total, used in zip(s.usd_per_month, served)]
    class_rows = []
    for i, rc in enumerate(classes):
        tokens = sum(report.output_tokens_per_month(rc, horizon))
        class_rows.append({
            "name": rc.name, "prompt_tokens": rc.prompt_tokens, "output_tokens": rc.output_tokens, "requests_per_s": rc.requests_per_s,
            "ttft_slo_s": rc.ttft_slo_s, "tpot_slo_s": rc.tpot_slo_s, "interruptible": rc.interruptible,
            "usd_per_month": class_usd[i], "usd_per_million_output_tokens": sum(class_usd[i]) / tokens * 1e6 if tokens else None,
            "capacity_requests_per_s": report.class_capacity(s, candidates, horizon, i),  # in the day's busiest slot
            "peak_requests_per_s": report.peak_requests_per_s(rc, horizon),
        })  # fmt: skip
    best = result.best_single
    usd_total = s.usd_total if s.solved else None
    single = None
    if best is not None and usd_total is not None:
        single = {"chip_slug": best.chip_slug, "usd_total": best.usd_total, "usd_per_month_mean": best.usd_total / months,
                  "saving_usd_total": best.usd_total - usd_total, "saving_share": (best.usd_total - usd_total) / best.usd_total if best.usd_total else None}  # fmt: skip
    tokens_total = sum(sum(report.output_tokens_per_month(rc, horizon)) for rc in classes)
    costs = {lc.group: lc for lc in result.limit_costs}
    limits = [{
        "group": u.group, "field": LIMIT_FIELDS[u.group.split(":")[0]], "used": u.used, "limit": u.limit, "slack": u.slack,
        "month": u.month + 1, "slot": u.hour + 1, "binding": costs[u.group].binding if u.group in costs else None,
        "saving_usd_per_month_if_lifted": (costs[u.group].saving_usd_total / months) if u.group in costs and costs[u.group].saving_usd_total is not None else None,
    } for u in s.limits]  # fmt: skip
    return json_safe({
        "status": s.status, "message": s.message,
        "usd_per_month": list(s.usd_per_month), "usd_total": usd_total,
        "usd_per_million_output_tokens": usd_total / tokens_total * 1e6 if usd_total is not None and tokens_total else None,
        "idle_owned_usd_per_month": idle_owned,
        "pessimistic": {"status": result.pessimistic.status, "usd_per_month": list(result.pessimistic.usd_per_month),
                        "usd_total": result.pessimistic.usd_total if result.pessimistic.solved else None,
                        "basis": "each replica at the low end of its throughput's 80% interval"},
        "classes": class_rows,
        "allocation": allocation,
        "owned_units": [{"offering": o, "units": list(v)} for o, v in sorted(s.owned_units.items())],
        "racks": list(s.racks),
        "peak_wall_kw": report.fleet_peak(s, horizon, lambda a: candidates[a.candidate].wall_kw or 0.0),
        "replicas_per_month": report.fleet_peak(s, horizon, lambda a: 1.0),
        "chips_per_month": report.fleet_peak(s, horizon, lambda a: float(candidates[a.candidate].chips)),
        "unknown_power_configurations": sorted({c.label for c in (candidates[a.candidate] for a in s.allocations) if c.wall_kw is None}),
        "limits": limits,
        "best_single_chip": single,
        "single_chip_fleets": [{"chip_slug": x.chip_slug, "usd_total": x.usd_total, "reason": x.reason} for x in result.single_types],
        "rent_or_buy": [dataclasses.asdict(r) for r in _rent_or_buy(prepared, {c.chip_slug for c in candidates})],
        "infeasible_because": list(result.infeasible_because),
        "skipped_analyses": list(result.skipped),
        "horizon": {"months": months, "growth": list(horizon.growth), "hourly_shape": list(horizon.shape)},
        "candidates": counts,
        "solver": {"name": SOLVER, "variables": s.variables, "constraints": s.constraints, "mip_gap": s.mip_gap, "solve_seconds": s.seconds,
                   "seconds": result.seconds, "candidate_seconds": candidate_seconds},
        "target_utilisation": prepared.target_utilisation,
    })  # fmt: skip


def _simulation_checks(prepared: PreparedFleet, candidates: list[Candidate], result: FleetResult) -> dict[int, dict[str, Any]]:
    """Each chosen configuration (at most FLEET_CHECK_MAX_ROWS) simulated as one replica at its share of its
    class's peak rate in the first month (Poisson arrivals, FLEET_CHECK_REQUESTS requests, the class's
    lengths, its batch per replica as max_num_seqs): p95 TTFT and TPOT against the class's SLOs (docs/simulation.md).
    A check, not a re-plan: the capacity the program used is the planner's estimate."""
    from planner.engine.simulation import SchedulerOptions, SimulationWorkload, Slos, StepBudgetSpent, step_budget
    from planner.engine.simulation.workload import Arrivals, Lengths
    from planner.simulation_services import Setup, SimulationRefused, percentile_checks, row_max_sequences, simulate_setup

    search, horizon = prepared.search, prepared.horizon
    specs = {s.slug: s for s in search.specs}
    checks: dict[int, dict[str, Any]] = {}
    for a in result.solution.allocations[:FLEET_CHECK_MAX_ROWS]:
        c, replicas = candidates[a.candidate], a.peak(0)
        rc = prepared.classes[c.class_index]
        rate = rc.requests_per_s * horizon.growth[0] * max(horizon.shape)
        peers = sum(b.peak(0) * candidates[b.candidate].requests_per_s for b in result.solution.allocations
                    if candidates[b.candidate].class_index == c.class_index)  # fmt: skip
        if not replicas or not peers or rate <= 0:
            continue
        share = rate * c.requests_per_s / peers  # the class's rate split by capacity
        d = c.detail
        slo_percentiles = {k: {"p": 95, "s": v} for k, v in (("ttft", rc.ttft_slo_s), ("tpot", rc.tpot_slo_s)) if v}
        try:
            if d["pipeline_parallel"] != 1 or d["attention_data_parallel"] != 1:
                raise SimulationRefused("the simulator models one pipeline stage and one KV cache per replica")
            deployment = Deployment(chip=specs[d["chip_variant"]], chip_count=c.chips, tensor_parallel=d["tensor_parallel"], weight_dtype=d["weight_dtype"],
                                    kv_dtype=d["kv_dtype"], decoding=search.options.decodings[0])  # fmt: skip
            setup = Setup(model=catalog_specs.model_spec(search.model), deployment=deployment, efficiency=search.options.efficiency,
                          calibration=search.options.calibration, usd_per_hour=c.usd_per_hour, offering=c.offering_slug, chip_kind="")  # fmt: skip
            workload = SimulationWorkload(requests=FLEET_CHECK_REQUESTS, arrivals=Arrivals.poisson(share), prompt=Lengths.fixed(rc.prompt_tokens),
                                          output=Lengths.fixed(rc.output_tokens), seed=1)  # fmt: skip
            slos = Slos(ttft_s=rc.ttft_slo_s, tpot_s=rc.tpot_slo_s)
            cap = row_max_sequences({"batch": d["batch"], "replicas": d.get("data_parallel_replicas")})  # max_num_seqs bounds one replica
            with step_budget(settings.SIMULATION_INLINE_MAX_STEPS):
                sim, _ = simulate_setup(setup, workload, slos=slos, options=SchedulerOptions(max_sequences=cap))
        except SimulationRefused as exc:
            checks[a.candidate] = {"error": str(exc)}
            continue
        except StepBudgetSpent:
            checks[a.candidate] = {"error": f"not checked: more than {settings.SIMULATION_INLINE_MAX_STEPS:,} simulated forwards"}
            continue
        _, meets, misses = percentile_checks(sim, slo_percentiles)
        checks[a.candidate] = json_safe({
            "requests_per_s": share, "ttft_p95_s": _p95(sim.ttft_s), "tpot_p95_s": _p95(sim.tpot_s), "overloaded": sim.overloaded,
            "meets_slos": meets, "misses": misses,
        })  # fmt: skip
    return checks


def _p95(values) -> float | None:
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    return float(np.percentile(finite, 95)) if len(finite) else None


def _rent_or_buy(prepared: PreparedFleet, chip_slugs: set[str]):
    offerings = {slug: specs for slug, specs in prepared.search.offering_specs.items() if slug in chip_slugs}
    tdp = {c.slug: c.tdp_watts for c in prepared.search.chips}
    return rent_or_buy(offerings, tdp)


def fleet_compute(
    prepared: PreparedFleet, *, on_progress: Callable[[int, int], None] | None = None, budget_s: float | None = None
) -> dict[str, Any]:
    """The FleetPlan fields a plan fills: results, candidate count, first month's cost, catalog snapshot. `budget_s`: the
    seconds its solves may take in all (engine.fleet.fleet_plan; None: each its FLEET_SOLVE_TIME_LIMIT_S)."""
    started = time.perf_counter()
    candidates, counts = fleet_candidates(prepared, on_progress=on_progress)
    candidate_seconds = time.perf_counter() - started
    solve_budget_s = None if budget_s is None else max(budget_s - candidate_seconds, 1.0)  # the search spent the rest
    result = fleet_plan(prepared.classes, candidates, prepared.limits, prepared.horizon, time_limit_s=settings.FLEET_SOLVE_TIME_LIMIT_S,
                        budget_s=solve_budget_s)  # fmt: skip
    providers = {o.slug: o.provider for o in prepared.search.offerings}
    results = result_json(prepared, candidates, result, counts, candidate_seconds=candidate_seconds, providers=providers)
    if prepared.simulate and result.solution.solved:
        started = time.perf_counter()
        checks = _simulation_checks(prepared, candidates, result)
        for row in results["allocation"]:
            row["simulation"] = checks.get(row["candidate"])
        results["simulation_seconds"] = time.perf_counter() - started
    if not result.solution.solved:
        results["error_field"], results["error"] = _infeasible_message(result, prepared.limits)
    return {
        "results": results, "candidate_count": counts["searched"],
        "usd_per_month": results["usd_per_month"][0] if results["usd_per_month"] else None, "catalog_snapshot": _snapshot(prepared),
    }  # fmt: skip


def _snapshot(prepared: PreparedFleet) -> dict[str, Any]:
    """The catalog rows the fleet reads (stored with a queued fleet too: they count as used while it waits)."""
    search = prepared.search
    return {"model": catalog_specs.snapshot([search.model]), "chips": catalog_specs.snapshot(search.chips),
            "offerings": catalog_specs.snapshot(search.offerings)}  # fmt: skip


def _record(data: dict[str, Any], raw_inputs: dict[str, Any], user) -> dict[str, Any]:
    return {"name": data.get("name", ""), "model_slug": data["model"].slug, "inputs": raw_inputs,
            "created_by": user if getattr(user, "is_authenticated", False) else None}  # fmt: skip


@transaction.atomic
def fleet_create(*, data: dict[str, Any], raw_inputs: dict[str, Any], user=None, inline: bool | None = None) -> FleetPlan:
    """Plan and store a FleetPlan; over settings.FLEET_INLINE_MAX_CANDIDATES configurations (or inline=False), or
    where planned inline the solver found no fleet in the request's time budget (FLEET_INLINE_TIME_BUDGET_S), it is
    stored queued and sent, after commit, to a worker. FleetRefused (nothing stored) for a request that is too large,
    or, planned inline, for limits no fleet meets (naming the binding one)."""
    prepared = fleet_prepare(data=data)
    if inline is None:
        inline = prepared.candidates <= settings.FLEET_INLINE_MAX_CANDIDATES
    record = _record(data, raw_inputs, user)
    if inline:
        outcome = fleet_compute(prepared, budget_s=settings.FLEET_INLINE_TIME_BUDGET_S)
        if outcome["results"]["status"] != "failed":  # "failed": the request's time ran out before any fleet; a worker has more
            if "error" in outcome["results"]:
                raise FleetRefused(outcome["results"]["error"], field=outcome["results"]["error_field"])
            return create_done(FleetPlan, **record, **outcome, status=FleetPlan.Status.DONE, progress=1.0)
    fleet = FleetPlan.objects.create(**record, candidate_count=prepared.candidates, catalog_snapshot=_snapshot(prepared),
                                     status=FleetPlan.Status.QUEUED, progress=0.0)  # fmt: skip
    transaction.on_commit(lambda: _send(fleet))
    return fleet


def _send(fleet: FleetPlan) -> bool:
    from planner.tasks import run_fleet

    return run_send(run_fleet, FleetPlan, fleet.pk, what="fleet")


def fleets_queued_resend(*, resend_after_s: float, sweep_every_s: float, now=None) -> int:
    return queued_resend(FleetPlan, _send, resend_after_s=resend_after_s, sweep_every_s=sweep_every_s, now=now)


def fleet_execute(*, fleet_id: str) -> str:
    """Plan a queued fleet in this (worker) process: "done", "failed", or what the claim said. Its inputs are
    validated again, against the catalog as it is now."""
    from celery.exceptions import SoftTimeLimitExceeded

    from planner.fleet_serializers import FleetInputSerializer

    claim = run_claim(FleetPlan, fleet_id, stale_after_s=FLEET_STALE_AFTER_S, max_attempts=FLEET_MAX_ATTEMPTS, what="fleet plan")
    if claim != "claimed":
        return claim
    fleet = FleetPlan.objects.get(pk=fleet_id)

    def progress(done: int, total: int) -> None:
        FleetPlan.objects.filter(pk=fleet_id, status=FleetPlan.Status.RUNNING).update(progress=0.9 * done / max(total, 1), heartbeat_at=timezone.now())

    try:
        serializer = FleetInputSerializer(data=fleet.inputs)
        if not serializer.is_valid():
            run_fail(FleetPlan, fleet_id, f"the request is no longer valid against the catalog: {serializer.errors}")
            return "failed"
        outcome = fleet_compute(fleet_prepare(data=serializer.validated_data), on_progress=progress,
                                budget_s=settings.FLEET_TASK_TIME_BUDGET_S)  # fmt: skip
    except SoftTimeLimitExceeded:
        run_fail(FleetPlan, fleet_id, f"the fleet plan ran past its time limit ({settings.PLAN_TASK_SOFT_TIME_LIMIT} s); narrow it")
        return "failed"
    except FleetRefused as exc:
        run_fail(FleetPlan, fleet_id, str(exc))
        return "failed"
    except Exception as exc:  # noqa: BLE001 - a failed plan is stored with its reason, never left running
        logger.exception("fleet %s failed", fleet_id)
        run_fail(FleetPlan, fleet_id, f"the fleet plan failed: {type(exc).__name__}: {exc}")
        return "failed"
    if "error" in outcome["results"]:
        FleetPlan.objects.filter(pk=fleet_id, status=FleetPlan.Status.RUNNING).update(
            results=outcome["results"], catalog_snapshot=outcome["catalog_snapshot"], status=FleetPlan.Status.FAILED,
            error=outcome["results"]["error"], finished_at=timezone.now(),
        )  # fmt: skip
        return "failed"
    stored = FleetPlan.objects.filter(pk=fleet_id, status=FleetPlan.Status.RUNNING).update(
        **outcome, status=FleetPlan.Status.DONE, progress=1.0, finished_at=timezone.now(), heartbeat_at=timezone.now(), error="",
    )  # fmt: skip
    return "done" if stored else "finished"


@transaction.atomic
def fleet_delete(*, fleet: FleetPlan, by) -> None:
    ensure_may_manage(user=by, owner_id=fleet.created_by_id, action="delete", what="this fleet plan")
    fleet.delete()


CSV_COLUMNS = [
    "class", "chip_slug", "configuration", "offering", "provider", "pricing_model", "ownership", "chips_per_replica", "billed_chips_per_replica",
    "requests_per_s_per_replica", "usd_per_hour_per_replica", "wall_kw_per_replica", "month", "replicas", "usd_per_month",
]  # fmt: skip


def fleet_csv(fleet: FleetPlan) -> str:
    """The allocation as CSV, one row per configuration and month (for procurement tools)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for row in (fleet.results or {}).get("allocation", []):
        for t, (replicas, usd) in enumerate(zip(row["replicas"], row["usd_per_month"])):
            writer.writerow([row[c] for c in CSV_COLUMNS[:12]] + [t + 1, replicas, usd])
    return out.getvalue()
