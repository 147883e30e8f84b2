"""docs/accuracy.md's generated tables against what `manage.py accuracy FILE --cv --markdown` prints now.

The tests that already run a file's cross-validation (a minute for the silicon file) pass their report here, so
the doc is checked without a second run. Figures may move by a rounding step between machines (the fits
converge to within their tolerance), so numbers are compared within half a point or 1%, and everything else
(the groups, their order, the ids of the largest misses) exactly."""

from __future__ import annotations

import re
from pathlib import Path

from planner.accuracy_tables import generated_block, generated_marker, markdown_report

DOC = Path(__file__).resolve().parents[2] / "docs" / "accuracy.md"
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?")


def _numbers(text: str) -> tuple[str, list[float]]:
    return NUMBER.sub("#", text), [float(n.replace(",", "")) for n in NUMBER.findall(text)]


def close_enough(documented: float, generated: float) -> bool:
    return abs(documented - generated) <= max(0.5, 0.01 * abs(generated))


def assert_doc_holds_the_tables(csv_path: str, report: dict) -> None:
    """The doc's block for `csv_path` (as its marker names it) is the report's tables, figures within a rounding step."""
    documented = generated_block(DOC.read_text(), csv_path)
    assert documented is not None, f"docs/accuracy.md has no line {generated_marker(csv_path)}"
    regenerate = f"regenerate: manage.py accuracy {csv_path} --cv --markdown --write-doc docs/accuracy.md"
    doc_lines, new_lines = documented.splitlines(), markdown_report(report).splitlines()
    assert len(doc_lines) == len(new_lines), f"the doc's tables have {len(doc_lines)} lines, the command prints {len(new_lines)}; {regenerate}"
    for doc_line, new_line in zip(doc_lines, new_lines):
        (doc_shape, doc_values), (new_shape, new_values) = _numbers(doc_line), _numbers(new_line)
        assert doc_shape == new_shape, f"{doc_line!r} is now {new_line!r}; {regenerate}"
        assert all(close_enough(d, g) for d, g in zip(doc_values, new_values)), f"{doc_line!r} is now {new_line!r}; {regenerate}"
