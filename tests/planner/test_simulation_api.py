"""POST /api/v1/simulations/: one configuration under one workload, or an uploaded trace, simulated
and stored; small ones inside the request, bigger ones on a worker (docs/simulation.md)."""
from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from planner import simulation_services
from planner.engine.simulation import RequestTooLarge, SchedulerOptions
from planner.models import SimulationRun

pytestmark = pytest.mark.django_db

CONFIGURATION = {"model": "llama-3.1-8b", "chip": "nvidia-h100-sxm", "chip_count": 1, "tensor_parallel": 1, "weight_dtype": "bf16"}
WORKLOAD = {
    "requests": 300,
    "arrivals": {"kind": "poisson", "rate_per_s": 10.0},
    "prompt": {"kind": "lognormal", "mean_tokens": 800, "std_tokens": 400},
    "output": {"kind": "fixed", "tokens": 100},
    "seed": 7,
}
BODY = {**CONFIGURATION, "workload": WORKLOAD, "slo_percentiles": {"ttft": {"p": 95, "s": 0.5}, "tpot": {"p": 95, "s": 0.05}}}
TRACE_CSV = "arrival_s,prompt_tokens,output_tokens,request_id\n0.0,500,50,a\n0.1,800,20,b\n0.25,300,80,c\n\n"


