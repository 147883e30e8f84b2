from __future__ import annotations

from django_celery_beat.models import PeriodicTask

from jobs.models import ValidationRun
from jobs.services import pinned_plans_revalidate


def test_the_nightly_schedule_and_the_recovery_sweep_are_stored_in_the_database(db):
    tasks = {t.name: t for t in PeriodicTask.objects.all()}
    assert tasks["nightly re-validation of pinned plans"].crontab.hour == "2"
    assert tasks["recover validation runs"].interval.every == 20  # VALIDATION_SWEEP_EVERY_S: a lost message is re-sent within a minute


def test_pinned_plans_get_one_decode_run_of_their_top_configuration(small_plan):
    assert pinned_plans_revalidate(period="day-0")["queued"] == 0  # not pinned
    small_plan.pinned = True
    small_plan.save(update_fields=["pinned"])
    assert pinned_plans_revalidate(period="day-1") == {"queued": 1, "skipped": 0, "already_claimed": 0}
    run = ValidationRun.objects.get()
    assert run.plan == small_plan and run.rank == 1 and run.trial == "decode"
    # the run has not finished yet: the next period does not pile another one on
    assert pinned_plans_revalidate(period="day-2") == {"queued": 0, "skipped": 1, "already_claimed": 0}


def test_a_second_beat_firing_in_the_same_period_runs_nothing(small_plan):
    small_plan.pinned = True
    small_plan.save(update_fields=["pinned"])
    first = pinned_plans_revalidate(period="2026-12-01", claimed_by="beat-a")
    second = pinned_plans_revalidate(period="2026-12-01", claimed_by="beat-b")
    assert first["queued"] == 1 and second == {"queued": 0, "skipped": 0, "already_claimed": 1}
    assert ValidationRun.objects.count() == 1
