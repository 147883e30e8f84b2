"""A queued plan whose message was lost is sent again by the recovery sweep, at doubling ages."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from planner import services
from planner.models import Plan


@pytest.fixture
def queued_plan(db):
    return Plan.objects.create(model_slug="llama-3.1-8b", inputs={}, catalog_snapshot={}, results={}, candidate_count=200_000,
                               feasible_count=0, status=Plan.Status.QUEUED, progress=0.0)  # fmt: skip


@pytest.mark.parametrize(("age_s", "sent"), [(10, 0), (35, 1), (55, 0), (65, 1), (100, 0), (125, 1), (250, 1), (300, 0)])
def test_a_queued_plan_is_sent_again_when_its_age_first_passes_each_doubling(queued_plan, monkeypatch, age_s, sent):
    calls = []
    monkeypatch.setattr(services, "_plan_send", lambda plan: calls.append(plan.pk) or True)
    now = queued_plan.created_at + timedelta(seconds=age_s)
    assert services.plans_queued_resend(resend_after_s=30, sweep_every_s=20, now=now) == sent == len(calls)


def test_a_plan_that_is_running_or_done_is_never_sent_again(queued_plan, monkeypatch):
    monkeypatch.setattr(services, "_plan_send", lambda plan: pytest.fail("sent"))
    for status in (Plan.Status.RUNNING, Plan.Status.DONE, Plan.Status.FAILED):
        Plan.objects.filter(pk=queued_plan.pk).update(status=status)
        assert services.plans_queued_resend(resend_after_s=30, sweep_every_s=20, now=timezone.now() + timedelta(seconds=35)) == 0


def test_the_recovery_sweep_sends_the_lost_plans_too(queued_plan, monkeypatch):
    from jobs.services import validation_runs_recover

    monkeypatch.setattr(services, "_plan_send", lambda plan: True)
    Plan.objects.filter(pk=queued_plan.pk).update(created_at=timezone.now() - timedelta(seconds=35))
    assert validation_runs_recover()["plans_resent"] == 1


def test_the_recovery_sweep_sends_lost_fleet_plans_and_simulations_as_it_does_plans(db, monkeypatch):
    from jobs.services import validation_runs_recover
    from planner import fleet_services, simulation_services
    from planner.models import FleetPlan, SimulationRun

    sent = []
    monkeypatch.setattr(fleet_services, "_send", lambda fleet: sent.append(("fleet", fleet.pk)) or True)
    monkeypatch.setattr(simulation_services, "_send", lambda run_id: sent.append(("simulation", run_id)) or True)
    fleet = FleetPlan.objects.create(model_slug="llama-3.1-8b", inputs={}, status=FleetPlan.Status.QUEUED, progress=0.0)
    run = SimulationRun.objects.create(model_slug="llama-3.1-8b", chip_slug="nvidia-h100-sxm", inputs={}, request_count=10_000,
                                       status=SimulationRun.Status.QUEUED, progress=0.0)  # fmt: skip
    done = FleetPlan.objects.create(model_slug="llama-3.1-8b", inputs={}, status=FleetPlan.Status.DONE)
    old = timezone.now() - timedelta(seconds=35)
    for model, pk in ((FleetPlan, fleet.pk), (SimulationRun, run.pk), (FleetPlan, done.pk)):
        model.objects.filter(pk=pk).update(created_at=old)
    outcome = validation_runs_recover(resend_after_s=30)
    assert outcome["fleets_resent"] == 1 and outcome["simulations_resent"] == 1
    assert sorted(sent, key=str) == sorted([("fleet", fleet.pk), ("simulation", run.pk)], key=str)
