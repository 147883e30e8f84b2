from __future__ import annotations

import uuid

from django.db.models import Exists, OuterRef, QuerySet

from planner.models import Calibration, Plan, SimulationRun


def validating(runs: QuerySet) -> QuerySet:
    """The validation runs that validate their plan: succeeded on a worker of the planned chip's kind. A stand-in (a CPU
    worker measuring for an H100 plan) checks the planner's physics on its own device, not the plan's numbers."""
    from jobs.models import ValidationRun

    return runs.filter(status=ValidationRun.Status.SUCCEEDED, stand_in=False)


def with_validation(plans: QuerySet[Plan]) -> QuerySet[Plan]:
    """Each plan annotated `validated`: one of its validation runs validates it (`validating`)."""
    from jobs.models import ValidationRun

    return plans.annotate(validated=Exists(validating(ValidationRun.objects.filter(plan=OuterRef("pk")))))


def plan_list(*, model_slug: str | None = None) -> QuerySet[Plan]:
    """Plans newest first, each with its creator, its tags and whether a validation of it succeeded."""
    plans = with_validation(Plan.objects.select_related("created_by").prefetch_related("tags"))
    return plans.filter(model_slug=model_slug) if model_slug else plans


def plan_get(*, plan_id) -> Plan:
    return Plan.objects.get(pk=plan_id)


def calibration_list() -> QuerySet[Calibration]:
    return Calibration.objects.all()


def plan_find(*, plan_id: str) -> Plan | None:
    """The plan with this id, or None (also for a string that is not a UUID)."""
    try:
        uuid.UUID(str(plan_id))
    except ValueError:
        return None
    return Plan.objects.filter(pk=plan_id).first()


def simulation_list(*, status: str | None = None, from_plan: uuid.UUID | None = None) -> QuerySet[SimulationRun]:
    """The stored simulations a list shows (not a plan's own stage), newest first: of a status, or started from a row
    of a plan."""
    runs = SimulationRun.objects.filter(plan__isnull=True)
    if status:
        runs = runs.filter(status=status)
    if from_plan:
        runs = runs.filter(from_plan_id=from_plan)
    return runs
