"""Uploaded request traces (CSV or JSONL of arrival_s, prompt_tokens, output_tokens) -> columns.

A bad value is a TraceError naming its line (1-based, the CSV header being line 1) and column, so
the API answers a 400 a person can act on: "line 7, column prompt_tokens: must be a whole number >= 1,
got 'abc'". Other columns or keys (a request id, a timestamp) are allowed and ignored; the result
says which. Nothing here touches Django or the engine.
"""
from __future__ import annotations

import csv
import io
import json
import math
from collections import Counter
from dataclasses import dataclass

TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
TRACE_FORMATS = ("csv", "jsonl")
MAX_TOKENS = 1e9  # per request and column; a model's context is checked after reading
# Arrivals up to ten years in: past it a trace's duration and every rate over it stop meaning anything (1e308 s divides
# the served tokens into denormals).
MAX_ARRIVAL_S = 315_576_000.0
# Columns that are not the trace's own are named in the results' notes, at most this many.
MAX_NAMED_IGNORED = 20


class TraceError(ValueError):
    def __init__(self, message: str, *, line: int | None = None, column: str | None = None) -> None:
        where = ", ".join(part for part in (f"line {line}" if line else "", f"column {column}" if column else "") if part)
        super().__init__(f"{where}: {message}" if where else message)
        self.line, self.column = line, column


