from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from planner.models import Plan

MEASURED_DEV = Path(__file__).resolve().parent.parent / "fixtures" / "measured_dev.csv"
MDAPE_BAR_PERCENT = 20.0


def test_the_estimate_command_prints_a_readable_estimate_and_json(catalog, capsys):
    call_command("estimate", "--model", "llama-3.1-8b", "--chip", "nvidia-h100-sxm", "--prompt-tokens", "1000", "--output-tokens", "300")
    out = capsys.readouterr().out
    assert "TTFT" in out and "memory-bound" in out and "per 1M output tokens" in out
    call_command("estimate", "--model", "llama-3.1-8b", "--chip", "nvidia-h100-sxm", "--prompt-tokens", "1000", "--output-tokens", "300", "--json")
    assert json.loads(capsys.readouterr().out)["decode"]["bound"] == "memory"


def test_the_estimate_command_takes_the_serving_engine_and_its_servers_settings(catalog, capsys):
    args = ["--model", "llama-3.1-8b", "--chip", "nvidia-h100-sxm", "--prompt-tokens", "1000", "--output-tokens", "300", "--batch", "32",
            "--serving-engine", "vLLM", "--json"]  # fmt: skip
    call_command("estimate", *args, "--scheduler", '{"max_sequences": 16}')
    capped = json.loads(capsys.readouterr().out)
    assert capped["serving_engine"] == "vLLM" and capped["memory"]["max_concurrency"] == 16 and not capped["feasible"]
    with pytest.raises(CommandError, match="scheduler"):
        call_command("estimate", *args, "--scheduler", '{"max_sequences": 0}')


def test_the_estimate_and_plan_commands_take_a_closed_loop(catalog, capsys):
    """--closed-loop: the clients the server's cap cannot hold wait for a slot, as POST /api/v1/estimates/ reads them."""
    args = ["--model", "llama-3.1-8b", "--prompt-tokens", "1000", "--output-tokens", "300", "--concurrency", "32", "--closed-loop"]
    call_command("estimate", *args, "--chip", "nvidia-h100-sxm", "--serving-engine", "vLLM", "--scheduler", '{"max_sequences": 16}')
    out = capsys.readouterr().out
    assert "feasible: True" in out and "batch 16" in out and "runs 16 of the 32 clients' requests at once" in out
    with pytest.raises(CommandError, match="request_rate_per_s"):
        call_command("estimate", *args, "--chip", "nvidia-h100-sxm", "--request-rate", "2")
    call_command("plan", *args, "--chips", "nvidia-h100-sxm", "--max-chips", "1", "--serving-engine", "vLLM", "--scheduler",
                 '{"max_sequences": 8}', "--rank-by", "pessimistic", "--json")  # fmt: skip
    plan = json.loads(capsys.readouterr().out)
    assert plan["inputs"]["workload"]["closed_loop"] is True and plan["inputs"]["scheduler"] == {"max_sequences": 8}
    assert plan["inputs"]["serving_engine"] == "vLLM" and plan["inputs"]["rank_by"] == "pessimistic"
    assert plan["results"]["ranked"] and all(r["batch"] <= 8 for r in plan["results"]["ranked"])


def test_the_estimate_command_names_a_bad_field(catalog):
    with pytest.raises(CommandError, match="tensor_parallel"):
        call_command("estimate", "--model", "llama-3.1-8b", "--chip", "nvidia-h100-sxm", "--prompt-tokens", "10",
                     "--output-tokens", "10", "--tensor-parallel", "3")


def test_the_plan_command_stores_a_plan_and_prints_the_ranking(catalog, capsys):
    call_command("plan", "--model", "llama-3.1-8b", "--prompt-tokens", "500", "--output-tokens", "200", "--concurrency", "16",
                 "--tpot-slo", "0.05", "--kinds", "gpu,tpu")
    out = capsys.readouterr().out
    assert Plan.objects.count() == 1 and "$/1M out" in out and "  1 " in out


def test_the_accuracy_command_refuses_other_chips_bands_without_a_bands_file_or_a_file_that_is_not_there(tmp_path):
    with pytest.raises(CommandError, match="--bands-other needs --bands-out"):
        call_command("accuracy", str(MEASURED_DEV), "--bands-other", str(MEASURED_DEV))
    missing = tmp_path / "nowhere.csv"
    with pytest.raises(CommandError, match="no such file"):
        call_command("accuracy", str(MEASURED_DEV), "--bands-out", str(tmp_path / "bands.json"), "--bands-other", str(missing))
    assert not (tmp_path / "bands.json").exists()


def test_the_accuracy_command_refuses_a_load_it_cannot_read_naming_the_row(catalog, tmp_path):
    header = MEASURED_DEV.read_text().splitlines()[0] + ",load,requests"
    path = tmp_path / "m.csv"
    path.write_text(f"{header}\nr1,llama-2-7b,nvidia-h100-sxm,1,1,bf16,bf16,max,128,128,ar,,ttft_s,1,vLLM,src,,closed_loop,\n")
    with pytest.raises(CommandError, match="row r1: a closed loop needs its clients in `batch`, not 'max'"):
        call_command("accuracy", str(path))


def test_accuracy_on_the_dev_set_has_a_median_error_under_twenty_percent(catalog, capsys):
    call_command("accuracy", str(MEASURED_DEV), "--json")
    report = json.loads(capsys.readouterr().out)
    summary = report["summary"]
    assert summary["total"] == 81
    assert summary["count"] + summary["unpredicted"] == summary["total"]
    for missed in report["unpredicted"]:
        assert missed["reason"]
    assert summary["mdape"] <= MDAPE_BAR_PERCENT
    assert set(summary["by_metric"]) >= {"decode_tokens_per_s_per_user", "output_tokens_per_s", "ttft_s"}


def test_an_unknown_slug_in_a_measurements_csv_is_listed_not_dropped(catalog, tmp_path, capsys):
    lines = MEASURED_DEV.read_text().splitlines()
    broken = lines[1].replace("llama-2-7b", "llama-99b", 1)
    path = tmp_path / "m.csv"
    path.write_text("\n".join([lines[0], broken, lines[2]]) + "\n")
    call_command("accuracy", str(path), "--json")
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["count"] == 1 and report["unpredicted"][0]["reason"].startswith("unknown catalog slug")
