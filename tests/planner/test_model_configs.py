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
