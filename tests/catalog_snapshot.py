"""The loaded catalog's rows, read once and written back in bulk for each test that needs them."""
from __future__ import annotations

import copy
from dataclasses import dataclass

from django.core.management.color import no_style
from django.db import connection, transaction

from hwcatalog.cache import catalog_version_bump
from hwcatalog.models import Chip, ModelArch, Offering, ServingEngine
from hwcatalog.services import LoadReport, catalog_load

# Parents before the rows that point at them; each with its django-simple-history table.
CATALOG_MODELS = (Chip, ModelArch, ServingEngine, Offering)


def snapshot_models() -> list:
    return [table for model in CATALOG_MODELS for table in (model, model.history.model)]


@dataclass(frozen=True, kw_only=True)
class CatalogSnapshot:
    report: LoadReport
    rows: dict[type, list[dict]]

    @classmethod
    def taken(cls) -> CatalogSnapshot:
        """Load the catalog into the (empty) test database, read every row, and roll the load back."""
        with transaction.atomic():
            report = catalog_load()
            rows = {model: list(model.objects.order_by("pk").values()) for model in snapshot_models()}
            transaction.set_rollback(True)
        return cls(report=report, rows=rows)

    def restore(self) -> LoadReport:
        """Write the rows back with their keys, move the key sequences past them (PostgreSQL's do not move
        on an explicit key) and change the catalog's version token, as the load's saves do."""
        for model in snapshot_models():
            model.objects.bulk_create([model(**values) for values in copy.deepcopy(self.rows[model])])
        with connection.cursor() as cursor:
            for statement in connection.ops.sequence_reset_sql(no_style(), snapshot_models()):
                cursor.execute(statement)
        catalog_version_bump()
        return copy.deepcopy(self.report)
