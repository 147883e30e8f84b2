from __future__ import annotations

import json
import re
import uuid

import pytest
from django.test import Client

from tests.frontend.conftest import CHAT, make_plan


@pytest.fixture
def client() -> Client:
    return Client()


def test_plan_page_shows_ranking_charts_explanation_and_exports(client, chat_plan):
    response = client.get(f"/plans/{chat_plan.id}/")
    assert response.status_code == 200
    html = response.content.decode()
    top = chat_plan.results["ranked"][0]
    assert 'id="ranked-table"' in html and html.count('<tr class="selectable') == len(chat_plan.results["ranked"])
    assert 'id="scatter-chart"' in html and 'id="roofline-chart"' in html and 'id="memory-chart"' in html
    assert "/static/frontend/vendor/chart-4.6.1.umd.min.js" in html
    assert f"/api/v1/plans/{chat_plan.id}/export.csv" in html and f'href="/api/v1/plans/{chat_plan.id}/"' in html
    explanation = response.context["explanation"]
    assert "cheapest feasible configuration" in explanation[0] and top["chip_slug"] in explanation[0]
    assert any("-bound at intensity" in line for line in explanation)
    assert 'id="infeasible-table"' in html and chat_plan.results["infeasible"][0]["reason"] in html


def test_plan_page_selects_the_rank_in_the_query(client, chat_plan):
    response = client.get(f"/plans/{chat_plan.id}/?rank=3")
    assert response.context["selected_rank"] == 3
    assert client.get(f"/plans/{chat_plan.id}/?rank=999").context["selected_rank"] == 1


def test_unknown_plan_is_404(client, db):
    assert client.get(f"/plans/{uuid.uuid4()}/").status_code == 404
    assert client.get("/plans/not-a-uuid/").status_code == 404


def test_a_plan_with_no_feasible_configuration_says_so_and_why(client, impossible_plan):
    assert impossible_plan.feasible_count == 0
    html = client.get(f"/plans/{impossible_plan.id}/").content.decode()
    assert 'id="no-feasible"' in html and "No configuration meets these targets" in html
    assert "misses the TTFT SLO" in html


def test_plans_list_empty_state(client, db):
    response = client.get("/plans/")
    assert response.status_code == 200
    assert 'id="no-plans"' in response.content.decode()


def test_plans_list_newest_first_with_links(client, catalog):
    first = make_plan(CHAT)
    second = make_plan({**CHAT, "model": "llama-3.1-8b"})
    html = client.get("/plans/").content.decode()
    assert html.index(f"/plans/{second.id}/") < html.index(f"/plans/{first.id}/")


def test_plans_list_is_paginated(client, chat_plan, monkeypatch):
    monkeypatch.setattr("frontend.views.PLANS_PER_PAGE", 1)
    make_plan(CHAT)
    response = client.get("/plans/?page=2")
    assert response.status_code == 200 and response.context["page"].number == 2
    assert client.get("/plans/?page=99").context["page"].number == 2  # out of range: the last page


def test_plan_compare_shows_inputs_and_top_choices_side_by_side(client, catalog):
    a = make_plan(CHAT)
    b = make_plan({**CHAT, "workload": {**CHAT["workload"], "concurrency": 8}})
    response = client.get(f"/plans/compare/?a={a.id}&b={b.id}")
    assert response.status_code == 200
    rows = {row["key"]: row for row in response.context["inputs"]}
    assert rows["workload.concurrency"]["differs"] and not rows["model"]["differs"]
    assert (rows["workload.concurrency"]["label"], rows["workload.concurrency"]["a"], rows["workload.concurrency"]["b"]) == ("Concurrent requests", "64", "8")
    assert (rows["workload.ttft_slo_s"]["label"], rows["workload.ttft_slo_s"]["a"]) == ("TTFT target", "500 ms")
    assert (rows["disaggregated"]["a"], rows["pinned"]["label"]) == ("no", "Re-validated nightly")
    assert len(response.context["top_a"]) == 3
    points = response.context["points"]
    assert len(points["a"]) == len(a.results["ranked"]) and all(p["usd"] > 0 and p["tpot_s"] > 0 for p in points["b"])
    assert 'id="compare-chart"' in response.content.decode() and 'id="compare-points"' in response.content.decode()


