"""An uploaded trace is read line by line; a bad value names its line (the CSV header is line 1) and column."""
from __future__ import annotations

import pytest

from planner.simulation_traces import TraceError, detect_format, parse_trace

HEADER = "arrival_s,prompt_tokens,output_tokens\n"


def test_a_csv_trace_is_read_with_its_lines_and_other_columns_noted():
    trace = parse_trace("request_id," + HEADER.replace("\n", "") + "\nx,0.5,100,10\n\ny,0,20,1\n", max_rows=10)
    assert trace.arrival_s == [0.5, 0.0] and trace.prompt_tokens == [100, 20] and trace.output_tokens == [10, 1]
    assert trace.lines == [2, 4] and trace.format == "csv" and trace.ignored_columns == ("request_id",)


def test_a_trace_with_many_other_columns_names_twenty_and_counts_the_rest():
    others = ",".join(f"x{i}" for i in range(25))
    trace = parse_trace(f"{others},{HEADER}" + ",".join("0" * 25) + ",0,100,10\n", max_rows=10)
    assert trace.ignored_columns == (*(f"x{i}" for i in range(20)), "and 5 more")


def test_a_jsonl_trace_is_detected_and_read():
    text = '{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 10, "id": 1}\n\n{"arrival_s": 1.5, "prompt_tokens": 7, "output_tokens": 3}\n'
    trace = parse_trace(text, max_rows=10)
    assert trace.format == "jsonl" and trace.lines == [1, 3] and trace.prompt_tokens == [100, 7] and trace.ignored_columns == ("id",)
    assert detect_format("arrival_s,...", "t.jsonl") == "jsonl" and detect_format("{}", "t.csv") == "csv"


@pytest.mark.parametrize("text, expected", [
    (HEADER + "0,100,10\n0.2,abc,10\n", "line 3, column prompt_tokens: must be a whole number >= 1"),
    (HEADER + "0,100,10\n-1,100,10\n", "line 3, column arrival_s: must be a number of seconds from 0 to 315576000 (ten years)"),
    (HEADER + "inf,100,10\n", "line 2, column arrival_s: must be a number of seconds"),
    (HEADER + "1e308,100,10\n", "line 2, column arrival_s: must be a number of seconds from 0 to 315576000"),
    ("arrival_s,arrival_s,prompt_tokens,output_tokens\n0,1,100,10\n", "line 1: the header names arrival_s more than once"),
    (HEADER + "0,100,2.5\n", "line 2, column output_tokens: must be a whole number"),
    (HEADER + "0,100,0\n", "line 2, column output_tokens: must be a whole number >= 1"),
    ("arrival_s,prompt_tokens\n0,100\n", "line 1: the header must name arrival_s, prompt_tokens, output_tokens; missing output_tokens"),
    (HEADER + "0,100\n", "line 2: has 2 fields; the header has 3"),
    (HEADER, "has no rows"),
    ('{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}\n{"arrival_s": 1, "prompt_tokens": 1}\n', "line 2, column output_tokens: is missing"),
    ('{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}\n{"arrival_s": 1,\n', "line 2: is not a JSON object"),
    ('{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}\n[1, 2, 3]\n', "line 2: must be a JSON object"),
    ('{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1, "output_tokens": 9}\n', "line 1: is not a JSON object: names output_tokens more than once"),
    ('{"arrival_s": NaN, "prompt_tokens": 1, "output_tokens": 1}\n', "line 1: is not a JSON object"),
    ('{"arrival_s": 0, "prompt_tokens": true, "output_tokens": 1}\n', "line 1, column prompt_tokens: must be a whole number >= 1"),
    (HEADER + "0,1,1\n" * 3, "line 4: more than 2 requests"),
])  # fmt: skip
def test_a_bad_line_names_its_line_and_column(text, expected):
    with pytest.raises(TraceError) as error:
        parse_trace(text, max_rows=2)
    assert str(error.value).startswith(expected)
