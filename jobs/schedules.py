"""Default periodic tasks, stored in django-celery-beat's tables (editable in the admin).

Created on post_migrate rather than in a data migration, so that they exist again after a
database flush and an admin's edits are kept (get_or_create never overwrites)."""
from __future__ import annotations


OLD_SWEEP_EVERY_S = 60  # the recovery sweep's interval before it became VALIDATION_SWEEP_EVERY_S


def ensure_default_schedules(**kwargs) -> None:
    from django.conf import settings
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    every_minute, _ = IntervalSchedule.objects.get_or_create(every=60, period=IntervalSchedule.SECONDS)
    sweep_every_s = settings.VALIDATION_SWEEP_EVERY_S
    sweep_interval, _ = IntervalSchedule.objects.get_or_create(every=sweep_every_s, period=IntervalSchedule.SECONDS)
    nightly, _ = CrontabSchedule.objects.get_or_create(minute="30", hour="2", day_of_week="*", day_of_month="*", month_of_year="*")
    defaults = [
        ("worker heartbeat", "jobs.heartbeat", {"interval": every_minute}, "Proves a worker reads the broker and writes the database."),
        ("recover validation runs", "jobs.recover_validation_runs", {"interval": sweep_interval},
         "Re-queues (or fails, with the reason) runs whose worker stopped answering; re-sends lost messages."),
        ("nightly re-validation of pinned plans", "jobs.revalidate_pinned_plans", {"crontab": nightly},
         "A decode trial of the top configuration of every pinned plan, on the cpu queue's device."),
    ]  # fmt: skip
    for name, task, schedule, description in defaults:
        # A minutely task not started within 50 s (its worker was busy with a trial) is dropped,
        # not run late in a pile: the next beat sends a fresh one.
        expiry = {"expire_seconds": max(int(schedule["interval"].every * 5 / 6), 1)} if "interval" in schedule else {}
        PeriodicTask.objects.get_or_create(
            name=name, defaults={"task": task, "queue": "cpu", "description": description, **schedule, **expiry}
        )
    # The sweep's old default (every 60 s) is ours, not an admin's choice: move it to the new one,
    # so that a lost message is re-sent within a minute on sites made before the change too.
    PeriodicTask.objects.filter(
        task="jobs.recover_validation_runs", interval__every=OLD_SWEEP_EVERY_S, interval__period=IntervalSchedule.SECONDS
    ).exclude(interval=sweep_interval).update(interval=sweep_interval, expire_seconds=max(int(sweep_every_s * 5 / 6), 1))
