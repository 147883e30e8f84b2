"""Default periodic tasks, stored in django-celery-beat's tables (editable in the admin).

Created on post_migrate rather than in a data migration, so that they exist again after a
database flush and an admin's edits are kept (get_or_create never overwrites)."""
from __future__ import annotations


def ensure_default_schedules(**kwargs) -> None:
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    every_minute, _ = IntervalSchedule.objects.get_or_create(every=60, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.get_or_create(
        name="worker heartbeat",
        defaults={
            "task": "jobs.heartbeat",
            "interval": every_minute,
            "queue": "cpu",
            "description": "Proves a worker reads the broker and writes the database.",
        },
    )
