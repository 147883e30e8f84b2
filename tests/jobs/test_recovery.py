"""The recovery sweep sends lost messages again, with a doubling wait; a duplicate message is a no-op."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import ValidationRun
from jobs.services import validation_run_create, validation_run_execute, validation_runs_recover


@pytest.fixture
def queued_run(small_plan):
    run = validation_run_create(plan=small_plan, rank=1, trial="decode", queue="cpu")
    # Created in the test's transaction, its on_commit send never ran: as if the broker was down.
    ValidationRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(seconds=10))
    return run


def _age_last_send(run, seconds: float) -> None:
    ValidationRun.objects.filter(pk=run.pk).update(sent_at=timezone.now() - timedelta(seconds=seconds))


def test_a_run_whose_message_never_reached_the_broker_is_sent_by_the_next_sweep(queued_run):
    assert ValidationRun.objects.get(pk=queued_run.pk).sent_at is None
    assert validation_runs_recover(resend_after_s=600)["resent"] == 1
    run = ValidationRun.objects.get(pk=queued_run.pk)
    assert run.sent_at is not None and run.send_count == 1 and run.celery_task_id
    assert validation_runs_recover(resend_after_s=600)["resent"] == 0  # sent a moment ago: left alone


def test_a_message_not_taken_is_sent_again_after_a_wait_that_doubles(queued_run):
    validation_runs_recover(resend_after_s=600)
    _age_last_send(queued_run, 601)
    assert validation_runs_recover(resend_after_s=600)["resent"] == 1  # first re-send after 600 s
    _age_last_send(queued_run, 601)
    assert validation_runs_recover(resend_after_s=600)["resent"] == 0  # the next waits 1,200 s
    _age_last_send(queued_run, 1_201)
    assert validation_runs_recover(resend_after_s=600)["resent"] == 1
    assert ValidationRun.objects.get(pk=queued_run.pk).send_count == 3


def test_a_run_that_started_or_ended_is_never_sent_again(queued_run):
    ValidationRun.objects.filter(pk=queued_run.pk).update(status="succeeded", finished_at=timezone.now())
    assert validation_runs_recover(resend_after_s=1)["resent"] == 0


def test_a_duplicate_message_for_a_run_a_live_worker_holds_changes_nothing(queued_run):
    now = timezone.now()
    ValidationRun.objects.filter(pk=queued_run.pk).update(status="running", attempts=1, started_at=now, heartbeat_at=now)
    validation_run_execute(run_id=str(queued_run.pk), hostname="second-worker", task_id="duplicate")
    run = ValidationRun.objects.get(pk=queued_run.pk)
    assert (run.status, run.attempts, run.worker_hostname) == ("running", 1, "")
