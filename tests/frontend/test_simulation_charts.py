"""The simulation page's chart data (frontend/charts.py): pure rearrangements of a SimulationRun's results."""
from __future__ import annotations

from frontend import charts

SLO_CHECKS = {"ttft": {"p": 95.0, "s": 0.5, "value_s": 0.3, "met": True}, "tpot": {"p": 99.0, "s": 0.05, "value_s": 0.07, "met": False}}


def point(rate, *, ttft_p50, goodput, overloaded=False, tpot_p50=0.02):
    tpot = {"p50": tpot_p50, "p99": None if tpot_p50 is None else tpot_p50 * 2}
    return {"rate_per_s": rate, "ttft_s": {"p50": ttft_p50, "p99": ttft_p50 * 3}, "tpot_s": tpot, "e2e_s": {"p50": 1.0, "p99": 2.0},
            "goodput_requests_per_s": goodput, "overloaded": overloaded}  # fmt: skip


def test_latency_rows_list_each_metric_at_mean_and_percentiles_with_none_where_missing():
    rows = charts.latency_rows({"ttft_s": {"mean": 0.1, "p50": 0.09, "p90": 0.2, "p95": 0.25, "p99": 0.4}, "tpot_s": None})
    assert [r["label"] for r in rows] == ["TTFT", "TPOT", "End to end"]
    assert rows[0]["values"] == [0.1, 0.09, 0.2, 0.25, 0.4] and rows[1]["values"] == [None] * 5


def test_slo_rows_follow_ttft_tpot_e2e_order():
    rows = charts.slo_rows({"slo_percentiles": {"tpot": SLO_CHECKS["tpot"], "ttft": SLO_CHECKS["ttft"]}})
    assert [(r["metric"], r["label"], r["met"]) for r in rows] == [("ttft", "TTFT", True), ("tpot", "TPOT", False)]
    assert charts.slo_rows({}) == []


def test_percentile_slos_win_over_per_request_bounds_for_the_chart_lines():
    bounds = charts.slo_bounds({"slos": {"ttft_s": 1.0, "tpot_s": None, "e2e_s": 9.0}, "slo_percentiles": {"ttft": SLO_CHECKS["ttft"]}})
    assert bounds == {"ttft_s": {"p": 95.0, "s": 0.5}, "e2e_s": {"p": None, "s": 9.0}}


def test_the_goodput_bounds_read_as_text():
    assert charts.goodput_bounds_label({"slos": {"ttft_s": 0.5, "tpot_s": None, "e2e_s": 12.0}}) == "TTFT ≤ 500 ms, End to end ≤ 12 s"
    assert charts.goodput_bounds_label({}) == ""


def test_the_cdf_is_latency_against_the_share_of_requests_and_leaves_out_a_metric_with_no_values():
    results = {"cdf": {"quantiles": [0.0, 50.0, 100.0], "ttft_s": [0.1, 0.2, 0.9], "tpot_s": [None, None, None], "e2e_s": [1.0, 2.0, 3.0]},
               "slo_percentiles": SLO_CHECKS}  # fmt: skip
    chart = charts.cdf_chart(results)
    assert [m["key"] for m in chart["metrics"]] == ["ttft_s", "e2e_s"]
    assert chart["metrics"][0]["points"] == [{"x": 0.1, "y": 0.0}, {"x": 0.2, "y": 0.5}, {"x": 0.9, "y": 1.0}]
    assert chart["metrics"][0]["slo"] == {"p": 95.0, "s": 0.5} and chart["metrics"][1]["slo"] is None


def test_an_older_run_has_no_cdf_series_or_sweep_chart():
    assert charts.cdf_chart({}) is None and charts.series_chart({}) is None and charts.sweep_chart({}) is None
    assert charts.cdf_chart({"cdf": {"quantiles": [0.0], "ttft_s": [None], "tpot_s": [None], "e2e_s": [None]}}) is None
    assert charts.sweep_rows({}) == []


def test_the_series_shows_kv_use_as_a_percentage_against_time():
    chart = charts.series_chart({"series": {"time_s": [0.0, 1.0], "queue_length": [0, 4], "running": [1, 8], "kv_utilisation": [0.1, 0.5]}})
    assert chart["queue"] == [{"x": 0.0, "y": 0}, {"x": 1.0, "y": 4}] and chart["running"][1] == {"x": 1.0, "y": 8}
    assert chart["kv_percent"] == [{"x": 0.0, "y": 10.0}, {"x": 1.0, "y": 50.0}] and chart["duration_s"] == 1.0


def test_the_sweep_chart_has_each_percentile_line_the_knee_the_bounds_and_the_overloaded_points():
    results = {
        "slo_percentiles": SLO_CHECKS,
        "sweep": {"knee_rate_per_s": 4.0, "points": [point(1.0, ttft_p50=0.05, goodput=1.0), point(4.0, ttft_p50=0.1, goodput=3.9),
                                                     point(64.0, ttft_p50=20.0, goodput=0.0, overloaded=True, tpot_p50=None)]},
    }  # fmt: skip
    chart = charts.sweep_chart(results)
    lines = {line["label"]: line["points"] for line in chart["lines"]}
    assert lines["TTFT p50"] == [{"x": 1.0, "y": 0.05}, {"x": 4.0, "y": 0.1}, {"x": 64.0, "y": 20.0}]
    assert [p["x"] for p in lines["TPOT p99"]] == [1.0, 4.0]  # no TPOT at the flood: left out, not drawn at 0 on a log axis
    assert chart["goodput"] == [{"x": 1.0, "y": 1.0}, {"x": 4.0, "y": 3.9}, {"x": 64.0, "y": 0.0}] and chart["offered"][2] == {"x": 64.0, "y": 64.0}
    assert chart["overloaded"] == [{"x": 64.0, "y": 0.0}] and chart["knee_rate_per_s"] == 4.0
    assert chart["slo"] == {"ttft_s": {"p": 95.0, "s": 0.5}, "tpot_s": {"p": 99.0, "s": 0.05}}
    assert chart["x_scale"] == "logarithmic" and chart["rate_range"] == [1.0, 64.0]
    assert [row["is_knee"] for row in charts.sweep_rows(results)] == [False, True, False]


