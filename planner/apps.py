from __future__ import annotations

from django.apps import AppConfig


class PlannerConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "planner"
    verbose_name = "Planner"

    def ready(self) -> None:
        # A catalog row a stored plan used is not deleted (hwcatalog.services.catalog_row_delete).
        from hwcatalog.references import reference_finder_register
        from planner.catalog_references import plans_using_catalog_row

        reference_finder_register(plans_using_catalog_row)
