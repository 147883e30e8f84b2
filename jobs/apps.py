from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class JobsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "jobs"
    verbose_name = "Validation jobs"

    def ready(self) -> None:
        from jobs.schedules import ensure_default_schedules

        post_migrate.connect(ensure_default_schedules, sender=self)
