from __future__ import annotations

from django.db.models import QuerySet

from jobs.models import ValidationRun


def validation_run_list(*, plan=None, status: str | None = None, trial: str | None = None) -> QuerySet[ValidationRun]:
    runs = ValidationRun.objects.all()
    if plan is not None:
        runs = runs.filter(plan=plan)
    if status:
        runs = runs.filter(status=status)
    if trial:
        runs = runs.filter(trial=trial)
    return runs


def validation_run_get(*, run_id) -> ValidationRun:
    return ValidationRun.objects.get(pk=run_id)


def succeeded_runs_for(*, chip_slug: str, dtype: str, trial: str = "decode") -> QuerySet[ValidationRun]:
    return ValidationRun.objects.filter(status=ValidationRun.Status.SUCCEEDED, matched_chip_slug=chip_slug, trial=trial, params__dtype=dtype)
