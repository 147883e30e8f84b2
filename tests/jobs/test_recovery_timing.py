"""Jobs that recover promptly, without a worker: lost messages are re-sent within 60 s, the
old 60 s sweep schedule moves to the new one, a worker process that died is taken over at once
on redelivery, the health check fails when the beat has stopped, and a broker that refuses a
publish gives 202 with the run queued for the sweep (never a 500)."""
from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from jobs import services
from jobs.models import ScheduledTaskRun, ValidationRun, WorkerHeartbeat
from jobs.schedules import ensure_default_schedules
from jobs.services import validation_run_create, validation_runs_recover, worker_queues_record


@pytest.fixture
def queued_run(small_plan):
    run = validation_run_create(plan=small_plan, rank=1, trial="decode", queue="cpu")
    ValidationRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(seconds=10))
    return run


def test_a_lost_message_is_sent_again_within_a_minute_of_its_send(queued_run):
    """The worst case is VALIDATION_RESEND_AFTER_S plus one sweep period after the lost send."""
    assert settings.VALIDATION_RESEND_AFTER_S + settings.VALIDATION_SWEEP_EVERY_S <= 60
    validation_runs_recover()  # the first send
    sent = ValidationRun.objects.get(pk=queued_run.pk).sent_at
    ValidationRun.objects.filter(pk=queued_run.pk).update(sent_at=sent - timedelta(seconds=settings.VALIDATION_RESEND_AFTER_S - 1))
    assert validation_runs_recover()["resent"] == 0  # not yet: it may still be in the queue
    ValidationRun.objects.filter(pk=queued_run.pk).update(sent_at=sent - timedelta(seconds=settings.VALIDATION_RESEND_AFTER_S + 1))
    assert validation_runs_recover()["resent"] == 1


