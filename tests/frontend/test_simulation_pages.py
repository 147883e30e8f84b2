"""The simulation pages: /simulations/ (the stored runs), /simulations/<id>/ (one run: its percentiles, SLO
checks, CDF, queue and KV over time, a rate sweep's knee; a polling page while a worker runs it) and
/simulations/new/ (the form, empty or prefilled from a plan's ranked row), which goes through the API's
serializer and service. Runs for the pages are made directly with hand-made results of the stored shape."""
from __future__ import annotations

import json
import re
import uuid

import pytest

from frontend import forms
from planner.models import SimulationRun
from tests.frontend.conftest import make_plan
from tests.frontend.test_csp import inline_code
from tests.frontend.test_fleet_pages import post, table_of

# A plan sized by a request rate, on GPUs of up to 8 chips: its ranking holds pipeline-parallel rows too.
RATE_PLAN = {
    "model": "llama-3.1-8b",
    "workload": {"prompt_tokens": 1000, "output_tokens": 200, "request_rate_per_s": 5, "ttft_slo_s": 0.5, "tpot_slo_s": 0.05},
    "hardware": {"max_chips": 8, "kinds": ["gpu"]},
}
# The empty form's values as a browser posts them, with a small workload the request simulates inline.
FORM = {
    "model": "llama-3.1-8b", "chip": "nvidia-h100-sxm", "chip_count": "1", "tensor_parallel": "1", "weight_dtype": "bf16", "kv_dtype": "",
    "serving_engine": "", "offering": "", "max_sequences": "", "requests": "200", "seed": "3", "arrivals": "poisson", "rate_per_s": "5",
    "cv": "2", "concurrency": "32", "think_time_s": "", "prompt_kind": "fixed", "prompt_tokens": "500", "prompt_std_tokens": "",
    "output_kind": "fixed", "output_tokens": "50", "output_std_tokens": "", "ttft_s": "0.5", "ttft_p": "95", "tpot_s": "0.05", "tpot_p": "95",
    "prefill_replicas": "", "sweep_rates": "", "plan": "", "rank": "",
}  # fmt: skip


def stats(mean, p50, p90, p95, p99):
    return {"mean": mean, "p50": p50, "p90": p90, "p95": p95, "p99": p99}


def cdf(scale):
    return [scale * (1 + q / 25) for q in range(101)]


POINT = {"ttft_s": stats(0.05, 0.04, 0.07, 0.08, 0.1), "tpot_s": stats(0.02, 0.02, 0.022, 0.023, 0.025), "e2e_s": stats(2.0, 1.9, 2.4, 2.6, 3.0)}
RESULTS = {
    "requests": 1000, "completed": 1000, "duration_s": 200.5, "ttft_s": stats(0.06, 0.05, 0.09, 0.12, 0.2),
    "tpot_s": stats(0.021, 0.02, 0.023, 0.024, 0.027), "e2e_s": stats(4.3, 4.1, 5.2, 5.6, 6.5), "request_throughput_per_s": 4.98,
    "output_tokens_per_s": 996.0, "input_tokens_per_s": 4980.0, "preemptions": 3, "steps": 26000, "kv_blocks": 30000,
    "mean_kv_utilisation": 0.12, "peak_kv_utilisation": 0.41, "slos": {"ttft_s": 0.5, "tpot_s": 0.05, "e2e_s": None},
    "slo_attainment": 0.991, "goodput_requests_per_s": 4.93,
    "slo_percentiles": {"ttft": {"p": 95.0, "s": 0.5, "value_s": 0.12, "met": True}, "tpot": {"p": 95.0, "s": 0.05, "value_s": 0.024, "met": True}},
    "meets_slo_percentiles": True, "misses": [], "overloaded": False, "overload_reason": None, "queue_growth_per_s": 0.0,
    "littles_law": {"mean_in_system": 21.4, "arrival_rate_per_s": 4.98, "mean_time_in_system_s": 4.3, "relative_error": 0.003},
    "notes": ["prefix caching is on; no request shares a prefix"], "tensor_parallel": 1, "replicas": 1, "prefill_replicas": 0, "total_chips": 1,
    "offering": "lambda-h100-sxm-on-demand", "usd_per_hour": 2.99, "usd_per_million_output_tokens": 0.834, "simulation_seconds": 0.21,
    "series": {"time_s": [0.0, 100.0, 200.0], "queue_length": [0, 2, 0], "running": [0, 20, 1], "kv_utilisation": [0.0, 0.25, 0.01]},
    "cdf": {"quantiles": [float(q) for q in range(101)], "ttft_s": cdf(0.04), "tpot_s": cdf(0.02), "e2e_s": cdf(4.0)},
    "sweep": {
        "rates_per_s": [2.0, 8.0, 200.0], "knee_rate_per_s": 8.0, "usd_per_million_output_tokens_at_knee": 0.52,
        "basis": "knee: the highest swept rate whose simulated percentiles meet every percentile SLO", "simulation_seconds": 0.5,
        "points": [
            {"rate_per_s": 2.0, **POINT, "goodput_requests_per_s": 2.0, "slo_attainment": 1.0, "output_tokens_per_s": 400.0, "overloaded": False,
             "meets_slo_percentiles": True, "misses": []},
            {"rate_per_s": 8.0, **POINT, "goodput_requests_per_s": 7.9, "slo_attainment": 0.99, "output_tokens_per_s": 1590.0, "overloaded": False,
             "meets_slo_percentiles": True, "misses": []},
            {"rate_per_s": 200.0, "ttft_s": stats(30, 28, 50, 55, 60), "tpot_s": stats(0.09, 0.08, 0.1, 0.11, 0.12), "e2e_s": stats(50, 48, 70, 75, 80),
             "goodput_requests_per_s": 0.0, "slo_attainment": 0.0, "output_tokens_per_s": 9000.0, "overloaded": True,
             "meets_slo_percentiles": False, "misses": ["p95 TTFT 55 s > 0.5 s", "overloaded: the queue grows without bound at this load"]},
        ],
    },
}  # fmt: skip
INPUTS = {
    "model": "llama-3.1-8b", "chip": "nvidia-h100-sxm", "chip_count": 1, "tensor_parallel": 1, "weight_dtype": "bf16",
    "workload": {"requests": 1000, "arrivals": {"kind": "poisson", "rate_per_s": 5.0}, "prompt": {"kind": "fixed", "tokens": 1000},
                 "output": {"kind": "lognormal", "mean_tokens": 200.0, "std_tokens": 100.0}, "seed": 0},
    "slo_percentiles": {"ttft": {"p": 95.0, "s": 0.5}, "tpot": {"p": 95.0, "s": 0.05}}, "sweep": {"rates_per_s": [2.0, 8.0, 200.0]},
}  # fmt: skip
# What a run stored before the page's charts had their data (older runs): no cdf, no sweep, no series.
OLDER = {k: v for k, v in RESULTS.items() if k not in ("cdf", "sweep", "series")}