def test_a_small_simulation_is_run_in_the_request_stored_and_read_back(catalog, token_client):
    response = token_client.post("/api/v1/simulations/", BODY, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    results = body["results"]
    assert body["status"] == "done" and body["request_count"] == 300 and body["model_slug"] == "llama-3.1-8b"
    assert results["completed"] == 300 and not results["overloaded"]
    assert 0 < results["ttft_s"]["p50"] <= results["ttft_s"]["p90"] <= results["ttft_s"]["p95"] <= results["ttft_s"]["p99"]
    assert results["tpot_s"]["p95"] > 0 and results["e2e_s"]["p99"] > results["ttft_s"]["p99"]
    assert results["slo_percentiles"]["ttft"]["p"] == 95 and results["slo_percentiles"]["ttft"]["value_s"] > 0
    assert results["goodput_requests_per_s"] > 0 and results["littles_law"]["relative_error"] < 0.05
    assert len(results["series"]["time_s"]) == len(results["series"]["queue_length"]) > 10
    assert results["usd_per_million_output_tokens"] is None or results["usd_per_million_output_tokens"] > 0
    read = token_client.get(body["url"]).json()
    assert read["results"]["ttft_s"] == results["ttft_s"] and read["inputs"]["workload"]["seed"] == 7


def test_the_same_seed_gives_the_same_percentiles(catalog, token_client):
    first = token_client.post("/api/v1/simulations/", BODY, format="json").json()["results"]
    second = token_client.post("/api/v1/simulations/", BODY, format="json").json()["results"]
    assert first["ttft_s"] == second["ttft_s"] and first["tpot_s"] == second["tpot_s"]


def test_a_csv_trace_upload_is_simulated_row_for_row(catalog, token_client):
    upload = SimpleUploadedFile("trace.csv", TRACE_CSV.encode(), content_type="text/csv")
    response = token_client.post("/api/v1/simulations/", {**CONFIGURATION, "trace_file": upload}, format="multipart")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["request_count"] == 3 and body["trace"] == {"rows": 3, "format": "csv", "ignored_columns": ["request_id"]}
    assert body["results"]["completed"] == 3 and any("request_id" in note for note in body["results"]["notes"])


def test_a_jsonl_trace_in_a_json_body_is_simulated(catalog, token_client):
    trace = '{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 10}\n{"arrival_s": 0.5, "prompt_tokens": 200, "output_tokens": 5}\n'
    response = token_client.post("/api/v1/simulations/", {**CONFIGURATION, "trace": trace, "workload": {"seed": 1}}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["trace"]["format"] == "jsonl" and response.json()["results"]["completed"] == 2


def test_a_bad_trace_line_is_a_400_naming_its_line_and_column_and_stores_nothing(catalog, token_client):
    trace = "arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.2,abc,10\n"
    response = token_client.post("/api/v1/simulations/", {**CONFIGURATION, "trace": trace}, format="json")
    assert response.status_code == 400
    assert response.json() == {"trace": ["line 3, column prompt_tokens: must be a whole number >= 1, got 'abc'"]}
    long = "arrival_s,prompt_tokens,output_tokens\n0,100,10\n0,100000000,10\n"  # past the model's context
    response = token_client.post("/api/v1/simulations/", {**CONFIGURATION, "trace": long}, format="json")
    assert response.status_code == 400 and response.json()["trace"][0].startswith("line 3, column prompt_tokens: prompt + output - 1")
    assert not SimulationRun.objects.exists()


def test_a_bad_uploaded_trace_names_the_line_under_trace_file(catalog, token_client):
    upload = SimpleUploadedFile("trace.csv", b"arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.1,100,NaN\n", content_type="text/csv")
    response = token_client.post("/api/v1/simulations/", {**CONFIGURATION, "trace_file": upload}, format="multipart")
    assert response.status_code == 400
    assert response.json()["trace_file"][0].startswith("line 3, column output_tokens:")


def test_a_trace_over_the_size_limit_is_refused(catalog, token_client, settings):
    settings.SIMULATION_MAX_TRACE_BYTES = 1_000
    trace = "arrival_s,prompt_tokens,output_tokens\n" + "0,100,10\n" * 200
    response = token_client.post("/api/v1/simulations/", {**CONFIGURATION, "trace": trace}, format="json")
    assert response.status_code == 400 and "at most 1,000 bytes" in response.json()["trace"][0]


def test_a_trace_over_the_request_limit_names_the_first_line_too_many(catalog, token_client, settings):
    settings.SIMULATION_MAX_REQUESTS = 2
    trace = "arrival_s,prompt_tokens,output_tokens\n0,100,10\n0,100,10\n0,100,10\n"
    response = token_client.post("/api/v1/simulations/", {**CONFIGURATION, "trace": trace}, format="json")
    assert response.status_code == 400 and response.json()["trace"][0].startswith("line 4: more than 2 requests")


def test_more_requests_than_the_limit_is_a_400_naming_the_field(catalog, token_client):
    response = token_client.post("/api/v1/simulations/", {**BODY, "workload": {**WORKLOAD, "requests": 20_001}}, format="json")
    assert response.status_code == 400 and "20,000" in response.json()["workload"]["requests"][0]


def test_unknown_fields_are_a_400_naming_them_at_every_level(catalog, token_client):
    body = {**BODY, "prompt_tokens": 100, "workload": {**WORKLOAD, "arrivals": {"kind": "poisson", "rate_per_s": 1, "burst": 3}}}
    response = token_client.post("/api/v1/simulations/", body, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert "prompt_tokens" in errors and "burst" in errors["workload"]["arrivals"]
    assert not SimulationRun.objects.exists()


def test_a_workload_the_engine_refuses_is_a_400_naming_the_field(catalog, token_client):
    body = {**BODY, "workload": {**WORKLOAD, "prompt": {"kind": "lognormal", "mean_tokens": 800}}}  # no std_tokens
    response = token_client.post("/api/v1/simulations/", body, format="json")
    assert response.status_code == 400 and "std_tokens" in response.json()["workload"]["prompt"]


def test_a_configuration_the_simulator_does_not_model_is_a_400_saying_why(catalog, token_client):
    response = token_client.post("/api/v1/simulations/", {**BODY, "pipeline_parallel": 2, "chip_count": 2}, format="json")
    assert response.status_code == 400 and "one pipeline stage" in response.json()["pipeline_parallel"][0]


def test_an_anonymous_client_may_read_but_not_simulate(catalog, anonymous_client, token_client):
    assert anonymous_client.post("/api/v1/simulations/", BODY, format="json").status_code == 401
    url = token_client.post("/api/v1/simulations/", BODY, format="json").json()["url"]
    assert anonymous_client.get(url).status_code == 200


def test_only_its_creator_or_staff_may_delete_a_simulation(catalog, token_client, session_client, staff_client):
    url = token_client.post("/api/v1/simulations/", BODY, format="json").json()["url"]
    assert session_client.delete(url).status_code == 403
    assert token_client.delete(url).status_code == 204
    assert token_client.get(url).status_code == 404


def test_a_simulation_over_the_inline_size_is_queued_and_a_worker_task_takes_it_to_done(catalog, token_client, settings,
                                                                                         django_capture_on_commit_callbacks):  # fmt: skip
    settings.SIMULATION_INLINE_MAX_REQUESTS = 100
    with django_capture_on_commit_callbacks(execute=False) as callbacks:  # nothing published
        response = token_client.post("/api/v1/simulations/", BODY, format="json")
    assert response.status_code == 202, response.json()
    assert len(callbacks) == 1
    queued = response.json()
    assert queued["status"] == "queued" and queued["progress"] == 0.0 and response["Location"] == queued["url"]
    from planner.tasks import run_simulation

    assert run_simulation.apply(args=[queued["id"]]).get() == "done"  # the task body, as a worker runs it
    done = token_client.get(queued["url"]).json()
    assert done["status"] == "done" and done["progress"] == 1.0 and done["results"]["completed"] == 300
    settings.SIMULATION_INLINE_MAX_REQUESTS = 5_000  # the same request, inside the request
    inline = token_client.post("/api/v1/simulations/", BODY, format="json").json()
    assert inline["results"]["ttft_s"] == done["results"]["ttft_s"]
    assert simulation_services.simulation_execute(run_id=queued["id"]) == "finished"  # a duplicate message does nothing


def test_a_simulation_of_more_forwards_than_a_request_may_run_goes_to_a_worker(catalog, token_client, settings,
                                                                               django_capture_on_commit_callbacks):  # fmt: skip
    # 300 requests of a 100-token answer in blocks of 64 at 64 forwards a block: few tokens, many forwards.
    body = {**BODY, "model": "fast-dllm-v2-7b", "decoding": {"method": "block_diffusion", "block_size": 64, "steps_per_block": 64}}
    settings.SIMULATION_INLINE_MAX_STEPS = 500  # under the bound on tokens (SIMULATION_INLINE_MAX_TOKENS), over the forwards
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = token_client.post("/api/v1/simulations/", body, format="json")
    assert response.status_code == 202, response.json()
    assert len(callbacks) == 1 and SimulationRun.objects.count() == 1  # the inline attempt stored nothing
    queued = response.json()
    from planner.tasks import run_simulation

    assert run_simulation.apply(args=[queued["id"]]).get() == "done"  # a worker runs it whole
    done = token_client.get(queued["url"]).json()
    settings.SIMULATION_INLINE_MAX_STEPS = 1_000_000
    inline = token_client.post("/api/v1/simulations/", body, format="json")
    assert inline.status_code == 201 and inline.json()["results"]["ttft_s"] == done["results"]["ttft_s"]


def test_a_queued_trace_is_simulated_by_the_worker_from_its_stored_rows(catalog, token_client, settings, django_capture_on_commit_callbacks):
    settings.SIMULATION_INLINE_MAX_REQUESTS = 1
    with django_capture_on_commit_callbacks(execute=False):
        queued = token_client.post("/api/v1/simulations/", {**CONFIGURATION, "trace": TRACE_CSV}, format="json").json()
    assert simulation_services.simulation_execute(run_id=queued["id"]) == "done"
    run = SimulationRun.objects.get(pk=queued["id"])
    assert run.results["completed"] == 3 and run.trace["lines"] == [2, 3, 4]


def test_the_openapi_schema_stays_valid_and_documents_the_simulations_endpoints(tmp_path):
    import yaml
    from django.core.management import call_command

    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    assert {"/api/v1/simulations/", "/api/v1/simulations/{run_id}/"} <= set(schema["paths"])
    create = schema["paths"]["/api/v1/simulations/"]["post"]
    assert {"201", "202"} <= set(create["responses"]) and "multipart/form-data" in create["requestBody"]["content"]
    plan_input = schema["components"]["schemas"]["PlanInputRequest"]["properties"]
    assert {"slo_percentiles", "simulation"} <= set(plan_input)


def test_a_chip_the_simulator_does_not_model_is_refused_before_anything_is_queued(catalog, token_client, settings):
    settings.SIMULATION_INLINE_MAX_REQUESTS = 1  # the refusal comes at the POST, not later on a worker
    body = {**BODY, "model": "llama-3.1-8b", "chip": "google-tpu-v5e", "tensor_parallel": 1}
    response = token_client.post("/api/v1/simulations/", body, format="json")
    assert response.status_code == 400 and "pads prompts to buckets" in response.json()["chip"][0]
    assert not SimulationRun.objects.exists()


def test_a_disaggregated_simulation_prices_both_pools_and_says_how_it_ran(catalog, token_client):
    colocated = token_client.post("/api/v1/simulations/", {**BODY, "chip_count": 2}, format="json").json()["results"]
    response = token_client.post("/api/v1/simulations/", {**BODY, "disaggregated": {"prefill_replicas": 1}}, format="json")
    assert response.status_code == 201, response.json()
    results = response.json()["results"]
    assert results["prefill_replicas"] == 1 and results["replicas"] == 1 and results["total_chips"] == 2
    assert results["completed"] == 300 and results["littles_law"]["relative_error"] < 0.05
    assert any(note.startswith("disaggregated: 1 prefill and 1 decode replicas") for note in results["notes"])
    # two chips either way, at the same offering: the same $/hour
    assert results["usd_per_hour"] == pytest.approx(colocated["usd_per_hour"])
    # the decode replica's steps carry no prefill chunks
    assert results["tpot_s"]["p99"] < colocated["tpot_s"]["p99"]


def test_a_disaggregated_simulation_under_a_closed_loop_is_a_400_that_says_why(catalog, token_client):
    closed = {**WORKLOAD, "arrivals": {"kind": "closed_loop", "concurrency": 8}}
    response = token_client.post("/api/v1/simulations/", {**BODY, "workload": closed, "disaggregated": {"prefill_replicas": 1}}, format="json")
    assert response.status_code == 400
    assert "closed loop" in response.json()["disaggregated"][0]
    assert not SimulationRun.objects.exists()


def test_a_bad_prefill_pool_is_a_400_naming_the_field(catalog, token_client):
    for bad in ({"prefill_replicas": 0}, {}, {"prefill_replicas": 1, "kv_link_bytes_per_s_per_chip": 0}, {"prefill_replicas": 1, "pool": 2}):
        response = token_client.post("/api/v1/simulations/", {**BODY, "disaggregated": bad}, format="json")
        assert response.status_code == 400 and "disaggregated" in response.json(), bad


def test_a_done_run_carries_each_latencys_cdf_at_every_percent(catalog, token_client):
    results = token_client.post("/api/v1/simulations/", BODY, format="json").json()["results"]
    cdf = results["cdf"]
    assert cdf["quantiles"] == [float(q) for q in range(101)]
    for name in ("ttft_s", "tpot_s", "e2e_s"):
        assert len(cdf[name]) == 101 and cdf[name] == sorted(cdf[name])
        assert cdf[name][50] == pytest.approx(results[name]["p50"]) and cdf[name][99] == pytest.approx(results[name]["p99"])


def test_a_rate_sweep_finds_the_knee_where_the_percentile_slos_stop_holding(catalog, token_client):
    body = {**BODY, "workload": {**WORKLOAD, "requests": 400}, "sweep": {"rates_per_s": [2.0, 8.0, 200.0]}}
    response = token_client.post("/api/v1/simulations/", body, format="json")
    assert response.status_code == 201, response.json()
    sweep = response.json()["results"]["sweep"]
    assert [p["rate_per_s"] for p in sweep["points"]] == [2.0, 8.0, 200.0]
    low, mid, flood = sweep["points"]
    assert low["meets_slo_percentiles"] and mid["meets_slo_percentiles"]
    assert flood["overloaded"] and not flood["meets_slo_percentiles"]
    assert low["ttft_s"]["p99"] <= flood["ttft_s"]["p99"]
    assert sweep["knee_rate_per_s"] == 8.0 and sweep["usd_per_million_output_tokens_at_knee"] is None or sweep["usd_per_million_output_tokens_at_knee"] > 0
    assert "knee" in sweep["basis"]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"sweep": {"rates_per_s": [4.0, 2.0]}}, "ascending"),
        ({"sweep": {"rates_per_s": []}}, ""),
        ({"sweep": {"rates_per_s": [1.0] * 13}}, ""),
        ({"sweep": {"rates_per_s": [1.0, 2.0]}, "workload": {**WORKLOAD, "arrivals": {"kind": "closed_loop", "concurrency": 4}}}, "closed loop"),
        ({"sweep": {"rates_per_s": [1.0, 2.0], "step": 2}}, ""),
    ],
    ids=["descending", "empty", "too-many", "closed-loop", "unknown-field"],
)
def test_a_bad_sweep_is_a_400_naming_it_and_stores_nothing(catalog, token_client, change, message):
    response = token_client.post("/api/v1/simulations/", {**BODY, **change}, format="json")
    assert response.status_code == 400 and message in str(response.json()["sweep"])
    assert not SimulationRun.objects.exists()