@dataclass(frozen=True, kw_only=True)
class ParsedTrace:
    arrival_s: list[float]
    prompt_tokens: list[int]
    output_tokens: list[int]
    lines: list[int]  # the line each row came from, for later errors (the model's context)
    format: str
    ignored_columns: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.arrival_s)

    def columns(self) -> dict[str, list]:
        return {"arrival_s": self.arrival_s, "prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens, "lines": self.lines}


def detect_format(text: str, filename: str | None = None) -> str:
    """jsonl for a .jsonl/.ndjson name or text whose first non-blank character is `{`; else csv."""
    name = (filename or "").lower()
    if name.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if name.endswith(".csv"):
        return "csv"
    return "jsonl" if text.lstrip().startswith("{") else "csv"


def parse_trace(text: str, *, format: str | None = None, filename: str | None = None, max_rows: int) -> ParsedTrace:
    fmt = format or detect_format(text, filename)
    if fmt not in TRACE_FORMATS:
        raise TraceError(f"format must be one of {', '.join(TRACE_FORMATS)}, got {fmt!r}")
    if "\x00" in text:
        raise TraceError("contains a NUL character; a trace is text")
    rows, ignored = (_csv_rows if fmt == "csv" else _jsonl_rows)(text, max_rows)
    if not rows:
        raise TraceError(f"has no rows; give one request per line with {', '.join(TRACE_COLUMNS)}")
    arrival, prompt, output, lines = [], [], [], []
    for line, values in rows:
        arrival.append(_number(values["arrival_s"], line=line, column="arrival_s"))
        prompt.append(_whole(values["prompt_tokens"], line=line, column="prompt_tokens"))
        output.append(_whole(values["output_tokens"], line=line, column="output_tokens"))
        lines.append(line)
    return ParsedTrace(arrival_s=arrival, prompt_tokens=prompt, output_tokens=output, lines=lines, format=fmt, ignored_columns=ignored)


def _too_many(line: int, max_rows: int) -> TraceError:
    return TraceError(f"more than {max_rows:,} requests; a trace may hold at most {max_rows:,}", line=line)


def _csv_rows(text: str, max_rows: int) -> tuple[list[tuple[int, dict]], tuple[str, ...]]:
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        return [], ()
    except csv.Error as exc:
        raise TraceError(f"is not CSV: {exc}", line=1) from None
    names = [h.strip() for h in header]
    repeated = [c for c in TRACE_COLUMNS if names.count(c) > 1]
    if repeated:
        raise TraceError(f"the header names {', '.join(repeated)} more than once; name each column once", line=1)
    missing = [c for c in TRACE_COLUMNS if c not in names]
    if missing:
        raise TraceError(f"the header must name {', '.join(TRACE_COLUMNS)}; missing {', '.join(missing)} (got {', '.join(names) or 'nothing'})",
                         line=1)  # fmt: skip
    index = {c: names.index(c) for c in TRACE_COLUMNS}
    rows = []
    try:
        for cells in reader:
            line = reader.line_num
            if not cells or all(not c.strip() for c in cells):
                continue  # blank lines (a trailing newline) carry no request
            if len(rows) >= max_rows:
                raise _too_many(line, max_rows)
            if len(cells) != len(names):
                raise TraceError(f"has {len(cells)} fields; the header has {len(names)}", line=line)
            rows.append((line, {c: cells[i].strip() for c, i in index.items()}))
    except csv.Error as exc:
        raise TraceError(f"is not CSV: {exc}", line=reader.line_num) from None
    return rows, _named(n for n in names if n not in TRACE_COLUMNS)


def _jsonl_rows(text: str, max_rows: int) -> tuple[list[tuple[int, dict]], tuple[str, ...]]:
    rows, ignored = [], set()
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        if len(rows) >= max_rows:
            raise _too_many(line, max_rows)
        try:
            value = json.loads(raw, parse_constant=_no_constant, object_pairs_hook=_once_each)
        except (ValueError, RecursionError) as exc:
            raise TraceError(f"is not a JSON object: {exc}", line=line) from None
        if not isinstance(value, dict):
            raise TraceError(f"must be a JSON object with {', '.join(TRACE_COLUMNS)}, got {type(value).__name__}", line=line)
        for column in TRACE_COLUMNS:
            if column not in value:
                raise TraceError("is missing", line=line, column=column)
        ignored.update(str(k) for k in value if k not in TRACE_COLUMNS)
        rows.append((line, {c: value[c] for c in TRACE_COLUMNS}))
    return rows, _named(sorted(ignored))


def _named(ignored) -> tuple[str, ...]:
    """The columns a trace carries beside its own, in order, the first MAX_NAMED_IGNORED by name and the rest counted."""
    names = list(dict.fromkeys(ignored))
    if len(names) <= MAX_NAMED_IGNORED:
        return tuple(names)
    return (*names[:MAX_NAMED_IGNORED], f"and {len(names) - MAX_NAMED_IGNORED:,} more")


def _once_each(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys are each given once (json keeps the last of a repeated key in silence)."""
    repeated = sorted(key for key, seen in Counter(key for key, _ in pairs).items() if seen > 1)  # linear: a line may carry many keys
    if repeated:
        raise ValueError(f"names {', '.join(repeated)} more than once")
    return dict(pairs)


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _as_float(value, *, line: int, column: str, rule: str) -> float:
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        raise TraceError(f"must be {rule}, got {json.dumps(value)}", line=line, column=column)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TraceError(f"must be {rule}, got {value!r}", line=line, column=column) from None
    if not math.isfinite(number):
        raise TraceError(f"must be {rule}, got {value!r}", line=line, column=column)
    return number


def _number(value, *, line: int, column: str) -> float:
    rule = f"a number of seconds from 0 to {MAX_ARRIVAL_S:.0f} (ten years)"
    number = _as_float(value, line=line, column=column, rule=rule)
    if not 0 <= number <= MAX_ARRIVAL_S:
        raise TraceError(f"must be {rule}, got {value!r}", line=line, column=column)
    return number


def _whole(value, *, line: int, column: str) -> int:
    rule = "a whole number >= 1"
    number = _as_float(value, line=line, column=column, rule=rule)
    if number < 1 or number != math.floor(number):
        raise TraceError(f"must be {rule}, got {value!r}", line=line, column=column)
    if number > MAX_TOKENS:
        raise TraceError(f"must be at most {MAX_TOKENS:.0e} tokens, got {value!r}", line=line, column=column)
    return int(number)