def test_a_sweep_shows_each_latency_at_its_slos_percentile_too():
    results = {"slo_percentiles": SLO_CHECKS,  # TTFT at p95, TPOT at p99
               "sweep": {"knee_rate_per_s": None, "points": [{**point(2.0, ttft_p50=0.1, goodput=2.0), "ttft_s": {"p50": 0.1, "p95": 0.25, "p99": 0.3}}]}}  # fmt: skip
    assert [label for _, _, label in charts.sweep_lines(results)] == ["TTFT p50", "TTFT p95", "TTFT p99", "TPOT p50", "TPOT p99"]
    assert {line["label"] for line in charts.sweep_chart(results)["lines"]} >= {"TTFT p95"}
    assert charts.sweep_rows(results)[0]["latencies"] == [0.1, 0.25, 0.3, 0.02, 0.04]
    assert [label for _, _, label in charts.sweep_lines({})] == ["TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"]


def test_a_narrow_sweep_is_drawn_on_a_linear_rate_axis():
    points = [point(2.0, ttft_p50=0.1, goodput=2.0), point(8.0, ttft_p50=0.2, goodput=8.0)]
    chart = charts.sweep_chart({"sweep": {"knee_rate_per_s": None, "points": points}})
    assert chart["x_scale"] == "linear" and chart["slo"] == {} and chart["knee_rate_per_s"] is None


def test_the_workload_label_names_the_arrivals_and_the_lengths():
    closed = {"workload": {"requests": 500, "arrivals": {"kind": "closed_loop", "concurrency": 16, "think_time_s": 0.5},
                           "prompt": {"kind": "lognormal", "mean_tokens": 800.0, "std_tokens": 400.0},
                           "output": {"kind": "fixed", "tokens": 64}}}  # fmt: skip
    assert charts.simulation_workload_label(closed) == (
        "500 requests · closed loop of 16 clients, 0.5 s think time · prompt lognormal 800 ± 400 · output 64 tokens")
    gamma = {"workload": {"requests": 10, "arrivals": {"kind": "gamma", "rate_per_s": 2.5, "cv": 3.0},
                          "prompt": {"tokens": 100}, "output": {"tokens": 10}}}  # fmt: skip
    assert "bursty 2.5 req/s (CV 3)" in charts.simulation_workload_label(gamma)
    assert charts.simulation_workload_label({"workload": {"seed": 1}}, trace_rows=3) == "a trace of 3 requests"
    assert charts.simulation_workload_label({"plan": "p", "candidate_rank": 2}) == "a plan's simulation stage, candidate #2"


def test_a_plans_stage_is_drawn_as_one_cdf_per_simulated_candidate_in_ranked_order():
    cdf = {"quantiles": [0.0, 50.0, 100.0], "ttft_s": [0.05, 0.1, 0.4], "tpot_s": [None, None, None], "e2e_s": [1.0, 2.0, 3.0]}
    checks = {"ttft": {"p": 95.0, "s": 0.5, "value_s": 0.3, "met": True}}
    ranked = [{"chip_slug": "nvidia-h100-sxm", "chip_count": 1, "tensor_parallel": 1, "weight_dtype": "fp8", "batch": 8,
               "simulation": {"cdf": cdf, "slo_percentiles": checks, "meets_slo_percentiles": True}},
              {"chip_slug": "nvidia-l4", "simulation": {"error": "not simulable"}},
              {"chip_slug": "nvidia-a100-sxm-80gb", "simulation": {"cdf": cdf, "slo_percentiles": checks, "meets_slo_percentiles": False}}]  # fmt: skip
    chart = charts.stage_cdf_chart({"ranked": ranked})
    assert [m["key"] for m in chart["metrics"]] == ["ttft_s", "e2e_s"]  # no TPOT to draw: one-token answers
    ttft = chart["metrics"][0]
    assert [(c["rank"], c["meets"]) for c in ttft["candidates"]] == [(1, True), (3, False)] and ttft["slo"] == {"p": 95.0, "s": 0.5}
    assert ttft["candidates"][0]["points"] == [{"x": 0.05, "y": 0.0}, {"x": 0.1, "y": 0.5}, {"x": 0.4, "y": 1.0}]
    assert ttft["candidates"][0]["label"].startswith("#1 ") and chart["shown"] == charts.STAGE_CDF_SHOWN
    assert charts.stage_cdf_chart({"ranked": [{"simulation": {"error": "x"}}]}) is None and charts.stage_cdf_chart({}) is None
    # Under a rate sweep a candidate meets as the ranking judged it, by its knee, not at the plan's own load.
    swept = {"cdf": cdf, "meets_slo_percentiles": False, "sweep": {"knee_rate_per_s": 6.0}}
    assert charts.stage_cdf_chart({"ranked": [{"chip_slug": "c", "simulation": swept}]})["metrics"][0]["candidates"][0]["meets"]
    assert not charts.stage_row_meets({**swept, "sweep": {"knee_rate_per_s": None}, "meets_slo_percentiles": True})
    assert not charts.stage_row_meets({"meets_slo_percentiles": True, "overloaded": True})

