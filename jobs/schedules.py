"""Default periodic tasks, stored in django-celery-beat's tables (editable in the admin).

Created on post_migrate rather than in a data migration, so that they exist again after a
database flush and an admin's edits are kept (get_or_create never overwrites)."""
from __future__ import annotations


def ensure_default_schedules(**kwargs) -> None:
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    every_minute, _ = IntervalSchedule.objects.get_or_create(every=60, period=IntervalSchedule.SECONDS)
    nightly, _ = CrontabSchedule.objects.get_or_create(minute="30", hour="2", day_of_week="*", day_of_month="*", month_of_year="*")
    defaults = [
        ("worker heartbeat", "jobs.heartbeat", {"interval": every_minute}, "Proves a worker reads the broker and writes the database."),
        ("recover validation runs", "jobs.recover_validation_runs", {"interval": every_minute},
         "Re-queues (or fails, with the reason) runs whose worker stopped answering."),
        ("nightly re-validation of pinned plans", "jobs.revalidate_pinned_plans", {"crontab": nightly},
         "A decode trial of the top configuration of every pinned plan, on the cpu queue's device."),
    ]  # fmt: skip
    for name, task, schedule, description in defaults:
        # A minutely task not started within 50 s (its worker was busy with a trial) is dropped,
        # not run late in a pile: the next beat sends a fresh one.
        expiry = {"expire_seconds": 50} if "interval" in schedule else {}
        PeriodicTask.objects.get_or_create(
            name=name, defaults={"task": task, "queue": "cpu", "description": description, **schedule, **expiry}
        )
