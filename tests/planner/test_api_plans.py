from __future__ import annotations

import csv
import io

import pytest

from planner.models import Plan

CHAT_70B = {
    "model": "llama-3.1-70b",
    "workload": {"prompt_tokens": 1000, "output_tokens": 300, "concurrency": 200, "ttft_slo_s": 0.5, "tpot_slo_s": 0.05},
}


def test_a_dtype_or_decoding_given_twice_counts_once(catalog, token_client):
    hardware = {"chips": ["nvidia-h100-sxm"], "max_chips": 2}
    once = token_client.post("/api/v1/plans/", {**CHAT_70B, "hardware": {**hardware, "weight_dtypes": ["fp8"]}}, format="json").json()
    twice = token_client.post("/api/v1/plans/", {**CHAT_70B, "hardware": {**hardware, "weight_dtypes": ["fp8", "fp8"]},
                                                 "decodings": [{"method": "ar"}, {"method": "ar"}]}, format="json").json()  # fmt: skip
    assert twice["candidate_count"] == once["candidate_count"] > 0
    keys = [(r["chip_count"], r["tensor_parallel"], r["weight_dtype"], r["decoding"]) for r in twice["results"]["ranked"]]
    assert len(keys) == len(set(keys)) == len(once["results"]["ranked"])


def test_a_plan_ranks_feasible_configurations_by_cost_and_stores_its_inputs(catalog, token_client):
    response = token_client.post("/api/v1/plans/", CHAT_70B, format="json")
    assert response.status_code == 201, response.json()
    plan = response.json()
    ranked = plan["results"]["ranked"]
    assert plan["feasible_count"] > 0 and ranked
    costs = [row["usd_per_million_output_tokens"] for row in ranked if row["usd_per_million_output_tokens"] is not None]
    assert costs == sorted(costs)
    assert all(row["tpot_s"] <= 0.05 and row["ttft_s"] <= 0.5 for row in ranked)
    assert plan["inputs"]["model"] == "llama-3.1-70b"
    assert {c["slug"] for c in plan["catalog_snapshot"]["chips"]} >= {"nvidia-h100-sxm", "google-tpu-v5e", "groq-lpu"}
    assert plan["results"]["pareto_cost_tpot"]
    reasons = {group["reason"] for group in plan["results"]["infeasible"]}
    assert any("weights" in reason for reason in reasons)


def test_the_pareto_front_has_no_dominated_point(catalog, token_client):
    plan = token_client.post("/api/v1/plans/", CHAT_70B, format="json").json()
    front = [(r["usd_per_million_output_tokens"], r["tpot_s"]) for r in plan["results"]["pareto_cost_tpot"]]
    for cost, tpot in front:
        assert not any(c <= cost and t <= tpot and (c, t) != (cost, tpot) for c, t in front)


def test_hardware_filters_and_budget_narrow_the_plan(catalog, token_client):
    body = {**CHAT_70B, "hardware": {"kinds": ["tpu"], "ownership": "rent", "max_chips": 32}}
    plan = token_client.post("/api/v1/plans/", body, format="json").json()
    assert plan["results"]["ranked"] and all(row["chip_kind"] == "tpu" for row in plan["results"]["ranked"])
    assert all(row["pricing_model"] != "purchase" for row in plan["results"]["ranked"])
    cheap = token_client.post("/api/v1/plans/", {**CHAT_70B, "budget_usd_per_million_output_tokens": 0.0001}, format="json").json()
    assert cheap["results"]["ranked"] == [] and cheap["results"]["over_budget_count"] > 0