def test_plan_inputs_read_as_a_reader_names_them_with_units():
    from frontend.compare import formatted, label_for

    assert label_for("decodings[0].focus_fraction") == "Decoding 1 · focus fraction"
    assert label_for("efficiency.step_overhead_s") == "Efficiency · step overhead"
    assert label_for("hardware.max_chips") == "At most chips"
    assert formatted("decodings[0].focus_fraction", 0.5) == "50.0%" and formatted("decodings[0].acceptance_rate", 0.7) == "70.0%"
    assert formatted("efficiency.step_overhead_s", 0.0003) == "0.3 ms" and formatted("workload.request_rate_per_s", 20) == "20/s"
    assert formatted("budget_usd_per_million_output_tokens", 0.5) == "$0.5" and formatted("hardware.kinds", []) == "any"
    assert formatted("decodings[0].adaptive_window", True) == "yes" and formatted("serving_engine", None) == "–"


def test_plan_compare_with_unknown_or_missing_ids_is_a_clear_error(client, chat_plan):
    response = client.get(f"/plans/compare/?a={chat_plan.id}&b={uuid.uuid4()}")
    assert response.status_code == 404 and "No plan with id" in response.content.decode()
    response = client.get("/plans/compare/")
    assert response.status_code == 400 and "missing" in response.content.decode()
    assert client.get(f"/plans/compare/?a={chat_plan.id}&b=junk").status_code == 404


def test_a_validation_card_says_how_steady_its_repetitions_were():
    from frontend.validation_cards import _repetitions_note

    assert _repetitions_note({"repetitions": 5, "tpot_spread": 0.04, "ttft_spread": 0.1}) == (
        "Medians of 5 timed repetitions after the warm-up; TPOT spread 4.0%, TTFT spread 10.0%.")
    assert "too noisy" in _repetitions_note({"repetitions": 5, "tpot_spread": 0.4, "ttft_spread": 0.1})
    assert _repetitions_note({"tpot_s": 0.1}) == ""  # a run from before repetitions were timed says nothing


def test_the_ranking_shows_the_cheapest_configuration_of_each_chip_first_and_all_of_them_on_request(client, chat_plan):
    ranked = chat_plan.results["ranked"]
    chips = list(dict.fromkeys(row["chip_slug"] for row in ranked))
    assert len(chips) < len(ranked)  # near-duplicates: one chip under several engines, batches, offerings
    response = client.get(f"/plans/{chat_plan.id}/")
    shown = [t for t in response.context["table"] if not t["hidden"]]
    assert [t["row"]["chip_slug"] for t in shown] == chips  # one line a chip, cheapest first
    assert all(t["rank"] == min(r["rank"] for r in response.context["table"] if r["row"]["chip_slug"] == t["row"]["chip_slug"]) for t in shown)
    html = response.content.decode()
    assert f"The cheapest configuration on each of {len(chips)} chips ({len(ranked)} ranked in all)" in html
    busiest = max(chips, key=lambda c: sum(r["chip_slug"] == c for r in ranked))
    more = sum(r["chip_slug"] == busiest for r in ranked) - 1
    assert f'data-expand-chip="{busiest}"' in html and f"+{more} more on this chip" in html
    assert html.count(" hidden tabindex") == len(ranked) - len(chips)
    everything = client.get(f"/plans/{chat_plan.id}/?view=all")
    assert not any(t["hidden"] for t in everything.context["table"]) and 'id="view-best"' in everything.content.decode()


def test_a_selected_configuration_is_shown_even_when_it_is_not_the_cheapest_of_its_chip(client, chat_plan):
    ranked = chat_plan.results["ranked"]
    second_of_a_chip = next(rank for rank, row in enumerate(ranked, 1) if any(r["chip_slug"] == row["chip_slug"] for r in ranked[: rank - 1]))
    table = client.get(f"/plans/{chat_plan.id}/?rank={second_of_a_chip}").context["table"]
    assert not table[second_of_a_chip - 1]["hidden"] and not table[second_of_a_chip - 1]["best"]


