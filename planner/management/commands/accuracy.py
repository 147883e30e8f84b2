from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from planner.accuracy import accuracy_report, format_report, write_error_bands
from planner.accuracy_tables import markdown_report
from planner.management.commands._inputs import add_configs_argument, check_doc_block, checked_configs, write_doc_block
from planner.services import json_safe


class Command(BaseCommand):
    help = "Predict every row of a measurements CSV and print predicted vs measured with MdAPE and MAPE."

    def add_arguments(self, parser):
        parser.add_argument("csv", type=Path)
        parser.add_argument("--json", action="store_true", dest="as_json")
        parser.add_argument("--markdown", action="store_true", help="docs/accuracy.md's tables for this file (with --cv: held out, "
                            "in-sample by engine, chip and the rest, the largest misses).")
        parser.add_argument("--write-doc", type=Path, help="With --markdown: write the tables into this doc, between its line "
                            "'<!-- generated: manage.py accuracy CSV --cv --markdown -->' (CSV as given here) and the next "
                            "'<!-- end generated -->'.")
        parser.add_argument("--spec-defaults", action="store_true", help="Ignore stored calibrations, serving-engine and chip-family profiles "
                            "(a silicon file is then predicted with nothing fitted; a row of this project's format that names its "
                            "serving engine still takes what that engine's fitted profile brings to its chip, as an API request naming "
                            "the engine does: its host costs, or its whole profile on an NVIDIA GPU).")
        parser.add_argument("--fit", action="store_true", help="Fit profiles to this file (serving-engine profiles to a silicon file, chip-family "
                            "profiles to this project's format) and predict with them (in-sample).")
        parser.add_argument("--cv", action="store_true", help="Also hold out each group in turn (silicon: engine, chip, model family; "
                            "this project's format: chip, compute architecture, engine) (cross-validated).")
        add_configs_argument(parser)
        parser.add_argument("--profiles-out", type=Path, help="Fit the profiles to this file and write them to this JSON file.")
        parser.add_argument("--bands-out", type=Path, help="Write the 80%% error bands (spec defaults; fitted profiles, cross-validated) to this JSON file.")
        parser.add_argument("--bands-other", type=Path, help="With --bands-out: also the bands of the chips the silicon file does not measure, from "
                            "this measurements file (this project's format) predicted with chip-family profiles, each compute architecture held out.")

    def handle(self, *args, csv: Path, as_json: bool, markdown: bool, spec_defaults: bool, fit: bool, cv: bool, profiles_out, bands_out, bands_other, write_doc,
               configs=None, **options):
        for path in (csv, bands_other):
            if path is not None and not path.is_file():
                raise CommandError(f"{path}: no such file")
        if checked_configs(configs) is not None and bands_out:
            raise CommandError("--configs and --bands-out: the bands are built from the catalog's models only")
        if bands_other and not bands_out:
            raise CommandError("--bands-other needs --bands-out")
        if as_json and markdown:
            raise CommandError("--json and --markdown: choose one")
        doc_command = f"manage.py accuracy {csv} --cv --markdown"
        if write_doc is not None:
            if not (markdown and cv) or spec_defaults or fit or profiles_out or bands_out:
                raise CommandError("--write-doc writes the doc's tables: give it with --markdown and --cv only (no --spec-defaults, --fit, "
                                   "--profiles-out or --bands-out)")  # fmt: skip
            check_doc_block(write_doc, command=doc_command)
        if bands_out:
            count = write_error_bands(csv_path=csv, out=bands_out, other_chips=bands_other)
            self.stdout.write(f"{count} error bands written to {bands_out}")
            return
        try:
            report = accuracy_report(csv_path=csv, use_calibration=not spec_defaults, fit=fit, cv=cv, profiles_out=profiles_out,
                                     configs_dir=configs)  # fmt: skip
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps(json_safe(report), indent=1))
        elif write_doc is not None:
            self.stdout.write(write_doc_block(write_doc, command=doc_command, text=markdown_report(report)))
        elif markdown:
            self.stdout.write(markdown_report(report))
        else:
            self.stdout.write(format_report(report))