def test_a_plan_is_listed_fetched_and_exported_as_csv(catalog, token_client, anonymous_client):
    plan_id = token_client.post("/api/v1/plans/", CHAT_70B, format="json").json()["id"]
    listing = anonymous_client.get("/api/v1/plans/").json()
    assert listing["results"][0]["id"] == plan_id
    assert anonymous_client.get(f"/api/v1/plans/{plan_id}/").json()["id"] == plan_id
    export = anonymous_client.get(f"/api/v1/plans/{plan_id}/export.csv")
    assert export.status_code == 200 and export["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(export.content.decode())))
    assert rows and rows[0]["rank"] == "1" and float(rows[0]["usd_per_million_output_tokens"]) > 0


def test_an_anonymous_plan_write_gets_401_and_stores_nothing(catalog, anonymous_client):
    assert anonymous_client.post("/api/v1/plans/", CHAT_70B, format="json").status_code == 401
    assert not Plan.objects.exists()


def test_an_unknown_plan_is_404(db, anonymous_client):
    assert anonymous_client.get("/api/v1/plans/00000000-0000-0000-0000-000000000000/").status_code == 404
    malformed = anonymous_client.get("/api/v1/plans/not-a-uuid/")
    assert malformed.status_code == 404 and malformed.json() == {"detail": "Not found."}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "nope", "workload": CHAT_70B["workload"]}, "model"),
        ({"model": "llama-3.1-70b"}, "workload"),
        ({**CHAT_70B, "workload": {"prompt_tokens": 0, "output_tokens": 10}}, "workload"),
        ({**CHAT_70B, "workload": {"prompt_tokens": "x", "output_tokens": 10}}, "workload"),
        ({**CHAT_70B, "hardware": {"kinds": ["quantum"]}}, "hardware"),
        ({**CHAT_70B, "hardware": {"max_chips": 100000}}, "hardware"),
        ({**CHAT_70B, "hardware": {"chips": ["no-such-chip"]}}, "hardware"),
        ({**CHAT_70B, "decodings": [{"method": "block_diffusion"}]}, "decodings"),
        ({**CHAT_70B, "budget_usd_per_million_output_tokens": -1}, "budget_usd_per_million_output_tokens"),
        ([1, 2], "non_field_errors"),
    ],
)
def test_bad_plan_input_gets_400_naming_the_field_and_stores_nothing(catalog, token_client, body, field):
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert not Plan.objects.exists()


def test_an_absurd_search_is_refused_up_front(catalog, token_client, monkeypatch):
    from planner import services

    monkeypatch.setattr(services, "MAX_PLAN_CANDIDATES", 1000)
    response = token_client.post("/api/v1/plans/", {**CHAT_70B, "workload": {"prompt_tokens": 100, "output_tokens": 100}}, format="json")
    assert response.status_code == 400 and "narrow" in response.json()["hardware"][0]
    assert not Plan.objects.exists()


def test_hardware_filters_that_match_no_chip_get_400_naming_hardware(catalog, token_client):
    body = {**CHAT_70B, "hardware": {"kinds": ["cpu", "tpu"], "vendors": ["nobody"]}}
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 400 and "No chip in the catalog matches" in response.json()["hardware"][0]
    assert not Plan.objects.exists()


def test_a_plan_ranks_by_the_pessimistic_end_of_its_cost_interval_when_asked(catalog, token_client):
    body = {**CHAT_70B, "hardware": {"kinds": ["gpu", "tpu"]}, "rank_by": "pessimistic"}
    plan = token_client.post("/api/v1/plans/", body, format="json").json()
    ranked = plan["results"]["ranked"]
    high = [r["intervals"]["usd_per_million_output_tokens"]["high"] for r in ranked]
    assert ranked and high == sorted(high)
    expected = token_client.post("/api/v1/plans/", {**body, "rank_by": "expected"}, format="json").json()["results"]["ranked"]
    costs = [r["usd_per_million_output_tokens"] for r in expected]
    assert costs == sorted(costs)
    assert token_client.post("/api/v1/plans/", {**body, "rank_by": "worst"}, format="json").status_code == 400


def test_a_plan_naming_a_serving_engine_searches_the_chips_it_runs_on(catalog, token_client):
    body = {**CHAT_70B, "serving_engine": "trtllm"}  # an alias of TensorRT-LLM, which runs on NVIDIA GPUs only
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 201, response.json()
    plan = response.json()
    assert {c["vendor"] for c in plan["catalog_snapshot"]["chips"]} == {"NVIDIA"}
    assert plan["results"]["efficiency_sources"] == ["fitted serving-engine profile (TensorRT-LLM)"]
    assert all(row["serving_engine"] == "TensorRT-LLM" for row in plan["results"]["ranked"])
    assert all("with TensorRT-LLM" in row["intervals"]["tpot_s"]["basis"] for row in plan["results"]["ranked"])
    refused = token_client.post("/api/v1/plans/", {**body, "hardware": {"kinds": ["tpu"]}}, format="json")
    assert refused.status_code == 400 and "runs on NVIDIA gpu chips only" in refused.json()["serving_engine"][0]


