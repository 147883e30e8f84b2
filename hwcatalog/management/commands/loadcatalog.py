from __future__ import annotations

from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from hwcatalog.services import DATA_DIR, catalog_load


class Command(BaseCommand):
    help = "Load the sourced starting catalog (chips, models, offerings) from data files; idempotent upsert by slug."

    def add_arguments(self, parser):
        parser.add_argument("--data-dir", type=Path, default=DATA_DIR)

    def handle(self, *args, data_dir: Path, verbosity: int, **options):
        try:
            report = catalog_load(data_dir=data_dir)
        except ValidationError as exc:
            raise CommandError(f"Catalog not loaded (nothing changed): {exc}") from None
        if verbosity > 1:
            for label in report.created:
                self.stdout.write(f"created {label}")
            for label in report.updated:
                self.stdout.write(f"updated {label}")
        self.stdout.write(self.style.SUCCESS(report.summary()))
