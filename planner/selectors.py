from __future__ import annotations

import uuid

from django.db.models import Exists, OuterRef, QuerySet

from planner.models import Calibration, Plan


def with_validation(plans: QuerySet[Plan]) -> QuerySet[Plan]:
    """Each plan annotated `validated`: a validation of one of its configurations succeeded."""
    from jobs.models import ValidationRun

    succeeded = ValidationRun.objects.filter(plan=OuterRef("pk"), status=ValidationRun.Status.SUCCEEDED)
    return plans.annotate(validated=Exists(succeeded))


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