def test_an_engine_named_on_a_chip_its_profile_does_not_cover_brings_its_scheduler_not_its_profile(
    catalog, token_client, amd_profile_of_the_mi300x_alone
):
    # The AMD profile as it stood when only the MI300X was measured: one chip's profile, its architecture's chips, and the
    # rest at the spec defaults.
    body = {**CHAT_70B, "serving_engine": "vLLM", "hardware": {"vendors": ["AMD"], "kinds": ["gpu"]}}
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 201, response.json()
    results = response.json()["results"]
    rows = results["ranked"] + [g["example_configuration"] for g in results["infeasible"]]
    assert rows and all(r["chip_slug"].startswith("amd-") and r["serving_engine"] == "vLLM" for r in rows)
    # vLLM's profile was fitted on NVIDIA GPUs: an AMD GPU keeps its own efficiency and the chip-family intervals, a chip of
    # the AMD profile's architecture (CDNA 3) that profile with vLLM's request overhead, another its spec defaults with vLLM's
    # host-side costs.
    host = "spec defaults with vLLM's step and request overheads (its fitted serving-engine profile)"
    profiled = {r["efficiency_source"] for r in rows if r["chip_slug"] in ("amd-mi300x", "amd-mi325x")}
    assert profiled and profiled <= {
        "fitted chip-family profile (AMD gpu: 43 published measurements on amd-mi300x), with vLLM's request overhead",
        "fitted chip-family profile (AMD gpu: 43 published measurements on amd-mi300x; the same CDNA 3 architecture as amd-mi300x), "
        "with vLLM's request overhead"}
    assert {r["efficiency_source"] for r in rows if r["chip_slug"] in ("amd-mi355x", "amd-mi250x", "amd-mi210")} == {host}
    assert all("with vLLM" not in r["intervals"]["tpot_s"]["basis"] for r in results["ranked"])
    fp8 = token_client.post("/api/v1/plans/", {**CHAT_70B, "serving_engine": "llama-cpp", "hardware": {"weight_dtypes": ["fp8"]}}, format="json")
    assert fp8.status_code == 400 and "llama.cpp serves" in fp8.json()["serving_engine"][0]


def test_a_disaggregated_plans_rows_carry_the_intervals_of_disaggregated_predictions(catalog, token_client):
    body = {**CHAT_70B, "serving_engine": "vLLM", "disaggregated": True, "hardware": {"vendors": ["NVIDIA"]}}
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 201, response.json()
    split = response.json()["results"]["ranked"]
    # vLLM publishes too few disaggregated values of its own: every engine's fitted disaggregated errors stand in.
    assert split and all(r["intervals"]["ttft_s"]["basis"].endswith("with every serving engine, disaggregated") for r in split)
    colocated = token_client.post("/api/v1/plans/", {**body, "disaggregated": False}, format="json").json()["results"]["ranked"]
    assert colocated and all(r["intervals"]["ttft_s"]["basis"].endswith("with vLLM, colocated") for r in colocated)


def test_a_plan_searches_every_chip_under_each_fitted_serving_engine_that_runs_on_it(catalog, token_client):
    """A plan that names no engine tries each chip under every engine with a fitted profile that the catalog lets drive
    it: NVIDIA's GPUs under that engine's whole profile, other chips with their own efficiency and the engine's host
    costs (so an AMD GPU waits SGLang's or vLLM's request overhead before its first token, as an NVIDIA GPU does); a
    chip none of them runs on (Groq's LPU) is tried as it is."""
    from hwcatalog.models import Chip, ServingEngine
    from planner.catalog_specs import engine_refusal

    plan = token_client.post("/api/v1/plans/", CHAT_70B, format="json").json()
    rows = plan["results"]["ranked"] + [g["example_configuration"] for g in plan["results"]["infeasible"]]
    fitted = list(ServingEngine.objects.filter(profile__in=["SGLang", "TensorRT-LLM", "vLLM"]))
    chips = {c.slug: c for c in Chip.objects.all()}
    runs_on = {slug: {e.profile for e in fitted if engine_refusal(e, c) is None} for slug, c in chips.items()}
    assert {r["chip_kind"] for r in rows} >= {"gpu", "cpu", "lpu", "other"}
    assert {r["serving_engine"] for r in rows if r["chip_slug"].startswith("amd-mi")} in ({"SGLang"}, {"vLLM"}, {"SGLang", "vLLM"})
    examples = [g["example"] for g in plan["results"]["infeasible"]]
    assert not any("@" in text for r in rows for text in r["reasons"] + r["warnings"] + examples)  # "amd-mi210 under SGLang"
    for r in rows:
        assert "@" not in r["chip_slug"]
        if not runs_on[r["chip_slug"]]:
            assert r["serving_engine"] is None
            assert r["efficiency_source"] == "spec defaults" or r["efficiency_source"].startswith("fitted chip-family profile (")
            continue
        engine = r["serving_engine"]
        assert engine in runs_on[r["chip_slug"]] and r["chip_name"].endswith(engine)
        if r["efficiency_source"].startswith("calibration"):
            continue  # runs measured on the chip speak for it (under some engine, its host costs with them)
        if chips[r["chip_slug"]].vendor == "NVIDIA" and r["chip_kind"] == "gpu":
            assert r["efficiency_source"] == f"fitted serving-engine profile ({engine})"
        else:
            assert r["efficiency_source"].endswith((f", with {engine}'s request overhead",
                                                    f"spec defaults with {engine}'s step and request overheads (its fitted serving-engine profile)"))
    exported = token_client.get(f"/api/v1/plans/{plan['id']}/export.csv")
    header = next(csv.reader(io.StringIO(exported.content.decode())))
    assert "serving_engine" in header


