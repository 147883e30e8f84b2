"""docs/accuracy.md's generated tables against what their command prints now (`manage.py accuracy FILE --cv --markdown`,
`manage.py simaccuracy FILE --markdown`).

The tests that already run a file's cross-validation (a minute for the silicon file) pass their report here, so the doc
is checked without a second run. A fit converges to within its tolerance, so a figure may differ in its last printed
digit between machines: each number is compared within three units of its last printed digit (or 1%), a count (a
whole number) exactly, the words and the ids in `code` exactly, and the rows of the largest-misses table as a set (their
figures within 1%), so that two misses a rounding apart may trade places."""

from __future__ import annotations

import re
from pathlib import Path

from planner.accuracy_tables import MISSES_HEADER, markdown_report
from planner.doc_blocks import generated_block, generated_marker

DOC = Path(__file__).resolve().parents[2] / "docs" / "accuracy.md"
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?")
CODE = re.compile(r"`[^`]*`")


def _numbers(text: str) -> tuple[str, list[tuple[float, float]]]:
    """The line's shape (its code spans kept, its numbers as #) and each number with the unit of its last printed digit
    (0 for a whole number: a count, compared exactly)."""
    shape, values, at = [], [], 0
    for span in CODE.finditer(text):
        part = text[at : span.start()]
        shape.append(NUMBER.sub("#", part))
        values += [_value(n) for n in NUMBER.findall(part)]
        shape.append(span.group())
        at = span.end()
    shape.append(NUMBER.sub("#", text[at:]))
    values += [_value(n) for n in NUMBER.findall(text[at:])]
    return "".join(shape), values


def _value(printed: str) -> tuple[float, float]:
    plain = printed.replace(",", "")
    if "." not in plain and "e" not in plain:
        return float(plain), 0.0
    decimals = len(plain.split(".")[1]) if "e" not in plain else 0
    return float(plain), 10.0**-decimals


def close_enough(documented: tuple[float, float], generated: tuple[float, float]) -> bool:
    """Within three units of the last printed digit or 1%; a whole number (a count) exactly."""
    (doc, unit), (new, _) = documented, generated
    return doc == new if unit == 0.0 else abs(doc - new) <= max(3 * unit, 0.01 * abs(new))


def _measured_figure(documented: tuple[float, float], generated: tuple[float, float]) -> bool:
    """A value of the largest-misses table (whole from 1,000 up): within 1%."""
    (doc, _), (new, _) = documented, generated
    return abs(doc - new) <= 0.01 * abs(new) or close_enough(documented, generated)


def _misses_rows(lines: list[str]) -> range:
    """The indices of the largest-misses table's rows."""
    if MISSES_HEADER not in lines:
        return range(0)
    start = lines.index(MISSES_HEADER) + 2
    return range(start, next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines)))


def _misses_as_a_set(lines: list[str]) -> list[str]:
    """The lines, the largest-misses table's rows sorted (within a metric, two a rounding step apart may trade places)."""
    rows = _misses_rows(lines)
    return lines[: rows.start] + sorted(lines[rows.start : rows.stop]) + lines[rows.stop :] if rows else lines


def assert_doc_holds(command: str, generated: str) -> None:
    """The doc's block for `command` (as its marker names it) is `generated`, figures within a rounding step."""
    documented = generated_block(DOC.read_text(encoding="utf-8"), command)
    assert documented is not None, f"docs/accuracy.md has no line {generated_marker(command)}"
    regenerate = f"regenerate: {command} --write-doc docs/accuracy.md"
    doc_lines, new_lines = _misses_as_a_set(documented.splitlines()), _misses_as_a_set(generated.strip("\n").splitlines())
    assert len(doc_lines) == len(new_lines), f"the doc's tables have {len(doc_lines)} lines, the command prints {len(new_lines)}; {regenerate}"
    misses = _misses_rows(doc_lines)
    for i, (doc_line, new_line) in enumerate(zip(doc_lines, new_lines)):
        (doc_shape, doc_values), (new_shape, new_values) = _numbers(doc_line), _numbers(new_line)
        assert doc_shape == new_shape, f"{doc_line!r} is now {new_line!r}; {regenerate}"
        same = _measured_figure if i in misses else close_enough
        assert all(same(d, g) for d, g in zip(doc_values, new_values)), f"{doc_line!r} is now {new_line!r}; {regenerate}"


def assert_doc_holds_the_tables(csv_path: str, report: dict) -> None:
    """The doc's block for `manage.py accuracy csv_path --cv --markdown` is the report's tables."""
    assert_doc_holds(f"manage.py accuracy {csv_path} --cv --markdown", markdown_report(report))
