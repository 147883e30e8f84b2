"""A plan with percentile SLOs: after the analytical search its top candidates are simulated at the
plan's load and re-ranked by simulated cost per token at the SLOs, each row saying which stage
decided its place; a big stage runs as one worker task per candidate (planner/simulation_services.py)."""
from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from planner import services
from planner.models import Plan, SimulationRun
from planner.simulation_services import analytical_miss
from planner.tasks import run_simulation

pytestmark = pytest.mark.django_db

SLO_PLAN = {
    "model": "llama-3.1-8b",
    "workload": {"prompt_tokens": 1000, "output_tokens": 200, "request_rate_per_s": 4.0},
    "hardware": {"chips": ["nvidia-h100-sxm", "nvidia-a100-sxm-80gb", "nvidia-l4"], "max_chips": 2, "weight_dtypes": ["bf16", "fp8"]},
    "slo_percentiles": {"ttft": {"p": 95, "s": 0.5}, "tpot": {"p": 95, "s": 0.05}},
    "simulation": {"requests": 150, "top_n": 6, "seed": 3, "prompt": {"kind": "lognormal", "mean_tokens": 1000, "std_tokens": 400}},
}


def _stage_rows(plan: dict) -> list[dict]:
    return [row for row in plan["results"]["ranked"] if row["ranking_stage"] == "simulated"]


def test_a_plan_with_percentile_slos_re_ranks_its_top_candidates_by_simulated_cost(catalog, token_client):
    response = token_client.post("/api/v1/plans/", SLO_PLAN, format="json")
    assert response.status_code == 201, response.json()
    plan = response.json()
    stage = plan["results"]["simulation"]
    assert stage["status"] == "done" and stage["mode"] == "inline" and stage["candidates"] == 6
    simulated = _stage_rows(plan)
    assert len(simulated) == stage["simulated"] > 0
    candidates = sorted(r["analytical_rank"] for r in plan["results"]["ranked"] if not r["analytical_miss"])[:6]  # not ruled out
    for row in simulated:
        sim = row["simulation"]
        assert sim["ttft_s"]["p95"] > 0 and sim["tpot_s"]["p95"] > 0 and sim["goodput_requests_per_s"] >= 0
        assert sim["slo_percentiles"]["ttft"]["p"] == 95 and row["analytical_rank"] in candidates
        assert sim["meets_slo_percentiles"] == (not sim["misses"])
    meeting = [r for r in simulated if r["simulation"]["meets_slo_percentiles"]]
    assert meeting == simulated[: len(meeting)] and plan["results"]["ranked"][: len(meeting)] == meeting
    costs = [r["simulated_usd_per_million_output_tokens"] for r in meeting]
    assert costs == sorted(costs)
    later = [r for r in plan["results"]["ranked"] if r["analytical_rank"] not in candidates]
    assert all(r["ranking_stage"] == "analytical" and r["simulation"] is None for r in later)
    assert stage["best_simulated_usd_per_million_output_tokens"] == (costs[0] if costs else None)
    # the CSV export carries the stage's columns, declared with the rest (planner/result_schema.py)
    rows = list(csv.DictReader(io.StringIO(token_client.get(f"/api/v1/plans/{plan['id']}/export.csv").content.decode())))
    assert [r["ranking_stage"] for r in rows] == [r["ranking_stage"] for r in plan["results"]["ranked"]]
    assert rows[0]["analytical_rank"] == str(plan["results"]["ranked"][0]["analytical_rank"])


def test_the_stages_scheduler_knobs_reach_every_candidate(catalog, token_client):
    key = ("chip_slug", "chip_count", "tensor_parallel", "weight_dtype", "decoding")

    def stage(scheduler=None) -> dict:
        simulation = {**SLO_PLAN["simulation"], **({"scheduler": scheduler} if scheduler else {})}
        response = token_client.post("/api/v1/plans/", {**SLO_PLAN, "simulation": simulation}, format="json")
        assert response.status_code == 201, response.json()
        return {tuple(r[k] for k in key): r["simulation"] for r in _stage_rows(response.json())}

    def alone(sim: dict) -> bool:
        return any("prefills run alone" in note for note in sim["notes"])

    default, apart, together = stage(), stage({"prefill_alone": False, "memory_fraction": 0.6}), stage({"prefill_alone": True})
    assert apart and together and set(apart) <= set(default)
    assert not any(alone(sim) for sim in apart.values()) and all(alone(sim) for sim in together.values())
    assert all(sim["kv_blocks"] < default[candidate]["kv_blocks"] for candidate, sim in apart.items())  # 0.6 against the engine's default


