"""A silicon-layout file's checkpoint the catalog lacks is read from the configs shipped beside it, for the run only."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from hwcatalog.models import ModelArch

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SILICON_DEV = FIXTURES / "silicon_dev.csv"
HF_CONFIGS = FIXTURES / "hf_configs"


def _silicon_rows(model_path: str, count: int) -> list[dict[str, str]]:
    with SILICON_DEV.open(newline="") as handle:
        return [row for row in csv.DictReader(handle) if row["model_path"] == model_path][:count]


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _report(capsys, *args) -> dict:
    call_command("accuracy", *map(str, args), "--json")
    return json.loads(capsys.readouterr().out)


def test_a_checkpoint_the_catalog_lacks_is_predicted_from_its_config_beside_the_file_as_the_catalog_model_is(catalog, tmp_path, capsys):
    llama = _silicon_rows("meta-llama/Llama-3.1-70B", 6)
    deepseek = _silicon_rows("nvidia/DeepSeek-V3.1-NVFP4", 1)
    known = _report(capsys, _write(tmp_path / "known.csv", llama + deepseek))
    (tmp_path / "new" / "configs").mkdir(parents=True)
    renamed = [{**row, "model_path": "acme/Llama-70B-Copy"} for row in llama] + [{**row, "model_path": "acme/DSV31-Copy"} for row in deepseek]
    shutil.copy(HF_CONFIGS / "llama-3.1-70b.json", tmp_path / "new" / "configs" / "acme--Llama-70B-Copy_config.json")
    shutil.copy(HF_CONFIGS / "deepseek-v3.1-nvfp4.json", tmp_path / "new" / "configs" / "acme--DSV31-Copy_config.json")
    shutil.copy(HF_CONFIGS / "deepseek-v3.1-nvfp4.hf_quant_config.json", tmp_path / "new" / "configs" / "acme--DSV31-Copy_hf_quant_config.json")
    stored = ModelArch.objects.count()

    copied = _report(capsys, _write(tmp_path / "new" / "silicon.csv", renamed))

    assert copied["summary"]["unpredicted"] == 0 and copied["summary"]["count"] == known["summary"]["count"] == 14
    by_value = {(r["id"], r["metric"]): r["predicted"] for r in known["rows"]}
    for row in copied["rows"]:
        assert row["predicted"] == pytest.approx(by_value[(row["id"], row["metric"])], rel=1e-9)
    assert copied["models_from_configs"]["read"] == {
        "acme/DSV31-Copy": "acme--DSV31-Copy_config.json + acme--DSV31-Copy_hf_quant_config.json",
        "acme/Llama-70B-Copy": "acme--Llama-70B-Copy_config.json",
    }
    assert ModelArch.objects.count() == stored  # read for the run, never stored


def test_a_config_the_importer_refuses_leaves_its_rows_unpredicted_with_the_reason_and_the_rest_predicted(catalog, tmp_path, capsys):
    rows = [{**row, "model_path": "acme/Broken"} for row in _silicon_rows("openai/gpt-oss-120b", 2)] + _silicon_rows("Qwen/Qwen3-32B", 2)
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "acme--Broken_config.json").write_text('{"model_type": "llama"}')

    report = _report(capsys, _write(tmp_path / "silicon.csv", rows), "--configs", tmp_path / "cfg")

    assert report["summary"]["count"] == 4 and report["summary"]["unpredicted"] == 4
    reason = report["unpredicted"][0]["reason"]
    assert "acme/Broken" in reason and "acme--Broken_config.json" in reason and "hidden_size" in reason
    assert "acme/Broken" in report["models_from_configs"]["refused"]


def test_the_configs_option_needs_a_folder_and_a_silicon_layout_file(catalog, tmp_path):
    silicon = _write(tmp_path / "silicon.csv", _silicon_rows("Qwen/Qwen3-32B", 1))
    with pytest.raises(CommandError, match="no such folder"):
        call_command("accuracy", str(silicon), "--configs", str(tmp_path / "nowhere"))
    with pytest.raises(CommandError, match="only a silicon-layout file"):
        call_command("accuracy", str(FIXTURES / "measured_dev.csv"), "--configs", str(tmp_path))


def test_two_repositories_whose_names_differ_only_in_punctuation_get_their_own_slugs(db, tmp_path):
    from planner.model_configs import models_from_configs

    for name in ("acme--m.1", "acme--m-1"):
        shutil.copy(HF_CONFIGS / "llama-3.1-8b.json", tmp_path / f"{name}_config.json")
    found = models_from_configs(["acme/m.1", "acme/m-1", "acme/absent"], tmp_path, taken_slugs={"acme-m-1"})
    assert sorted(model.slug for model in found.models.values()) == ["acme-m-1-2", "acme-m-1-3"]
    assert set(found.models) == {"acme/m.1", "acme/m-1"} and not found.refused


def test_the_serving_simulator_reads_the_same_configs_and_simulates_the_copy_as_the_catalog_model(catalog, tmp_path, capsys):
    rows = [row for row in _silicon_rows("meta-llama/Llama-3.1-70B", 40) if row["mode"] == "agg"][:1]
    call_command("simaccuracy", str(_write(tmp_path / "known.csv", rows)), "--json")
    known = json.loads(capsys.readouterr().out)
    (tmp_path / "new" / "configs").mkdir(parents=True)
    shutil.copy(HF_CONFIGS / "llama-3.1-70b.json", tmp_path / "new" / "configs" / "acme--Llama-70B-Copy_config.json")
    call_command("simaccuracy", str(_write(tmp_path / "new" / "silicon.csv", [{**row, "model_path": "acme/Llama-70B-Copy"} for row in rows])), "--json")
    copied = json.loads(capsys.readouterr().out)
    assert known["values"] and [v["predicted_s"] for v in copied["values"]] == pytest.approx([v["predicted_s"] for v in known["values"]], rel=1e-9)
    assert copied["models_from_configs"]["read"] == {"acme/Llama-70B-Copy": "acme--Llama-70B-Copy_config.json"}
    with pytest.raises(CommandError, match="only a silicon-layout file"):
        call_command("simaccuracy", str(FIXTURES / "serving_percentiles.csv"), "--configs", str(tmp_path))


def test_a_checkpoint_takes_the_one_config_named_as_its_base_model_as_aiconfigurator_names_them(catalog, tmp_path, capsys):
    """The layout's folder names Llama-3.1-70B's config meta-llama--Meta-Llama-3.1-70B_config.json, and serves the
    instruct and FP8 checkpoints of the same model with it."""
    rows = [{**row, "model_path": "acme/Llama-3.1-70B-Instruct-FP8"} for row in _silicon_rows("meta-llama/Llama-3.1-70B", 2)]
    shutil.copy(HF_CONFIGS / "llama-3.1-70b.json", tmp_path / "acme--Meta-Llama-3.1-70B_config.json")
    shutil.copy(HF_CONFIGS / "llama-3.1-8b.json", tmp_path / "acme--Meta-Llama-3.1-8B_config.json")

    report = _report(capsys, _write(tmp_path / "s.csv", rows), "--configs", tmp_path)

    assert report["summary"]["unpredicted"] == 0
    assert report["models_from_configs"]["read"] == {"acme/Llama-3.1-70B-Instruct-FP8": "acme--Meta-Llama-3.1-70B_config.json (its base model's, by name)"}
    call_command("accuracy", str(tmp_path / "s.csv"), "--configs", str(tmp_path), "--markdown")
    assert "acme/Llama-3.1-70B-Instruct-FP8 (acme--Meta-Llama-3.1-70B_config.json (its base model's, by name))" in capsys.readouterr().out
    shutil.copy(HF_CONFIGS / "llama-3.1-70b.json", tmp_path / "other--Llama-3.1-70B_config.json")
    ambiguous = _report(capsys, tmp_path / "s.csv", "--configs", tmp_path)
    assert ambiguous["summary"]["count"] == 0
    assert "several configs are named as its base model: acme--Meta-Llama-3.1-70B_config.json, other--Llama-3.1-70B_config.json" in ambiguous["unpredicted"][0]["reason"]


def test_what_the_folder_cannot_give_is_named_file_by_file_and_nothing_crashes(catalog, tmp_path, capsys):
    rows = _silicon_rows("Qwen/Qwen3-32B", 1)
    paths = ["acme/BadQuant", "acme/Absent", "acme/" + "x" * 300]
    (tmp_path / "acme--BadQuant_config.json").write_text((HF_CONFIGS / "qwen3-32b.json").read_text())
    (tmp_path / "acme--BadQuant_hf_quant_config.json").write_text("nope")
    silicon = _write(tmp_path / "s.csv", [{**rows[0], "id": f"r{i}", "model_path": path} for i, path in enumerate(paths)])

    report = _report(capsys, silicon, "--configs", tmp_path)

    reasons = {u["id"]: u["reason"] for u in report["unpredicted"]}
    assert "acme--BadQuant_hf_quant_config.json: Not a JSON file" in reasons["r0"]
    assert "no acme--Absent_config.json" in reasons["r1"] and str(tmp_path) in reasons["r1"]
    assert "file name cannot be looked up" in reasons["r2"]
    assert report["models_from_configs"]["missing"] == ["acme/Absent"]
    call_command("accuracy", str(silicon), "--configs", str(tmp_path))
    text = capsys.readouterr().out
    assert f"checkpoints the catalog lacks, read from {tmp_path} for this run (not stored): none" in text
    assert "  acme/Absent: no config for it in the folder" in text and "  acme/BadQuant: not read, acme--BadQuant_hf_quant_config.json" in text


def test_a_folder_given_wins_over_the_one_beside_the_file(catalog, tmp_path, capsys):
    rows = [{**row, "model_path": "acme/M"} for row in _silicon_rows("meta-llama/Llama-3.1-70B", 1)]
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "acme--M_config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "given").mkdir()
    shutil.copy(HF_CONFIGS / "llama-3.1-70b.json", tmp_path / "given" / "acme--M_config.json")
    silicon = _write(tmp_path / "s.csv", rows)

    assert _report(capsys, silicon)["summary"]["count"] == 0  # the folder beside: a config the importer refuses
    assert _report(capsys, silicon, "--configs", tmp_path / "given")["summary"]["count"] == 2
    call_command("simaccuracy", str(silicon), "--json")
    refused = json.loads(capsys.readouterr().out)["unpredicted"][0]["reason"]
    assert "'acme/M' is not in the catalog" in refused and "acme--M_config.json: hidden_size" in refused
    with pytest.raises(CommandError, match="--configs and --bands-out"):
        call_command("accuracy", str(silicon), "--configs", str(tmp_path / "given"), "--bands-out", str(tmp_path / "b.json"))