def test_a_plan_runs_its_named_engine_under_the_servers_settings(catalog, token_client):
    """A server started with --max-num-seqs 8 runs at most 8 sequences a replica: no ranked row assumes more. The settings
    are one engine's command line, so a plan that names no engine is refused them."""
    body = {**CHAT_70B, "serving_engine": "vLLM", "hardware": {"chips": ["nvidia-h100-sxm"]}}
    free = token_client.post("/api/v1/plans/", body, format="json")
    capped = token_client.post("/api/v1/plans/", {**body, "scheduler": {"max_sequences": 8}}, format="json")
    assert free.status_code == capped.status_code == 201, capped.json()

    def per_replica(row):
        return row["batch"] / (row["replicas"] * row.get("attention_data_parallel", 1))

    assert any(per_replica(r) > 8 for r in free.json()["results"]["ranked"])
    ranked = capped.json()["results"]["ranked"]
    assert ranked and all(per_replica(r) <= 8 for r in ranked)
    assert capped.json()["inputs"]["scheduler"] == {"max_sequences": 8}
    refused = token_client.post("/api/v1/plans/", {**CHAT_70B, "scheduler": {"max_sequences": 8}}, format="json")
    assert refused.status_code == 400 and "serving_engine" in refused.json()["scheduler"][0]
    # The attention-DP balance is an estimate's setting: a plan searches no attention data parallelism, so it is an unknown field.
    balance = token_client.post("/api/v1/plans/", {**body, "scheduler": {"attention_dp_balance_steps": 0}}, format="json")
    assert balance.status_code == 400 and "attention_dp_balance_steps" in balance.json()["scheduler"], balance.json()


def test_a_plan_applies_a_cpu_builds_matrix_unit_setting_to_its_cpus_only(catalog, token_client):
    """llama.cpp built without AMX kernels (`cpu_matrix_dtypes` []): the plan's Xeon rows prefill on the vector units,
    slower; its GPU rows are those of a plan without the setting."""
    body = {"model": "llama-3.1-8b", "workload": {"prompt_tokens": 2048, "output_tokens": 64, "concurrency": 1},
            "serving_engine": "llama.cpp", "hardware": {"chips": ["intel-xeon-8480plus", "nvidia-l40s"], "max_chips": 1,
                                                         "weight_dtypes": ["int4"]}}  # fmt: skip
    tiles = token_client.post("/api/v1/plans/", body, format="json")
    vector = token_client.post("/api/v1/plans/", {**body, "scheduler": {"cpu_matrix_dtypes": []}}, format="json")
    assert tiles.status_code == vector.status_code == 201, vector.json()

    def ttft(plan, chip):
        return sorted(r["ttft_s"] for r in plan.json()["results"]["ranked"] if r["chip_slug"] == chip)

    assert ttft(tiles, "intel-xeon-8480plus") and all(
        v > 3 * t for v, t in zip(ttft(vector, "intel-xeon-8480plus"), ttft(tiles, "intel-xeon-8480plus"), strict=True))
    assert ttft(vector, "nvidia-l40s") == ttft(tiles, "nvidia-l40s") != []
    assert vector.json()["inputs"]["scheduler"] == {"cpu_matrix_dtypes": []}
    twice = token_client.post("/api/v1/plans/", {**body, "scheduler": {"cpu_matrix_dtypes": ["int8", "int8"]}}, format="json")
    assert twice.status_code == 201 and twice.json()["inputs"]["scheduler"] == {"cpu_matrix_dtypes": ["int8"]}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"serving_engine": "TensorRT-LLM", "hardware": {"max_chips": 1}}, "scheduler"),  # an engine that runs on no CPU
        ({"hardware": {"kinds": ["gpu"], "max_chips": 1}}, "scheduler"),
        ({"hardware": {"chips": ["nvidia-l40s"], "max_chips": 1}}, "scheduler"),
        ({"slo_percentiles": {"ttft": {"p": 95, "s": 5}}, "simulation": {"scheduler": {"cpu_matrix_dtypes": []}},
          "scheduler": {}}, "simulation"),  # the simulation stage runs the plan's build, not one of its own
    ],
)
def test_a_cpu_build_setting_that_reaches_no_cpu_is_refused_naming_it(catalog, token_client, change, field):
    body = {"model": "llama-3.1-8b", "workload": {"prompt_tokens": 2048, "output_tokens": 64, "concurrency": 1},
            "serving_engine": "llama.cpp", "scheduler": {"cpu_matrix_dtypes": []}, **change}  # fmt: skip
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 400, response.json()
    named = response.json()[field]
    assert "cpu_matrix_dtypes" in (named["scheduler"] if field == "simulation" else named)