def test_the_plan_load_defaults_to_its_workload_when_no_simulation_is_given(catalog, token_client, django_capture_on_commit_callbacks):
    body = {k: v for k, v in SLO_PLAN.items() if k != "simulation"}
    with django_capture_on_commit_callbacks(execute=False):  # 20 x 2,000 requests: one task per candidate, not sent here
        response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 202, response.json()
    stored = Plan.objects.get(pk=response.json()["id"]).inputs["simulation"]
    assert stored["arrivals"] == {"kind": "poisson", "rate_per_s": 4.0} and stored["prompt"]["tokens"] == 1000 and stored["top_n"] == 20
    assert stored["requests"] == 2000


def test_percentile_slos_without_a_load_to_simulate_are_a_400(catalog, token_client):
    body = {**{k: v for k, v in SLO_PLAN.items() if k != "simulation"}, "workload": {"prompt_tokens": 1000, "output_tokens": 200}}
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 400 and "arrivals" in response.json()["simulation"]


def test_a_bad_percentile_slo_or_an_unknown_field_is_a_400_naming_it(catalog, token_client):
    bad = token_client.post("/api/v1/plans/", {**SLO_PLAN, "slo_percentiles": {"ttft": {"p": 120, "s": 0.5}}}, format="json")
    assert bad.status_code == 400 and "p" in bad.json()["slo_percentiles"]["ttft"]
    unknown = token_client.post("/api/v1/plans/", {**SLO_PLAN, "slo_percentiles": {"ttft": {"p": 95, "s": 0.5}, "itl": {}}}, format="json")
    assert unknown.status_code == 400 and "itl" in unknown.json()["slo_percentiles"]
    too_much = token_client.post("/api/v1/plans/", {**SLO_PLAN, "simulation": {**SLO_PLAN["simulation"], "requests": 20_000, "top_n": 50}}, format="json")
    assert too_much.status_code == 400 and "top_n x requests" in too_much.json()["simulation"]["requests"][0]


def test_a_big_simulation_stage_runs_as_one_task_per_candidate_and_the_last_re_ranks_the_plan(
    catalog, token_client, settings, django_capture_on_commit_callbacks
):
    settings.SIMULATION_INLINE_MAX_REQUESTS = 100  # 6 x 150 requests is "big"
    with django_capture_on_commit_callbacks(execute=False) as callbacks:  # nothing published
        response = token_client.post("/api/v1/plans/", SLO_PLAN, format="json")
    assert response.status_code == 202, response.json()
    assert len(callbacks) == 1
    plan_id = response.json()["id"]
    polled = token_client.get(f"/api/v1/plans/{plan_id}/").json()
    assert polled["status"] == "running" and polled["progress"] == 0.0 and polled["results"]["simulation"]["status"] == "pending"
    runs = list(SimulationRun.objects.filter(plan_id=plan_id).order_by("candidate_rank"))
    assert [r.candidate_rank for r in runs] == [1, 2, 3, 4, 5, 6] and all(r.status == "queued" for r in runs)
    for k, run in enumerate(runs, start=1):
        assert run_simulation.apply(args=[str(run.pk)]).get() in ("done", "failed")  # the task body, as a worker runs it
        plan = Plan.objects.get(pk=plan_id)
        assert plan.status == ("done" if k == 6 else "running") and plan.progress == pytest.approx(k / 6 if k < 6 else 1.0)
    done = token_client.get(f"/api/v1/plans/{plan_id}/").json()
    assert done["results"]["simulation"]["mode"] == "tasks" and _stage_rows(done)
    assert all(r["simulation"]["ttft_s"]["p95"] > 0 for r in _stage_rows(done))
    # The same stage inside the request ranks the same way (the simulation is seeded).
    settings.SIMULATION_INLINE_MAX_REQUESTS = 5_000
    inline = token_client.post("/api/v1/plans/", SLO_PLAN, format="json").json()
    same = ("chip_slug", "chip_count", "tensor_parallel", "weight_dtype", "serving_engine", "ranking_stage")
    assert [[r[k] for k in same] for r in done["results"]["ranked"]] == [[r[k] for k in same] for r in inline["results"]["ranked"]]