def test_a_sweep_counts_every_pass_toward_the_inline_size_and_a_worker_runs_it_the_same(catalog, token_client, settings,
                                                                                       django_capture_on_commit_callbacks):  # fmt: skip
    body = {**BODY, "sweep": {"rates_per_s": [2.0, 5.0]}}  # 3 passes of 300 requests: over an inline size of 800
    settings.SIMULATION_INLINE_MAX_REQUESTS = 800
    with django_capture_on_commit_callbacks(execute=False):
        queued = token_client.post("/api/v1/simulations/", body, format="json")
    assert queued.status_code == 202, queued.json()
    from planner.tasks import run_simulation

    assert run_simulation.apply(args=[queued.json()["id"]]).get() == "done"
    done = token_client.get(queued.json()["url"]).json()["results"]
    settings.SIMULATION_INLINE_MAX_REQUESTS = 5_000
    inline = token_client.post("/api/v1/simulations/", body, format="json").json()["results"]
    assert [p["ttft_s"] for p in done["sweep"]["points"]] == [p["ttft_s"] for p in inline["sweep"]["points"]]


def test_speculative_decoding_is_simulated_round_by_round_and_diffusion_is_refused_by_name(catalog, token_client):
    heads = {"method": "draft_heads", "head_kind": "eagle", "draft_tokens": 3, "acceptance_rate": 0.7}
    response = token_client.post("/api/v1/simulations/", {**BODY, "decoding": heads}, format="json")
    assert response.status_code == 201, response.json()
    results = response.json()["results"]
    assert results["completed"] == 300 and results["preemptions"] == 0
    assert any(note.startswith("eagle(k=3): each decode step is a round") for note in results["notes"])
    plain = token_client.post("/api/v1/simulations/", BODY, format="json").json()["results"]
    assert results["tpot_s"]["p50"] < plain["tpot_s"]["p50"]
    diffusion = {"method": "diffusion", "steps": 64}
    refused = token_client.post("/api/v1/simulations/", {**BODY, "model": "llada-8b", "decoding": diffusion}, format="json")
    assert refused.status_code == 400 and "not diffusion" in str(refused.json()["decoding"]["method"])
    assert not SimulationRun.objects.filter(model_slug="llada-8b").exists()