def make_run(*, results=None, inputs=None, **fields) -> SimulationRun:
    fields = {"model_slug": "llama-3.1-8b", "chip_slug": "nvidia-h100-sxm", "request_count": 1000, **fields}
    return SimulationRun.objects.create(inputs=inputs or INPUTS, results=RESULTS if results is None else results, **fields)


def json_data(html: str, element_id: str):
    match = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', html, re.S)
    assert match, element_id
    return json.loads(match.group(1))


@pytest.fixture
def rate_plan(catalog):
    return make_plan(RATE_PLAN)


# --- /simulations/ ------------------------------------------------------------------------------------
def test_the_list_says_there_are_none_yet_and_links_the_form(db, anonymous_ui_client):
    html = anonymous_ui_client.get("/simulations/").content.decode()
    assert 'id="no-simulations"' in html and 'href="/simulations/new/"' in html


def test_the_site_navigation_links_to_the_simulations(ui_client, db):
    assert '<a href="/simulations/">Simulations</a>' in ui_client.get("/").content.decode()
    assert '<a href="/simulations/" aria-current="page">Simulations</a>' in ui_client.get("/simulations/").content.decode()


def test_the_list_shows_each_run_newest_first_with_its_percentiles_goodput_and_cost(db, anonymous_ui_client):
    older = make_run(results=OLDER)
    newer = make_run()
    queued = make_run(results={}, status=SimulationRun.Status.QUEUED, progress=0.0, chip_slug="amd-mi300x")
    response = anonymous_ui_client.get("/simulations/")
    assert response.status_code == 200
    html = response.content.decode()
    table = table_of(html, "simulations-table")
    assert [m for m in re.findall(r'href="/simulations/([0-9a-f-]+)/"', table)] == [str(queued.id), str(newer.id), str(older.id)]
    assert "120 ms" in table and "24 ms" in table and "4.93 req/s" in table and "$0.834" in table  # p95 TTFT, p95 TPOT, goodput, $/1M
    assert "1,000 requests · Poisson 5 req/s · prompt 1,000 · output lognormal 200 ± 100 tokens" in table
    assert "knee 8 req/s" in table and "meets the SLOs" in table and "Queued" in table
    assert inline_code(html) == []


def test_the_list_names_a_trace_runs_workload_by_its_rows(db, anonymous_ui_client):
    # a trace fixes the requests: its workload names neither a count nor lengths ("Poisson – req/s · prompt –" before)
    make_run(inputs={**INPUTS, "workload": {"arrivals": {"kind": "poisson"}}}, request_count=300,
             trace={"arrival_s": [0.0] * 300, "prompt_tokens": [10] * 300, "output_tokens": [5] * 300})  # fmt: skip
    table = table_of(anonymous_ui_client.get("/simulations/").content.decode(), "simulations-table")
    assert "a trace of 300 requests" in table and "– req/s" not in table


# --- /simulations/<id>/ -----------------------------------------------------------------------------
def test_a_done_runs_page_shows_its_percentiles_slo_checks_and_the_charts_data(db, anonymous_ui_client):
    run = make_run()
    response = anonymous_ui_client.get(f"/simulations/{run.id}/")
    assert response.status_code == 200
    html = response.content.decode()
    latency = table_of(html, "latency-table")
    for header in ("mean", "p50", "p90", "p95", "p99"):
        assert f">{header}</th>" in latency
    ttft = latency[latency.index('data-metric="ttft_s"'):latency.index('data-metric="tpot_s"')]
    assert [re.sub("<.*?>", "", cell) for cell in re.findall(r'<td class="n">(.*?)</td>', ttft)] == ["60 ms", "50 ms", "90 ms", "120 ms", "200 ms"]
    assert "4.3 s" in latency and "6.5 s" in latency  # end to end in seconds
    slo = table_of(html, "slo-table")
    assert "p95 ≤ 500 ms" in slo and "120 ms" in slo and "p95 ≤ 50 ms" in slo and slo.count("slo-met") == 2
    assert 'id="slo-met"' in html and "4.93 req/s" in html and "99.1%" in html and "$0.834" in html and "$2.99" in html
    assert "21.4 requests in the system" in html and "0.3% apart" in html and "Prefix caching is on" in html
    assert "lambda-h100-sxm-on-demand" in html and "TP1" in html
    cdf = json_data(html, "sim-cdf-data")
    assert [m["key"] for m in cdf["metrics"]] == ["ttft_s", "tpot_s", "e2e_s"]
    assert cdf["metrics"][0]["points"][0] == {"x": 0.04, "y": 0.0} and cdf["metrics"][0]["points"][-1]["y"] == 1.0
    assert cdf["metrics"][0]["slo"] == {"p": 95.0, "s": 0.5}
    series = json_data(html, "sim-series-data")
    assert series["kv_percent"][1] == {"x": 100.0, "y": 25.0} and series["queue"][1] == {"x": 100.0, "y": 2}
    sweep = json_data(html, "sim-sweep-data")
    assert sweep["knee_rate_per_s"] == 8.0 and sweep["x_scale"] == "logarithmic" and sweep["overloaded"] == [{"x": 200.0, "y": 0.0}]
    # Both SLOs are stated at p95: each latency is drawn at its p95 as well.
    assert [line["label"] for line in sweep["lines"]] == ["TTFT p50", "TTFT p95", "TTFT p99", "TPOT p50", "TPOT p95", "TPOT p99"]
    assert sweep["slo"] == {"ttft_s": {"p": 95.0, "s": 0.5}, "tpot_s": {"p": 95.0, "s": 0.05}}
    table = table_of(html, "sweep-table")
    assert table.count("<tr") == 4 and '<tr class="knee">' in table and "overloaded" in table and "Knee at 8 requests/s" in html
    assert "TTFT p95</th>" in table and "TPOT p95</th>" in table
    for canvas in ("cdf-chart", "series-chart", "sweep-latency-chart", "sweep-goodput-chart"):
        assert f'id="{canvas}"' in html
    assert "frontend/js/simulation.js" in html and inline_code(html) == []


