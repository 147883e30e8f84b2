"""manage.py simaccuracy: each published serving benchmark row simulated, each published percentile compared,
every row the simulator cannot run listed with its reason."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command

from planner.engine.simulation import SchedulerOptions
from planner.simulation_accuracy import first_round, resolve_chip, row_scheduler

COLUMNS = ("id source source_detail engine engine_version model_hf_id chip chip_count tensor_parallel weight_dtype kv_dtype max_sequences "
           "token_budget memory_fraction prefill_alone arrival rate_per_s "
           "concurrency requests prompt_tokens_mean prompt_tokens_std output_tokens_mean output_tokens_std length_note ttft_p50_ms "
           "ttft_p90_ms ttft_p99_ms ttft_mean_ms tpot_p50_ms tpot_p90_ms tpot_p99_ms tpot_mean_ms tpot_kind notes").split()


def _write(path, rows):
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in COLUMNS})


BASE = {"source": "https://example.invalid/bench", "engine": "vllm", "model_hf_id": "meta-llama/Llama-3.1-8B-Instruct", "chip_count": "1",
        "tensor_parallel": "1", "weight_dtype": "bf16", "requests": "200", "prompt_tokens_mean": "1000", "prompt_tokens_std": "0",
        "output_tokens_mean": "100", "output_tokens_std": "0", "ttft_p50_ms": "50", "ttft_p99_ms": "120", "tpot_p50_ms": "8", "tpot_kind": "tpot"}  # fmt: skip


@pytest.mark.django_db
def test_every_row_is_simulated_or_listed_with_its_reason(catalog, tmp_path, capsys):
    path = tmp_path / "p.csv"
    _write(path, [
        {**BASE, "id": "poisson", "chip": "H100 SXM 80GB", "arrival": "poisson", "rate_per_s": "4"},
        {**BASE, "id": "burst", "chip": "h100_sxm", "arrival": "burst"},
        {**BASE, "id": "capped", "chip": "nvidia-h100-sxm", "arrival": "burst", "concurrency": "16"},
        {**BASE, "id": "no-chip", "chip": "Imaginary X9", "arrival": "poisson", "rate_per_s": "1"},
        {**BASE, "id": "no-lengths", "chip": "H100 SXM", "arrival": "poisson", "rate_per_s": "1", "prompt_tokens_mean": "", "length_note": "ShareGPT"},
        {**BASE, "id": "no-rate", "chip": "H100 SXM", "arrival": "poisson"},
    ])  # fmt: skip
    call_command("simaccuracy", str(path), "--json")
    report = json.loads(capsys.readouterr().out)
    simulated = {v["id"] for v in report["values"]}
    assert simulated == {"poisson", "burst", "capped"}
    reasons = {u["id"]: u["reason"] for u in report["unpredicted"]}
    assert "no catalog chip" in reasons["no-chip"] and "ShareGPT" in reasons["no-lengths"] and "without a rate" in reasons["no-rate"]
    poisson = [v for v in report["values"] if v["id"] == "poisson"]
    assert {(v["metric"], v["percentile"]) for v in poisson} == {("ttft", "p50"), ("ttft", "p99"), ("tpot", "p50")}
    assert all(v["predicted_s"] > 0 and v["serving_engine_profile"] == "vLLM" for v in poisson)
    # a burst of 200 requests queues far longer than 16 capped clients do
    p99 = {v["id"]: v["predicted_s"] for v in report["values"] if (v["metric"], v["percentile"]) == ("ttft", "p99")}
    assert p99["burst"] > p99["capped"]
    assert report["summary"]["p50"]["count"] == 6 and report["summary"]["p99"]["count"] == 3
    call_command("simaccuracy", str(path))
    assert "3 of 6 rows simulated" in capsys.readouterr().out


def test_a_closed_loops_first_round_is_read_off_its_mean_and_median_ttft():
    # InferenceX's MI300X row at 4 clients: 40 requests, ten rounds; mean 449.55 ms over a median of 167.28 ms.
    row = {"arrival": "closed_loop", "concurrency": "4", "requests": "40", "ttft_mean_ms": "449.55", "ttft_p50_ms": "167.28"}
    first = first_round(row, mean_s=0.2, p50_s=0.19)
    assert first["rounds"] == 10.0
    assert first["published_excess_s"] == pytest.approx((0.44955 - 0.16728) * 10)  # 2.82 s a first-round request
    assert first["simulated_excess_s"] == pytest.approx(0.1)
    assert first_round({**row, "arrival": "poisson"}, mean_s=0.2, p50_s=0.19) is None  # no first round to read
    assert first_round({**row, "requests": "4"}, mean_s=0.2, p50_s=0.19) is None  # one round: it is all first round
    assert first_round({**row, "ttft_mean_ms": ""}, mean_s=0.2, p50_s=0.19) is None


def test_a_rows_server_columns_are_its_scheduler_knobs_and_empty_ones_the_engines_defaults():
    row = {"max_sequences": "256", "token_budget": "32768", "memory_fraction": "0.8", "prefill_alone": "true"}
    assert row_scheduler(row) == SchedulerOptions(max_sequences=256, token_budget=32768, memory_fraction=0.8, prefill_alone=True)
    assert row_scheduler({**row, "prefill_alone": "FALSE"}).prefill_alone is False
    assert row_scheduler({}) == SchedulerOptions()
    with pytest.raises(ValueError, match="prefill_alone 'maybe'"):
        row_scheduler({"prefill_alone": "maybe"})
    for fractional in ("256.5", "inf"):  # a count read off a command line is whole; never truncated
        with pytest.raises(ValueError, match="max_sequences .* is not a whole number"):
            row_scheduler({"max_sequences": fractional})


@pytest.mark.django_db
def test_a_rows_server_settings_are_the_simulations_and_a_bad_one_is_listed_with_its_reason(catalog, tmp_path, capsys):
    loop = {**BASE, "chip": "H100 SXM", "arrival": "closed_loop", "concurrency": "32", "requests": "320", "prompt_tokens_mean": "3000",
            "output_tokens_mean": "300"}  # fmt: skip
    path = tmp_path / "p.csv"
    _write(path, [
        {**loop, "id": "defaults"},
        {**loop, "id": "v0-no-chunked-prefill", "prefill_alone": "true", "token_budget": "8192"},
        {**loop, "id": "v1-chunked-prefill", "prefill_alone": "false", "token_budget": "8192"},
        {**loop, "id": "fp8-kv", "kv_dtype": "fp8", "memory_fraction": "0.5"},
        {**loop, "id": "bad-mode", "prefill_alone": "sometimes"},
        {**loop, "id": "bad-kv", "kv_dtype": "fp7"},
    ])  # fmt: skip
    call_command("simaccuracy", str(path), "--json")
    report = json.loads(capsys.readouterr().out)
    ttft = {v["id"]: v["predicted_s"] for v in report["values"] if (v["metric"], v["percentile"]) == ("ttft", "p50")}
    # prefills run before any decode keep the 32 clients in step: each round's prompts queue behind one another
    assert ttft["v0-no-chunked-prefill"] > 3 * ttft["v1-chunked-prefill"]
    assert "fp8-kv" in ttft
    reasons = {u["id"]: u["reason"] for u in report["unpredicted"]}
    assert "prefill_alone 'sometimes'" in reasons["bad-mode"] and "kv_dtype 'fp7'" in reasons["bad-kv"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "name, slug",
    [("H100 SXM 80GB", "nvidia-h100-sxm"), ("A100 80GB SXM", "nvidia-a100-sxm-80gb"), ("MI300X", "amd-mi300x"), ("l40s", "nvidia-l40s"),
     ("NVIDIA H200 SXM 141GB", "nvidia-h200-sxm"), ("H100 80GB", "nvidia-h100-sxm"), ("H200", "nvidia-h200-sxm")],
)
def test_a_published_chip_name_finds_its_catalog_chip(catalog, name, slug):
    from hwcatalog.models import Chip

    chip, why = resolve_chip(name, list(Chip.objects.all()))
    assert chip is not None and chip.slug == slug, why
    assert (why is not None) == ("SXM" not in name.upper() and "-" not in name and name not in ("MI300X", "l40s"))  # the SXM reading is said


@pytest.mark.django_db
def test_an_ambiguous_chip_name_says_which_it_could_be(catalog):
    from hwcatalog.models import Chip

    chip, why = resolve_chip("H100 SXM or PCIe", list(Chip.objects.all()))
    assert chip is None and "could be any of" in why and "nvidia-h100-sxm" in why and "nvidia-h100-pcie" in why
    assert resolve_chip("A100", list(Chip.objects.all()))[0] is None  # 40 or 80 GB, SXM or PCIe: not guessed
    chip, why = resolve_chip("A100 SXM", list(Chip.objects.all()))  # gpustack's label: no memory size
    assert chip is None and "no memory size" in why and "nvidia-a100-sxm-40gb" in why and "nvidia-a100-sxm-80gb" in why


SILICON_SAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "silicon_sample.csv"


@pytest.mark.django_db
def test_a_silicon_file_is_simulated_as_closed_loops_of_its_agg_rows_and_the_rest_listed_with_the_reason(catalog, capsys):
    """AIConfigurator's layout, detected by its header: each agg row of one tensor-parallel group becomes a closed loop of
    its concurrency, ten requests a client, compared on the published mean TTFT and TPOT; disaggregated and attention-DP
    rows are listed with why a simulation request cannot express them."""
    call_command("simaccuracy", str(SILICON_SAMPLE), "--json")
    report = json.loads(capsys.readouterr().out)
    simulated = {v["id"] for v in report["values"]}
    reasons = {u["id"]: u["reason"] for u in report["unpredicted"]}
    assert len(simulated) == 4 and len(reasons) == 4 and report["rows"] == 8
    assert all("disaggregated" in why or "attention DP" in why for why in reasons.values())
    assert {(v["metric"], v["percentile"]) for v in report["values"]} == {("ttft", "mean"), ("tpot", "mean")}
    llama = {v["metric"]: v for v in report["values"] if v["id"].startswith("meta_llama_llama_3_1_8b")}
    assert llama["ttft"]["measured_s"] == pytest.approx(0.190954, rel=1e-4) and llama["tpot"]["serving_engine_profile"] == "TensorRT-LLM"
    assert report["summary"]["mean"]["count"] == 8


def test_a_range_ratio_draws_a_silicon_rows_lengths_uniformly_below_the_published_ones():
    from planner.engine.silicon import read_silicon
    from planner.simulation_accuracy import _lengths, silicon_rows

    rows = silicon_rows(read_silicon(SILICON_SAMPLE.open()), range_ratio=0.8)
    llama = next(r for r in rows if r["id"].startswith("meta_llama_llama_3_1_8b"))
    assert (llama["requests"], llama["concurrency"]) == ("80", "8")  # ten requests a client
    draws = _lengths(llama, "prompt").sample(np.random.default_rng(0), 10_000)
    assert draws.min() >= 819 and draws.max() <= 1024 and draws.mean() == pytest.approx(921.6, rel=0.01)
    assert _lengths(silicon_rows(read_silicon(SILICON_SAMPLE.open()))[0], "prompt").kind == "fixed"
    with pytest.raises(ValueError, match="range_ratio"):
        silicon_rows([], range_ratio=1.5)


@pytest.mark.django_db
def test_a_range_ratio_is_refused_for_a_file_that_states_its_own_lengths(catalog, tmp_path):
    from django.core.management.base import CommandError

    path = tmp_path / "p.csv"
    _write(path, [{**BASE, "id": "poisson", "chip": "H100 SXM 80GB", "arrival": "poisson", "rate_per_s": "4"}])
    with pytest.raises(CommandError, match="range-ratio"):
        call_command("simaccuracy", str(path), "--range-ratio", "0.8")


PUBLISHED = Path(__file__).resolve().parents[1] / "fixtures" / "serving_percentiles.csv"


@pytest.mark.django_db
def test_the_published_percentiles_are_simulated_and_docs_accuracy_md_prints_what_the_command_does(catalog, capsys):
    """docs/accuracy.md's serving-percentile tables are `manage.py simaccuracy tests/fixtures/serving_percentiles.csv
    --markdown`, figures within a rounding step; the summary it leads with is the JSON's."""
    from tests.planner.accuracy_doc import assert_doc_holds

    from planner.simulation_accuracy import markdown_simulation_accuracy

    call_command("simaccuracy", str(PUBLISHED), "--json")
    report = json.loads(capsys.readouterr().out)
    tables = markdown_simulation_accuracy(report)  # what --markdown prints, from the same run
    assert_doc_holds("manage.py simaccuracy tests/fixtures/serving_percentiles.csv --markdown", tables)
    assert report["rows"] == 174 and len(report["unpredicted"]) == 15
    p50 = report["summary"]["p50"]
    assert f"| p50 | {p50['mdape']:.1f}% ({p50['count']}) |" in tables
    assert "| dstack |" in tables and "| inferencex |" in tables and "| nim |" not in tables  # NIM publishes neither p50 nor p99


def test_simaccuracy_refuses_bad_combinations_and_changes_nothing(tmp_path):
    from django.core.management import CommandError

    doc = tmp_path / "doc.md"
    doc.write_text("no block\n")
    with pytest.raises(CommandError, match="choose one"):
        call_command("simaccuracy", str(PUBLISHED), "--json", "--markdown")
    with pytest.raises(CommandError, match="needs --markdown"):
        call_command("simaccuracy", str(PUBLISHED), "--write-doc", str(doc))
    with pytest.raises(CommandError, match="no such file"):
        call_command("simaccuracy", str(PUBLISHED), "--markdown", "--write-doc", str(tmp_path / "missing.md"))
    assert doc.read_text() == "no block\n"
