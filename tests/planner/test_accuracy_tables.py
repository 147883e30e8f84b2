"""`manage.py accuracy FILE --cv --markdown`: docs/accuracy.md's tables, each miss with its direction."""

from __future__ import annotations

import math
import time

import pytest
from django.core.management import CommandError, call_command

from planner.accuracy_tables import concurrency_band, markdown_report, replica_band
from planner.engine import group_stats, ratio_stats
from planner.doc_blocks import generated_block, generated_marker, splice_generated
from tests.planner.accuracy_doc import DOC, _numbers, close_enough


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
    assert list(group_stats(rows, "id")) == ["2", "512", "64", "8"]  # a plain key's groups in the order of their names


def test_a_colocated_row_is_banded_by_its_clients_per_attention_replica_and_a_disaggregated_row_is_left_out():
    rows = [_row("agg-tp", "tpot_s", 0.02, 0.02, mode="agg", concurrency=512, attention_data_parallel=1),
            _row("agg-adp", "tpot_s", 0.02, 0.02, mode="agg", concurrency=512, attention_data_parallel=8),
            _row("small", "tpot_s", 0.02, 0.02, mode="agg", concurrency=16, attention_data_parallel=None),
            _row("between", "tpot_s", 0.02, 0.02, mode="agg", concurrency=33, attention_data_parallel=2),
            _row("disagg", "tpot_s", 0.02, 0.02, mode="disagg", concurrency=4096, attention_data_parallel=1)]  # fmt: skip
    # 512 clients on one replica; 512 over eight attention replicas is 64 a replica, the 16-64 band's upper end; 16.5 is
    # past 16.
    assert [replica_band(r) for r in rows] == [(4, "over 256"), (1, "16-64"), (0, "up to 16"), (1, "16-64"), None]
    assert {group: stats["tpot_s"]["count"] for group, stats in group_stats(rows, replica_band).items()} == {"up to 16": 1, "16-64": 2, "over 256": 1}


def test_the_tables_lead_with_the_held_out_figures_and_list_the_largest_misses():
    rows = [_row("small", "ttft_s", 0.1, 0.11, family="Llama", mode="agg", weight_dtype="fp8", concurrency=4),
            _row("worst", "ttft_s", 0.1, 0.5, family="Llama", mode="agg", weight_dtype="fp8", concurrency=64)]  # fmt: skip
    summary = {"mdape": 205.0, "count": 2, "total": 2, "by_metric": {"ttft_s": {"mdape": 205.0, "count": 2}}}
    cv = {g: {"mdape": 300.0, "by_metric": {"ttft_s": {"mdape": 300.0, "count": 2}}, "by_group": group_stats(rows, "engine")}
          for g in ("engine", "chip", "model family")}  # fmt: skip
    report = {"rows": rows, "unpredicted": [{"id": "x", "metric": "ttft_s", "reason": "unknown chip"}], "summary": summary,
              "spec_defaults": summary, "cv": cv, "fit": {}, "replicates": {"groups": 0}}  # fmt: skip
    text = markdown_report(report)
    lines = text.splitlines()
    assert lines[0] == "Cross-validated first (MdAPE):"
    assert lines[2].startswith("| MdAPE | leave one engine out | leave one chip out | leave one model family out | in-sample, fitted")
    assert lines[4] == "| TTFT | 300.0% | 300.0% | 300.0% | 205.0% | 205.0% |"
    assert "| engine held out | TTFT |" in text and "| 33-256 |" in text and "| serving mode |" in text
    # The worst value first, in milliseconds, with its direction.
    misses = [line for line in lines if line.startswith("| TTFT | `")]
    assert misses[0] == "| TTFT | `worst` | vLLM | nvidia-h100-sxm | 100.0 ms | 500.0 ms | 5.00 |"
    assert "- 1 x unknown chip" in text
    # Without cross-validation a silicon report says so, and keeps its own slices.
    plain = markdown_report({k: v for k, v in report.items() if k not in ("cv", "fit", "spec_defaults")})
    assert plain.splitlines()[:5] == ["MdAPE:", "", "| MdAPE | as predicted |", "|---|---|", "| TTFT | 205.0% |"]
    assert "leave one" not in plain and "| chip family |" not in plain and "| model family |" in plain and "As predicted, by engine" in plain


def test_missing_figures_print_as_such():
    rows = [_row("a", "tpot_s", 0.01, 0.02)]
    summary = {"mdape": float("nan"), "count": 1, "total": 1, "by_metric": {"tpot_s": {"mdape": None, "count": 1}}}
    report = {"rows": rows, "unpredicted": [], "summary": summary, "replicates": {"groups": 0},
              "below_roofline": {"tpot_s": {"count": 1, "by_mode_engine": {"agg vLLM": 1}, "within": {"mdape": None, "count": 0}}}}  # fmt: skip
    text = markdown_report(report)
    assert "| TPOT | n/a |" in text and "without them TPOT MdAPE is n/a in-sample." in text