def test_a_runs_scheduler_settings_read_as_given_a_cpu_build_without_matrix_kernels_as_none(db, anonymous_ui_client):
    inputs = {**INPUTS, "chip": "intel-xeon-8480plus", "scheduler": {"memory_fraction": 0.8, "cpu_matrix_dtypes": []}}
    html = anonymous_ui_client.get(f"/simulations/{make_run(inputs=inputs).id}/").content.decode()
    assert "memory_fraction 0.8 · cpu_matrix_dtypes none" in html and "cpu_matrix_dtypes []" not in html
    listed = {**inputs, "scheduler": {"cpu_matrix_dtypes": ["int8", "int4"]}}
    assert "cpu_matrix_dtypes int8, int4" in anonymous_ui_client.get(f"/simulations/{make_run(inputs=listed).id}/").content.decode()


def test_an_older_run_without_cdf_sweep_or_series_shows_its_tables_and_leaves_the_charts_out(db, anonymous_ui_client):
    html = anonymous_ui_client.get(f"/simulations/{make_run(results=OLDER).id}/").content.decode()
    assert 'id="latency-table"' in html and 'id="slo-table"' in html
    for absent in ("sim-cdf-data", "sim-series-data", "sim-sweep-data", 'id="sweep"', "cdf-chart", "series-chart", "simulation.js"):
        assert absent not in html, absent


def test_a_run_that_misses_an_slo_and_overloads_says_so(db, anonymous_ui_client):
    checks = {**RESULTS["slo_percentiles"], "ttft": {"p": 95.0, "s": 0.5, "value_s": 3.2, "met": False}}
    results = {**OLDER, "overloaded": True, "overload_reason": "the queue grew by 120 requests/s", "meets_slo_percentiles": False,
               "misses": ["p95 TTFT 3.2 s > 0.5 s"], "slo_percentiles": checks}  # fmt: skip
    html = anonymous_ui_client.get(f"/simulations/{make_run(results=results).id}/").content.decode()
    assert 'id="overloaded"' in html and "the queue grew by 120 requests/s" in html
    assert 'id="slo-misses"' in html and "p95 TTFT 3.2 s &gt; 0.5 s" in html and "slo-missed" in table_of(html, "slo-table")


def test_a_queued_run_shows_the_page_that_polls_its_api_address(db, anonymous_ui_client):
    run = make_run(results={}, status=SimulationRun.Status.QUEUED, progress=0.0)
    html = anonymous_ui_client.get(f"/simulations/{run.id}/").content.decode()
    assert 'id="plan-status"' in html and f'data-status-url="/api/v1/simulations/{run.id}/"' in html and 'data-progress="none"' in html
    assert "Waiting for a worker" in html and "frontend/js/plan_status.js" in html and 'id="latency-table"' not in html
    assert inline_code(html) == []


def test_a_failed_run_says_why_and_does_not_poll(db, anonymous_ui_client):
    run = make_run(results={"error": "the simulation ran past its time limit (300 s)"}, status=SimulationRun.Status.FAILED, error="")
    html = anonymous_ui_client.get(f"/simulations/{run.id}/").content.decode()
    assert 'id="simulation-error"' in html and "past its time limit" in html and "plan_status.js" not in html


def test_an_unknown_run_is_a_404(db, anonymous_ui_client):
    assert anonymous_ui_client.get(f"/simulations/{uuid.uuid4()}/").status_code == 404


# --- the plan page's Simulate action and the prefilled form --------------------------------------------
def test_the_plan_page_offers_simulate_on_a_simulable_row_and_not_on_a_pipeline_parallel_one(rate_plan, anonymous_ui_client):
    ranked = rate_plan.results["ranked"]
    simulable = next(rank for rank, row in enumerate(ranked, 1) if row["pipeline_parallel"] == 1)
    pipelined = next(rank for rank, row in enumerate(ranked, 1) if row["pipeline_parallel"] > 1)
    html = anonymous_ui_client.get(f"/plans/{rate_plan.id}/").content.decode()

    def row_html(rank: int) -> str:
        start = html.index(f'data-rank="{rank}"')
        return html[start:html.index("</tr>", start)]

    assert f'href="/simulations/new/?plan={rate_plan.id}&amp;rank={simulable}"' in row_html(simulable)
    assert "simulate-row" not in row_html(pipelined) and "not-simulable" in row_html(pipelined)
    assert "one pipeline stage" in row_html(pipelined)
    assert inline_code(html) == []


