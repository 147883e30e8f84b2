"""Serving simulations as a service (issue 15; docs/simulation.md): one configuration under one
workload (POST /api/v1/simulations/), and a plan's simulation stage, which simulates the first N
candidates of the analytical ranking that physics does not rule out (analytical_miss) and re-ranks them by simulated cost per token at the plan's
percentile SLOs.

Where it runs: at most settings.SIMULATION_INLINE_MAX_REQUESTS simulated requests (a plan's stage:
top_n x requests) run inside the request, and there within settings.SIMULATION_INLINE_MAX_STEPS forwards in all
(the engine's step_budget: the tokens alone do not bound the steps); more is stored queued and run by workers
(planner/tasks.py run_simulation), a plan's stage as one task per candidate, so more workers finish
sooner; the last candidate to finish re-ranks the plan and marks it done.

Cost per token at the SLO, as implemented: the configuration's $/hour over the output tokens per
second it served in the simulation at the plan's load, for a candidate whose simulated percentiles
meet every percentile SLO there (and that is not overloaded). At a stated load ("p95 TTFT under
500 ms at 40 requests/s") that is what serving that load costs. With `simulation.sweep` the basis is
the cost at each candidate's knee instead, the highest swept rate that still meets the SLOs (every
lower rate too): the cost of a replica run as hard as the SLOs allow, at (1 + rates) simulations per
candidate, counted in the stage's size.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import math
import time
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.ownership import ensure_may_manage
from hwcatalog.cache import catalog_snapshot
from hwcatalog.models import Chip, ModelArch
from planner import catalog_specs
from planner.engine import Deployment, Workload
from planner.engine.estimate import evaluate_deployment
from planner.engine.hardware import batch_per_replica
from planner.engine.parallel import tensor_parallel_options
from planner.engine.simulation import (
    RequestTooLarge,
    SchedulerOptions,
    check_fits,
    SimulationResult,
    SimulationWorkload,
    Slos,
    StepBudgetSpent,
    latency_cdf,
    mean_lengths,
    rate_sweep,
    simulate,
    simulate_disaggregated,
    step_budget,
    step_cost_for,
)
from planner.engine_profiles import variant_slug
from planner.models import Plan, SimulationRun
from planner.runs import create_done, queued_resend, run_send
from planner.services import _efficiency, decoding_spec, json_safe, named_engine_setup
from planner.simulation_inputs import scheduler_from, slos_from, workload_from, workload_tokens

logger = logging.getLogger(__name__)

SIMULATION_MAX_ATTEMPTS = 2
KNEE_STAGE_BASIS = ("simulated $/1M output tokens = the configuration's $/hour over the output tokens/s it served at its knee, the "
                    "highest swept rate meeting every percentile SLO (every lower rate meeting them too); ranked first: candidates "
                    "with a knee, cheapest there first")  # fmt: skip
STAGE_BASIS = ("simulated $/1M output tokens = the configuration's $/hour over the output tokens/s it served in the simulation at the "
               "plan's load; ranked first: candidates whose simulated percentiles meet every percentile SLO there, cheapest first")  # fmt: skip


class SimulationRefused(ValueError):
    """The configuration cannot be simulated (a chip kind that pads prompts, a request larger than the KV cache...):
    a 400 on `field` (dotted where it nests: "scheduler.memory_fraction")."""

    def __init__(self, message: str, *, field: str = "chip") -> None:
        super().__init__(message)
        self.field = field


@dataclasses.dataclass(frozen=True, kw_only=True)
class Setup:
    """What simulate() needs for one configuration, and its price."""

    model: Any  # ModelSpec
    deployment: Deployment
    efficiency: dict[str, float] | None
    calibration: dict
    usd_per_hour: float | None  # the whole configuration's, the prefill pool's chips included
    offering: str | None
    chip_kind: str
    prefill_replicas: int = 0  # disaggregated: replicas of the deployment's shape in the prefill pool (0: colocated)
    kv_link_bytes_per_s_per_chip: float | None = None

    @property
    def prefill_chips(self) -> int:
        d = self.deployment
        return self.prefill_replicas * d.tensor_parallel * d.pipeline_parallel * d.attention_data_parallel


# --- one configuration --------------------------------------------------------------------------


def simulation_setup(*, data: dict[str, Any], workload: SimulationWorkload) -> Setup:
    """The Deployment, efficiency and calibration of a validated configuration, built from the catalog as
    POST /api/v1/estimates/ builds them (planner.services.estimate_compute); tensor_parallel "auto"
    chooses as the estimate does (the feasible TP with the most output tokens/s) at the workload's mean lengths."""
    model: ModelArch = data["model"]
    chip: Chip = data["chip"]
    model_spec = catalog_specs.model_spec(model)
    chip_spec = catalog_specs.chip_spec(chip)
    calibration = catalog_specs.calibrations_for([chip.slug])
    # As the estimate takes them (planner.services.named_engine_setup).
    chip_spec, factors, _ = named_engine_setup(data.get("serving_engine"), chip, chip_spec, data["weight_dtype"], calibration)
    efficiency = _efficiency(data.get("efficiency"), factors)
    requests = workload.sample()
    mean = Workload(prompt_tokens=max(int(np.mean(requests.prompt_tokens)), 1), output_tokens=max(int(np.mean(requests.output_tokens)), 1))
    decoding = decoding_spec(data["decoding"], model=model, output_tokens=mean.output_tokens)
    offerings = [data["offering"]] if data.get("offering") else catalog_snapshot().offerings_by_chip.get(chip.slug, [])

    def deployment(tp: int) -> Deployment:
        return Deployment(chip=chip_spec, chip_count=data["chip_count"], tensor_parallel=tp, weight_dtype=data["weight_dtype"],
                          weight_format=data.get("weight_format"), kv_dtype=data.get("kv_dtype"), decoding=decoding)  # fmt: skip

    tps = [data["tensor_parallel"]] if data["tensor_parallel"] != "auto" else tensor_parallel_options(model_spec, chip_spec, data["chip_count"])
    evaluations = [(tp, evaluate_deployment(model_spec, deployment(tp), mean, batch=1, efficiency=efficiency, calibration=calibration)) for tp in tps]
    estimates = [(tp, e, e.estimate()) for tp, e in evaluations]
    tp, evaluation, _ = max(estimates, key=lambda t: (t[2].feasible, t[2].fits, t[2].output_tokens_per_s_total if t[2].fits else 0.0))
    priced = sorted(((evaluation.cost(catalog_specs.offering_spec(o)).usd_per_hour, o.slug) for o in offerings),
                    key=lambda c: c[0] if c[0] is not None and math.isfinite(c[0]) else math.inf)  # fmt: skip
    usd_per_hour, offering = priced[0] if priced else (None, None)
    disaggregated = data.get("disaggregated") or {}
    setup = Setup(model=model_spec, deployment=deployment(tp), efficiency=efficiency, calibration=calibration, usd_per_hour=usd_per_hour,
                  offering=offering, chip_kind=chip.kind, prefill_replicas=disaggregated.get("prefill_replicas", 0),
                  kv_link_bytes_per_s_per_chip=disaggregated.get("kv_link_bytes_per_s_per_chip"))  # fmt: skip
    if usd_per_hour is not None and setup.prefill_chips:  # the prefill pool's chips at the same offering's rate
        setup = dataclasses.replace(setup, usd_per_hour=usd_per_hour * (data["chip_count"] + setup.prefill_chips) / data["chip_count"])
    return setup


