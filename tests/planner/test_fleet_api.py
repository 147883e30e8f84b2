"""POST /api/v1/fleets/: a traffic mix planned as the cheapest fleet from the planner's own estimates, stored,
exported; limits no fleet meets are a 400 naming the binding one (docs/fleet.md)."""
from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth import get_user_model

from accounts.services import api_token_create
from tests.conftest import client_with_token

from planner import fleet_services
from planner.engine.cost import HOURS_PER_MONTH
from planner.models import FleetPlan, Plan
from planner.serializers import PlanInputSerializer
from planner.services import plan_create

pytestmark = pytest.mark.django_db

HARDWARE = {"chips": ["nvidia-h100-sxm", "nvidia-l40s", "nvidia-a100-sxm-80gb"], "max_chips": 8}
CHAT = {"name": "chat", "prompt_tokens": 1000, "output_tokens": 200, "requests_per_s": 8.0, "ttft_slo_s": 1.0, "tpot_slo_s": 0.05}
RAG = {"name": "rag", "prompt_tokens": 6000, "output_tokens": 300, "requests_per_s": 2.0, "ttft_slo_s": 3.0, "tpot_slo_s": 0.08}
BODY = {"model": "llama-3.1-8b", "classes": [CHAT, RAG], "hardware": HARDWARE}


def post(client, body, **extra):
    return client.post("/api/v1/fleets/", {**body, **extra}, format="json")


def test_a_fleet_is_planned_in_the_request_stored_and_read_back(catalog, token_client):
    response = post(token_client, BODY, name="two classes")
    assert response.status_code == 201, response.json()
    body = response.json()
    results = body["results"]
    assert body["status"] == "done" and body["name"] == "two classes" and results["status"] == "optimal"
    assert {row["class"] for row in results["allocation"]} == {"chat", "rag"}
    for c in results["classes"]:
        assert c["capacity_requests_per_s"][0] >= c["requests_per_s"]  # every class's rate is served
        assert c["usd_per_million_output_tokens"] > 0
    assert body["usd_per_month"] == pytest.approx(results["usd_per_month"][0]) and body["usd_per_month"] > 0
    assert results["pessimistic"]["usd_total"] >= results["usd_total"]
    assert results["solver"]["name"].startswith("HiGHS") and results["candidates"]["searched"] == body["candidate_count"] > 0
    assert token_client.get(body["url"]).json()["results"] == results
    assert any(row["id"] == body["id"] for row in token_client.get("/api/v1/fleets/").json()["results"])


def test_the_mix_never_costs_more_than_the_best_single_chip_fleet_and_says_by_how_much(catalog, token_client):
    results = post(token_client, BODY).json()["results"]
    best = results["best_single_chip"]
    assert best["usd_total"] >= results["usd_total"] * (1 - 1e-9)
    assert best["saving_usd_total"] == pytest.approx(best["usd_total"] - results["usd_total"])
    assert results["single_chip_fleets"][0]["chip_slug"] == best["chip_slug"]


def test_a_single_class_reduces_to_the_plans_top_answer(catalog, token_client):
    workload = {k: CHAT[k] for k in ("prompt_tokens", "output_tokens", "ttft_slo_s", "tpot_slo_s")}
    inputs = PlanInputSerializer(data={"model": "llama-3.1-8b", "workload": workload, "hardware": HARDWARE})
    inputs.is_valid(raise_exception=True)
    top = plan_create(data=inputs.validated_data, raw_inputs=inputs.data).results["ranked"][0]
    capacity = top["output_tokens_per_s_total"] / CHAT["output_tokens"]  # requests/s one replica serves
    rate = 7 * capacity  # exactly seven of them at full load
    results = post(token_client, {**BODY, "classes": [{**CHAT, "requests_per_s": rate}]}, target_utilisation=1.0).json()["results"]
    (row,) = results["allocation"]
    # the same configuration at the same price (two offerings may tie on price; either is the answer)
    assert row["replicas"] == [7] and row["usd_per_hour_per_replica"] == pytest.approx(top["usd_per_hour"])
    assert (row["chip_variant"], row["tensor_parallel"], row["batch"], row["weight_dtype"]) == (
        f"{top['chip_slug']}@{top['serving_engine']}" if top["serving_engine"] else top["chip_slug"], top["tensor_parallel"], top["batch"], top["weight_dtype"])
    assert results["usd_per_month"][0] == pytest.approx(7 * top["usd_per_month"], rel=1e-6)
    assert results["usd_per_million_output_tokens"] == pytest.approx(top["usd_per_million_output_tokens"], rel=1e-6)