def test_the_form_is_prefilled_from_a_plan_row_and_its_workload(rate_plan, ui_client):
    ranked = rate_plan.results["ranked"]
    rank, row = next((r, row) for r, row in enumerate(ranked, 1) if row["pipeline_parallel"] == 1 and row.get("serving_engine"))
    response = ui_client.get(f"/simulations/new/?plan={rate_plan.id}&rank={rank}")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<option value="{row["chip_slug"]}" selected>' in html and '<option value="llama-3.1-8b" selected>' in html
    assert f'name="chip_count" value="{row["chip_count"]}"' in html and f'name="tensor_parallel" value="{row["tensor_parallel"]}"' in html
    assert f'<option value="{row["serving_engine"]}" selected>' in html and f'name="offering" value="{row["offering"]}"' in html
    assert f'name="max_sequences" value="{row["batch"]}"' in html
    assert 'name="prompt_tokens" value="1000"' in html and 'name="output_tokens" value="200"' in html and 'name="requests" value="1000"' in html
    assert 'name="arrivals" value="poisson" checked' in html and 'name="rate_per_s" value="5.0"' in html
    assert 'name="ttft_s" value="0.5"' in html and 'name="tpot_s" value="0.05"' in html and 'name="ttft_p" value="95"' in html
    assert f'name="plan" value="{rate_plan.id}"' in html and 'id="simulation-source"' in html and 'id="simulation-refusal"' not in html
    assert 'id="simulation-submit"' in html and inline_code(html) == []


def test_a_pipeline_parallel_row_opens_the_form_saying_why_it_cannot_run(rate_plan, ui_client):
    rank = next(r for r, row in enumerate(rate_plan.results["ranked"], 1) if row["pipeline_parallel"] > 1)
    html = ui_client.get(f"/simulations/new/?plan={rate_plan.id}&rank={rank}").content.decode()
    assert 'id="simulation-refusal"' in html and "one pipeline stage" in html


def test_an_unknown_plan_or_rank_is_a_404(rate_plan, ui_client):
    assert ui_client.get(f"/simulations/new/?plan={uuid.uuid4()}&rank=1").status_code == 404
    assert ui_client.get(f"/simulations/new/?plan={rate_plan.id}&rank=999").status_code == 404
    assert ui_client.get(f"/simulations/new/?plan={rate_plan.id}&rank=first").status_code == 404


# --- posting the form ---------------------------------------------------------------------------------
def test_the_empty_form_is_reachable_from_the_list_and_an_anonymous_visitor_sees_a_sign_in_link(db, catalog, anonymous_ui_client):
    html = anonymous_ui_client.get("/simulations/new/").content.decode()
    assert 'id="simulation-form"' in html and 'id="sign-in-to-simulate"' in html and 'id="simulation-submit"' not in html
    assert '<option value="llama-3.1-8b" selected>' in html and 'name="requests" value="1000"' in html


def test_posting_the_form_simulates_stores_and_redirects_to_the_run(catalog, ui_client, dana):
    response = ui_client.post("/simulations/new/", FORM)
    run = SimulationRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/simulations/{run.id}/"
    assert run.status == "done" and run.created_by == dana and run.request_count == 200 and run.plan is None
    assert run.inputs["workload"]["arrivals"] == {"kind": "poisson", "rate_per_s": 5.0}
    assert run.inputs["workload"]["prompt"]["tokens"] == 500 and run.inputs["workload"]["seed"] == 3
    assert run.inputs["slo_percentiles"] == {"ttft": {"p": 95.0, "s": 0.5}, "tpot": {"p": 95.0, "s": 0.05}}
    assert run.results["completed"] == 200
    html = ui_client.get(response["Location"]).content.decode()
    assert 'id="latency-table"' in html and 'id="slo-table"' in html and json_data(html, "sim-series-data")["queue"]


def test_a_rate_sweep_and_lognormal_lengths_are_sent_as_the_api_takes_them(catalog, ui_client):
    values = {**FORM, "requests": "100", "sweep_rates": "2, 8", "output_kind": "lognormal", "output_tokens": "50", "output_std_tokens": "20"}
    response = ui_client.post("/simulations/new/", values)
    assert response.status_code == 302, response.content.decode()[:2000]
    run = SimulationRun.objects.get()
    assert run.inputs["sweep"] == {"rates_per_s": [2.0, 8.0]}
    assert run.inputs["workload"]["output"]["kind"] == "lognormal" and run.inputs["workload"]["output"]["std_tokens"] == 20.0
    assert [p["rate_per_s"] for p in run.results["sweep"]["points"]] == [2.0, 8.0]


def test_a_bad_field_re_renders_the_form_with_the_error_next_to_it(catalog, ui_client):
    response = ui_client.post("/simulations/new/", {**FORM, "requests": "20001"})
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="form-errors"' in html and 'name="requests" value="20001" aria-invalid="true" aria-describedby="err-requests"' in html
    assert "20,000" in html[html.index('id="err-requests"'):][:300]
    html = ui_client.post("/simulations/new/", {**FORM, "rate_per_s": ""}).content.decode()
    assert "rate_per_s" in html[html.index('id="err-rate_per_s"'):][:300] and 'name="rate_per_s" value="" aria-invalid="true"' in html
    assert not SimulationRun.objects.exists()


def test_a_bad_swept_rate_is_named_under_the_sweep_field(catalog, ui_client):
    html = ui_client.post("/simulations/new/", {**FORM, "sweep_rates": "1, fast"}).content.decode()
    errors = html[html.index('id="err-sweep_rates"'):][:300]
    assert "rate 2:" in errors and "valid number" in errors and not SimulationRun.objects.exists()


