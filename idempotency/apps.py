from __future__ import annotations

from django.apps import AppConfig


class IdempotencyConfig(AppConfig):
    name = "idempotency"
    verbose_name = "Idempotency keys"
    default_auto_field = "django.db.models.BigAutoField"
