from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs.models import WorkerHeartbeat


@transaction.atomic
def worker_heartbeat_record(*, hostname: str, queue: str) -> WorkerHeartbeat:
    heartbeat, _ = WorkerHeartbeat.objects.get_or_create(hostname=hostname, defaults={"queue": queue, "seen_at": timezone.now()})
    WorkerHeartbeat.objects.filter(pk=heartbeat.pk).update(seen_at=timezone.now(), queue=queue, beats=F("beats") + 1)
    heartbeat.refresh_from_db()
    return heartbeat