def test_a_power_cap_below_the_unconstrained_fleet_forces_a_costlier_mix_and_binds(catalog, token_client):
    free = post(token_client, BODY, limits={"apply_to": "all"}).json()["results"]
    peak_kw = free["peak_wall_kw"][0]
    capped = post(token_client, BODY, limits={"apply_to": "all", "wall_kw_max": 0.8 * peak_kw})
    assert capped.status_code == 201, capped.json()
    results = capped.json()["results"]
    (power,) = [row for row in results["limits"] if row["group"] == "power"]
    assert power["binding"] and power["used"] <= 0.8 * peak_kw + 1e-6 and power["saving_usd_per_month_if_lifted"] > 0
    assert results["usd_total"] > free["usd_total"]


def test_limits_no_fleet_meets_are_a_400_naming_the_binding_one_and_store_nothing(catalog, token_client):
    response = post(token_client, BODY, limits={"apply_to": "all", "wall_kw_max": 0.5})
    assert response.status_code == 400
    assert "power (wall_kw_max 0.5 kW)" in response.json()["wall_kw_max"][0]
    supply = post(token_client, BODY, limits={"chips": {"nvidia-h100-sxm": {"max": 0}, "nvidia-l40s": {"max": 0}, "nvidia-a100-sxm-80gb": {"max": 1}}})
    assert supply.status_code == 400 and "supply of" in supply.json()["chips"][0]
    assert not FleetPlan.objects.exists()


@pytest.mark.parametrize(("change", "field"), [
    ({"classes": []}, "classes"),
    ({"classes": [CHAT, CHAT]}, "classes"),
    ({"classes": [{**CHAT, "colour": "red"}]}, "classes"),
    ({"classes": [{**CHAT, "prompt_tokens": 200_000}]}, "classes"),
    ({"limits": {"racks_max": 4}}, "limits"),
    ({"limits": {"chips": {"no-such-chip": {"max": 3}}}}, "limits"),
    ({"limits": {"chips": {"nvidia-h100-sxm": {"max": 3, "min": 5}}}}, "limits"),
    ({"horizon": {"months": 37}}, "horizon"),
    ({"horizon": {"growth": [1, 2], "months": 2}}, "horizon"),
    ({"horizon": {"hourly_shape": [0, 0]}}, "horizon"),
    ({"model": "llada-8b"}, "model"),
    ({"budget": 3}, "budget"),
])  # fmt: skip
def test_bad_input_is_a_400_naming_the_field_and_stores_nothing(catalog, token_client, change, field):
    response = post(token_client, {**BODY, **change})
    assert response.status_code == 400 and field in response.json(), response.json()
    assert not FleetPlan.objects.exists()


def test_a_program_too_large_to_solve_is_refused_before_any_search(catalog, token_client):
    classes = [{**CHAT, "name": f"c{i}"} for i in range(20)]
    response = post(token_client, {**BODY, "classes": classes, "hardware": {"max_chips": 64}, "horizon": {"months": 36, "hourly_shape": [1] * 24}})
    assert response.status_code == 400 and "variables" in response.json()["horizon"][0]


def test_a_growing_fleet_is_planned_month_by_month_and_owned_units_are_never_sold(catalog, token_client, settings):
    settings.FLEET_INLINE_MAX_CANDIDATES = 200_000  # every GPU under each engine that runs on it, planned in the request
    body = {**BODY, "hardware": {"max_chips": 8, "kinds": ["gpu"], "ownership": "own"}, "horizon": {"months": 4, "monthly_growth": 0.5}}
    results = post(token_client, body).json()["results"]
    assert len(results["usd_per_month"]) == 4 and results["usd_per_month"] == sorted(results["usd_per_month"])
    for unit in results["owned_units"]:
        assert unit["units"] == sorted(unit["units"])
    for c in results["classes"]:
        assert all(cap >= peak * (1 - 1e-9) for cap, peak in zip(c["capacity_requests_per_s"], c["peak_requests_per_s"]))


def test_the_csv_export_lists_every_configuration_and_month(catalog, token_client):
    body = post(token_client, BODY, horizon={"months": 2, "monthly_growth": 1.0}).json()
    rows = list(csv.DictReader(io.StringIO(token_client.get(f"/api/v1/fleets/{body['id']}/export.csv").content.decode())))
    assert len(rows) == 2 * len(body["results"]["allocation"])
    assert {r["month"] for r in rows} == {"1", "2"}
    total = sum(float(r["usd_per_month"]) for r in rows if r["month"] == "1")
    assert total == pytest.approx(sum(c["usd_per_month"][0] for c in body["results"]["classes"]))