def test_a_doc_block_is_found_by_its_command_and_rewritten_in_place():
    a, b = "manage.py accuracy a.csv --cv --markdown", "manage.py simaccuracy a.csv --markdown"
    doc = f"# Title\n\n{generated_marker(a)}\n\nold\n\n<!-- end generated -->\n\n{generated_marker(b)}\nother\n<!-- end generated -->\nafter\n"
    assert generated_block(doc, a) == "old" and generated_block(doc, b) == "other" and generated_block(doc, "manage.py x") is None
    new = splice_generated(doc, command=a, text="| new |")
    assert generated_block(new, a) == "| new |" and generated_block(new, b) == "other" and new.startswith("# Title") and new.endswith("after\n")
    with pytest.raises(ValueError, match="no line"):
        splice_generated(doc, command="manage.py x", text="x")
    # A marker counts as a whole line only; a block closes before the next opens; a command has one block.
    assert generated_block(f"see {generated_marker(a)} in prose\n", a) is None
    with pytest.raises(ValueError, match="not closed"):
        generated_block(f"{generated_marker(a)}\nno end\n{generated_marker(b)}\nx\n<!-- end generated -->\n", a)
    with pytest.raises(ValueError, match="opens 2 blocks"):
        generated_block(f"{generated_marker(a)}\n<!-- end generated -->\n{generated_marker(a)}\n<!-- end generated -->\n", a)
    # A doc with CRLF line endings keeps them.
    crlf = doc.replace("\n", "\r\n")
    assert generated_block(crlf, a) == "old" and splice_generated(crlf, command=a, text="| new |") == new.replace("\n", "\r\n")


def test_figures_may_move_by_a_rounding_step_and_no_more():
    def same(doc, new):
        return all(close_enough(d, g) for d, g in zip(_numbers(doc)[1], _numbers(new)[1]))

    assert same("19.8%", "19.9%") and same("0.87x", "0.89x") and same("5,368", "5,368")
    assert not same("19.8%", "20.4%") and not same("0.87x", "0.97x") and not same("0.934", "0.500")
    assert not same("8 of the 2,684", "11 of the 2,684") and not same("5,368", "5,370")  # counts exactly
    # Ids are words: a digit in one is not a figure.
    assert _numbers("| `a_ep1_0_520` | 1.0 |")[0] != _numbers("| `a_ep1_0_525` | 1.0 |")[0]


def test_the_command_writes_the_tables_into_a_doc(catalog, tmp_path, capsys):
    doc = tmp_path / "accuracy.md"
    csv = "tests/fixtures/measured_dev.csv"
    command = f"manage.py accuracy {csv} --cv --markdown"
    doc.write_text(f"intro\n\n{generated_marker(command)}\n<!-- end generated -->\n")
    call_command("accuracy", csv, "--cv", "--markdown", "--write-doc", str(doc))
    assert "written" in capsys.readouterr().out  # the line names the command whose tables it wrote
    written = generated_block(doc.read_text(), command)
    assert written.startswith("Cross-validated first") and "| chip held out |" in written and doc.read_text().startswith("intro")
    # The project's doc holds the same tables (tests/planner/test_silicon_accuracy.py checks them against a fresh run).
    assert generated_block(DOC.read_text(), command) is not None


def test_bad_combinations_are_refused_before_any_work(catalog, tmp_path):
    csv = "tests/fixtures/measured_dev.csv"
    with pytest.raises(CommandError, match="choose one"):
        call_command("accuracy", csv, "--json", "--markdown")
    doc = tmp_path / "accuracy.md"
    doc.write_text(DOC.read_text(encoding="utf-8"), encoding="utf-8")
    for extra in ([], ["--spec-defaults"], ["--fit"], ["--bands-out", str(tmp_path / "bands.json")]):
        with pytest.raises(CommandError, match="--markdown and --cv only"):
            call_command("accuracy", csv, "--markdown", *(["--cv"] if extra else []), *extra, "--write-doc", str(doc))
    assert doc.read_text(encoding="utf-8") == DOC.read_text(encoding="utf-8")
    with pytest.raises(CommandError, match="no such file"):
        call_command("accuracy", csv, "--cv", "--markdown", "--write-doc", str(tmp_path / "missing.md"))
    no_block = tmp_path / "plain.md"
    no_block.write_text("nothing generated here\n")
    started = time.monotonic()
    with pytest.raises(CommandError, match="no line"):
        call_command("accuracy", "tests/fixtures/silicon_dev.csv", "--cv", "--markdown", "--write-doc", str(no_block))
    assert time.monotonic() - started < 20  # refused before the run, which takes about a minute
    assert no_block.read_text() == "nothing generated here\n" and not (tmp_path / "bands.json").exists()