def test_a_validation_card_says_what_ran_a_scaled_copy_and_a_stand_in():
    from types import SimpleNamespace

    from frontend.validation_cards import what_ran

    def run(**overrides):
        base = {"device_name": "AMD EPYC 9654 (32 cores)", "matched_chip_slug": "amd-epyc-9654", "model_slug": "llama-3.1-70b", "stand_in": False, "trial": "decode",
                "params": {"dtype": "bf16"}, "measured": {"scaled": {"layers_run": 2, "layers_full": 80, "scale_factor": 40.0}},
                "configuration": {"chip_slug": "intel-gaudi3", "chip_name": "Intel Gaudi 3"}}  # fmt: skip
        return SimpleNamespace(**{**base, **overrides})

    assert what_ran(run()) == ("Ran a 2-layer bf16 scaled copy (of 80 layers) of llama-3.1-70b on AMD EPYC 9654 (32 cores), a stand-in "
                               "for the planned Intel Gaudi 3: the predictions beside it are this device's, for the same scaled copy.")  # fmt: skip
    same_chip = run(configuration={"chip_slug": "amd-epyc-9654"})
    assert what_ran(same_chip) == ("Ran a 2-layer bf16 scaled copy (of 80 layers) of llama-3.1-70b on AMD EPYC 9654 (32 cores): "
                                   "the predictions beside it are for the same scaled copy on this device.")  # fmt: skip
    whole = run(measured={}, model_slug="llama-3.2-1b", configuration={"chip_slug": "amd-epyc-9654"})
    assert what_ran(whole) == "Ran the whole llama-3.2-1b in bf16 on AMD EPYC 9654 (32 cores)."
    assert what_ran(run(device_name="")) == ""  # not run yet


def test_a_plan_for_a_request_rate_says_what_its_costs_are_charged_to(client, catalog):
    plan = make_plan({"model": "llama-3.1-8b", "workload": {"prompt_tokens": 1000, "output_tokens": 300, "request_rate_per_s": 2},
                      "hardware": {"chips": ["nvidia-h100-sxm"], "max_chips": 1}})  # fmt: skip
    html = client.get(f"/plans/{plan.id}/").content.decode()
    assert "2 requests/s (" in html and "600 output tokens/s, what each row's $/1M output tokens is charged to" in html
    top = plan.results["ranked"][0]
    assert top["served_output_tokens_per_s"] == pytest.approx(600.0) and top["output_tokens_per_s_total"] > 600.0
    assert top["usd_per_million_output_tokens"] == pytest.approx(top["usd_per_hour"] / (600.0 * 3600) * 1e6, rel=1e-6)
    assert "The request rate asks 600 of those tokens/s" in html


def test_a_plan_with_percentile_slos_shows_its_simulation_stage_and_warns_when_nothing_simulated_meets_them(client, catalog):
    plan = make_plan({"model": "llama-3.1-8b", "workload": {"prompt_tokens": 1000, "output_tokens": 200, "request_rate_per_s": 4},
                      "hardware": {"chips": ["nvidia-h100-sxm", "nvidia-a100-sxm-80gb", "nvidia-l4"], "max_chips": 2, "weight_dtypes": ["bf16", "fp8"]},
                      "slo_percentiles": {"ttft": {"p": 99, "s": 0.02}}, "simulation": {"requests": 100, "top_n": 3}})  # fmt: skip
    assert plan.results["simulation"]["candidates"] == 3
    html = client.get(f"/plans/{plan.id}/").content.decode()
    assert "percentile SLOs p99 TTFT ≤ 20 ms" in html and "TTFT target –" not in html
    assert 'id="simulation-stage"' in html and "The first 3 rows not ruled out by a prefill longer than the TTFT bound were simulated" in html
    ranked = plan.results["ranked"]
    assert html.count('<td class="small stage-') == len(ranked)
    assert plan.results["simulation"]["meeting_slos"] == 0  # a 20 ms p99 TTFT at 4 requests/s: none of the three simulated meets it
    assert 'id="stage-warning"' in html and "No simulated configuration meets the percentile SLOs" in html
    ruled_out = [r for r in ranked if r["analytical_miss"]]
    assert ruled_out and html.count('class="small stage-ruled-out"') == len(ruled_out)
    assert f"{len(ruled_out):,} rows miss the TTFT bound whatever the load" in html
    # Each simulated candidate's latency CDF, in ranked order, with the SLO's bound and percentile.
    cdf = json.loads(re.search(r'<script id="stage-cdf-data" type="application/json">(.*?)</script>', html, re.S).group(1))
    ttft = cdf["metrics"][0]
    simulated = [rank for rank, row in enumerate(ranked, 1) if (row.get("simulation") or {}).get("cdf")]
    assert ttft["key"] == "ttft_s" and [c["rank"] for c in ttft["candidates"]] == simulated and len(simulated) == 3
    assert ttft["slo"] == {"p": 99.0, "s": 0.02} and ttft["candidates"][0]["points"][-1]["y"] == 1.0
    assert 'id="stage-cdf-chart"' in html and 'data-stage-cdf-metric="tpot_s"' in html