def test_a_block_diffusion_model_is_simulated_block_by_block(catalog, token_client):
    body = {**BODY, "model": "fast-dllm-v2-7b", "decoding": {"method": "block_diffusion", "block_size": 32, "steps_per_block": 8}}
    response = token_client.post("/api/v1/simulations/", body, format="json")
    assert response.status_code == 201, response.json()
    results = response.json()["results"]
    assert results["completed"] == 300 and results["preemptions"] == 0
    assert any(note.startswith("block_diffusion(B=32, S_eff=8)") for note in results["notes"])
    assert results["ttft_s"]["p50"] > 0 and results["tpot_s"]["p50"] > 0


@pytest.mark.parametrize("output_tokens", [64, 256])
def test_a_block_diffusion_estimate_and_its_simulation_agree_near_zero_load(catalog, token_client, output_tokens):
    # The first block is in TTFT; the TPOT after it carries the other blocks only (until 2026-12-07 the estimate's TPOT
    # was the whole answer's time over its tokens, 6.04 ms against 3.12 ms simulated at 64 tokens)
    config = {"model": "fast-dllm-v2-7b", "chip": "nvidia-h100-sxm"}
    estimate = token_client.post("/api/v1/estimates/", {**config, "prompt_tokens": 512, "output_tokens": output_tokens, "batch": 1},
                                 format="json").json()  # fmt: skip
    workload = {"arrivals": {"kind": "poisson", "rate_per_s": 0.01}, "prompt": {"kind": "fixed", "tokens": 512},
                "output": {"kind": "fixed", "tokens": output_tokens}, "requests": 20}  # fmt: skip
    simulated = token_client.post("/api/v1/simulations/", {**config, "workload": workload}, format="json").json()["results"]
    assert simulated["ttft_s"]["p50"] == pytest.approx(estimate["ttft_s"], rel=0.01)
    assert simulated["tpot_s"]["p50"] == pytest.approx(estimate["tpot_s"], rel=0.01)