def test_a_stage_of_more_forwards_than_a_request_may_run_goes_to_the_workers(catalog, token_client, settings,
                                                                            django_capture_on_commit_callbacks):  # fmt: skip
    settings.SIMULATION_INLINE_MAX_STEPS = 100  # the stage's requests and tokens are small enough, its forwards are not
    with django_capture_on_commit_callbacks(execute=False):
        response = token_client.post("/api/v1/plans/", SLO_PLAN, format="json")
    assert response.status_code == 202, response.json()
    stage = token_client.get(f"/api/v1/plans/{response.json()['id']}/").json()["results"]["simulation"]
    assert stage["status"] == "pending" and stage["mode"] == "tasks" and stage["candidates"] == 6


def test_a_queued_plan_with_a_big_stage_is_searched_then_simulated_by_workers(catalog, token_client, settings, django_capture_on_commit_callbacks):
    settings.PLAN_INLINE_MAX_CANDIDATES = 10
    settings.SIMULATION_INLINE_MAX_REQUESTS = 100
    with django_capture_on_commit_callbacks(execute=False):
        plan_id = token_client.post("/api/v1/plans/", SLO_PLAN, format="json").json()["id"]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert services.plan_execute(plan_id=plan_id) == "simulating"
    assert len(callbacks) == 1 and Plan.objects.get(pk=plan_id).status == "running"
    runs = list(SimulationRun.objects.filter(plan_id=plan_id).order_by("candidate_rank"))
    # The first candidate lost its worker twice: its redelivered message fails it, and the plan does not wait on it.
    stale = timezone.now() - timedelta(seconds=settings.SIMULATION_TASK_TIME_LIMIT + 1)
    SimulationRun.objects.filter(pk=runs[0].pk).update(status="running", attempts=2, heartbeat_at=stale)
    for run in runs:
        run_simulation.apply(args=[str(run.pk)])
    plan = Plan.objects.get(pk=plan_id)
    assert plan.status == "done" and plan.results["simulation"]["candidates"] == 6
    first = next(r for r in plan.results["ranked"] if r["analytical_rank"] == 1)
    assert first["ranking_stage"] == "analytical" and "lost its worker 2 times" in first["simulation"]["error"]


def test_a_disaggregated_plan_simulates_its_candidates_with_their_prefill_pools(catalog, token_client):
    body = {**SLO_PLAN, "disaggregated": True, "hardware": {**SLO_PLAN["hardware"], "chips": ["nvidia-h100-sxm"]}}
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 201, response.json()
    simulated = _stage_rows(response.json())
    assert simulated
    for row in simulated:
        pool = row["simulation"]["prefill_replicas"]
        assert pool >= 1 and row["simulation"]["total_chips"] == row["total_chips"]
        assert any(note.startswith(f"disaggregated: {pool} prefill") for note in row["simulation"]["notes"])


def test_a_disaggregated_plan_under_a_closed_loop_stage_is_a_400_naming_the_simulation(catalog, token_client):
    workload = {"prompt_tokens": 1000, "output_tokens": 200, "concurrency": 16}
    body = {**{k: v for k, v in SLO_PLAN.items() if k != "simulation"}, "workload": workload, "disaggregated": True}
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 400 and "closed loop" in str(response.json()["simulation"])


def test_a_plan_can_rank_its_candidates_by_the_cost_at_their_knee(catalog, token_client):
    body = {**SLO_PLAN, "simulation": {**SLO_PLAN["simulation"], "requests": 100, "top_n": 4, "sweep": {"rates_per_s": [1.0, 4.0, 16.0]}}}
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 201, response.json()
    plan = response.json()
    stage = plan["results"]["simulation"]
    assert "knee" in stage["basis"]
    simulated = _stage_rows(plan)
    assert simulated
    with_knee = [r for r in simulated if r["simulation"]["sweep"]["knee_rate_per_s"] is not None]
    assert plan["results"]["ranked"][: len(with_knee)] == with_knee  # candidates with a knee first
    for row in with_knee:
        assert row["simulated_usd_per_million_output_tokens"] == row["simulation"]["sweep"]["usd_per_million_output_tokens_at_knee"]
    costs = [r["simulated_usd_per_million_output_tokens"] for r in with_knee]
    assert costs == sorted(costs)


def test_a_knee_basis_counts_every_rate_toward_the_plans_bound(catalog, token_client, settings):
    settings.SIMULATION_MAX_PLAN_REQUESTS = 1000
    body = {**SLO_PLAN, "simulation": {**SLO_PLAN["simulation"], "requests": 100, "top_n": 4, "sweep": {"rates_per_s": [1.0, 2.0, 4.0]}}}
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 400 and "(1 + rates)" in str(response.json()["simulation"]["requests"])