def test_the_engines_memory_fraction_and_prefill_mode_are_sent_and_a_bad_fraction_is_named_at_its_field(catalog, ui_client):
    response = ui_client.post("/simulations/new/", {**FORM, "memory_fraction": "0.6", "prefill_alone": "true"})
    assert response.status_code == 302, response.content.decode()[:2000]
    run = SimulationRun.objects.get()
    assert run.inputs["scheduler"]["memory_fraction"] == 0.6 and run.inputs["scheduler"]["prefill_alone"] is True
    assert any("prefills run alone" in note for note in run.results["notes"])
    html = ui_client.post("/simulations/new/", {**FORM, "memory_fraction": "1.5"}).content.decode()
    assert 'name="memory_fraction" value="1.5"' in html and 'aria-describedby="err-memory_fraction"' in html
    assert "less than or equal to 1.0" in html[html.index('id="err-memory_fraction"'):][:300] and SimulationRun.objects.count() == 1
    assert '<option value="true">Prefills run alone' in ui_client.get("/simulations/new/").content.decode()


def test_a_cpu_build_without_matrix_kernels_is_sent_from_the_form_and_refused_at_its_field_on_a_gpu(catalog, ui_client):
    cpu = {**FORM, "model": "llama-2-7b", "chip": "intel-xeon-8480plus", "weight_dtype": "int4", "serving_engine": "llama.cpp",
           "requests": "20", "rate_per_s": "0.05", "prompt_tokens": "256", "output_tokens": "8", "cpu_matrix_dtypes": "none"}  # fmt: skip
    response = ui_client.post("/simulations/new/", cpu)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert SimulationRun.objects.get().inputs["scheduler"]["cpu_matrix_dtypes"] == []
    html = ui_client.post("/simulations/new/", {**FORM, "cpu_matrix_dtypes": "int4"}).content.decode()
    assert 'name="cpu_matrix_dtypes" value="int4"' in html and 'aria-describedby="err-cpu_matrix_dtypes"' in html
    assert "CPU" in html[html.index('id="err-cpu_matrix_dtypes"'):][:400] and SimulationRun.objects.count() == 1
    html = ui_client.post("/simulations/new/", {**cpu, "cpu_matrix_dtypes": "int4 fp99"}).content.decode()
    assert "fp99" in html[html.index('id="err-cpu_matrix_dtypes"'):][:400] and SimulationRun.objects.count() == 1


def test_prefill_replicas_under_a_closed_loop_are_refused_at_that_field(catalog, ui_client):
    html = ui_client.post("/simulations/new/", {**FORM, "arrivals": "closed_loop", "concurrency": "8", "prefill_replicas": "1"}).content.decode()
    assert "closed loop" in html[html.index('id="err-prefill_replicas"'):][:400] and not SimulationRun.objects.exists()


def test_a_chip_the_simulator_does_not_model_is_refused_at_the_chip_field(catalog, ui_client):
    html = ui_client.post("/simulations/new/", {**FORM, "chip": "google-tpu-v5e", "weight_dtype": "bf16"}).content.decode()
    assert "pads prompts" in html[html.index('id="err-chip"'):][:400] and not SimulationRun.objects.exists()


def test_a_re_rendered_form_links_back_to_its_plan_only_when_given_a_plan_id(catalog, ui_client):
    plan_id = uuid.uuid4()
    html = ui_client.post("/simulations/new/", {**FORM, "requests": "0", "plan": str(plan_id), "rank": "2"}).content.decode()
    assert f'href="/plans/{plan_id}/?rank=2"' in html and 'id="err-requests"' in html
    html = ui_client.post("/simulations/new/", {**FORM, "requests": "0", "plan": "not-a-plan", "rank": "2"}).content.decode()
    assert 'id="simulation-source"' not in html and 'id="err-requests"' in html


def _row_form(plan, rank: int) -> dict[str, str]:
    """The simulation form as "Simulate" on row `rank` of `plan` fills its configuration."""
    row = plan.results["ranked"][rank - 1]
    return {**FORM, "chip": row["chip_slug"], "chip_count": str(row["chip_count"]), "tensor_parallel": str(row["tensor_parallel"]),
            "weight_dtype": row["weight_dtype"], "plan": str(plan.id), "rank": str(rank)}  # fmt: skip


def test_a_simulation_of_a_plan_row_links_both_ways(rate_plan, ui_client, anonymous_ui_client):
    plan_page = anonymous_ui_client.get(f"/plans/{rate_plan.id}/").content.decode()
    assert 'id="no-row-simulations"' in plan_page
    rank = next(r for r, row in enumerate(rate_plan.results["ranked"], 1) if row["pipeline_parallel"] == 1)
    response = ui_client.post("/simulations/new/", _row_form(rate_plan, rank))
    run = SimulationRun.objects.get()
    assert response.status_code == 302 and (run.from_plan_id, run.from_rank, run.plan_id) == (rate_plan.id, rank, None)
    detail = anonymous_ui_client.get(f"/simulations/{run.id}/").content.decode()
    assert f'href="/plans/{rate_plan.id}/?rank={rank}">configuration #{rank} of a plan</a>' in detail
    plan_page = anonymous_ui_client.get(f"/plans/{rate_plan.id}/").content.decode()
    rows = plan_page[plan_page.index('id="row-simulations-table"'):]
    assert f'href="/simulations/{run.id}/"' in rows and f'href="/plans/{rate_plan.id}/?rank={rank}">row #{rank}</a>' in rows
    listed = anonymous_ui_client.get("/simulations/").content.decode()
    assert f'href="/plans/{rate_plan.id}/?rank={rank}">row #{rank} of a plan</a>' in listed
    # A rank past the plan's ranking is simulated unlinked, and the page says why.
    response = ui_client.post("/simulations/new/", {**_row_form(rate_plan, rank), "rank": "999"}, follow=True)
    assert "Not listed with configuration #999 of the plan: The plan ranks" in response.content.decode()
    assert SimulationRun.objects.filter(from_plan__isnull=True).count() == 1


