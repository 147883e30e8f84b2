from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from planner.management.commands._inputs import add_configs_argument, check_doc_block, checked_configs, write_doc_block
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
        add_configs_argument(parser)
        parser.add_argument("--write-doc", type=Path, help="With --markdown: write the tables into this doc, between its line "
                            "'<!-- generated: manage.py simaccuracy CSV --markdown -->' (CSV as given here) and the next '<!-- end generated -->'.")

    def handle(self, *args, csv: Path, as_json: bool, markdown: bool, range_ratio: float | None, write_doc: Path | None,
               configs: Path | None = None, **options):
        if not csv.is_file():
            raise CommandError(f"{csv}: no such file")
        checked_configs(configs)
        if as_json and markdown:
            raise CommandError("--json and --markdown: choose one")
        doc_command = f"manage.py simaccuracy {csv} --markdown"
        if write_doc is not None:
            if not markdown or range_ratio is not None:
                raise CommandError("--write-doc needs --markdown (and the lengths as the file states them, no --range-ratio)")
            check_doc_block(write_doc, command=doc_command)
        try:
            report = simulation_accuracy_report(csv_path=csv, range_ratio=range_ratio, configs_dir=configs)
        except (KeyError, ValueError) as exc:
            raise CommandError(f"{csv}: {exc}") from None
        if write_doc is not None:
            self.stdout.write(write_doc_block(write_doc, command=doc_command, text=markdown_simulation_accuracy(report)))
        elif markdown:
            self.stdout.write(markdown_simulation_accuracy(report))
        else:
            self.stdout.write(json.dumps(json_safe(report), indent=1) if as_json else format_simulation_accuracy(report))