def test_a_plans_simulation_stage_runs_its_candidates_under_the_servers_settings(catalog, token_client):
    """The stage simulates the very chip specs the search priced: a plan naming vLLM with --max-num-seqs 8 simulates
    rows of at most 8 sequences a replica, and the simulations run (no candidate refused for its settings)."""
    body = {**SLO_PLAN, "serving_engine": "vLLM", "scheduler": {"max_sequences": 8}}
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 201, response.json()
    plan = response.json()
    assert plan["results"]["simulation"]["status"] == "done"
    simulated = _stage_rows(plan)
    assert simulated and all(r["batch"] / (r["replicas"] * r.get("attention_data_parallel", 1)) <= 8 for r in simulated)


def test_the_stage_caps_each_simulated_replica_at_its_share_of_the_rows_batch(catalog, token_client, monkeypatch):
    """A row of 16 sequences over two replicas is vLLM at --max-num-seqs 8 on each: the simulator, whose max_sequences
    bounds one replica, is given 8, not the row's 16 (which let a capped plan's two-replica rows run 32 at once)."""
    from planner import simulation_services

    given: list[int] = []
    simulate = simulation_services.simulate_setup

    def recording(setup, workload, **kwargs):
        given.append(kwargs["options"].max_sequences)
        return simulate(setup, workload, **kwargs)

    monkeypatch.setattr(simulation_services, "simulate_setup", recording)
    body = {**SLO_PLAN, "serving_engine": "vLLM", "scheduler": {"max_sequences": 8},
            "hardware": {**SLO_PLAN["hardware"], "weight_dtypes": ["fp8"]}}
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 201, response.json()
    simulated = _stage_rows(response.json())
    assert any(r["replicas"] > 1 for r in simulated) and given and max(given) <= 8
    assert simulation_services.row_max_sequences({"batch": 16, "replicas": 2}) == 8
    assert simulation_services.row_max_sequences({"batch": 15, "replicas": 2}) == 8  # rounded up, as the planner shares it
    assert simulation_services.row_max_sequences({"batch": 5}) == 5


def test_chips_outside_nvidia_are_simulated_under_the_engine_their_row_names(catalog, token_client):
    """A plan naming no engine tries an AMD GPU under SGLang and vLLM: the stage finds each such row's variant (its chip
    under its engine) and simulates it, as it does an NVIDIA GPU's."""
    body = {**SLO_PLAN, "hardware": {"chips": ["amd-mi300x", "amd-mi355x"], "max_chips": 2, "weight_dtypes": ["bf16", "fp8"]}}
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 201, response.json()
    simulated = _stage_rows(response.json())
    assert simulated and {r["serving_engine"] for r in simulated} <= {"SGLang", "vLLM"}
    for row in simulated:
        sim = row["simulation"]
        assert "error" not in sim and sim["ttft_s"]["p95"] > 0 and sim["goodput_requests_per_s"] >= 0, sim
        assert row["efficiency_source"].endswith(f"with {row['serving_engine']}'s request overhead")


def test_a_ttft_bound_below_one_prefill_is_missed_at_any_percentile_and_nothing_else_is_ruled_out_unsimulated():
    from planner.simulation_services import analytical_miss

    row = {"ttft_s": 0.2, "tpot_s": 0.03, "prefill": {"time_s": 0.1},
           "intervals": {"ttft_s": {"low": 0.1, "high": 0.4}, "tpot_s": {"low": 0.02, "high": 0.05}}}  # fmt: skip
    # one prefill at the optimistic end of the TTFT's interval: 0.1 s x 0.1 / 0.2 = 50 ms
    assert analytical_miss(row, {"ttft": {"p": 50, "s": 0.04}})["least_s"] == pytest.approx(0.05)
    assert analytical_miss(row, {"ttft": {"p": 99.9, "s": 0.04}})["ratio"] == pytest.approx(1.25)
    assert analytical_miss(row, {"ttft": {"p": 99, "s": 0.06}}) is None  # the mean at load is no floor: queueing is the simulation's
    assert analytical_miss(row, {"tpot": {"p": 95, "s": 0.001}, "e2e": {"p": 99, "s": 0.001}}) is None  # left to the simulation
    assert analytical_miss({**row, "intervals": {}}, {"ttft": {"p": 99, "s": 0.001}}) is None  # no interval: nothing to say
    # the floor is the row's prompt: a stage that sends shorter or drawn prompts, or a prefix a cache skips, may prefill faster
    row = {**row, "prefill_tokens": 1000}
    same = {"prompt": {"kind": "fixed", "tokens": 1000}, "shared_prefix_fraction": 0.0, "shared_prefix_tokens": 0}
    assert analytical_miss(row, {"ttft": {"p": 50, "s": 0.04}}, stage=same) is not None
    for stage in ({**same, "prompt": {"kind": "fixed", "tokens": 500}}, {**same, "prompt": {"kind": "lognormal", "mean_tokens": 1000}},
                  {**same, "shared_prefix_fraction": 0.5, "shared_prefix_tokens": 400}):  # fmt: skip
        assert analytical_miss(row, {"ttft": {"p": 50, "s": 0.04}}, stage=stage) is None
    # an interval whose low end lies above the point (a biased band) does not raise the floor above the prefill itself
    biased = {**row, "intervals": {"ttft_s": {"low": 0.3, "high": 1.4}}}
    assert analytical_miss(biased, {"ttft": {"p": 50, "s": 0.04}})["least_s"] == pytest.approx(0.1)


