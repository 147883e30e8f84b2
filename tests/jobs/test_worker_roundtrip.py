from __future__ import annotations

import pytest

from jobs.models import WorkerHeartbeat
from jobs.tasks import heartbeat
from tests.worker import WORKER_LOG, running_worker, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_real_worker_takes_a_task_off_the_broker_and_writes_the_database():
    with running_worker():
        heartbeat.apply_async(queue="cpu")
        beat = wait_for(lambda: WorkerHeartbeat.objects.first(), timeout_s=90)
    assert beat is not None, WORKER_LOG.read_text()[-3000:]
    assert beat.beats == 1 and beat.hostname.startswith("test-")


def test_the_heartbeat_schedule_is_stored_in_the_database():
    from django_celery_beat.models import PeriodicTask

    task = PeriodicTask.objects.get(name="worker heartbeat")
    assert task.task == "jobs.heartbeat" and task.interval.every == 60