def test_the_recovery_sweep_runs_every_twenty_seconds_and_the_old_default_moves(db):
    sweep = PeriodicTask.objects.get(task="jobs.recover_validation_runs")
    assert sweep.interval.every == settings.VALIDATION_SWEEP_EVERY_S == 20 and sweep.expire_seconds < 20
    every_minute = IntervalSchedule.objects.get(every=60, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.filter(pk=sweep.pk).update(interval=every_minute, expire_seconds=50)  # a site made before the change
    ensure_default_schedules()
    assert PeriodicTask.objects.get(pk=sweep.pk).interval.every == 20


def test_an_interval_an_admin_chose_is_kept(db):
    every_5_min, _ = IntervalSchedule.objects.get_or_create(every=300, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.filter(task="jobs.recover_validation_runs").update(interval=every_5_min)
    ensure_default_schedules()
    assert PeriodicTask.objects.get(task="jobs.recover_validation_runs").interval.every == 300


def _running(run, *, hostname: str, pid: int):
    now = timezone.now()
    ValidationRun.objects.filter(pk=run.pk).update(status="running", attempts=1, started_at=now, heartbeat_at=now,
                                                   worker_hostname=hostname, worker_pid=pid)  # fmt: skip


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_a_redelivered_run_whose_worker_process_died_is_taken_over_at_once(queued_run, monkeypatch):
    """Was 95 s "running": the redelivery was dropped as a duplicate while the heartbeat looked fresh."""
    _running(queued_run, hostname="cpu@host", pid=_dead_pid())
    supervised = []
    monkeypatch.setattr(services, "_supervise", lambda run, process, stderr: supervised.append(run.pk) or process.kill())
    monkeypatch.setattr(services, "close_old_connections", lambda: None)  # keep the test's transaction open
    services.validation_run_execute(run_id=str(queued_run.pk), hostname="cpu@host", task_id="redelivered")
    run = ValidationRun.objects.get(pk=queued_run.pk)
    assert supervised == [run.pk] and run.attempts == 2 and run.worker_pid == os.getpid()


def test_a_duplicate_for_a_live_worker_process_on_the_same_host_changes_nothing(queued_run):
    _running(queued_run, hostname="cpu@host", pid=os.getppid())  # alive, and not us
    services.validation_run_execute(run_id=str(queued_run.pk), hostname="cpu@host", task_id="duplicate")
    run = ValidationRun.objects.get(pk=queued_run.pk)
    assert run.attempts == 1 and run.worker_pid == os.getppid()


def test_a_pid_on_another_host_is_never_taken_for_dead(queued_run):
    _running(queued_run, hostname="cpu@other-host", pid=_dead_pid())
    services.validation_run_execute(run_id=str(queued_run.pk), hostname="cpu@host", task_id="duplicate")
    assert ValidationRun.objects.get(pk=queued_run.pk).attempts == 1


def test_the_jobs_health_check_fails_when_the_beat_has_stopped(db, anonymous_client):
    now = timezone.now()
    WorkerHeartbeat.objects.create(hostname="cpu@host", seen_at=now)
    ScheduledTaskRun.objects.create(name=ScheduledTaskRun.RECOVERY_SWEEP, last_run_at=now)
    assert anonymous_client.get("/api/v1/health/jobs/").status_code == 200
    ScheduledTaskRun.objects.update(last_run_at=now - timedelta(seconds=settings.JOBS_STALE_AFTER_S + 1))
    response = anonymous_client.get("/api/v1/health/jobs/")
    assert response.status_code == 503
    assert "the beat has stopped" in response.json()["problems"][0]


def test_the_jobs_health_check_fails_before_any_sweep_or_worker(db, anonymous_client):
    body = anonymous_client.get("/api/v1/health/jobs/").json()
    assert body["ok"] is False and len(body["problems"]) == 2


def test_each_sweep_is_recorded(db):
    validation_runs_recover()
    validation_runs_recover()
    assert ScheduledTaskRun.objects.get(name=ScheduledTaskRun.RECOVERY_SWEEP).runs == 2


def test_a_waiting_run_in_the_ui_says_the_beat_has_stopped(small_plan, client):
    run = validation_run_create(plan=small_plan, rank=1, trial="decode", queue="cpu")
    page = client.get(f"/plans/{small_plan.pk}/validations/{run.pk}/")
    assert page.status_code == 200
    assert "The recovery sweep has never run" in page.content.decode()
    ScheduledTaskRun.objects.create(name=ScheduledTaskRun.RECOVERY_SWEEP, last_run_at=timezone.now())
    WorkerHeartbeat.objects.create(hostname="cpu@host", seen_at=timezone.now())
    # The beat and a worker are fine, but no worker has said it serves the run's queue: the card says so.
    assert "No worker serves the cpu queue now" in client.get(f"/plans/{small_plan.pk}/validations/{run.pk}/").content.decode()
    worker_queues_record(hostname="cpu@host", queues=["cpu"])
    assert "jobs-warning" not in client.get(f"/plans/{small_plan.pk}/validations/{run.pk}/").content.decode()


class _RefusingTask:
    def apply_async(self, *args, **kwargs):
        raise ConnectionRefusedError(111, "Connection refused")


@pytest.mark.django_db(transaction=True)  # the publish runs on the request's own commit, as in production
def test_a_broker_that_refuses_the_publish_gives_202_and_a_run_queued_for_the_sweep(small_plan, token_client, monkeypatch):
    import jobs.tasks

    monkeypatch.setattr(jobs.tasks, "run_validation", _RefusingTask())
    response = token_client.post(f"/api/v1/plans/{small_plan.pk}/validations/", {"rank": 1, "trial": "decode", "queue": "cpu"}, format="json")
    assert response.status_code == 202, response.content
    run = ValidationRun.objects.get(pk=response.json()["id"])
    assert run.status == "queued" and run.sent_at is None and "waiting for the broker" in run.progress_message


@pytest.mark.django_db(transaction=True)
def test_a_publish_that_reaches_the_broker_gives_201(small_plan, token_client, monkeypatch):
    import jobs.tasks

    class _Sent:
        def apply_async(self, *args, **kwargs):
            return type("Result", (), {"id": "task-1"})()

    monkeypatch.setattr(jobs.tasks, "run_validation", _Sent())
    response = token_client.post(f"/api/v1/plans/{small_plan.pk}/validations/", {"rank": 1, "trial": "decode", "queue": "cpu"}, format="json")
    assert response.status_code == 201
    assert ValidationRun.objects.get(pk=response.json()["id"]).sent_at is not None
