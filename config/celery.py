from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("hwplanner")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _register_steps(app: Celery) -> None:
    from jobs.worker_steps import QueueHeartbeat  # celery only: no Django model is imported here

    app.steps["worker"].add(QueueHeartbeat)


_register_steps(app)