def simulate_setup(setup: Setup, workload: SimulationWorkload, *, slos: Slos, options: SchedulerOptions) -> tuple[SimulationResult, float]:
    started = time.perf_counter()
    try:
        if setup.prefill_replicas:
            result = simulate_disaggregated(setup.model, setup.deployment, workload, prefill_replicas=setup.prefill_replicas,
                                            kv_bytes_per_s_per_chip=setup.kv_link_bytes_per_s_per_chip, slos=slos, options=options,
                                            efficiency=setup.efficiency, calibration=setup.calibration)  # fmt: skip
        else:
            result = simulate(setup.model, setup.deployment, workload, slos=slos, options=options, efficiency=setup.efficiency,
                              calibration=setup.calibration)  # fmt: skip
    except ValueError as exc:  # the engine's refusals: a chip kind it does not model, a request larger than the KV cache
        raise _refused(exc, options) from None
    return result, time.perf_counter() - started


def _refused(exc: ValueError, options: SchedulerOptions) -> SimulationRefused:
    """The engine's refusal as a 400 on the field at fault: a request larger than the KV cache is the workload's, or
    the scheduler's where a memory fraction set the cache; anything else is the configuration's (its chip)."""
    message = str(exc)
    if not isinstance(exc, RequestTooLarge):
        return SimulationRefused(message, field="chip")
    if options.memory_fraction is not None:
        return SimulationRefused(f"{message} at memory_fraction {options.memory_fraction:g}", field="scheduler.memory_fraction")
    return SimulationRefused(message, field="workload")


def percentile_checks(result: SimulationResult, slo_percentiles: dict[str, Any] | None) -> tuple[dict[str, Any], bool, list[str]]:
    """Each asked percentile as simulated, whether it meets its bound, and (for people) what misses."""
    checks, misses = {}, []
    arrays = {"ttft": result.ttft_s, "tpot": result.tpot_s, "e2e": result.e2e_s}
    for metric, spec in (slo_percentiles or {}).items():
        values = np.asarray(arrays[metric], dtype=float)
        values = values[np.isfinite(values)]
        value = float(np.percentile(values, spec["p"])) if len(values) else None
        met = value is None or value <= spec["s"]  # no TPOT to miss when every answer is one token
        checks[metric] = {"p": spec["p"], "s": spec["s"], "value_s": value, "met": met}
        if not met:
            misses.append(f"p{spec['p']:g} {metric.upper()} {value:.3g} s > {spec['s']:g} s")
    if result.overloaded:
        misses.append("overloaded: the queue grows without bound at this load")
    return checks, not misses, misses


def result_json(result: SimulationResult, *, setup: Setup, slo_percentiles: dict[str, Any] | None, seconds: float, series: bool) -> dict[str, Any]:
    checks, meets, misses = percentile_checks(result, slo_percentiles)
    tokens_per_s = result.output_tokens_per_s
    usd = setup.usd_per_hour / (tokens_per_s * 3600.0) * 1e6 if setup.usd_per_hour is not None and tokens_per_s > 0 else None
    out = {
        "requests": result.requests, "completed": result.completed,
        "ttft_s": json_safe(result.ttft), "tpot_s": json_safe(result.tpot), "e2e_s": json_safe(result.e2e),
        "duration_s": result.duration_s, "request_throughput_per_s": result.request_throughput_per_s,
        "output_tokens_per_s": tokens_per_s, "input_tokens_per_s": result.input_tokens_per_s,
        "preemptions": result.preemptions, "steps": result.steps, "kv_blocks": result.kv_blocks,
        "mean_kv_utilisation": result.mean_kv_utilisation, "peak_kv_utilisation": result.peak_kv_utilisation,
        "slos": json_safe(result.slos), "slo_attainment": result.slo_attainment, "goodput_requests_per_s": result.goodput_requests_per_s,
        "slo_percentiles": checks, "meets_slo_percentiles": meets, "misses": misses,
        "overloaded": result.overloaded, "overload_reason": result.overload_reason, "queue_growth_per_s": result.queue_growth_per_s,
        "littles_law": json_safe(result.littles_law), "notes": list(result.notes),
        "tensor_parallel": setup.deployment.tensor_parallel, "replicas": setup.deployment.replicas,
        "prefill_replicas": setup.prefill_replicas, "total_chips": setup.deployment.chip_count + setup.prefill_chips,
        "offering": setup.offering, "usd_per_hour": setup.usd_per_hour, "usd_per_million_output_tokens": usd,
        "simulation_seconds": seconds,
    }  # fmt: skip
    if series:
        s = result.series
        out["series"] = {name: [round(float(v), 6) for v in getattr(s, name)] for name in ("time_s", "queue_length", "running", "kv_utilisation")}
    return json_safe(out)


