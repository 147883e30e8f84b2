"""The load test driver's own arithmetic (benchmarks/loadtest.py, stdlib only): the plans scenario's
summaries and target, and a run of one scenario keeping the stored results of the others."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("loadtest", Path(__file__).resolve().parent.parent / "benchmarks" / "loadtest.py")
loadtest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(loadtest)

CHIPS_TARGET = "GET /api/v1/chips/ p95 < 100 ms while 4 of the largest plans run"


def _plan(posted_at, *, created=None, started=None, finished=None, status="done", search_s=None, post_ms=100.0):
    return {"posted_at": posted_at, "post_ms": post_ms, "status": status, "created": created if created is not None else posted_at,
            "started": started, "finished": finished, "search_s": search_s, "error": "" if status == "done" else "out of memory"}  # fmt: skip


def _plans_result(*, chips_p95: float, completed: int = 5, least_in_flight: int = 3) -> dict:
    return {
        "endpoints": [{"method": "GET", "endpoint": "/api/v1/chips/", "p95_ms": chips_p95},
                      {"method": "GET", "endpoint": "/api/v1/chips/{slug}/", "p95_ms": 500.0}],
        "plans": {"kept_in_flight": 4, "completed_in_window": completed, "queued_or_running": {"min": least_in_flight}},
    }  # fmt: skip


def test_in_flight_profile_weighs_each_count_by_the_time_it_held():
    # Window 0-10: two plans throughout, one finishing at 4 and replaced at 4.5, one more from 8 to the end.
    profile = loadtest.in_flight_profile([(-5, None), (-3, None), (-1, 4), (4.5, None), (8, 20)], 0, 10)
    assert profile["share_of_time"] == {"2": 0.05, "3": 0.75, "4": 0.2}
    assert (profile["min"], profile["max"], profile["mean"]) == (2, 4, 3.15)


def test_in_flight_profile_of_an_empty_window_is_zero():
    assert loadtest.in_flight_profile([(20, 30)], 0, 10) == {"mean": 0.0, "min": 0, "max": 0, "share_of_time": {"0": 1.0}}


def test_plans_summary_counts_only_the_plans_finished_in_the_window():
    plans = {
        "before": _plan(0, started=1, finished=5),  # finished before the window opened
        "a": _plan(2, started=5, finished=14, search_s=8.5),
        "b": _plan(3, started=14, finished=24, search_s=9.5),
        "lost": _plan(4, started=24, finished=25, status="failed"),
        "after": _plan(12, started=25, finished=40),  # finished after it closed
    }
    summary = loadtest.plans_summary(plans, start=10, end=30, in_flight=4)
    assert (summary["completed_in_window"], summary["failed_in_window"], summary["completed_per_min"]) == (2, 1, 6.0)
    assert summary["worker_run_s"] == {"n": 2, "min": 9, "p50": 9, "p95": 10, "max": 10}
    assert summary["search_s"]["p50"] == 8.5 and summary["queue_wait_s"] == {"n": 2, "min": 3, "p50": 3, "p95": 11, "max": 11}
    assert summary["submitted"] == 5 and summary["submitted_in_window"] == 1 and summary["errors"] == ["out of memory"]


@pytest.mark.parametrize(("chips_p95", "met"), [(99.9, True), (100.0, False)])
def test_the_plans_target_is_the_chip_lists_p95(chips_p95, met):
    (verdict,) = loadtest.judge({"plans": _plans_result(chips_p95=chips_p95)})
    assert verdict == {"target": CHIPS_TARGET, "scenario": "plans", "measured": chips_p95, "met": met}


@pytest.mark.parametrize(("completed", "least_in_flight"), [(0, 4), (3, 2)])
def test_the_plans_target_is_not_met_by_reads_while_the_plans_did_not_run(completed, least_in_flight):
    (verdict,) = loadtest.judge({"plans": _plans_result(chips_p95=20.0, completed=completed, least_in_flight=least_in_flight)})
    assert verdict["measured"] is None and not verdict["met"]


def test_a_run_of_one_scenario_keeps_the_stored_others_with_their_own_date():
    reads = {"total": {"req_per_s": 621.7}}
    stored = {"date": "2026-11-30T03:12:43+00:00", "command": "benchmarks/loadtest.py ", "settings": {"users": 24}, "machine": {"nproc": 2},
              "scenarios": {"reads": reads, "plans": _plans_result(chips_p95=150.0)}, "targets": []}  # fmt: skip
    run = {"date": "2026-12-02T01:00:00+00:00", "command": "benchmarks/loadtest.py --scenario plans", "settings": {"users": 24},
           "machine": {"nproc": 2}, "scenarios": {"plans": _plans_result(chips_p95=60.0)}}  # fmt: skip
    merged = loadtest.merge_results(stored, run)
    assert list(merged["scenarios"]) == ["reads", "plans"]
    assert merged["scenarios"]["reads"] == {**reads, "date": stored["date"], "command": stored["command"], "settings": {"users": 24},
                                            "machine": {"nproc": 2}}  # fmt: skip
    assert merged["scenarios"]["plans"]["date"] == run["date"] and merged["date"] == run["date"]
    assert [(v["scenario"], v["measured"], v["met"]) for v in merged["targets"]] == [("reads", 621.7, True), ("plans", 60.0, True)]


def test_a_first_run_has_nothing_to_keep():
    run = {"date": "d", "command": "c", "settings": {}, "machine": {}, "scenarios": {"reads": {"total": {"req_per_s": 400.0}}}}
    merged = loadtest.merge_results(None, run)
    assert merged["scenarios"]["reads"]["date"] == "d" and merged["targets"][0]["met"] is False
