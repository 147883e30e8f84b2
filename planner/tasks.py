"""Celery tasks of the planner: each takes ids and calls a service (a task is just another interface)."""
from __future__ import annotations

from celery import shared_task
from django.conf import settings

from planner import services


@shared_task(
    bind=True,
    name="planner.run_plan",
    acks_late=True,  # a worker killed mid-search leaves the message to be delivered again
    reject_on_worker_lost=True,
    soft_time_limit=settings.PLAN_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.PLAN_TASK_TIME_LIMIT,
    max_retries=20,
)
def run_plan(self, plan_id: str) -> str:
    outcome = services.plan_execute(plan_id=plan_id)
    if outcome == "busy":  # another worker's search is alive; look again once it would count as lost
        raise self.retry(countdown=services.PLAN_STALE_AFTER_S)
    return outcome


@shared_task(
    bind=True,
    name="planner.run_simulation",
    acks_late=True,  # a worker killed mid-simulation leaves the message to be delivered again
    reject_on_worker_lost=True,
    soft_time_limit=settings.SIMULATION_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.SIMULATION_TASK_TIME_LIMIT,
    max_retries=5,
)
def run_simulation(self, run_id: str) -> str:
    """One serving simulation: a POST /api/v1/simulations/ too big to run inline, or one candidate of a
    plan's simulation stage (the last candidate to finish re-ranks the plan)."""
    from planner import simulation_services

    outcome = simulation_services.simulation_execute(run_id=run_id)
    if outcome == "busy":  # another worker runs it; look again once it would count as lost
        raise self.retry(countdown=settings.SIMULATION_TASK_TIME_LIMIT)
    return outcome


@shared_task(
    bind=True,
    name="planner.run_fleet",
    acks_late=True,  # a worker killed mid-plan leaves the message to be delivered again
    reject_on_worker_lost=True,
    soft_time_limit=settings.PLAN_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.PLAN_TASK_TIME_LIMIT,
    max_retries=20,
)
def run_fleet(self, fleet_id: str) -> str:
    """A fleet plan too big to plan inside its request (planner/fleet_services.py)."""
    from planner import fleet_services

    outcome = fleet_services.fleet_execute(fleet_id=fleet_id)
    if outcome == "busy":  # another worker plans it; look again once it would count as lost
        raise self.retry(countdown=fleet_services.FLEET_STALE_AFTER_S)
    return outcome
