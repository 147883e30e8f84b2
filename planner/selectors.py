from __future__ import annotations

import uuid

from django.db.models import QuerySet

from planner.models import Calibration, Plan


def plan_list(*, model_slug: str | None = None) -> QuerySet[Plan]:
    plans = Plan.objects.all()
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
