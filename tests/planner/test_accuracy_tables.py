"""`manage.py accuracy FILE --cv --markdown`: docs/accuracy.md's tables, each miss with its direction."""

from __future__ import annotations

import math

import pytest
from django.core.management import CommandError, call_command

from planner.accuracy_tables import concurrency_band, generated_block, generated_marker, group_stats, markdown_report, ratio_stats, splice_generated
from tests.planner.accuracy_doc import DOC, close_enough


def _row(id_, metric, measured, predicted, **extra):
    return {"id": id_, "metric": metric, "measured": measured, "predicted": predicted,
            "ape": abs(predicted - measured) / measured * 100.0, "engine": "vLLM", "chip": "nvidia-h100-sxm", **extra}  # fmt: skip


def test_a_group_says_how_far_and_which_way_it_misses():
    rows = [_row("a", "tpot_s", 0.010, 0.012), _row("b", "tpot_s", 0.010, 0.009), _row("c", "tpot_s", 0.010, 0.020)]
    stats = ratio_stats(rows)
    # APEs 20, 10, 100: the median is 20%; predicted / measured 1.2, 0.9, 2.0: the median is 1.2 (too high).
    assert stats["mdape"] == pytest.approx(20.0) and stats["ratio"] == pytest.approx(1.2) and stats["count"] == 3
    assert math.isnan(ratio_stats([])["mdape"]) and ratio_stats([])["count"] == 0


def test_concurrency_bands_are_listed_from_the_lowest_not_alphabetically():
    rows = [_row(str(c), "ttft_s", 1.0, 1.1, concurrency=c) for c in (512, 8, 2, 64)]
    assert list(group_stats(rows, concurrency_band)) == ["1-4", "5-32", "33-256", "257 and more"]
    assert list(group_stats(rows, "id")) == ["2", "512", "64", "8"]  # a plain key keeps its own order


def test_the_tables_lead_with_the_held_out_figures_and_list_the_largest_misses():
    rows = [_row("small", "ttft_s", 0.1, 0.11, family="Llama", mode="agg", weight_dtype="fp8", concurrency=4),
            _row("worst", "ttft_s", 0.1, 0.5, family="Llama", mode="agg", weight_dtype="fp8", concurrency=64)]  # fmt: skip
    summary = {"mdape": 205.0, "count": 2, "total": 2, "by_metric": {"ttft_s": {"mdape": 205.0, "count": 2}}}
    cv = {g: {"mdape": 300.0, "by_metric": {"ttft_s": {"mdape": 300.0, "count": 2}}, "by_group": group_stats(rows, "engine")}
          for g in ("engine", "chip", "model family")}  # fmt: skip
    text = markdown_report({"rows": rows, "unpredicted": [{"id": "x", "metric": "ttft_s", "reason": "unknown chip"}],
                            "summary": summary, "spec_defaults": summary, "cv": cv})  # fmt: skip
    lines = text.splitlines()
    assert lines[2].startswith("| MdAPE | leave one engine out | leave one chip out | leave one model family out | in-sample")
    assert lines[4] == "| TTFT | 300.0% | 300.0% | 300.0% | 205.0% | 205.0% |"
    assert "| engine held out | TTFT |" in text and "| 33-256 |" in text
    # The worst value first, in milliseconds, with its direction.
    misses = [line for line in lines if line.startswith("| TTFT | `")]
    assert misses[0] == "| TTFT | `worst` | vLLM | nvidia-h100-sxm | 100.0 ms | 500.0 ms | 5.00 |"
    assert "- 1 x unknown chip" in text


def test_a_doc_block_is_found_by_its_command_and_rewritten_in_place():
    doc = f"# Title\n\n{generated_marker('a.csv')}\n\nold\n\n<!-- end generated -->\n\nafter\n"
    assert generated_block(doc, "a.csv") == "old" and generated_block(doc, "b.csv") is None
    new = splice_generated(doc, "a.csv", "| new |")
    assert generated_block(new, "a.csv") == "| new |" and new.startswith("# Title") and new.endswith("after\n")
    with pytest.raises(ValueError, match="no line"):
        splice_generated(doc, "b.csv", "x")
    with pytest.raises(ValueError, match="not closed"):
        generated_block(f"{generated_marker('a.csv')}\nno end", "a.csv")


def test_figures_may_move_by_a_rounding_step_and_no_more():
    assert close_enough(19.8, 19.9) and close_enough(5368, 5370) and not close_enough(19.8, 20.4) and not close_enough(100.0, 102.0)


def test_the_command_writes_the_tables_into_a_doc(catalog, tmp_path, capsys):
    doc = tmp_path / "accuracy.md"
    csv = "tests/fixtures/measured_dev.csv"
    doc.write_text(f"intro\n\n{generated_marker(csv)}\n<!-- end generated -->\n")
    call_command("accuracy", csv, "--cv", "--markdown", "--write-doc", str(doc))
    assert "written" in capsys.readouterr().out
    written = generated_block(doc.read_text(), csv)
    assert written.startswith("Cross-validated first") and "| chip held out |" in written and doc.read_text().startswith("intro")
    # The project's doc holds the same tables (tests/planner/test_silicon_accuracy.py checks them against a fresh run).
    assert generated_block(DOC.read_text(), csv) is not None


def test_bad_combinations_are_refused_before_any_work(catalog, tmp_path):
    csv = "tests/fixtures/measured_dev.csv"
    with pytest.raises(CommandError, match="choose one"):
        call_command("accuracy", csv, "--json", "--markdown")
    with pytest.raises(CommandError, match="needs --markdown and --cv"):
        call_command("accuracy", csv, "--markdown", "--write-doc", str(DOC))
    with pytest.raises(CommandError, match="no such file"):
        call_command("accuracy", csv, "--cv", "--markdown", "--write-doc", str(tmp_path / "missing.md"))
    no_block = tmp_path / "plain.md"
    no_block.write_text("nothing generated here\n")
    with pytest.raises(CommandError, match="no line"):
        call_command("accuracy", csv, "--cv", "--markdown", "--write-doc", str(no_block))
    assert no_block.read_text() == "nothing generated here\n"