def test_a_big_fleet_is_queued_for_a_worker_which_plans_it(catalog, token_client, settings, monkeypatch):
    settings.FLEET_INLINE_MAX_CANDIDATES = 0
    sent = []
    monkeypatch.setattr(fleet_services, "_send", lambda fleet: sent.append(fleet.pk) or True)
    response = post(token_client, BODY)
    assert response.status_code == 202 and response["Location"].endswith(f"/api/v1/fleets/{response.json()['id']}/")
    fleet = FleetPlan.objects.get()
    assert fleet.status == "queued"
    # The message is sent once the request's transaction commits (the test's never does): run it as a worker would.
    assert fleet_services.fleet_execute(fleet_id=str(fleet.pk)) == "done", FleetPlan.objects.get().error
    fleet.refresh_from_db()
    assert fleet.status == "done" and fleet.results["status"] == "optimal" and fleet.usd_per_month > 0
    assert fleet_services.fleet_execute(fleet_id=str(fleet.pk)) == "finished"  # a duplicate message does nothing


def test_a_stored_fleet_cannot_change_and_only_its_creator_deletes_it(catalog, token_client):
    body = post(token_client, BODY).json()
    fleet = FleetPlan.objects.get(pk=body["id"])
    fleet.name = "renamed"
    with pytest.raises(Exception, match="immutable"):
        fleet.save(update_fields=["name"])
    bob = get_user_model().objects.create_user("bob", password="not-used-1234")
    assert client_with_token(api_token_create(bob, "bob's tool", "write")[1]).delete(body["url"]).status_code == 403
    assert token_client.delete(body["url"]).status_code == 204 and not FleetPlan.objects.exists()


def test_the_fleet_figures_are_the_estimates_figures(catalog, token_client):
    """A replica's $/hour is its estimate's whole-configuration price; a month is 730.5 hours."""
    results = post(token_client, BODY).json()["results"]
    for row in results["allocation"]:
        assert row["usd_per_month"][0] == pytest.approx(row["replicas"][0] * row["usd_per_hour_per_replica"] * HOURS_PER_MONTH)
    assert Plan.objects.count() == 0  # a fleet stores no plans


def test_a_chip_a_stored_fleet_used_is_not_deleted(catalog, token_client, staff_client):
    body = post(token_client, BODY).json()
    response = staff_client.delete("/api/v1/chips/nvidia-l40s/")
    assert response.status_code == 409 and body["id"] in response.json()["detail"]
    assert token_client.delete(body["url"]).status_code == 204
    assert staff_client.delete("/api/v1/chips/nvidia-l40s/").status_code == 204


def test_storing_a_fleet_needs_a_write_token_and_anyone_reads_it(catalog, token_client, anonymous_client, read_token_client):
    assert post(anonymous_client, BODY).status_code == 401
    assert post(read_token_client, BODY).status_code == 403
    body = post(token_client, BODY).json()
    assert anonymous_client.get(body["url"]).status_code == 200
    assert anonymous_client.delete(body["url"]).status_code == 401


def test_a_chip_can_be_rented_only_or_owned_only(catalog, token_client):
    body = {**BODY, "hardware": {"chips": ["nvidia-h100-sxm", "nvidia-b200"], "max_chips": 8}}
    rented = post(token_client, body, limits={"chips": {"nvidia-h100-sxm": {"ownership": "rent"}, "nvidia-b200": {"ownership": "rent"}}})
    assert rented.status_code == 201, rented.json()
    assert {row["ownership"] for row in rented.json()["results"]["allocation"]} == {"rent"}
    owned = post(token_client, body, limits={"chips": {"nvidia-h100-sxm": {"ownership": "own"}, "nvidia-b200": {"ownership": "own"}}})
    assert owned.status_code == 201, owned.json()
    assert {row["ownership"] for row in owned.json()["results"]["allocation"]} == {"own"}


def test_a_class_given_as_length_histograms_is_planned_at_their_means(catalog, token_client):
    chat = {**CHAT}
    del chat["prompt_tokens"], chat["output_tokens"]
    chat["prompt"] = {"kind": "histogram", "bin_edges_tokens": [0, 1000, 3000], "bin_weights": [3, 1]}  # mean 375 + 500 = 875
    chat["output"] = {"kind": "fixed", "tokens": 200}
    response = post(token_client, {**BODY, "classes": [chat]})
    assert response.status_code == 201, response.json()
    (row,) = response.json()["results"]["classes"]
    assert (row["prompt_tokens"], row["output_tokens"]) == (875, 200)
    assert response.json()["inputs"]["classes"][0]["prompt"]["bin_weights"] == [3.0, 1.0]  # the request as given is kept
    both = post(token_client, {**BODY, "classes": [{**chat, "prompt_tokens": 500}]})
    assert both.status_code == 400 and "prompt_tokens" in str(both.json())
    bad = post(token_client, {**BODY, "classes": [{**chat, "prompt": {"kind": "histogram", "bin_edges_tokens": [5, 1], "bin_weights": [1]}}]})
    assert bad.status_code == 400 and "bin_edges_tokens" in str(bad.json())


