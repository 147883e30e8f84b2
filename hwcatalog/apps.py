from __future__ import annotations

from django.apps import AppConfig


class HwcatalogConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "hwcatalog"
    verbose_name = "Hardware and model catalog"

    def ready(self) -> None:
        from hwcatalog.cache import connect_signals

        connect_signals()