def test_rows_whose_estimate_already_misses_a_percentile_slo_are_not_simulated_and_rank_last(catalog, token_client):
    body = {**SLO_PLAN, "slo_percentiles": {"ttft": {"p": 99, "s": 0.02}}, "simulation": {"requests": 100, "top_n": 3}}
    plan = token_client.post("/api/v1/plans/", body, format="json").json()
    ranked, stage = plan["results"]["ranked"], plan["results"]["simulation"]
    ruled_out = [r for r in ranked if r["analytical_miss"]]
    assert ruled_out and len(ruled_out) < len(ranked) and stage["missing_by_analysis"] == len(ruled_out)
    assert all(r["simulation"] is None and r["ranking_stage"] == "analytical" for r in ruled_out)
    assert all(r["analytical_miss"]["least_s"] > 0.02 and r["analytical_miss"]["metric"] == "ttft" for r in ruled_out)
    first_ruled_out = ranked.index(ruled_out[0])
    assert all(r["analytical_miss"] or r["ranking_stage"] == "simulated" for r in ranked[first_ruled_out:])  # only misses after it
    # the stage spent its candidates on the first rows not ruled out, in analytical order
    open_ranks = sorted(r["analytical_rank"] for r in ranked if not r["analytical_miss"])
    assert sorted(r["analytical_rank"] for r in ranked if r["simulation"] is not None) == open_ranks[:3]


def test_percentile_slos_for_a_masked_diffusion_model_are_a_400_naming_them_and_store_nothing(catalog, token_client):
    # the stage would simulate nothing (the simulator does not run masked diffusion) and the SLOs would go unchecked
    body = {"model": "llada-8b", "workload": {"prompt_tokens": 1000, "output_tokens": 300, "concurrency": 32},
            "slo_percentiles": {"ttft": {"p": 95, "s": 0.5}}}  # fmt: skip
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 400 and "masked diffusion" in response.json()["slo_percentiles"][0]
    assert not Plan.objects.exists()


def test_a_stage_on_workers_sends_the_first_rows_not_ruled_out_each_with_its_own_configuration(catalog, token_client, settings):
    settings.SIMULATION_INLINE_MAX_REQUESTS = 10  # the stage goes to the workers
    body = {**SLO_PLAN, "slo_percentiles": {"ttft": {"p": 99, "s": 0.02}}, "simulation": {"requests": 100, "top_n": 3}}
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 202, response.json()
    plan = Plan.objects.get(pk=response.json()["id"])
    ranked = plan.results["ranked"]
    open_ranks = [rank for rank, row in enumerate(ranked, start=1) if not analytical_miss(row, body["slo_percentiles"], stage=plan.inputs["simulation"])]
    assert len(open_ranks) < len(ranked)  # some are ruled out, so the ranks sent are not simply 1..3
    runs = list(SimulationRun.objects.filter(plan=plan).order_by("candidate_rank"))
    assert [r.candidate_rank for r in runs] == open_ranks[:3] and open_ranks[:3] != [1, 2, 3]
    for run in runs:  # the worker reads results["ranked"][rank - 1]: the row the run was sent for
        assert run.inputs["configuration"]["chip_slug"] == ranked[run.candidate_rank - 1]["chip_slug"] == run.chip_slug
