"""Redis restarted (without persistence) while validations are queued: none is lost, each runs once."""
from __future__ import annotations

import time

import pytest
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from jobs.models import ValidationRun
from tests.faults.conftest import SMALL_PLAN, private_redis
from tests.worker import running_web, running_worker, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _sweep_every_two_seconds() -> None:
    """The recovery sweep runs every minute in production; every 2 s here, so the test is short."""
    every_2s, _ = IntervalSchedule.objects.get_or_create(every=2, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.filter(task="jobs.recover_validation_runs").update(interval=every_2s, expire_seconds=2)
    PeriodicTask.objects.exclude(task="jobs.recover_validation_runs").update(enabled=False)


def _finished(ids):
    runs = list(ValidationRun.objects.filter(pk__in=ids))
    return runs if len(runs) == len(ids) and all(run.finished for run in runs) else None


def test_validations_queued_when_redis_restarts_all_run_once_after_it_comes_back(api):
    with private_redis() as redis_server:
        env = {"REDIS_URL": redis_server.url, "VALIDATION_RESEND_AFTER_S": "3"}
        with running_web(extra_env=env) as web:
            plan = api.post(f"{web}/api/v1/plans/", json=SMALL_PLAN, timeout=60).json()
            validate = f"{web}/api/v1/plans/{plan['id']}/validations/"
            ids = [api.post(validate, json={"rank": 1, "trial": "decode", "queue": "cpu"}, timeout=30).json()["id"] for _ in range(2)]
            assert redis_server.queue_length("cpu") == 2  # both messages wait in the broker, no worker yet

            redis_server.stop()
            started = time.monotonic()
            while_down = api.post(validate, json={"rank": 1, "trial": "decode", "queue": "cpu"}, timeout=30)
            publish_s = time.monotonic() - started
            assert while_down.status_code == 202, while_down.text  # stored, queued for the sweep: accepted, never a 500
            assert publish_s < 10
            ids.append(while_down.json()["id"])
            unsent = ValidationRun.objects.get(pk=ids[-1])
            assert unsent.status == "queued" and unsent.sent_at is None
            assert "waiting for the broker" in unsent.progress_message

            redis_server.start()
            assert redis_server.queue_length("cpu") == 0  # the restart lost the two queued messages

            _sweep_every_two_seconds()
            worker_log = redis_server.log_path.with_suffix(".worker.log")
            with running_worker(extra_env=env, beat=True, log_path=worker_log):
                runs = wait_for(lambda: _finished(ids), timeout_s=240, interval_s=0.5)
                assert runs is not None, worker_log.read_text()[-4000:]

                # Restarted again under a running worker: it reconnects and takes new work.
                redis_server.stop()
                redis_server.start()
                after = api.post(validate, json={"rank": 1, "trial": "decode", "queue": "cpu"}, timeout=30).json()["id"]
                again = wait_for(lambda: _finished([after]), timeout_s=240, interval_s=0.5)
                assert again is not None, worker_log.read_text()[-4000:]

    everything = list(ValidationRun.objects.filter(pk__in=[*ids, after]))
    assert len(everything) == 4
    for run in everything:
        assert run.status == "succeeded", (run.failure_reason, run.log_tail[-2000:])
        assert run.attempts == 1  # ran once: a re-sent duplicate message is a no-op
        assert run.measured["tpot_s"] > 0
    assert sum(run.send_count for run in everything) >= 4