def simulation_compute(*, data: dict[str, Any]) -> dict[str, Any]:
    """A validated simulation request (planner/simulation_serializers.py) -> its results, JSON-safe."""
    workload: SimulationWorkload = data["engine_workload"]
    setup = simulation_setup(data=data, workload=workload)
    slos = slos_from(data.get("slos"), data.get("slo_percentiles"))
    options = scheduler_from(data.get("scheduler"))
    result, seconds = simulate_setup(setup, workload, slos=slos, options=options)
    out = result_json(result, setup=setup, slo_percentiles=data.get("slo_percentiles"), seconds=seconds, series=True)
    out["cdf"] = latency_cdf(result)
    if data.get("sweep"):
        out["sweep"] = sweep_json(setup, workload, data["sweep"]["rates_per_s"], slos=slos, options=options,
                                  slo_percentiles=data.get("slo_percentiles"))  # fmt: skip
        out["simulation_seconds"] += out["sweep"]["simulation_seconds"]
    trace = data.get("parsed_trace")
    if trace is not None and trace.ignored_columns:
        out["notes"].append(f"trace columns not used: {', '.join(trace.ignored_columns)}")
    return out


SWEEP_BASIS = ("knee: the highest swept rate whose simulated percentiles meet every percentile SLO (every rate's queue stable "
               "when none is asked), all lower rates meeting them too; its cost per token is the configuration's $/hour over the "
               "output tokens/s served there")  # fmt: skip


