"""Claiming, failing and re-sending stored runs a worker fills in (a Plan, a FleetPlan): one queued row is
run once, a lost worker's row is taken again, and a message that may be lost is sent again."""
from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import models, transaction
from django.db.models import F
from django.utils import timezone

logger = logging.getLogger(__name__)


def create_done(model: type[models.Model], **fields):
    """Store a run finished in the request (status and results in `fields`): its finished_at is its created_at, the
    moment it was stored, as the work had just ended. A clock read before the insert fell a few milliseconds before
    created_at (auto_now_add), so the API showed it finishing before it was created."""
    run = model.objects.create(**fields)
    model.objects.filter(pk=run.pk).update(finished_at=run.created_at)
    run.finished_at = run.created_at
    return run


def run_send(task, model: type[models.Model], pk, *, what: str) -> bool:
    """Publish a stored row's Celery task on queue cpu; a broker that refuses leaves the row queued, its
    error saying so (the request that stored it still succeeds, and the recovery sweep sends it again)."""
    try:
        task.apply_async(args=[str(pk)], queue="cpu", retry_policy=settings.VALIDATION_PUBLISH_RETRY_POLICY)
    except Exception as exc:  # noqa: BLE001 - kombu, redis-py and socket errors all mean "not sent"
        logger.warning("%s %s: the broker refused the task (%s)", what, pk, exc)
        model.objects.filter(pk=pk, status="queued").update(error=f"waiting for the broker ({type(exc).__name__})")
        return False
    return True


def run_claim(model: type[models.Model], pk, *, stale_after_s: float, max_attempts: int, what: str) -> str:
    """Take a queued row (or a running one whose worker wrote nothing for stale_after_s) for this worker:
    "claimed"; "busy" while another worker's run is alive; "finished" when there is nothing to do."""
    now = timezone.now()
    with transaction.atomic():
        row = model.objects.select_for_update().filter(pk=pk).first()
        if row is None or not row.pending:
            return "finished"
        if row.status == "running" and row.heartbeat_at and (now - row.heartbeat_at).total_seconds() < stale_after_s:
            return "busy"
        if row.attempts >= max_attempts:
            run_fail(model, pk, f"the {what} lost its worker {row.attempts} times (killed, or out of memory)")
            return "finished"
        model.objects.filter(pk=pk).update(status="running", attempts=F("attempts") + 1, started_at=now, heartbeat_at=now, progress=0.0, error="")
    return "claimed"


def run_fail(model: type[models.Model], pk, reason: str) -> None:
    model.objects.filter(pk=pk, status__in=("queued", "running")).update(status="failed", error=reason[:2000], finished_at=timezone.now())


def queued_resend(model: type[models.Model], send: Callable[[models.Model], bool], *, resend_after_s: float, sweep_every_s: float,
                  now=None) -> int:  # fmt: skip
    """Send again the rows still queued whose message may be lost (a broker that was down at the POST, or
    restarted without persistence), from the recovery sweep. With no record of the sends, the wait doubles by
    age: a row is sent again in the sweep that first sees it past resend_after_s, 2x, 4x, ... old, so one that
    only waits behind other work gains a message now and then, never one per sweep. A duplicate is harmless:
    the claim runs a row once."""
    now = now or timezone.now()
    sent = 0
    for row in model.objects.filter(status="queued", created_at__lte=now - timedelta(seconds=resend_after_s))[:100]:
        age = (now - row.created_at).total_seconds()
        threshold = resend_after_s * 2 ** math.floor(math.log2(age / resend_after_s))
        if age - threshold < sweep_every_s:
            sent += send(row)
    return sent
