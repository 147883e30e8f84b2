"""An LPU estimate with tensor_parallel "auto" and no pipeline_parallel shards the model over its chips
(TP x PP, as Groq deploys it), and the CLI prints every estimate, feasible or not (issue 14)."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from planner.engine.chips import policy_for
from planner.engine.chips.lpu import min_chips
from planner.engine.deployment import Deployment
from planner.engine.estimate import estimate
from planner.engine.specs import Workload
from tests.planner.engine.factories import groq_lpu, h100_sxm, llama_3_1_70b

WORKLOAD = Workload(prompt_tokens=1000, output_tokens=300)


def test_an_lpu_spreads_one_replica_over_every_chip_when_no_fewer_hold_the_weights():
    chip, model = groq_lpu(), llama_3_1_70b()
    assert min_chips(model, chip, "bf16") > 576  # 141 GB of bf16 weights need 614 chips of 230 MB
    layouts = policy_for(chip).layouts_of_count(chip, model, 576, weight_dtype="bf16")
    assert layouts and all(tp * pp == 576 and pp <= model.num_layers for tp, pp in layouts)
    assert layouts[0] == (8, 72)


def test_an_lpu_tries_only_shardings_whose_replicas_hold_the_weights():
    chip, model = groq_lpu(), llama_3_1_70b()
    needed = min_chips(model, chip, "fp8")
    layouts = policy_for(chip).layouts_of_count(chip, model, 1232, weight_dtype="fp8")
    assert {1232 // (tp * pp) for tp, pp in layouts} == {1, 2}  # 616 chips per replica hold 307 chips' worth
    assert all(tp * pp >= needed and 1232 % (tp * pp) == 0 for tp, pp in layouts)


def test_a_given_pipeline_parallel_is_kept_on_an_lpu():
    chip, model = groq_lpu(), llama_3_1_70b()
    assert all(pp == 1 for _, pp in policy_for(chip).layouts_of_count(chip, model, 576, weight_dtype="bf16", pipeline_parallel=1))


def test_a_gpu_keeps_pipeline_parallel_1_when_unset():
    chip, model = h100_sxm(), llama_3_1_70b()
    assert policy_for(chip).layouts_of_count(chip, model, 8, weight_dtype="bf16") == [(1, 1), (2, 1), (4, 1), (8, 1)]


def test_the_lpu_sharding_explains_the_chips_the_weights_need():
    chip, model = groq_lpu(), llama_3_1_70b()
    tp, pp = policy_for(chip).layouts_of_count(chip, model, 576, weight_dtype="bf16")[0]
    e = estimate(model, Deployment(chip=chip, chip_count=576, tensor_parallel=tp, pipeline_parallel=pp), WORKLOAD)
    assert e.replicas == 1 and not e.feasible
    assert f"needs at least {min_chips(model, chip, 'bf16')} chips" in e.reasons[0] and "got 576" in e.reasons[0]
    assert e.memory.weights_bytes_per_chip == pytest.approx(model.total_params * 2 / 576, rel=0.1)  # a 576th of the weights each


def test_the_cli_prints_an_infeasible_lpu_estimate_sharded_over_576_chips(catalog, capsys):
    call_command("estimate", "--model", "llama-3.1-70b", "--chip", "groq-lpu", "--chip-count", "576", "--prompt-tokens", "1000",
                 "--output-tokens", "300")  # fmt: skip
    out = capsys.readouterr().out
    assert "576 x groq-lpu (TP 8, PP 72, 1 replica(s))" in out
    assert "feasible: False" in out and "needs at least" in out and "got 576" in out


def test_the_api_shards_an_fp8_lpu_estimate_and_it_is_feasible(catalog, anonymous_client):
    body = {"model": "llama-3.1-70b", "chip": "groq-lpu", "chip_count": 576, "weight_dtype": "fp8", "prompt_tokens": 1000,
            "output_tokens": 300}  # fmt: skip
    e = anonymous_client.post("/api/v1/estimates/", body, format="json").json()
    assert e["feasible"] and e["tensor_parallel"] * e["pipeline_parallel"] * e["replicas"] == 576 and e["pipeline_parallel"] > 1
    given = anonymous_client.post("/api/v1/estimates/", {**body, "pipeline_parallel": 1}, format="json").json()
    assert given["pipeline_parallel"] == 1 and not given["feasible"]
