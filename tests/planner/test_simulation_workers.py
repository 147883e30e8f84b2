"""Integration: a plan's simulation stage of 20 candidates x 2,000 requests runs as one task per
candidate on two real workers, and the last candidate to finish re-ranks the plan. Prints the
measured figures (docs/simulation.md#where-it-runs-the-api-plans-and-workers)."""
from __future__ import annotations

import time

import pytest

from planner import services
from planner.models import Plan, SimulationRun
from planner.serializers import PlanInputSerializer
from tests.worker import ROOT, running_worker, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

STAGE_PLAN = {
    "model": "llama-3.1-8b",
    "workload": {"prompt_tokens": 1000, "output_tokens": 200, "request_rate_per_s": 20.0},
    "hardware": {"kinds": ["gpu"], "max_chips": 8},
    "slo_percentiles": {"ttft": {"p": 95, "s": 0.5}, "tpot": {"p": 95, "s": 0.05}},
    "simulation": {"requests": 2000, "top_n": 20, "prompt": {"kind": "lognormal", "mean_tokens": 1000, "std_tokens": 500},
                   "output": {"kind": "lognormal", "mean_tokens": 200, "std_tokens": 100}},
}  # fmt: skip


def _ready(log_path) -> bool:
    return log_path.exists() and " ready." in log_path.read_text()


def test_twenty_candidates_x_2000_requests_are_simulated_by_two_workers_and_the_plan_re_ranked(catalog):
    inputs = PlanInputSerializer(data=STAGE_PLAN)
    inputs.is_valid(raise_exception=True)
    logs = [ROOT / "var" / f"test-worker-simulation-{k}.log" for k in (1, 2)]
    with running_worker(log_path=logs[0]), running_worker(log_path=logs[1]):
        assert wait_for(lambda: all(_ready(p) for p in logs), timeout_s=120), [p.read_text()[-2000:] for p in logs]
        started = time.perf_counter()
        plan = services.plan_create(data=inputs.validated_data, raw_inputs=inputs.data)  # searched here, the stage sent on commit
        queued_s = time.perf_counter() - started
        done = wait_for(lambda: Plan.objects.filter(pk=plan.pk, status__in=["done", "failed"]).first(), timeout_s=240, interval_s=0.05)
        elapsed = time.perf_counter() - started
    assert done is not None, [p.read_text()[-3000:] for p in logs]
    assert done.status == "done", done.error
    stage = done.results["simulation"]
    runs = SimulationRun.objects.filter(plan=done)
    assert stage["mode"] == "tasks" and stage["candidates"] == runs.count() == 20
    simulated = [r for r in done.results["ranked"] if r["ranking_stage"] == "simulated"]
    assert simulated and all(r["simulation"]["ttft_s"]["p95"] > 0 for r in simulated)
    print(f"\nplan stage of 20 candidates x 2,000 requests on two workers: search + dispatch {queued_s:.2f} s, done after {elapsed:.2f} s "
          f"(simulation {stage['simulation_seconds']:.2f} s of worker time, {stage['simulated']} simulated, {stage['meeting_slos']} meeting the SLOs)")
