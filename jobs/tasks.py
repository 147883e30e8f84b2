from __future__ import annotations

from celery import shared_task

from jobs import services


@shared_task(bind=True, name="jobs.heartbeat", soft_time_limit=30, time_limit=60)
def heartbeat(self) -> dict:
    """Proves a worker is alive end to end: broker -> worker -> database."""
    queue = (self.request.delivery_info or {}).get("routing_key") or "cpu"
    beat = services.worker_heartbeat_record(hostname=self.request.hostname or "unknown", queue=queue)
    return {"hostname": beat.hostname, "beats": beat.beats}