def test_a_trace_is_split_into_classes_by_prompt_length_at_its_own_rate(catalog, token_client):
    rows = ["arrival_s,prompt_tokens,output_tokens"] + [f"{i * 0.5},{200 if i % 2 else 4000},{100 if i % 2 else 300}" for i in range(21)]
    body = {**BODY, "classes": [], "trace": "\n".join(rows), "trace_classes": 2, "trace_slos": {"ttft_slo_s": 3.0, "tpot_slo_s": 0.08}}
    response = post(token_client, body)
    assert response.status_code == 201, response.json()
    classes = response.json()["results"]["classes"]
    assert [c["name"] for c in classes] == ["trace 1 (prompt <= 200)", "trace 2 (prompt <= 4000)"]
    short, long_ = classes
    # 21 requests over 10 s: the 10 short ones at 1.0 request/s, the 11 long ones at 1.1
    assert (short["requests_per_s"], long_["requests_per_s"]) == (pytest.approx(1.0), pytest.approx(1.1))
    assert (short["prompt_tokens"], short["output_tokens"], long_["prompt_tokens"], long_["output_tokens"]) == (200, 100, 4000, 300)
    assert short["ttft_slo_s"] == 3.0 and long_["tpot_slo_s"] == 0.08
    stored = response.json()["inputs"]
    assert "trace" not in stored and len(stored["classes"]) == 2  # stored as the classes it gave
    assert post(token_client, {**BODY, "classes": [], "trace": "arrival_s,prompt_tokens,output_tokens\n0,10,10\n"}).status_code == 400
    assert "trace" in post(token_client, {**BODY, "trace": "arrival_s,prompt_tokens\n0,10\n"}).json()


def test_simulate_checks_each_chosen_configuration_at_its_share_of_the_rate(catalog, token_client):
    results = post(token_client, BODY, simulate=True).json()["results"]
    assert results["simulation_seconds"] > 0
    for row in results["allocation"]:
        sim = row["simulation"]
        assert sim is not None
        if "error" in sim:
            assert "pipeline" in sim["error"] or "KV" in sim["error"]
            continue
        assert 0 < sim["requests_per_s"] <= row["requests_per_s_per_replica"] * row["replicas"][0] / 0.85 * (1 + 1e-9)
        assert sim["ttft_p95_s"] > 0 and sim["meets_slos"] == (not sim["misses"])
    assert "simulation" not in post(token_client, BODY).json()["results"]["allocation"][0]


def test_simulate_caps_each_replica_at_its_share_of_the_configurations_batch(catalog, token_client, monkeypatch):
    """A configuration of several data-parallel replicas is simulated as those replicas behind a router, each at its
    share of the batch as max_num_seqs, as the plan's simulation stage does (simulation_services.row_max_sequences)."""
    from planner import simulation_services

    calls = []
    real_simulate, real_cap = simulation_services.simulate_setup, simulation_services.row_max_sequences

    def cap(row):
        calls.append({"row": row, "cap": real_cap(row)})
        return calls[-1]["cap"]

    def simulate(setup, workload, **kwargs):
        calls[-1]["replicas"], calls[-1]["max_sequences"] = setup.deployment.replicas, kwargs["options"].max_sequences
        return real_simulate(setup, workload, **kwargs)

    monkeypatch.setattr(simulation_services, "row_max_sequences", cap)
    monkeypatch.setattr(simulation_services, "simulate_setup", simulate)
    body = {**BODY, "classes": [{**CHAT, "requests_per_s": 120.0}], "hardware": {"chips": ["nvidia-l40s"], "max_chips": 8}}
    response = post(token_client, body, simulate=True)
    assert response.status_code == 201, response.json()
    checked = [c for c in calls if "replicas" in c]
    assert checked and any(c["replicas"] > 1 for c in checked)
    for c in checked:
        assert c["row"]["replicas"] == c["replicas"] and c["max_sequences"] == c["cap"]
        assert c["cap"] * c["replicas"] >= c["row"]["batch"] > (c["cap"] - 1) * c["replicas"]