def test_sglang_is_simulated_with_its_prefills_run_alone_and_the_result_says_so(catalog, token_client):
    sglang = token_client.post("/api/v1/simulations/", {**BODY, "serving_engine": "SGLang"}, format="json").json()["results"]
    vllm = token_client.post("/api/v1/simulations/", {**BODY, "serving_engine": "vLLM"}, format="json").json()["results"]
    assert any("prefills run alone" in note for note in sglang["notes"])
    assert not any("prefills run alone" in note for note in vllm["notes"])
    assert token_client.get("/api/v1/engines/sglang/").json()["prefill_runs_alone"] is True


def test_the_engines_memory_knob_and_prefill_mode_can_be_set_as_the_benchmark_set_them(catalog, token_client):
    default = token_client.post("/api/v1/simulations/", {**BODY, "serving_engine": "vLLM"}, format="json").json()["results"]
    scheduler = {"memory_fraction": 0.5, "prefill_alone": True, "token_budget": 8192}
    set_so = token_client.post("/api/v1/simulations/", {**BODY, "serving_engine": "vLLM", "scheduler": scheduler}, format="json")
    assert set_so.status_code == 201, set_so.json()
    results = set_so.json()["results"]
    assert results["kv_blocks"] < default["kv_blocks"]  # gpu_memory_utilization 0.5 against vLLM's 0.9
    assert any("prefills run alone" in note for note in results["notes"])
    assert set_so.json()["inputs"]["scheduler"]["prefill_alone"] is True