def test_an_anonymous_post_is_refused_and_stores_nothing(catalog, anonymous_ui_client):
    response = anonymous_ui_client.post("/simulations/new/", FORM)
    assert response.status_code == 403 and 'id="sign-in-required"' in response.content.decode()
    assert not SimulationRun.objects.exists()


# --- the form's pure parts ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "row, reason",
    [
        ({"pipeline_parallel": 2, "decoding": "ar", "chip_kind": "gpu"}, "one pipeline stage"),
        ({"pipeline_parallel": 1, "attention_data_parallel": 4, "decoding": "ar", "chip_kind": "gpu"}, "one KV cache per replica"),
        ({"pipeline_parallel": 1, "decoding": "diffusion(T=64)", "chip_kind": "gpu"}, "block-diffusion decoding only"),
        ({"pipeline_parallel": 1, "decoding": "ar", "chip_kind": "tpu", "chip_slug": "google-tpu-v5e"}, "pads prompts"),
    ],
    ids=["pipeline", "attention-dp", "masked-diffusion", "tpu"],
)
def test_rows_the_simulator_cannot_run_say_why(row, reason):
    assert reason in forms.simulation_refusal(row)


@pytest.mark.parametrize("decoding", ["ar", "speculative(k=4)", "eagle(k=3)", "mtp(k=1)", "block_diffusion(B=32, S_eff=8)"])
def test_a_gpu_row_decoding_as_the_simulator_steps_is_simulable(decoding):
    assert forms.simulation_refusal({"pipeline_parallel": 1, "attention_data_parallel": 1, "decoding": decoding, "chip_kind": "gpu"}) is None


def test_a_speculative_plan_rows_decoding_travels_with_the_form_into_the_simulation(catalog, ui_client):
    heads = {"method": "draft_heads", "head_kind": "eagle", "draft_tokens": 3, "acceptance_rate": 0.7}
    plan = make_plan({**RATE_PLAN, "decodings": [{"method": "ar"}, heads], "hardware": {"chips": ["nvidia-h100-sxm"], "max_chips": 1}})
    rank = next(r for r, row in enumerate(plan.results["ranked"], 1) if row["decoding"] == "eagle(k=3)")
    html = ui_client.get(f"/simulations/new/?plan={plan.id}&rank={rank}").content.decode()
    assert 'id="simulation-decoding"' in html and "eagle" in html
    carried = re.search(r'name="decoding" value="([^"]*)"', html).group(1).replace("&quot;", '"')
    assert heads.items() <= json.loads(carried).items()  # with the serializer's defaults the plan stored
    response = ui_client.post("/simulations/new/", {**FORM, "decoding": json.dumps(heads)})
    assert response.status_code == 302, response.content.decode()[:2000]
    run = SimulationRun.objects.get()
    assert run.inputs["decoding"]["head_kind"] == "eagle" and any(n.startswith("eagle(k=3)") for n in run.results["notes"])


def test_a_plan_holding_a_batch_steady_is_simulated_as_a_closed_loop_of_as_many_clients(catalog, ui_client):
    plan = make_plan({**RATE_PLAN, "workload": {"prompt_tokens": 1000, "output_tokens": 200, "concurrency": 16},
                      "hardware": {"max_chips": 1, "kinds": ["gpu"]}})  # fmt: skip
    html = ui_client.get(f"/simulations/new/?plan={plan.id}&rank=1").content.decode()
    assert 'name="arrivals" value="closed_loop" checked' in html and 'name="concurrency" value="16"' in html
    assert "holds a batch of 16 steady" in html and "give a rate below" not in html


def test_a_disaggregated_plan_sized_by_concurrency_leaves_the_rate_to_give_and_its_row_brings_its_prefill_pool():
    inputs = {"model": "m", "disaggregated": True, "workload": {"prompt_tokens": 800, "output_tokens": 100, "concurrency": 64},
              "slo_percentiles": {"ttft": {"p": 99.0, "s": 1.0}}}  # fmt: skip
    row = {"chip_slug": "c", "chip_count": 2, "total_chips": 6, "tensor_parallel": 2, "pipeline_parallel": 1, "weight_dtype": "fp8", "batch": 64}
    values = forms.simulation_values_from_plan(inputs, row, plan_id="p", rank=3)
    assert values["rate_per_s"] == "" and values["concurrency"] == 64 and values["arrivals"] == "poisson"
    assert values["prefill_replicas"] == 2 and values["ttft_p"] == 99.0 and values["ttft_s"] == 1.0 and values["tpot_s"] == ""
    assert values["kv_dtype"] == "" and values["serving_engine"] == "" and values["rank"] == 3
    assert values["memory_fraction"] == "" and values["prefill_alone"] == "" and values["max_sequences"] == 64
    staged = {**inputs, "simulation": {"scheduler": {"memory_fraction": 0.85, "prefill_alone": False, "max_sequences": 32}}}
    values = forms.simulation_values_from_plan(staged, row, plan_id="p", rank=3)
    assert values["memory_fraction"] == 0.85 and values["prefill_alone"] == "false" and values["max_sequences"] == 32
    looped = {**inputs, "disaggregated": False, "workload": {**inputs["workload"], "closed_loop": True}}
    values = forms.simulation_values_from_plan(looped, row, plan_id="p", rank=3)
    assert values["arrivals"] == "closed_loop" and values["concurrency"] == 64
    # A colocated batch held steady is what as many clients with no think time keep in flight: a closed loop, not a
    # Poisson stream with no rate.
    steady = {**inputs, "disaggregated": False}
    values = forms.simulation_values_from_plan(steady, row, plan_id="p", rank=3)
    assert values["arrivals"] == "closed_loop" and values["concurrency"] == 64 and values["think_time_s"] == ""
    rated = {**steady, "workload": {"prompt_tokens": 800, "output_tokens": 100, "request_rate_per_s": 4.0}}
    assert forms.simulation_values_from_plan(rated, row, plan_id="p", rank=3)["arrivals"] == "poisson"