def test_a_closed_loop_plan_ranks_layouts_that_queue_the_clients_memory_cannot_hold(catalog, token_client):
    """200 clients against servers that run at most 8 sequences a replica: as a batch, only layouts of 25 replicas
    or more hold them; as a closed loop, smaller ones run 8 a replica and the rest wait for a slot, which the TTFT
    carries and each row's warnings say."""
    workload = {"prompt_tokens": 1000, "output_tokens": 300, "concurrency": 200}
    body = {"model": "llama-3.1-70b", "workload": workload, "serving_engine": "vLLM", "scheduler": {"max_sequences": 8},
            "hardware": {"chips": ["nvidia-h100-sxm"], "max_chips": 16}}  # fmt: skip
    batch = token_client.post("/api/v1/plans/", body, format="json")
    looped = token_client.post("/api/v1/plans/", {**body, "workload": {**workload, "closed_loop": True}}, format="json")
    assert batch.status_code == looped.status_code == 201, looped.json()
    assert batch.json()["results"]["ranked"] == []  # 16 chips make at most 16 replicas of 8
    ranked = looped.json()["results"]["ranked"]
    assert ranked and all(r["batch"] == 8 * r["replicas"] < 200 for r in ranked)
    assert all(f"of the 200 clients' requests at once" in " ".join(r["warnings"]) for r in ranked)
    assert all(r["queue_wait_s"] > r["ttft_s"] / 2 for r in ranked)  # most of the first token's time is the wait
    assert looped.json()["inputs"]["workload"]["closed_loop"] is True


def test_a_plan_for_a_request_rate_prices_the_tokens_it_serves_so_idle_chips_rank_last(catalog, token_client):
    """0.1 requests/s of 1,000 / 300 tokens is 30 output tokens/s: every configuration that serves it is paid by the hour,
    so the one with fewer chips is cheaper per token; none is priced as though it ran full."""
    body = {"model": "llama-3.1-8b", "workload": {"prompt_tokens": 1000, "output_tokens": 300, "request_rate_per_s": 0.1},
            "hardware": {"chips": ["nvidia-h100-sxm"], "max_chips": 2, "weight_dtypes": ["fp8"]}}  # fmt: skip
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 201, response.json()
    ranked = response.json()["results"]["ranked"]
    assert ranked and all(r["served_output_tokens_per_s"] == pytest.approx(30.0) for r in ranked)
    assert all(r["output_tokens_per_s_total"] > 30.0 for r in ranked)
    assert ranked[0]["chip_count"] == 1
    # Every batch of the layout costs the same; the smallest that holds what the rate keeps in flight (about one
    # sequence) comes first, its TPOT near what one sequence decodes at, not a full large batch's.
    alike = [r for r in ranked if (r["chip_count"], r["tensor_parallel"], r["serving_engine"]) == (1, 1, ranked[0]["serving_engine"])]
    assert ranked[0]["batch"] == min(r["batch"] for r in alike) and ranked[0]["tpot_s"] == min(r["tpot_s"] for r in alike)
    for row in ranked:  # $/1M output tokens = the configuration's hour over the 30 tokens/s served
        hourly = row["usd_per_hour"]
        assert row["usd_per_million_output_tokens"] == pytest.approx(hourly / (30.0 * 3600) * 1e6, rel=1e-6)