def test_a_plan_whose_budget_leaves_nothing_says_the_budget_did_it(client, catalog):
    plan = make_plan({"model": "llama-3.1-8b", "workload": {"prompt_tokens": 1000, "output_tokens": 300, "concurrency": 32},
                      "hardware": {"chips": ["nvidia-h100-sxm"], "max_chips": 2}, "budget_usd_per_million_output_tokens": 0.0001})  # fmt: skip
    assert plan.feasible_count == 0 and plan.results["over_budget_count"] > 0
    html = client.get(f"/plans/{plan.id}/").content.decode()
    assert "No configuration meets these targets within the budget" in html and "Raise the budget" in html
    assert f"{plan.results['over_budget_count']:,} meet the targets but cost more than the budget of $0.0001 per 1M output tokens" in html


def test_a_plan_run_in_the_request_finishes_when_it_is_stored_not_before(catalog):
    plan = make_plan({"model": "llama-3.1-8b", "workload": {"prompt_tokens": 1000, "output_tokens": 300, "concurrency": 8},
                      "hardware": {"chips": ["nvidia-h100-sxm"], "max_chips": 1}})  # fmt: skip
    plan.refresh_from_db()
    assert plan.finished_at == plan.created_at


def test_a_plan_whose_simulation_stage_runs_on_workers_says_it_simulates_candidates_not_that_it_searches(client, catalog, settings):
    settings.SIMULATION_INLINE_MAX_REQUESTS = 10  # the stage goes to the workers (none runs here: the plan stays running)
    plan = make_plan({"model": "llama-3.1-8b", "workload": {"prompt_tokens": 1000, "output_tokens": 200, "request_rate_per_s": 4},
                      "hardware": {"chips": ["nvidia-h100-sxm"], "max_chips": 1}, "slo_percentiles": {"ttft": {"p": 95, "s": 0.5}},
                      "simulation": {"requests": 100, "top_n": 2}})  # fmt: skip
    assert plan.status == "running" and plan.results["simulation"]["status"] == "pending"
    html = client.get(f"/plans/{plan.id}/").content.decode()
    assert "Simulating the top candidates" in html and "Its first 2" in html and f"{plan.candidate_count:,} configurations" in html
    assert 'data-progress-what="of the candidates simulated"' in html and "0.0% of the candidates simulated" in html
    assert "so it runs on a worker" not in html


def test_under_a_rate_sweep_a_rows_cell_is_decided_by_its_knee_not_by_the_plans_load():
    from frontend.explain import simulation_cell

    sim = {"sweep": {"knee_rate_per_s": 6.0}, "meets_slo_percentiles": False,
           "slo_percentiles": {"ttft": {"p": 95, "s": 0.5, "value_s": 0.8, "met": False}}}  # fmt: skip
    cell = simulation_cell({"simulation": sim, "simulated_usd_per_million_output_tokens": 0.3})
    assert cell["kind"] == "meets" and "at its knee" in cell["text"] and "at the plan's load p95 TTFT 800 ms > 500 ms" in cell["text"]
    none = simulation_cell({"simulation": {**sim, "sweep": {"knee_rate_per_s": None}}, "simulated_usd_per_million_output_tokens": None})
    assert none["kind"] == "misses" and "no swept rate meets every percentile SLO" in none["text"]
