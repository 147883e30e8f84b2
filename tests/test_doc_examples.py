"""The README's and docs/api.md's examples are what the live code answers against the catalog (issue 14):
`manage.py docexamples` recomputes every block between its markers and fails when a doc differs."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from planner.management.commands import docexamples
from planner.models import Calibration


def test_the_documented_examples_match_what_the_code_answers(catalog, capsys):
    try:
        call_command("docexamples")
    except CommandError as exc:
        diff = capsys.readouterr().out
        pytest.fail(f"{exc}\n{diff[-6000:]}")  # the message names the command that regenerates them


def test_the_estimate_example_shows_the_cost_fields_of_the_answer_at_spec_defaults_whatever_is_calibrated(catalog):
    e = docexamples.run_estimate(docexamples.README_ESTIMATE)
    block = docexamples.readme_estimate()
    for key in ("usd_per_chip_hour", "usd_per_million_output_tokens", "ownership", "billed_chips", "usd_per_hour", "usd_per_month"):
        assert (f'"{key}"' in block) == (key in e["cost"])
    Calibration.objects.create(chip_slug="nvidia-h200-sxm", weight_dtype="fp8", version=1, compute_fraction=0.1, bandwidth_fraction=0.1,
                               step_overhead_s=0.01, link_bandwidth_fraction=0.5, run_count=1)  # fmt: skip
    with docexamples.spec_defaults():
        assert docexamples.readme_estimate() == block
    assert Calibration.objects.get(chip_slug="nvidia-h200-sxm").active  # set aside only inside, then rolled back


def test_a_doc_that_differs_fails_with_the_command_that_regenerates_it_and_is_not_touched(db, monkeypatch):
    readme = (docexamples.Path(docexamples.settings.BASE_DIR) / "README.md").read_text()
    stale = tuple(docexamples.Example(ex.name, ex.doc, lambda: "stale\n") for ex in docexamples.EXAMPLES)
    monkeypatch.setattr(docexamples, "EXAMPLES", stale)
    with pytest.raises(CommandError, match=r"README.md, docs/api.md, docs/fleet.md: .* manage.py docexamples --write"):
        call_command("docexamples")
    assert (docexamples.Path(docexamples.settings.BASE_DIR) / "README.md").read_text() == readme