def test_a_cpu_simulated_under_a_build_without_matrix_kernels_prefills_slower(catalog, token_client):
    """llama.cpp on a Xeon 8480+ with 4-bit weights, a few requests far apart: a build without AMX kernels
    (`cpu_matrix_dtypes` []) takes several times the catalog build's time to a first token."""
    workload = {"requests": 8, "arrivals": {"kind": "poisson", "rate_per_s": 0.05}, "prompt": {"kind": "fixed", "tokens": 1024},
                "output": {"kind": "fixed", "tokens": 8}, "seed": 3}  # fmt: skip
    body = {"model": "llama-2-7b", "chip": "intel-xeon-8480plus", "chip_count": 1, "tensor_parallel": 1, "weight_dtype": "int4",
            "serving_engine": "llama.cpp", "workload": workload}  # fmt: skip
    tiles = token_client.post("/api/v1/simulations/", body, format="json")
    vector = token_client.post("/api/v1/simulations/", {**body, "scheduler": {"cpu_matrix_dtypes": []}}, format="json")
    assert tiles.status_code == vector.status_code == 201, vector.json()
    assert vector.json()["results"]["ttft_s"]["p50"] > 3 * tiles.json()["results"]["ttft_s"]["p50"]


@pytest.mark.parametrize("scheduler, field", [({"memory_fraction": 0}, "memory_fraction"), ({"memory_fraction": 1.2}, "memory_fraction"),
                                               ({"prefill_alone": "sometimes"}, "prefill_alone"),
                                               ({"cpu_matrix_dtypes": []}, "cpu_matrix_dtypes")])  # fmt: skip
