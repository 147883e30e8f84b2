"""Celery tasks: each takes ids and calls a service (a task is just another interface)."""
from __future__ import annotations

from celery import shared_task
from django.conf import settings

from jobs import services


@shared_task(bind=True, name="jobs.heartbeat", soft_time_limit=30, time_limit=60)
def heartbeat(self) -> dict:
    """Proves a worker is alive end to end: broker -> worker -> database."""
    queue = (self.request.delivery_info or {}).get("routing_key") or "cpu"
    beat = services.worker_heartbeat_record(hostname=self.request.hostname or "unknown", queue=queue)
    return {"hostname": beat.hostname, "beats": beat.beats}


@shared_task(
    bind=True,
    name="jobs.run_validation",
    acks_late=True,  # a worker killed mid-trial leaves the message to be delivered again
    reject_on_worker_lost=True,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def run_validation(self, run_id: str) -> None:
    services.validation_run_execute(run_id=run_id, hostname=self.request.hostname or "", task_id=self.request.id or "")


@shared_task(name="jobs.recover_validation_runs", soft_time_limit=60, time_limit=120)
def recover_validation_runs() -> dict:
    return services.validation_runs_recover()


@shared_task(bind=True, name="jobs.revalidate_pinned_plans", soft_time_limit=120, time_limit=180)
def revalidate_pinned_plans(self, queue: str = "cpu") -> dict:
    return services.pinned_plans_revalidate(queue=queue, claimed_by=self.request.hostname or "")
