"""The importer reads sliding windows, MoE styles and the checkpoint's weight format, and records the Hugging Face id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from hwcatalog.models import ModelArch
from planner import catalog_specs
from planner.engine import Hybrid, SlidingWindow

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"


def _load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def _import(client, slug: str, config: dict, **extra):
    return client.post("/api/v1/models/import/", {"slug": slug, "config": config, **extra}, format="json")


def test_gpt_oss_has_a_128_token_window_on_half_its_layers_and_mxfp4_weights(catalog_token_client):
    response = _import(catalog_token_client, "oss-120b", _load("gpt-oss-120b.json"), hf_id="openai/gpt-oss-120b")
    assert response.status_code == 201, response.json()
    model = ModelArch.objects.get(slug="oss-120b")
    assert (model.sliding_window, model.sliding_window_layers, model.checkpoint_format) == (128, 18, "mxfp4")
    assert model.hf_id == "openai/gpt-oss-120b" and model.sources == ["https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json"]
    attention = catalog_specs.model_spec(model).attention
    assert isinstance(attention, Hybrid) and isinstance(attention.parts[1], SlidingWindow)
    # At 8k tokens the banded half holds 128 tokens: the cache is (8192 + 128) / 2 tokens' worth.
    assert attention.kv_held_tokens(8192.0) == pytest.approx((8192 + 128) / 2)


def test_qwen3_moe_counts_every_layer_as_moe_with_no_shared_expert(catalog_token_client):
    assert _import(catalog_token_client, "q235", _load("qwen3-235b-a22b-fp8.json")).status_code == 201
    model = ModelArch.objects.get(slug="q235")
    assert (model.num_experts, model.experts_per_token, model.moe_layer_count, model.num_shared_experts) == (128, 8, 94, 0)
    assert model.checkpoint_format == "fp8_block"  # quantization_config: fp8 with weight_block_size


def test_nvfp4_comes_from_the_checkpoints_hf_quant_config(catalog_token_client):
    body = {"quant_config": _load("deepseek-v3.1-nvfp4.hf_quant_config.json")}
    assert _import(catalog_token_client, "dsv31-fp4", _load("deepseek-v3.1-nvfp4.json"), **body).status_code == 201
    assert ModelArch.objects.get(slug="dsv31-fp4").checkpoint_format == "nvfp4"


@pytest.mark.parametrize(
    ("config_change", "extra", "field"),
    [
        ({"quantization_config": {"quant_method": "bitsandbytes"}}, {}, "quantization_config"),
        ({}, {"quant_config": {"quantization": {"quant_algo": "SPARSE"}}}, "quant_config"),
        ({"decoder_sparse_step": 2}, {}, "decoder_sparse_step"),
    ],
)
def test_an_unreadable_format_or_layout_gets_400_naming_the_field(catalog_token_client, config_change, extra, field):
    base = _load("qwen3-235b-a22b-fp8.json")
    response = _import(catalog_token_client, "bad-q", {**base, **config_change}, **extra)
    assert response.status_code == 400 and field in json.dumps(response.json()), response.json()
    assert not ModelArch.objects.filter(slug="bad-q").exists()


def test_an_hf_id_is_recorded_once(catalog_token_client):
    assert _import(catalog_token_client, "q32-a", _load("qwen3-32b.json"), hf_id="Qwen/Qwen3-32B").status_code == 201
    again = _import(catalog_token_client, "q32-b", _load("qwen3-32b.json"), hf_id="Qwen/Qwen3-32B")
    assert again.status_code == 400 and "hf_id" in again.json()
    assert _import(catalog_token_client, "q32-c", _load("qwen3-32b.json"), hf_id="not an id").status_code == 400


def test_the_importmodel_command_records_the_hf_id_and_reads_a_quant_config(db, capsys):
    call_command("importmodel", str(FIXTURES / "deepseek-v3.1-nvfp4.json"), "--slug", "dsv31-cli", "--hf-id", "nvidia/DeepSeek-V3.1-NVFP4",
                 "--quant-config", str(FIXTURES / "deepseek-v3.1-nvfp4.hf_quant_config.json"))  # fmt: skip
    model = ModelArch.objects.get(slug="dsv31-cli")
    assert (model.hf_id, model.checkpoint_format) == ("nvidia/DeepSeek-V3.1-NVFP4", "nvfp4")
    with pytest.raises(CommandError, match="no such file"):
        call_command("importmodel", str(FIXTURES / "qwen3-32b.json"), "--slug", "x-cli", "--quant-config", "/nonexistent.json")


def test_catalog_models_are_found_by_their_hf_ids_and_chips_by_their_aliases(catalog):
    from planner.accuracy import _by_name
    from hwcatalog.models import Chip

    models = _by_name(ModelArch.objects.all(), "hf_id", "hf_aliases")
    assert models["deepseek-ai/DeepSeek-R1"].slug == models["nvidia/DeepSeek-R1-NVFP4"].slug == "deepseek-v3"
    assert models["Qwen/Qwen3-235B-A22B-FP8"].slug == "qwen3-235b-a22b"
    assert _by_name(Chip.objects.all(), "aliases")["h200_sxm"].slug == "nvidia-h200-sxm"


def test_llama4_scout_reads_its_text_config_shared_expert_and_chunked_layers(catalog_token_client):
    response = _import(catalog_token_client, "scout", _load("llama-4-scout.json"), hf_id="meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert response.status_code == 201, response.json()
    assert response.json()["detected_style"] == "llama4"
    model = ModelArch.objects.get(slug="scout")
    assert (model.num_experts, model.experts_per_token, model.num_shared_experts, model.moe_layer_count) == (16, 1, 1, 48)
    assert (model.moe_intermediate_size, model.intermediate_size, model.hidden_size, model.num_kv_heads) == (8192, 16384, 5120, 8)
    # attention_chunk_size 8192 on the RoPE layers: all but every 4th (transformers' default no_rope_layers)
    assert (model.sliding_window, model.sliding_window_layers) == (8192, 36)


def test_llama4_maverick_has_moe_on_every_second_layer_and_dense_ffns_between(catalog_token_client):
    assert _import(catalog_token_client, "maverick", _load("llama-4-maverick.json")).status_code == 201
    model = ModelArch.objects.get(slug="maverick")
    assert (model.num_experts, model.moe_layer_count, model.moe_intermediate_size, model.intermediate_size) == (128, 24, 8192, 16384)


def test_llama4_no_rope_layers_and_moe_layers_when_given_and_no_window_without_a_chunk(catalog_token_client):
    config = _load("llama-4-scout.json")
    text = config["text_config"]
    given = {**config, "text_config": {**text, "no_rope_layers": [1, 0] * 24, "moe_layers": [0, 1, 2]}}
    assert _import(catalog_token_client, "scout-given", given).status_code == 201
    model = ModelArch.objects.get(slug="scout-given")
    assert (model.sliding_window_layers, model.moe_layer_count) == (24, 3)
    plain = {**config, "text_config": {k: v for k, v in text.items() if k != "attention_chunk_size"}}
    assert _import(catalog_token_client, "scout-plain", plain).status_code == 201
    assert ModelArch.objects.get(slug="scout-plain").sliding_window is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_local_experts", 0), ("num_experts_per_tok", "1"), ("interleave_moe_layer_step", 0),
        ("intermediate_size_mlp", -1), ("attention_chunk_size", 1.5), ("no_rope_layers", [1] * 47),
        ("no_rope_layers", "abc"), ("moe_layers", [48]), ("hidden_size", None),
    ],
)  # fmt: skip
def test_a_bad_llama4_text_config_value_gets_400_naming_it(catalog_token_client, key, value):
    config = _load("llama-4-scout.json")
    bad = {**config, "text_config": {**config["text_config"], key: value}}
    response = _import(catalog_token_client, "scout-bad", bad)
    assert response.status_code == 400 and f"text_config.{key}" in response.json(), response.json()
    assert not ModelArch.objects.filter(slug="scout-bad").exists()