def test_a_bad_scheduler_knob_is_a_400_naming_it_and_stores_nothing(catalog, token_client, scheduler, field):
    response = token_client.post("/api/v1/simulations/", {**BODY, "scheduler": scheduler}, format="json")
    assert response.status_code == 400
    assert field in response.json()["scheduler"]
    assert not SimulationRun.objects.exists()


def test_a_memory_fraction_too_small_for_a_request_is_a_400_naming_it_inline_or_queued(catalog, token_client, settings):
    body = {**BODY, "serving_engine": "vLLM", "scheduler": {"memory_fraction": 0.2}}  # 16 GB of an 80 GB H100: the weights alone
    response = token_client.post("/api/v1/simulations/", body, format="json")
    assert response.status_code == 400
    message = response.json()["scheduler"]["memory_fraction"][0]
    assert "KV blocks" in message and "memory_fraction 0.2" in message
    settings.SIMULATION_INLINE_MAX_REQUESTS = 10  # a run a worker would take is refused before it is queued
    queued = token_client.post("/api/v1/simulations/", body, format="json")
    assert queued.status_code == 400 and "memory_fraction" in queued.json()["scheduler"]
    assert not SimulationRun.objects.exists()


def test_a_refusal_names_the_workload_only_for_a_request_the_cache_cannot_hold():
    too_large = RequestTooLarge("request 0 needs 7 KV blocks (100 prompt + 1 output tokens) but the cache holds 6; no schedule can run it")
    assert simulation_services._refused(too_large, SchedulerOptions()).field == "workload"
    assert simulation_services._refused(too_large, SchedulerOptions(memory_fraction=0.5)).field == "scheduler.memory_fraction"
    # an engine error that merely mentions KV blocks is still the configuration's
    assert simulation_services._refused(ValueError("cannot simulate x on y: KV blocks of 0 tokens"), SchedulerOptions()).field == "chip"


ROW = {"chip_slug": "nvidia-h100-sxm", "chip_count": 1, "tensor_parallel": 1, "weight_dtype": "bf16"}  # CONFIGURATION's, as a plan ranks it


def _stored_plan(ranked_rows: int, **fields):
    from planner.models import Plan

    return Plan.objects.create(model_slug="llama-3.1-8b", inputs={}, catalog_snapshot={}, results={"ranked": [ROW] * ranked_rows},
                               candidate_count=ranked_rows, feasible_count=ranked_rows, **fields)  # fmt: skip