def sweep_json(setup: Setup, workload: SimulationWorkload, rates_per_s: list[float], *, slos: Slos, options: SchedulerOptions,
               slo_percentiles: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    """The configuration at each rate (engine rate_sweep), compact: percentiles, goodput, SLO checks; and the knee."""
    started = time.perf_counter()
    try:
        results = rate_sweep(lambda w: simulate_setup(setup, w, slos=slos, options=options)[0], workload, rates_per_s)
    except ValueError as exc:
        raise SimulationRefused(str(exc), field="sweep") from None
    points, knee, all_meet = [], None, True
    for rate, result in zip(rates_per_s, results):
        _, meets, misses = percentile_checks(result, slo_percentiles)
        points.append({
            "rate_per_s": rate, "ttft_s": json_safe(result.ttft), "tpot_s": json_safe(result.tpot), "e2e_s": json_safe(result.e2e),
            "goodput_requests_per_s": result.goodput_requests_per_s, "slo_attainment": result.slo_attainment,
            "output_tokens_per_s": result.output_tokens_per_s, "overloaded": result.overloaded, "meets_slo_percentiles": meets, "misses": misses,
        })  # fmt: skip
        all_meet = all_meet and meets
        if all_meet:
            knee = len(points) - 1
    at = points[knee] if knee is not None else None
    usd = (setup.usd_per_hour / (at["output_tokens_per_s"] * 3600.0) * 1e6
           if at and setup.usd_per_hour is not None and at["output_tokens_per_s"] > 0 else None)  # fmt: skip
    return json_safe({
        "rates_per_s": rates_per_s, "points": points, "knee_rate_per_s": at["rate_per_s"] if at else None,
        "usd_per_million_output_tokens_at_knee": usd, "basis": SWEEP_BASIS, "simulation_seconds": time.perf_counter() - started,
    })  # fmt: skip


def _request_count(data: dict[str, Any]) -> int:
    trace = data.get("parsed_trace")
    return len(trace) if trace is not None else int(data["workload"]["requests"])


def _record(data: dict[str, Any], raw_inputs: dict[str, Any], user) -> dict[str, Any]:
    trace = data.get("parsed_trace")
    stored_trace = {**trace.columns(), "format": trace.format, "ignored_columns": list(trace.ignored_columns)} if trace is not None else {}
    # The plan row it was started from is the run's link (from_plan, from_rank), not an input a worker re-reads.
    inputs = {k: v for k, v in raw_inputs.items() if k not in ("trace", "trace_file", "trace_format", "from_plan")}
    source = data.get("from_plan") or {}
    return {
        "model_slug": data["model"].slug, "chip_slug": data["chip"].slug, "inputs": inputs, "trace": stored_trace,
        "request_count": _request_count(data), "created_by": user if getattr(user, "is_authenticated", False) else None,
        "from_plan_id": source.get("plan"), "from_rank": source.get("rank"),
    }  # fmt: skip


@transaction.atomic
def simulation_create(*, data: dict[str, Any], raw_inputs: dict[str, Any], user=None, inline: bool | None = None) -> SimulationRun:
    """Simulate and store a SimulationRun; over settings.SIMULATION_INLINE_MAX_REQUESTS requests (or
    inline=False) it is stored queued and sent, after commit, to a worker. SimulationRefused for a
    configuration the simulator cannot run."""
    record = _record(data, raw_inputs, user)
    if inline is None:
        passes = 1 + len((data.get("sweep") or {}).get("rates_per_s", ()))  # the workload as given, then each swept rate
        inline = _small(passes * record["request_count"], passes * workload_tokens(data["engine_workload"]))
    if inline:
        try:
            with step_budget(settings.SIMULATION_INLINE_MAX_STEPS):
                results = simulation_compute(data=data)
        except StepBudgetSpent:  # more forwards than a request may run: a worker runs it
            pass
        else:
            return create_done(SimulationRun, **_still_linked(record), results=results, status=SimulationRun.Status.DONE, progress=1.0)
    _check_simulable(data)  # refused now with a 400, not later on the worker
    run = SimulationRun.objects.create(**_still_linked(record), status=SimulationRun.Status.QUEUED, progress=0.0)
    transaction.on_commit(lambda: _send(run.pk))
    return run


def _still_linked(record: dict[str, Any]) -> dict[str, Any]:
    """The run's record, its plan link kept only if the plan still stands, and that plan's row locked (PostgreSQL) from
    here to the commit, so a delete of the plan (plan_changes.plan_delete locks it first) waits for the run or goes
    before it; taken once the simulation is done, not across it. A plan gone since the request was validated leaves
    the row's rank, as a plan deleted later does."""
    if record["from_plan_id"] is None or Plan.objects.select_for_update().filter(pk=record["from_plan_id"]).exists():
        return record
    return {**record, "from_plan_id": None}


def _check_simulable(data: dict[str, Any]) -> None:
    """The engine's refusals that need no simulation (a chip kind that pads prompts, a layout it does not model):
    building the step cost (~10 ms) says them."""
    setup = simulation_setup(data=data, workload=data["engine_workload"])
    options = scheduler_from(data.get("scheduler"))
    workload = data["engine_workload"]
    try:
        cost = step_cost_for(setup.model, options.applied(setup.deployment), efficiency=setup.efficiency, calibration=setup.calibration,
                             token_budget=options.token_budget, max_sequences=options.max_sequences, kv_block_tokens=options.kv_block_tokens,
                             workload=mean_lengths(workload))  # fmt: skip
        check_fits(cost, workload.sample(), prefix_caching=options.prefix_caching)  # a request the KV cache cannot hold
    except ValueError as exc:
        raise _refused(exc, options) from None


def _small(requests: int, tokens: int) -> bool:
    """Whether a simulation (or a plan's stage, all its candidates together) runs inside the request."""
    return requests <= settings.SIMULATION_INLINE_MAX_REQUESTS and tokens <= settings.SIMULATION_INLINE_MAX_TOKENS


def _send(run_id) -> bool:
    from planner.tasks import run_simulation

    return run_send(run_simulation, SimulationRun, run_id, what="simulation")


def simulations_queued_resend(*, resend_after_s: float, sweep_every_s: float, now=None) -> int:
    """Queued simulations whose message may be lost, sent again by the recovery sweep (planner.runs.queued_resend)."""
    return queued_resend(SimulationRun, lambda run: _send(run.pk), resend_after_s=resend_after_s, sweep_every_s=sweep_every_s, now=now)


def simulation_claim(*, run_id: str) -> str:
    """"claimed", "busy" while another worker runs it (within the task's time limit), or "finished"."""
    now = timezone.now()
    with transaction.atomic():
        run = SimulationRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or not run.pending:
            return "finished"
        alive = run.heartbeat_at and (now - run.heartbeat_at).total_seconds() < settings.SIMULATION_TASK_TIME_LIMIT
        if run.status == SimulationRun.Status.RUNNING and alive:
            return "busy"
        if run.attempts >= SIMULATION_MAX_ATTEMPTS:
            _fail(run_id, f"the simulation lost its worker {run.attempts} times (killed, or out of memory)")
            return "finished"
        SimulationRun.objects.filter(pk=run_id).update(status=SimulationRun.Status.RUNNING, attempts=F("attempts") + 1, started_at=now,
                                                       heartbeat_at=now, progress=0.0, error="")  # fmt: skip
    return "claimed"


def _fail(run_id, reason: str) -> None:
    SimulationRun.objects.filter(pk=run_id, status__in=Plan.PENDING).update(status=SimulationRun.Status.FAILED, error=reason[:2000],
                                                                            finished_at=timezone.now())  # fmt: skip


def simulation_execute(*, run_id: str) -> str:
    """Run a queued simulation in this (worker) process: "done", "failed", or what the claim said.
    A plan's candidate also re-ranks its plan once it is the last to finish (plan_simulation_collect)."""
    from celery.exceptions import SoftTimeLimitExceeded

    claim = simulation_claim(run_id=run_id)
    if claim != "claimed":
        plan_id = SimulationRun.objects.filter(pk=run_id).values_list("plan_id", flat=True).first()
        if claim == "finished" and plan_id:  # failed for a lost worker, or a duplicate: the plan may be waiting on it
            plan_simulation_collect(plan_id=plan_id)
        return claim
    run = SimulationRun.objects.get(pk=run_id)
    try:
        results = _candidate_compute(run) if run.plan_id else _standalone_compute(run)
        outcome = "done"
    except SoftTimeLimitExceeded:
        results, outcome = {"error": f"the simulation ran past its time limit ({settings.SIMULATION_TASK_SOFT_TIME_LIMIT} s)"}, "failed"
    except (SimulationRefused, StoredInputsInvalid) as exc:
        results, outcome = {"error": str(exc)}, "failed"
    except Exception as exc:  # noqa: BLE001 - a failed run is stored with its reason, never left running
        logger.exception("simulation %s failed", run_id)
        results, outcome = {"error": f"the simulation failed: {type(exc).__name__}: {exc}"}, "failed"
    if outcome == "done":
        SimulationRun.objects.filter(pk=run_id, status=SimulationRun.Status.RUNNING).update(
            results=results, status=SimulationRun.Status.DONE, progress=1.0, finished_at=timezone.now(), heartbeat_at=timezone.now(), error="",
        )  # fmt: skip
    else:
        _fail(run_id, results["error"])
    if run.plan_id:
        plan_simulation_collect(plan_id=run.plan_id)
    return outcome


class StoredInputsInvalid(ValueError):
    pass


def _standalone_compute(run: SimulationRun) -> dict[str, Any]:
    from planner.simulation_serializers import SimulationInputSerializer
    from planner.simulation_traces import ParsedTrace

    trace = None
    if run.trace:
        t = run.trace
        trace = ParsedTrace(arrival_s=t["arrival_s"], prompt_tokens=t["prompt_tokens"], output_tokens=t["output_tokens"], lines=t["lines"],
                            format=t["format"], ignored_columns=tuple(t["ignored_columns"]))  # fmt: skip
    serializer = SimulationInputSerializer(data=run.inputs, context={"stored_trace": trace})
    if not serializer.is_valid():
        raise StoredInputsInvalid(f"the request is no longer valid against the catalog: {serializer.errors}")
    return simulation_compute(data=serializer.validated_data)


@transaction.atomic
def simulation_delete(*, run: SimulationRun, by) -> None:
    ensure_may_manage(user=by, owner_id=run.created_by_id, action="delete", what="this simulation")
    run.delete()


# --- a plan's simulation stage --------------------------------------------------------------------


def _row_deployment(prepared, data: dict[str, Any], row: dict[str, Any]) -> Deployment:
    """The deployment of a plan row, with the very chip spec (engine variant, scheduler) the search priced."""
    slug = variant_slug(row["chip_slug"], row["serving_engine"]) if row.get("serving_engine") else row["chip_slug"]
    spec = next((s for s in prepared.specs if s.slug == slug), None)
    if spec is None:
        raise SimulationRefused(f"{slug} is no longer in the catalog's search")
    decoding = next((d for d in prepared.options.decodings if d.label == row["decoding"]), None)
    if decoding is None:
        raise SimulationRefused(f"decoding {row['decoding']!r} is not one of the plan's")
    return Deployment(chip=spec, chip_count=row["chip_count"], tensor_parallel=row["tensor_parallel"], pipeline_parallel=row["pipeline_parallel"],
                      attention_data_parallel=row.get("attention_data_parallel", 1), weight_dtype=row["weight_dtype"], kv_dtype=row.get("kv_dtype"),
                      decoding=decoding)  # fmt: skip


# What a simulation must share with the plan row it says it checks (its `from_plan`): the row's name for each.
ROW_LINK_FIELDS = {"model": "model_slug", "chip": "chip_slug", "chip_count": "chip_count", "weight_dtype": "weight_dtype",
                   "tensor_parallel": "tensor_parallel"}  # fmt: skip


def plan_row_link_refusal(plan_id: Any, rank: int, **configuration: Any) -> tuple[str, str] | None:
    """Why a simulation of `configuration` (model and chip slugs, chip_count, weight_dtype, tensor_parallel; None: not
    given, as "auto") may not say it checks row `rank` of plan `plan_id`, as (field of from_plan, message); None when it
    may. The plan must be done (a stage still simulating reorders its ranking) and the row run the same model on the
    same chips, weights and tensor parallelism; the scheduler, workload and SLOs are the simulation's own."""
    plan = Plan.objects.filter(pk=plan_id).only("status", "results", "model_slug").first()
    if plan is None:
        return "plan", "No such plan."
    if plan.status != Plan.Status.DONE:
        return "plan", f"The plan is {plan.status}: link a row of a finished plan (its ranking may still change)."
    ranked = (plan.results or {}).get("ranked") or []
    if not 1 <= rank <= len(ranked):
        return "rank", f"The plan ranks {len(ranked)} configuration{'' if len(ranked) == 1 else 's'}."
    row = {**ranked[rank - 1]}
    row.setdefault("model_slug", plan.model_slug)
    differ = [(name, row.get(key), configuration.get(name)) for name, key in ROW_LINK_FIELDS.items()
              if configuration.get(name) is not None and str(configuration[name]) != str(row.get(key))]  # fmt: skip
    if differ:
        said = ", ".join(f"{name} {has} (this simulation: {asked})" for name, has, asked in differ)
        return "rank", f"Row #{rank} runs {said}: simulate the row's configuration to link the two."
    return None


def plan_row_decoding(plan: Plan, row: dict[str, Any]) -> dict[str, Any] | None:
    """The decoding options (as POST /api/v1/plans/ took them) behind a plan row's decoding label, for a
    simulation of that row; None when none of the plan's decodings gives that label."""
    inputs = plan.inputs or {}
    options = inputs.get("decodings") or [{"method": "ar"}]
    model = ModelArch.objects.filter(slug=plan.model_slug).first()
    output_tokens = int((inputs.get("workload") or {}).get("output_tokens") or 1)
    if model is None:
        return None
    from planner.serializers import DecodingSerializer

    for option in options:
        checked = DecodingSerializer(data=option)  # the stored options name a draft model by slug: resolved here
        if not checked.is_valid():
            continue  # no longer valid against the catalog (a draft model deleted since)
        try:
            if decoding_spec(checked.validated_data, model=model, output_tokens=output_tokens).label == row.get("decoding"):
                return dict(option)
        except ValueError:
            continue
    return None


def _row_prefill_replicas(data: dict[str, Any], row: dict[str, Any]) -> int:
    """A disaggregated plan row's prefill pool in replicas of the row's shape (its usd_per_hour already counts them)."""
    if not data.get("disaggregated"):
        return 0
    per_replica = row["tensor_parallel"] * row["pipeline_parallel"] * row.get("attention_data_parallel", 1)
    pool = float(row.get("total_chips") or row["chip_count"]) - row["chip_count"]
    return max(int(round(pool / per_replica)), 1)


def _stage_inputs(inputs: dict[str, Any]) -> tuple[SimulationWorkload, Slos, SchedulerOptions]:
    spec = {k: v for k, v in inputs["simulation"].items() if k not in ("top_n", "scheduler", "sweep")}
    workload = workload_from(spec, under="simulation")
    return workload, slos_from(None, inputs.get("slo_percentiles")), scheduler_from(inputs["simulation"].get("scheduler"))


def row_max_sequences(row: dict[str, Any]) -> int:
    """A plan row's batch as its engine's max_num_seqs, which bounds each replica (the simulator's `max_sequences`): the
    row's batch over its data-parallel replicas, shared out as the planner does (hardware.batch_per_replica)."""
    return max(int(batch_per_replica(int(row["batch"]), int(row.get("replicas") or 1))), 1)


def candidate_simulate(prepared, *, data: dict[str, Any], inputs: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """One plan row simulated under the plan's simulation workload: its compact results, or {"error": why not}."""
    try:
        deployment = _row_deployment(prepared, data, row)
        setup = Setup(model=catalog_specs.model_spec(prepared.model), deployment=deployment, efficiency=prepared.options.efficiency,
                      calibration=prepared.options.calibration, usd_per_hour=row.get("usd_per_hour"), offering=row.get("offering"),
                      chip_kind=row.get("chip_kind", ""), prefill_replicas=_row_prefill_replicas(data, row))  # fmt: skip
        workload, slos, options = _stage_inputs(inputs)
        if setup.prefill_replicas and workload.arrivals is not None and workload.arrivals.kind == "closed_loop":
            raise SimulationRefused("a closed loop couples the prefill and decode pools; give the stage an arrival rate (simulation.arrivals)")
        if options.max_sequences is None and row.get("batch"):  # the candidate's batch is its engine's max_num_seqs
            options = dataclasses.replace(options, max_sequences=row_max_sequences(row))
        result, seconds = simulate_setup(setup, workload, slos=slos, options=options)
        out = result_json(result, setup=setup, slo_percentiles=inputs.get("slo_percentiles"), seconds=seconds, series=False)
        # Each latency at every whole percent, to the microsecond, for the plan page's CDF of each candidate (about 4 KB).
        out["cdf"] = {name: [None if v is None else round(v, 6) for v in values] for name, values in latency_cdf(result).items()}
        rates = (inputs["simulation"].get("sweep") or {}).get("rates_per_s")
        if rates:  # the knee basis: the same candidate at each rate
            out["sweep"] = sweep_json(setup, workload, rates, slos=slos, options=options, slo_percentiles=inputs.get("slo_percentiles"))
            out["simulation_seconds"] += out["sweep"]["simulation_seconds"]
    except SimulationRefused as exc:
        return {"error": str(exc)}
    return out


def plan_simulation_stage(prepared, *, data: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    """The hook after a plan's analytical search (planner.services.plan_search_run): with a simulation
    stage asked for, its top_n rows simulated and re-ranked here when small, else marked pending for
    workers (plan_simulation_pending; the caller stores the plan running and plan_simulations_start sends them)."""
    if not data.get("simulation"):
        return results
    inputs = _raw_stage(data)
    top = stage_candidates(results["ranked"], inputs)
    tokens = workload_tokens(_stage_inputs(inputs)[0])
    passes = len(top) * (1 + len((inputs["simulation"].get("sweep") or {}).get("rates_per_s", ())))
    if not _small(passes * inputs["simulation"]["requests"], passes * tokens):
        return _pending(results, len(top))
    started = time.perf_counter()
    simulated, seen = {}, {}
    try:
        with step_budget(settings.SIMULATION_INLINE_MAX_STEPS):  # every candidate's forwards together
            for rank, row in top:
                key = _candidate_key(row)  # rows that differ only in what the simulation does not read simulate once
                simulated[rank] = seen[key] if key in seen else candidate_simulate(prepared, data=data, inputs=inputs, row=row)
                seen[key] = simulated[rank]
    except StepBudgetSpent:  # more forwards than a request may run: the workers simulate the stage
        return _pending(results, len(top))
    return plan_rerank(results, simulated, inputs=inputs, mode="inline", wall_seconds=time.perf_counter() - started)


CANDIDATE_KEY_FIELDS = ("chip_slug", "serving_engine", "chip_count", "total_chips", "tensor_parallel", "pipeline_parallel", "attention_data_parallel",
                        "weight_dtype", "kv_dtype", "decoding", "batch", "offering")  # fmt: skip


def _candidate_key(row: dict[str, Any]) -> tuple:
    return tuple(str(row.get(k)) for k in CANDIDATE_KEY_FIELDS)


def _raw_stage(data: dict[str, Any]) -> dict[str, Any]:
    """The stage's inputs in their stored (JSON) form: what a worker reads back from plan.inputs."""
    from planner.simulation_inputs import PercentileSlosSerializer, PlanSimulationSerializer

    return {
        "simulation": PlanSimulationSerializer(data["simulation"]).data,
        "slo_percentiles": PercentileSlosSerializer(data["slo_percentiles"]).data if data.get("slo_percentiles") else None,
    }


def _pending(results: dict[str, Any], candidates: int) -> dict[str, Any]:
    """The plan's results with its simulation stage marked for the workers."""
    return {**results, "simulation": {"status": "pending", "candidates": candidates, "done": 0, "mode": "tasks", "started_at": time.time()}}


def plan_simulation_pending(outcome: dict[str, Any]) -> bool:
    return outcome["results"].get("simulation", {}).get("status") == "pending"


def _miss_ratio(simulation: dict[str, Any]) -> float:
    ratios = [c["value_s"] / c["s"] for c in simulation.get("slo_percentiles", {}).values() if c["value_s"] is not None]
    return max(ratios, default=0.0) + (1e6 if simulation.get("overloaded") else 0.0)


def analytical_miss(row: dict[str, Any], slo_percentiles: dict[str, Any] | None, *, stage: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """What a row the simulation did not check already misses by physics (None where nothing does): every request's
    TTFT holds at least one prefill of its prompt on an idle configuration (`prefill.time_s`), so a TTFT bound below
    it, taken at the optimistic end of the TTFT's 80% interval (the prefill scaled as the interval's low is to the
    TTFT), is missed at any percentile. As {metric, p, s, least_s, ratio, basis}. The estimate's mean at the plan's
    load is no such floor: its closed-form queueing can exceed the simulated 95th percentile several times over
    (a bf16 A100 row of Llama-3.1-8B at 4 requests/s: 7.2 s mean against 0.30 s simulated), so TPOT and e2e bounds,
    and TTFT bounds above one prefill, are left to the simulation. `stage`: the simulation stage's workload; the floor
    holds only where it sends the row's prompts, fixed at least as long and with no shared prefix a cache could skip
    (a shorter or drawn prompt, a low percentile of a spread, a cached prefix can prefill faster)."""
    spec, value = (slo_percentiles or {}).get("ttft"), row.get("ttft_s")
    interval, prefill = (row.get("intervals") or {}).get("ttft_s") or {}, (row.get("prefill") or {}).get("time_s")
    if not spec or not value or interval.get("low") is None or prefill is None or not _stage_prompts_are_the_rows(row, stage):
        return None
    least = prefill * min(1.0, interval["low"] / value)
    if least <= spec["s"]:
        return None
    return {"metric": "ttft", "p": spec["p"], "s": spec["s"], "least_s": least, "ratio": least / spec["s"],
            "basis": "one prefill of its prompt on an idle configuration, at the low end of its 80% interval"}  # fmt: skip


def _stage_prompts_are_the_rows(row: dict[str, Any], stage: dict[str, Any] | None) -> bool:
    if stage is None:
        return True
    prompt = stage.get("prompt") or {}
    fixed = prompt.get("kind", "fixed") == "fixed" and (prompt.get("tokens") or 0) >= (row.get("prefill_tokens") or 0)
    return fixed and not stage.get("shared_prefix_fraction") and not stage.get("shared_prefix_tokens")


def plan_rerank(results: dict[str, Any], simulated: dict[int, dict[str, Any]], *, inputs: dict[str, Any], mode: str,
                wall_seconds: float) -> dict[str, Any]:  # fmt: skip
    """The ranking after the simulation stage, each row saying which stage decided its place:
    1. simulated, meeting every percentile SLO at the plan's load (with a sweep: having a knee, meeting them at some
       swept rate and every rate below it): by simulated $/1M output tokens there (then analytical rank);
    2. not decided by the simulation, in analytical order: top-N rows the simulator cannot run (with the reason), then rows past N;
    3. missing an SLO, closest to its bounds first: simulated and missing, or not simulated and missing already by
       physics (`analytical_miss`: a TTFT bound below one prefill of the prompt)."""
    knee = bool((inputs["simulation"].get("sweep") or {}).get("rates_per_s"))
    ranked = [dict(row, analytical_rank=k) for k, row in enumerate(results["ranked"], start=1)]
    meets, undecided, misses = [], [], []
    for row in ranked:
        sim = simulated.get(row["analytical_rank"])
        row["simulation"] = sim
        if sim is None or "error" in sim:
            row["simulated_usd_per_million_output_tokens"] = None
            row["ranking_stage"] = "analytical"
            row["analytical_miss"] = analytical_miss(row, inputs.get("slo_percentiles"), stage=inputs["simulation"])
            (misses if row["analytical_miss"] else undecided).append(row)
            continue
        row["ranking_stage"], row["analytical_miss"] = "simulated", None
        if knee:
            row["simulated_usd_per_million_output_tokens"] = sim["sweep"]["usd_per_million_output_tokens_at_knee"]
            (meets if sim["sweep"]["knee_rate_per_s"] is not None else misses).append(row)
        else:
            row["simulated_usd_per_million_output_tokens"] = sim.get("usd_per_million_output_tokens")
            (meets if sim["meets_slo_percentiles"] else misses).append(row)
    meets.sort(key=lambda r: (r["simulated_usd_per_million_output_tokens"] if r["simulated_usd_per_million_output_tokens"] is not None else math.inf,
                              r["analytical_rank"]))  # fmt: skip
    misses.sort(key=lambda r: (r["analytical_miss"]["ratio"] if r.get("analytical_miss") else _miss_ratio(r["simulation"]), r["analytical_rank"]))
    reranked = meets + undecided + misses
    seconds = sum(s.get("simulation_seconds") or 0.0 for s in simulated.values())
    summary = {
        "status": "done", "mode": mode, "candidates": len(simulated), "simulated": sum(1 for s in simulated.values() if "error" not in s),
        "meeting_slos": len(meets), "missing_slos": sum(1 for r in misses if r["ranking_stage"] == "simulated"),
        "not_simulated": sum(1 for s in simulated.values() if "error" in s), "missing_by_analysis": sum(1 for r in misses if r["ranking_stage"] == "analytical"),
        "requests_per_candidate": inputs["simulation"]["requests"], "workload": inputs["simulation"], "slo_percentiles": inputs.get("slo_percentiles"),
        "basis": KNEE_STAGE_BASIS if knee else STAGE_BASIS, "simulation_seconds": seconds, "wall_seconds": wall_seconds,
        "best_simulated_usd_per_million_output_tokens": meets[0]["simulated_usd_per_million_output_tokens"] if meets else None,
    }  # fmt: skip
    return json_safe({**results, "ranked": reranked, "simulation": summary})


def stage_candidates(ranked: list[dict[str, Any]], inputs: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """The rows the stage simulates, with their analytical rank: the first top_n that their analytical estimate does not
    already rule out (`analytical_miss`), so that a bound no prefill can meet does not spend the stage on them."""
    slos, stage = inputs.get("slo_percentiles"), inputs["simulation"]
    open_rows = ((rank, row) for rank, row in enumerate(ranked, start=1) if not analytical_miss(row, slos, stage=stage))
    return list(itertools.islice(open_rows, inputs["simulation"]["top_n"]))


def _plan_stage_runs(plan: Plan) -> list[SimulationRun]:
    inputs = plan.inputs
    rows = stage_candidates(plan.results["ranked"], inputs)
    return [
        SimulationRun(
            model_slug=plan.model_slug, chip_slug=row["chip_slug"], plan=plan, candidate_rank=rank, created_by=plan.created_by,
            request_count=inputs["simulation"]["requests"], status=SimulationRun.Status.QUEUED, progress=0.0,
            inputs={"plan": str(plan.pk), "candidate_rank": rank, "configuration": {k: row.get(k) for k in (
                "chip_slug", "serving_engine", "chip_count", "tensor_parallel", "pipeline_parallel", "weight_dtype", "kv_dtype", "decoding")}},
        )
        for rank, row in rows
    ]  # fmt: skip


@transaction.atomic
def plan_simulations_start(*, plan_id=None, record: dict[str, Any] | None = None, outcome: dict[str, Any]) -> Plan:
    """Store a plan whose simulation stage is pending as running (a new one from `record`, or the
    worker's `plan_id`), with its analytical results, and send one task per candidate after commit."""
    now = timezone.now()
    fields = {**outcome, "status": Plan.Status.RUNNING, "progress": 0.0, "heartbeat_at": now}
    if record is not None:
        plan = Plan.objects.create(**record, **fields, started_at=now)
    else:
        Plan.objects.filter(pk=plan_id, status=Plan.Status.RUNNING).update(**fields)
        plan = Plan.objects.get(pk=plan_id)
    runs = SimulationRun.objects.bulk_create(_plan_stage_runs(plan))
    if not runs:  # nothing ranked: nothing to simulate
        plan_simulation_collect(plan_id=plan.pk)
    ids = [r.pk for r in runs]
    transaction.on_commit(lambda: [_send(i) for i in ids])
    return plan


# A worker takes several candidates of one plan in a row: it resolves the plan's search (validation,
# catalog rows, engine variants, calibrations; ~0.1-0.3 s) once per plan, not once per candidate. A plan's
# inputs never change once stored, so its id is the key.
@functools.lru_cache(maxsize=4)
def _plan_prepared(plan_id: str) -> tuple[dict[str, Any], Any]:
    from planner.serializers import PlanInputSerializer
    from planner.services import plan_search_prepare

    serializer = PlanInputSerializer(data=Plan.objects.values_list("inputs", flat=True).get(pk=plan_id))
    if not serializer.is_valid():
        raise StoredInputsInvalid(f"the plan's request is no longer valid against the catalog: {serializer.errors}")
    return serializer.validated_data, plan_search_prepare(data=serializer.validated_data)


def _candidate_compute(run: SimulationRun) -> dict[str, Any]:
    plan = run.plan
    data, prepared = _plan_prepared(str(plan.pk))
    row = plan.results["ranked"][run.candidate_rank - 1]
    result = candidate_simulate(prepared, data=data, inputs=plan.inputs, row=row)
    if "error" in result:
        raise SimulationRefused(result["error"])
    return result


def plan_simulation_collect(*, plan_id) -> bool:
    """After a candidate finished: the plan's progress, and once every candidate has, its re-ranked
    results stored and the plan done. True when this call finished the plan."""
    with transaction.atomic():
        plan = Plan.objects.select_for_update().filter(pk=plan_id).first()
        if plan is None or plan.status != Plan.Status.RUNNING or not plan_simulation_pending({"results": plan.results}):
            return False
        runs = list(SimulationRun.objects.filter(plan_id=plan_id).only("candidate_rank", "status", "results", "error"))
        finished = [r for r in runs if not r.pending]
        now = timezone.now()
        if len(finished) < len(runs):
            Plan.objects.filter(pk=plan_id).update(progress=len(finished) / len(runs), heartbeat_at=now)
            return False
        simulated = {r.candidate_rank: (r.results if r.status == SimulationRun.Status.DONE else {"error": r.error or "failed"}) for r in runs}
        started = plan.results["simulation"].get("started_at") or time.time()
        results = plan_rerank(plan.results, simulated, inputs=plan.inputs, mode="tasks", wall_seconds=time.time() - started)
        top = results["ranked"]
        Plan.objects.filter(pk=plan_id).update(
            results=results, status=Plan.Status.DONE, progress=1.0, finished_at=now, heartbeat_at=now, error="",
            best_usd_per_million_output_tokens=top[0]["usd_per_million_output_tokens"] if top else None,
        )  # fmt: skip
    return True
