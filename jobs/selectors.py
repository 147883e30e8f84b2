from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from jobs.models import ScheduledTaskRun, ValidationRun, WorkerHeartbeat


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
    """The chip's succeeded runs in `dtype` as they ran (a trial fitted to memory may run bf16 where fp32 was asked)."""
    ran_in = Q(measured__dtype=dtype) | (Q(measured__dtype__isnull=True) & Q(params__dtype=dtype))
    return ValidationRun.objects.filter(ran_in, status=ValidationRun.Status.SUCCEEDED, matched_chip_slug=chip_slug, trial=trial)


def jobs_health() -> dict[str, Any]:
    """Whether queued work will be run and recovered: the recovery sweep (sent by the beat, run by
    a worker) and some worker's heartbeat (the same) are younger than JOBS_STALE_AFTER_S. A beat
    that died stops both; so does having no worker on the cpu queue."""
    now, stale_after_s = timezone.now(), settings.JOBS_STALE_AFTER_S
    sweep = ScheduledTaskRun.objects.filter(name=ScheduledTaskRun.RECOVERY_SWEEP).first()
    worker = WorkerHeartbeat.objects.order_by("-seen_at").first()
    sweep_age_s = (now - sweep.last_run_at).total_seconds() if sweep else None
    worker_age_s = (now - worker.seen_at).total_seconds() if worker else None
    problems = []
    if sweep_age_s is None:
        problems.append("The recovery sweep has never run: start a beat (celery beat, or a worker with --beat) and a cpu worker.")
    elif sweep_age_s > stale_after_s:
        busy = ValidationRun.objects.filter(status=ValidationRun.Status.RUNNING, heartbeat_at__gte=now - timezone.timedelta(seconds=60)).exists()
        why = "every cpu worker is busy with a trial, or the beat has stopped" if busy else "the beat has stopped, or no worker serves the cpu queue"
        problems.append(
            f"The recovery sweep last ran {sweep_age_s:.0f} s ago (it should run every {settings.VALIDATION_SWEEP_EVERY_S} s): "
            f"{why}. Lost messages are not re-sent until it runs again."
        )
    if worker_age_s is None or worker_age_s > stale_after_s:
        seen = "never" if worker_age_s is None else f"{worker_age_s:.0f} s ago"
        problems.append(f"No worker heartbeat for over {stale_after_s} s (last {seen}): queued validations wait until a worker runs.")
    return {"ok": not problems, "problems": problems, "recovery_sweep_age_s": sweep_age_s, "worker_heartbeat_age_s": worker_age_s,
            "stale_after_s": stale_after_s}  # fmt: skip


# The trials each kind of model can run (a speculative trial needs an autoregressive target).
TRIAL_MODEL_KINDS = {"decode": ("autoregressive", "diffusion", "block_diffusion"), "speculative": ("autoregressive",),
                     "block_diffusion": ("block_diffusion", "diffusion", "autoregressive")}  # fmt: skip


def trials_for(model) -> list[str]:
    """The trials a catalog model (a ModelArch) can run, in TRIAL_MODEL_KINDS' order."""
    return [trial for trial, kinds in TRIAL_MODEL_KINDS.items() if model.generation_kind in kinds]