def test_a_simulation_started_from_a_plan_row_links_to_it_and_simulates_the_same(catalog, token_client):
    plan = _stored_plan(3)
    linked = token_client.post("/api/v1/simulations/", {**BODY, "from_plan": {"plan": str(plan.id), "rank": 2}}, format="json")
    assert linked.status_code == 201, linked.json()
    body = linked.json()
    assert body["from_plan"] == {"plan": str(plan.id), "rank": 2} and body["plan"] is None  # its own run, not the plan's stage
    assert "from_plan" not in body["inputs"]  # the link is the run's, not an input a worker re-reads
    assert body["results"]["ttft_s"] == token_client.post("/api/v1/simulations/", BODY, format="json").json()["results"]["ttft_s"]
    assert [run.from_rank for run in plan.row_simulations.all()] == [2]
    plan.delete()  # the run stays, saying which row it checked of a plan now gone
    assert token_client.get(body["url"]).json()["from_plan"] == {"plan": None, "rank": 2}


@pytest.mark.parametrize("source, field", [
    ({"plan": "00000000-0000-0000-0000-000000000000", "rank": 1}, "plan"),
    ({"plan": "not-a-plan", "rank": 1}, "plan"),
    ("EXISTING", "rank"),
    ({"plan": "EXISTING", "rank": 0}, "rank"),
    ({"plan": "EXISTING"}, "rank"),
    ({"plan": "EXISTING", "rank": 1, "row": 1}, "row"),
])  # fmt: skip
def test_a_plan_row_that_does_not_exist_is_a_400_naming_it_and_stores_nothing(catalog, token_client, source, field):
    plan = _stored_plan(2)
    if source == "EXISTING":
        source = {"plan": str(plan.id), "rank": 3}  # past its ranking of 2
    source = {k: (str(plan.id) if v == "EXISTING" else v) for k, v in source.items()}
    response = token_client.post("/api/v1/simulations/", {**BODY, "from_plan": source}, format="json")
    assert response.status_code == 400 and field in response.json()["from_plan"], response.json()
    assert not SimulationRun.objects.exists()


def test_a_simulation_of_another_configuration_or_of_a_plan_still_running_is_not_linked_to_its_row(catalog, token_client):
    plan = _stored_plan(2)
    other_chip = {**BODY, "chip": "nvidia-a100-sxm-80gb", "from_plan": {"plan": str(plan.id), "rank": 1}}
    response = token_client.post("/api/v1/simulations/", other_chip, format="json")
    assert response.status_code == 400 and "chip nvidia-h100-sxm (this simulation: nvidia-a100-sxm-80gb)" in str(response.json()["from_plan"]["rank"])
    running = _stored_plan(2, status="running")
    response = token_client.post("/api/v1/simulations/", {**BODY, "from_plan": {"plan": str(running.id), "rank": 1}}, format="json")
    assert response.status_code == 400 and "running" in str(response.json()["from_plan"]["plan"])
    assert not SimulationRun.objects.exists()


def test_the_list_filters_by_status_and_by_the_plan_a_run_was_started_from(catalog, token_client, anonymous_client):
    plan = _stored_plan(2)
    linked = token_client.post("/api/v1/simulations/", {**BODY, "from_plan": {"plan": str(plan.id), "rank": 1}}, format="json").json()
    other = token_client.post("/api/v1/simulations/", BODY, format="json").json()

    def ids(query: str) -> list[str]:
        return [run["id"] for run in anonymous_client.get(f"/api/v1/simulations/{query}").json()["results"]]

    assert ids(f"?from_plan={plan.id}") == [linked["id"]] and set(ids("?status=done")) == {linked["id"], other["id"]}
    assert ids("?status=queued") == [] and set(ids("?status=&from_plan=")) == {linked["id"], other["id"]}  # blank: any
    for query, field in (("?status=finished", "status"), ("?from_plan=not-a-plan", "from_plan")):
        response = anonymous_client.get(f"/api/v1/simulations/{query}")
        assert response.status_code == 400 and field in response.json()

