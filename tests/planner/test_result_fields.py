"""Result fields are declared once (planner/engine/fields.py) and reach the API schema, the CSV and the UI from there."""

from __future__ import annotations

import csv
import dataclasses
import io

import pytest

from planner.engine import Deployment, Estimate, MemoryBreakdown, Workload, estimate
from planner.engine.fields import ARRAY_FIELDS, ESTIMATE_FIELDS, MEMORY_FIELDS, RESULT_FIELDS
from planner.result_schema import PLAN_ROW_FIELDS, csv_columns, table_columns

from .engine.factories import h100_sxm, llama_3_1_8b

PLAN = {"model": "llama-3.1-8b", "workload": {"prompt_tokens": 1000, "output_tokens": 300, "concurrency": 16},
        "hardware": {"chips": ["nvidia-h100-sxm", "nvidia-l4"]}}  # fmt: skip


def test_an_estimate_has_exactly_the_declared_fields():
    assert [f.name for f in dataclasses.fields(Estimate)] == [f.name for f in ESTIMATE_FIELDS] + ["prefill", "decode", "memory", "cost"]
    assert [f.name for f in dataclasses.fields(MemoryBreakdown)] == [f.name for f in MEMORY_FIELDS]


def test_an_evaluation_fills_every_declared_array_and_nothing_else():
    e = estimate(llama_3_1_8b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=100, output_tokens=100), batch=4)
    assert e.feasible and e.memory.max_concurrency > 4
    from planner.engine.estimate import evaluate_deployment

    results = evaluate_deployment(llama_3_1_8b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=100, output_tokens=100)).results
    assert sorted(results.arrays) == sorted(ARRAY_FIELDS)
    with pytest.raises(ValueError, match="undeclared \\['made_up'\\]"):
        dataclasses.replace(results, arrays={**results.arrays, "made_up": results.tpot_s})


def test_the_estimate_api_answers_and_documents_every_declared_field(catalog, anonymous_client):
    body = {"model": "llama-3.1-8b", "chip": "nvidia-h100-sxm", "prompt_tokens": 1000, "output_tokens": 300, "batch": 4}
    answer = anonymous_client.post("/api/v1/estimates/", body, format="json").json()
    schema = anonymous_client.get("/api/schema/?format=json").json()
    documented = schema["paths"]["/api/v1/estimates/"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    for f in ESTIMATE_FIELDS:
        assert f.name in answer, f.name
        assert f.description in documented["properties"][f.name]["description"], f.name
    assert set(documented["properties"]["memory"]["properties"]) == {f.name for f in MEMORY_FIELDS}
    assert documented["properties"]["ttft_s"]["description"].endswith("(s)")


def test_ranked_plan_rows_and_their_csv_carry_the_declared_columns(catalog, token_client, anonymous_client):
    plan = token_client.post("/api/v1/plans/", PLAN, format="json").json()
    row = plan["results"]["ranked"][0]
    assert {f.name for f in ESTIMATE_FIELDS + PLAN_ROW_FIELDS} <= set(row)
    export = anonymous_client.get(f"/api/v1/plans/{plan['id']}/export.csv").content.decode()
    header = next(csv.reader(io.StringIO(export)))
    assert header == ["rank", *(f.csv for f in csv_columns()), "decode_bound", "prefill_bound"]
    assert {"usd_per_chip_hour", "ttft_s", "mbu", "chip"} <= set(header)
    schema = anonymous_client.get("/api/schema/?format=json").json()
    plan_schema = schema["components"]["schemas"]["PlanOutput"]["properties"]["results"]
    assert {f.name for f in PLAN_ROW_FIELDS} <= set(plan_schema["properties"]["ranked"]["items"]["properties"])


def test_the_ranking_table_shows_a_column_per_labelled_field(catalog, token_client, client):
    plan = token_client.post("/api/v1/plans/", PLAN, format="json").json()
    html = client.get(f"/plans/{plan['id']}/").content.decode()
    for f in table_columns():
        assert f">{f.label}</th>" in html, f.label
    assert 'class="small muted range" title="80% interval: ' in html  # the range under each figure that has one
    assert all(f.label for f in RESULT_FIELDS if f.validated)


def test_each_ranked_row_names_the_format_its_weights_are_stored_in(catalog, token_client):
    body = {"model": "gpt-oss-120b", "workload": {"prompt_tokens": 1000, "output_tokens": 300, "concurrency": 8},
            "hardware": {"chips": ["nvidia-b200"], "weight_dtypes": ["fp4", "fp8"], "max_chips": 2}}  # fmt: skip
    rows = token_client.post("/api/v1/plans/", body, format="json").json()["results"]["ranked"]
    formats = {(r["weight_dtype"], r["weight_format"], r["weight_bits_per_weight"]) for r in rows}
    assert formats == {("fp4", "mxfp4", 4.25), ("fp8", "fp8", 8.0)}  # gpt-oss's own MXFP4 checkpoint; fp8 per tensor