def test_the_payload_has_the_shape_the_simulations_api_takes():
    values = {**FORM, "arrivals": "gamma", "cv": "3", "prompt_kind": "lognormal", "prompt_tokens": "800", "prompt_std_tokens": "400",
              "prefill_replicas": "2", "sweep_rates": "1, 2;4", "max_sequences": "128", "memory_fraction": "0.85", "prefill_alone": "true",
              "kv_dtype": "fp8", "tpot_s": ""}  # fmt: skip
    payload = forms.simulation_payload(post(**values))
    assert payload == {
        "model": "llama-3.1-8b", "chip": "nvidia-h100-sxm", "chip_count": "1", "weight_dtype": "bf16", "tensor_parallel": "1", "kv_dtype": "fp8",
        "workload": {"arrivals": {"kind": "gamma", "rate_per_s": "5", "cv": "3"},
                     "prompt": {"kind": "lognormal", "mean_tokens": "800", "std_tokens": "400"},
                     "output": {"kind": "fixed", "tokens": "50"}, "requests": "200", "seed": "3"},
        "slo_percentiles": {"ttft": {"p": "95", "s": "0.5"}}, "disaggregated": {"prefill_replicas": "2"},
        "sweep": {"rates_per_s": ["1", "2", "4"]}, "scheduler": {"max_sequences": "128", "memory_fraction": "0.85", "prefill_alone": "true"},
    }  # fmt: skip
    closed = forms.simulation_payload(post(**{**FORM, "arrivals": "closed_loop", "think_time_s": "0.5", "tensor_parallel": ""}))
    assert closed["workload"]["arrivals"] == {"kind": "closed_loop", "concurrency": "32", "think_time_s": "0.5"} and closed["tensor_parallel"] == "auto"


@pytest.mark.parametrize(
    "path, field",
    [
        (("workload", "arrivals", "rate_per_s"), "rate_per_s"), (("workload", "prompt", "mean_tokens"), "prompt_tokens"),
        (("workload", "output", "std_tokens"), "output_std_tokens"), (("workload", "prompt", "min_tokens"), "prompt_tokens"),
        (("workload", "requests"), "requests"), (("workload", "shared_prefix_tokens"), "workload"), (("slo_percentiles", "tpot", "p"), "tpot_p"),
        (("slo_percentiles", "non_field_errors"), "slos"), (("sweep", "rates_per_s", 2), "sweep_rates"), (("disaggregated",), "prefill_replicas"),
        (("scheduler", "max_sequences"), "max_sequences"), (("scheduler", "memory_fraction"), "memory_fraction"),
        (("scheduler", "prefill_alone"), "prefill_alone"), (("tensor_parallel",), "tensor_parallel"), (("decoding", "method"), "form"),
        (("pipeline_parallel",), "form"),
    ],
)  # fmt: skip
def test_each_serializer_error_lands_on_the_field_that_caused_it(path, field):
    assert forms.simulation_field_for(path) == field


def test_a_draft_model_plan_rows_decoding_travels_with_the_form_too(catalog, ui_client):
    draft = {"method": "speculative", "draft_model": "llama-3.2-1b", "draft_tokens": 4, "acceptance_rate": 0.7}
    plan = make_plan({**RATE_PLAN, "decodings": [draft], "hardware": {"chips": ["nvidia-h100-sxm"], "max_chips": 1}})
    rank = next(r for r, row in enumerate(plan.results["ranked"], 1) if row["decoding"].startswith("speculative("))
    response = ui_client.get(f"/simulations/new/?plan={plan.id}&rank={rank}")
    assert response.status_code == 200
    carried = re.search(r'name="decoding" value="([^"]*)"', response.content.decode()).group(1).replace("&quot;", '"')
    assert json.loads(carried)["draft_model"] == "llama-3.2-1b"


# --- a recorded trace, uploaded through the form -------------------------------------------------
TRACE_CSV = b"arrival_s,prompt_tokens,output_tokens,user\n0.0,500,50,a\n0.2,800,20,b\n0.5,300,80,c\n"


def _upload(content: bytes, name: str = "trace.csv"):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, content, content_type="text/csv")


def test_a_trace_uploaded_through_the_form_is_simulated_row_for_row(catalog, ui_client):
    response = ui_client.post("/simulations/new/", {**FORM, "arrivals": "trace", "requests": "200", "trace_file": _upload(TRACE_CSV)})
    run = SimulationRun.objects.get()
    assert response.status_code == 302 and run.request_count == 3 and run.trace["ignored_columns"] == ["user"]
    assert "requests" not in run.inputs.get("workload", {}) and run.results["completed"] == 3
    html = ui_client.get(f"/simulations/{run.id}/").content.decode()
    assert "a trace of 3 requests" in html


