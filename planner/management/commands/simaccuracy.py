from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from planner.services import json_safe
from planner.simulation_accuracy import format_simulation_accuracy, markdown_simulation_accuracy, simulation_accuracy_report


class Command(BaseCommand):
    help = "Simulate every row of a CSV of published serving-latency percentiles and print simulated vs published, with MdAPE per percentile."

    def add_arguments(self, parser):
        parser.add_argument("csv", type=Path)
        parser.add_argument("--json", action="store_true", dest="as_json")
        parser.add_argument("--markdown", action="store_true", help="docs/accuracy.md's tables (every published percentile, the rows not simulated).")
        parser.add_argument("--range-ratio", type=float, default=None, dest="range_ratio",
                            help="A silicon file only: draw each length uniformly in [R x L, L] (InferenceX's --random-range-ratio) "
                                 "instead of the fixed lengths its README states.")

    def handle(self, *args, csv: Path, as_json: bool, markdown: bool, range_ratio: float | None, **options):
        if not csv.is_file():
            raise CommandError(f"{csv}: no such file")
        try:
            report = simulation_accuracy_report(csv_path=csv, range_ratio=range_ratio)
        except (KeyError, ValueError) as exc:
            raise CommandError(f"{csv}: {exc}") from None
        if markdown:
            self.stdout.write(markdown_simulation_accuracy(report))
        else:
            self.stdout.write(json.dumps(json_safe(report), indent=1) if as_json else format_simulation_accuracy(report))
