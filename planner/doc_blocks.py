"""Blocks of a doc that a command writes: the lines between a line `<!-- generated: COMMAND -->` and the next line
`<!-- end generated -->` are what COMMAND prints (docs/accuracy.md's tables: `manage.py accuracy FILE --cv --markdown`,
`manage.py simaccuracy FILE --markdown`). The commands' `--write-doc` writes them; tests compare them with a fresh run.
A marker counts only as a whole line; a block must close before the next one opens, and a command has one block."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

END_MARKER = "<!-- end generated -->"
OPENING = "<!-- generated: "


def generated_marker(command: str) -> str:
    """The line that opens the block a command writes."""
    return f"{OPENING}{command} -->"


def _span(lines: list[str], command: str) -> tuple[int, int] | None:
    """(index of the opening line, index of its end line) of the command's block in the doc's lines; None without one."""
    marker = generated_marker(command)
    opened = [i for i, line in enumerate(lines) if line.rstrip("\r") == marker]
    if not opened:
        return None
    if len(opened) > 1:
        raise ValueError(f"{marker} opens {len(opened)} blocks; a command writes one")
    start = opened[0]
    for i in range(start + 1, len(lines)):
        line = lines[i].rstrip("\r")
        if line == END_MARKER:
            return start, i
        if line.startswith(OPENING):
            break
    raise ValueError(f"{marker} is not closed by {END_MARKER} before the next block or the end")


def generated_block(doc: str, command: str) -> str | None:
    """The text between the command's marker line and its end line, blank lines at either end left out (None where the
    doc has no such block)."""
    lines = doc.replace("\r\n", "\n").split("\n")
    span = _span(lines, command)
    return None if span is None else "\n".join(lines[span[0] + 1 : span[1]]).strip("\n")


def splice_generated(doc: str, *, command: str, text: str) -> str:
    """The doc with the command's block replaced by `text`, the doc's line endings kept (ValueError where it has no
    such block, or an ill-formed one)."""
    newline = "\r\n" if "\r\n" in doc else "\n"
    lines = doc.replace("\r\n", "\n").split("\n")
    span = _span(lines, command)
    if span is None:
        raise ValueError(f"no line {generated_marker(command)!r} to write after")
    start, end = span
    spliced = lines[: start + 1] + ["", *text.strip("\n").split("\n"), ""] + lines[end:]
    return newline.join(spliced)


def check_doc(path: Path, *, command: str) -> None:
    """That `path` has a well-formed block for the command (ValueError otherwise), before any work is spent on it."""
    if generated_block(path.read_text(encoding="utf-8"), command) is None:
        raise ValueError(f"no line {generated_marker(command)!r} to write after")


def write_doc(path: Path, *, command: str, text: str) -> None:
    """Write the command's block into the doc at `path`: the whole new doc to a file beside it, then moved over it, so a
    failure leaves the doc as it was."""
    with path.open(encoding="utf-8", newline="") as handle:
        spliced = splice_generated(handle.read(), command=command, text=text)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(spliced)
        os.chmod(temporary, path.stat().st_mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