def test_a_trace_chosen_without_a_file_or_with_a_bad_line_is_an_error_at_the_file_and_stores_nothing(catalog, ui_client):
    html = ui_client.post("/simulations/new/", {**FORM, "arrivals": "trace"}).content.decode()
    assert "Choose a trace file" in html[html.index('id="err-trace_file"'):][:300]
    assert 'name="arrivals" value="trace" checked' in html and 'id="trace-again"' in html
    bad = TRACE_CSV.replace(b"0.2,800,20,b", b"0.2,eight hundred,20,b")
    html = ui_client.post("/simulations/new/", {**FORM, "arrivals": "trace", "trace_file": _upload(bad)}).content.decode()
    error = html[html.index('id="err-trace_file"'):][:400]
    assert "line 3" in error and "prompt_tokens" in error
    assert not SimulationRun.objects.exists()


def test_the_payload_of_a_trace_is_the_file_and_the_seed_alone():
    upload = _upload(TRACE_CSV)
    payload = forms.simulation_payload(post(**{**FORM, "arrivals": "trace", "seed": "5"}), {"trace_file": upload})
    assert payload["workload"] == {"seed": "5"} and payload["trace_file"] is upload
    assert forms.simulation_field_for(("trace_file",)) == "trace_file"


def test_a_file_chosen_under_drawn_arrivals_or_a_trace_over_the_token_limit_is_said_at_the_file(catalog, ui_client, settings):
    html = ui_client.post("/simulations/new/", {**FORM, "trace_file": _upload(TRACE_CSV)}).content.decode()
    assert "choose “A recorded trace”" in html[html.index('id="err-trace_file"'):][:300]
    settings.SIMULATION_MAX_TOKENS = 1000  # the trace carries 1,750 prompt + output tokens
    html = ui_client.post("/simulations/new/", {**FORM, "arrivals": "trace", "trace_file": _upload(TRACE_CSV)}).content.decode()
    assert "1,750 prompt + output tokens" in html[html.index('id="err-trace_file"'):][:400] and 'id="err-requests"' not in html
    assert not SimulationRun.objects.exists()


def test_a_prefilled_form_whose_configuration_was_changed_runs_unlinked_and_says_why(rate_plan, ui_client):
    ranked = rate_plan.results["ranked"]
    rank = next(r for r, row in enumerate(ranked, 1) if row["pipeline_parallel"] == 1 and row["chip_slug"] != "nvidia-h100-sxm")
    response = ui_client.post("/simulations/new/", {**FORM, "plan": str(rate_plan.id), "rank": str(rank)}, follow=True)
    run = SimulationRun.objects.get()
    assert run.from_plan_id is None and run.from_rank is None
    html = response.content.decode()
    assert f"Not listed with configuration #{rank} of the plan" in html and "(this simulation: nvidia-h100-sxm)" in html


def test_a_run_of_a_deleted_plans_row_says_so_and_the_list_filters_by_plan_and_status(rate_plan, ui_client, anonymous_ui_client):
    rank = next(r for r, row in enumerate(rate_plan.results["ranked"], 1) if row["pipeline_parallel"] == 1)
    ui_client.post("/simulations/new/", _row_form(rate_plan, rank))
    run = SimulationRun.objects.get()
    listed = anonymous_ui_client.get(f"/simulations/?from_plan={rate_plan.id}").content.decode()
    assert 'id="from-plan-filter"' in listed and f'href="/simulations/{run.id}/"' in listed
    assert 'id="no-matching-simulations"' in anonymous_ui_client.get("/simulations/?status=queued").content.decode()
    bad = anonymous_ui_client.get("/simulations/?status=finished").content.decode()
    assert 'id="filter-errors"' in bad and f'href="/simulations/{run.id}/"' in bad  # said, and every run shown
    rate_plan.delete()
    assert "configuration #%d of a plan since deleted" % rank in anonymous_ui_client.get(f"/simulations/{run.id}/").content.decode()
    assert f"row #{rank} of a deleted plan" in anonymous_ui_client.get("/simulations/").content.decode()


def test_a_row_of_a_plan_with_a_simulation_stage_is_prefilled_with_the_stages_workload():
    stage = {"requests": 2000, "arrivals": {"kind": "gamma", "rate_per_s": 3.0, "cv": 2.0}, "seed": 4,
             "prompt": {"kind": "lognormal", "mean_tokens": 800.0, "std_tokens": 300.0}, "output": {"kind": "fixed", "tokens": 200}}  # fmt: skip
    inputs = {"model": "m", "workload": {"prompt_tokens": 1000, "output_tokens": 200, "request_rate_per_s": 5.0}, "simulation": stage}
    values = forms.simulation_values_from_plan(inputs, {"chip_slug": "c", "batch": 8}, plan_id="p", rank=1)
    assert (values["arrivals"], values["rate_per_s"], values["cv"], values["requests"], values["seed"]) == ("gamma", 3.0, 2.0, 2000, 4)
    assert (values["prompt_kind"], values["prompt_tokens"], values["prompt_std_tokens"], values["output_tokens"]) == ("lognormal", 800.0, 300.0, 200)
    assert forms.stage_left_out(stage) == []
    histogram = {**stage, "output": {"kind": "histogram", "bin_edges_tokens": [1, 100, 400], "weights": [1, 1]}, "shared_prefix_tokens": 500,
                 "shared_prefix_fraction": 0.5}  # fmt: skip
    assert forms.stage_left_out(histogram) == ["output lengths histogram", "a shared prefix of 500 tokens on 50% of the requests"]


def test_a_plan_with_no_rate_or_concurrency_asks_for_a_rate(catalog, ui_client):
    plan = make_plan({**RATE_PLAN, "workload": {"prompt_tokens": 1000, "output_tokens": 200}, "hardware": {"max_chips": 1, "kinds": ["gpu"]}})
    html = ui_client.get(f"/simulations/new/?plan={plan.id}&rank=1").content.decode()
    assert "gives no request rate to simulate" in html and 'name="arrivals" value="poisson" checked' in html

