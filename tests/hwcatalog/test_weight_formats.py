"""Weights are counted in the format they are stored in: block scales included, and the parts a quantised
checkpoint keeps in 16 bits at 16 bits (hwcatalog.architecture; docs/planner_math.md#units-and-data-types)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwcatalog import architecture
from hwcatalog.importers.huggingface import sixteen_bit_modules
from hwcatalog.models import ModelArch
from hwcatalog.validation import sixteen_bit_modules_error

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
GIB = 2**30


def _load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_block_scaled_formats_count_their_scales():
    # OCP MX v1.0: 32 E2M1 values share an 8-bit E8M0 scale; NVFP4: 16 values share an FP8 E4M3 scale.
    assert architecture.WEIGHT_FORMAT_BITS["mxfp4"] == 4.25
    assert architecture.WEIGHT_FORMAT_BITS["nvfp4"] == 4.5
    # AWQ / GPTQ group 128: a 16-bit scale and a 4-bit zero point per 128 weights.
    assert architecture.WEIGHT_FORMAT_BITS["int4"] == pytest.approx(4.156, abs=1e-3)
    assert architecture.WEIGHT_FORMAT_BITS["fp8_block"] == pytest.approx(8.002, abs=1e-3)
    # compressed-tensors symmetric int4 in groups of 32 (Kimi K2.5): a 16-bit scale per 32 weights.
    assert architecture.WEIGHT_FORMAT_BITS["int4_g32"] == 4.5


def test_kimi_k2_5_is_stored_as_its_checkpoint_says(catalog):
    model = ModelArch.objects.get(slug="kimi-k2.5")
    assert (model.checkpoint_format, model.sixteen_bit_modules) == ("int4_g32", {"int4_g32": ["attention", "shared_experts", "dense_ffn"]})
    shape = model.shape()
    sixteen = architecture.sixteen_bit_module_params(shape, ["attention", "shared_experts", "dense_ffn"])
    # Weight-only int4 keeps the head at the format's width (SIXTEEN_BIT_HEAD_FORMATS): only the listed modules are 16-bit.
    assert model.weight_bytes("int4") == pytest.approx((model.parameter_count() - sixteen) * 4.5 / 8 + sixteen * 2)


def test_a_dtype_is_stored_in_the_checkpoints_own_format_when_it_is_of_that_dtype():
    assert architecture.weight_format("fp4", "mxfp4") == "mxfp4"
    assert architecture.weight_format("fp4", "fp8_block") == "nvfp4"  # DeepSeek-V3 served at fp4: NVIDIA's NVFP4
    assert architecture.weight_format("fp8", "fp8_block") == "fp8_block"
    assert architecture.weight_format("bf16", "mxfp4") == "bf16"


@pytest.mark.parametrize(("slug", "published_gib"), [("gpt-oss-120b", 60.8), ("gpt-oss-20b", 12.8)])
def test_gpt_oss_in_its_mxfp4_checkpoint_weighs_what_its_model_card_says(catalog, slug, published_gib):
    # gpt-oss model card (arXiv:2508.10925): checkpoints of 60.8 GiB and 12.8 GiB; MXFP4 experts, bf16 attention,
    # router, embeddings and head (config.json modules_to_not_convert). Biases and attention sinks are not counted.
    model = ModelArch.objects.get(slug=slug)
    assert model.weight_bytes("fp4") / GIB == pytest.approx(published_gib, rel=0.01)
    # At a uniform 4 bits the card's size would be missed by 8-9%.
    assert model.parameter_count() * 0.5 / GIB < published_gib * 0.93


def test_fp8_and_fp4_formats_keep_the_lm_head_in_16_bits_and_weight_only_int4_does_not(catalog):
    shape = ModelArch.objects.get(slug="llama-3.1-8b").shape()
    head = architecture.lm_head_params(shape)
    assert architecture.sixteen_bit_params(shape, "nvfp4") == (2 * head, head)  # the untied embedding is stored, not streamed
    assert architecture.sixteen_bit_params(shape, "fp8") == (2 * head, head)
    assert architecture.sixteen_bit_params(shape, "int4") == (0, 0)  # gpt-fast and llama.cpp quantise the head
    assert architecture.sixteen_bit_params(shape, "bf16") == (0, 0)


def test_deepseeks_nvfp4_checkpoint_keeps_the_attention_inputs_in_16_bits(catalog):
    model = ModelArch.objects.get(slug="deepseek-v3")
    shape = model.shape()
    # q_a 7168x1536, q_b 1536x(128x192), kv_a 7168x(512+64), kv_b 512x(128x(128+128)) in each of 61 layers.
    inputs = 61 * (7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256)
    assert architecture.sixteen_bit_module_params(shape, ["attention_inputs"]) == inputs
    assert architecture.sixteen_bit_module_params(shape, ["attention"]) == inputs + 61 * 128 * 128 * 7168
    nvfp4 = model.weight_bytes("fp4")
    uniform = model.parameter_count() * 4.5 / 8
    head_and_embedding = 2 * architecture.lm_head_params(shape)
    assert nvfp4 == pytest.approx(uniform + (inputs + head_and_embedding) * (2 - 0.5625))


def test_the_importer_reads_which_modules_a_checkpoint_leaves_unquantised():
    assert sixteen_bit_modules(_load("gpt-oss-120b.json")["quantization_config"], None) == ["attention", "router"]
    assert sixteen_bit_modules(None, _load("deepseek-v3.1-nvfp4.hf_quant_config.json")) == ["attention_inputs"]
    assert sixteen_bit_modules(None, _load("kimi-k2.6-nvfp4.hf_quant_config.json")) == ["attention", "shared_experts", "dense_ffn"]
    kimi = _load("kimi-k2.5.json")
    kimi_quant = kimi.get("quantization_config") or kimi["text_config"]["quantization_config"]
    assert sixteen_bit_modules(kimi_quant, None) == ["attention", "shared_experts", "dense_ffn"]
    # Only MTP layers excluded: nothing the planner counts stays in 16 bits beyond the head.
    assert sixteen_bit_modules(None, _load("qwen3.6-27b-nvfp4.hf_quant_config.json")) == []
    assert sixteen_bit_modules(_load("deepseek-v3.json")["quantization_config"], None) == []


def test_an_import_records_the_16_bit_modules_under_the_checkpoints_format(catalog, catalog_token_client):
    body = {"slug": "oss-fmt", "config": _load("gpt-oss-120b.json")}
    assert catalog_token_client.post("/api/v1/models/import/", body, format="json").status_code == 201
    model = ModelArch.objects.get(slug="oss-fmt")
    assert model.sixteen_bit_modules == {"mxfp4": ["attention", "router"]}
    assert model.weight_bytes("fp4") == pytest.approx(ModelArch.objects.get(slug="gpt-oss-120b").weight_bytes("fp4"))


@pytest.mark.parametrize(
    "value",
    [["attention"], {"bf16": ["attention"]}, {"fp4": ["attention"]}, {"nvfp4": []}, {"nvfp4": ["mlp"]}, {"nvfp4": ["router", "router"]},
     {"nvfp4": ["attention", "attention_inputs"]}],
)  # fmt: skip
def test_a_bad_16_bit_module_map_is_refused_in_words(value):
    assert sixteen_bit_modules_error(value)
    assert sixteen_bit_modules_error({"nvfp4": ["attention_inputs", "router"]}) is None


def test_a_bad_16_bit_module_map_gets_400_naming_the_field_and_stores_nothing(catalog, catalog_token_client):
    row = catalog_token_client.get("/api/v1/models/gpt-oss-20b/").json()
    response = catalog_token_client.patch("/api/v1/models/gpt-oss-20b/", {"sixteen_bit_modules": {"mxfp4": ["lm_head"]}}, format="json")
    assert response.status_code == 400 and "sixteen_bit_modules" in response.json(), response.json()
    assert ModelArch.objects.get(slug="gpt-oss-20b").sixteen_bit_modules == row["sixteen_bit_modules"] == {"mxfp4": ["attention", "router"]}
