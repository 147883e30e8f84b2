"""Real config.json files of hybrid (linear attention / Mamba-2), sparse-attention (DSA), windowed and newer MoE
models: the importer reads them, the shapes count to the published sizes, and the catalog rows built from them
hold the same shapes. Each fixture's origin is in the catalog row that cites it (hwcatalog/data/models/*.yaml)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwcatalog import architecture
from hwcatalog.importers.huggingface import ConfigError, fields_from_hf_config
from hwcatalog.models import ModelArch
from hwcatalog.validation import validate_arch

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"


def _load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def _import(name: str, quant: str | None = None) -> dict:
    return fields_from_hf_config(_load(name), _load(quant) if quant else None).fields


# (fixture, hf_quant_config fixture, published total or None, published active or None, KV bytes per token at bf16)
# Published figures: the catalog rows' sources. None where the only published figure is a rounded label that the
# shapes do not meet within 2% (noted beside it); the KV bytes count attention layers only.
REAL_CONFIGS = [
    ("qwen3.5-27b", None, 27e9, None, 2 * 16 * 4 * 256 * 2),  # 16 of 64 layers full attention
    ("qwen3.5-9b", None, 9e9, None, 2 * 8 * 4 * 256 * 2),
    ("qwen3.5-35b-a3b", None, 35e9, None, 2 * 10 * 2 * 256 * 2),  # 'A3B' is a label: 3.45B with both embeddings
    ("qwen3.5-122b-a10b", None, 122e9, None, 2 * 12 * 2 * 256 * 2),
    ("qwen3.5-397b-a17b", None, 397e9, None, 2 * 15 * 2 * 256 * 2),
    ("qwen3-next-80b-a3b", None, 80e9, None, 2 * 12 * 2 * 256 * 2),  # 'A3B' is a label: 3.87B with both embeddings
    ("qwen3.6-27b-nvfp4", "qwen3.6-27b-nvfp4.hf_quant_config", 27e9, None, 2 * 16 * 4 * 256 * 2),
    ("nemotron-3-nano-30b-a3b", None, 31.6e9, 3.6e9, 2 * 6 * 2 * 128 * 2),  # arXiv:2512.20848
    ("nemotron-3-super-120b-a12b", None, 120.6e9, 12.7e9, 2 * 8 * 2 * 128 * 2),  # LatentMoE; tech report 120.6B / 12.7B
    ("nemotron-h-56b", None, 56e9, None, 2 * 10 * 8 * 128 * 2),  # ten attention layers (model card)
    ("deepseek-v3.2", None, 671e9, 38.4e9, 61 * (576 + 128) * 2),  # MLA latent + the indexer's key; V3's 36.6B + embedding + indexer
    ("glm-5", None, 744e9, 41.9e9, 78 * (576 + 128) * 2),  # 40B activated + both embeddings (catalog row notes)
    ("glm-4.7", None, 358e9, 33.55e9, 2 * 92 * 8 * 128 * 2),
    ("glm-4.7-flash", None, 30e9, None, 47 * 576 * 2),  # 'about 30B total and 3B active' (3B: a label)
    ("minimax-m2.5", None, 229.9e9, 11.03e9, 2 * 62 * 8 * 128 * 2),  # 248 KiB per token, as published for M2.5
    ("minimax-m2.7", None, 229.9e9, 11.03e9, 2 * 62 * 8 * 128 * 2),
    ("kimi-k2.5", None, 1.04e12, 32.6e9, 61 * 576 * 2),
    ("kimi-k2.6-nvfp4", "kimi-k2.6-nvfp4.hf_quant_config", 1.04e12, 32.6e9, 61 * 576 * 2),
    ("kimi-k2-thinking", None, 1.04e12, 32.6e9, 61 * 576 * 2),
    ("gemma-3-27b", None, 27e9, None, 2 * 62 * 16 * 128 * 2),  # before the 1024-token window on 52 layers
    ("devstral-small-2-24b", None, 24e9, None, 2 * 40 * 8 * 128 * 2),
    ("devstral-2-123b", None, 123e9, None, 2 * 88 * 8 * 128 * 2),
    ("mistral-7b-v0.3", None, 7.3e9, None, 2 * 32 * 8 * 128 * 2),
    ("olmo-3.1-32b", None, 32e9, None, 2 * 64 * 8 * 128 * 2),
    ("exaone-4.0-32b", None, 32e9, None, 2 * 64 * 8 * 128 * 2),
    ("allam-7b", None, 7e9, None, 2 * 32 * 32 * 128 * 2),
    ("qwen3-vl-4b", None, 4.0e9, None, 2 * 36 * 8 * 128 * 2),
    ("qwen3-vl-8b", None, 8.2e9, None, 2 * 36 * 8 * 128 * 2),
    ("qwen3-vl-32b", None, 32.8e9, None, 2 * 64 * 8 * 128 * 2),
    ("qwen3-vl-30b-a3b", None, 30.5e9, 3.3e9, 2 * 48 * 4 * 128 * 2),
    ("qwen3-vl-235b-a22b", None, 235e9, 22e9, 2 * 94 * 4 * 128 * 2),
    ("llada-8b", None, 8e9, None, 2 * 32 * 32 * 128 * 2),
    ("llama-3.2-1b", None, 1.24e9, None, 2 * 16 * 8 * 64 * 2),
    ("llama-3.3-70b", None, 70.6e9, None, 2 * 80 * 8 * 128 * 2),
    ("phi-4", None, 14.7e9, None, 2 * 40 * 10 * 128 * 2),  # the model page's 14.7B (the card's '14B' is 4.7% below the shapes)
    ("gemma-3-4b", None, 3.88e9, None, 2 * 34 * 4 * 256 * 2),  # the report's 675M embedding + 3,209M non-embedding ('4B' is a label)
    ("nemotron-3.5-lightning-30b-a3b-nvfp4", "nemotron-3.5-lightning-30b-a3b-nvfp4.hf_quant_config", None, None, 2 * 6 * 2 * 128 * 2),
    ("dream-7b", None, 7.62e9, None, 2 * 28 * 4 * 128 * 2),  # its checkpoint's 7.616e9 (the name's '7B' is a label)
    ("sdar-8b-chat", None, 8.2e9, None, 2 * 36 * 8 * 128 * 2),  # Qwen3-8B's card (SDAR continues Qwen3-8B-Base)
    ("fast-dllm-v2-7b", None, 7.61e9, None, 2 * 28 * 4 * 128 * 2),  # Qwen2.5-7B-Instruct's card; the checkpoint's 7.616e9
]


@pytest.mark.parametrize(("fixture", "quant", "total", "active", "kv_bytes"), REAL_CONFIGS, ids=[c[0] for c in REAL_CONFIGS])
def test_a_real_config_imports_to_its_published_size_and_kv(fixture, quant, total, active, kv_bytes):
    fields = _import(fixture, quant)
    shape = architecture.ArchShape(**{k: fields.get(k) for k in architecture.ArchShape.__dataclass_fields__ if k in fields})
    if total:
        assert fields["total_params"] == pytest.approx(total, rel=0.02)
    if active:
        assert fields["active_params"] == pytest.approx(active, rel=0.02)
    assert architecture.kv_cache_bytes_per_token(shape, "bf16") == kv_bytes
    assert not validate_arch({**fields, "total_params": fields["total_params"]}), fixture


def test_the_hybrid_fixtures_bring_the_importer_suite_past_45_real_configs():
    configs = [p for p in FIXTURES.glob("*.json") if not p.stem.endswith("hf_quant_config")]
    assert len(configs) >= 45


def test_qwen3_next_style_layers_are_read_from_layer_types_or_the_interval():
    qwen35 = _import("qwen3.5-27b")
    assert (qwen35["linear_attention_kind"], qwen35["linear_attention_layers"], qwen35["attention_layers"]) == ("gated_deltanet", 48, 16)
    assert (qwen35["linear_num_key_heads"], qwen35["linear_key_head_dim"], qwen35["linear_num_value_heads"], qwen35["linear_value_head_dim"]) == (16, 128, 48, 128)
    assert qwen35["attention_output_gate"] is True and qwen35["tie_word_embeddings"] is False  # top-level key of the wrapper
    nxt = _import("qwen3-next-80b-a3b")  # no layer_types: every full_attention_interval-th (4th) layer is full
    assert (nxt["linear_attention_layers"], nxt["attention_layers"]) == (36, 12)
    assert (nxt["num_experts"], nxt["experts_per_token"], nxt["num_shared_experts"], nxt["shared_expert_intermediate_size"]) == (512, 10, 1, 512)
    moe = _import("qwen3.5-397b-a17b")
    assert moe["moe_layer_count"] == 60 and moe["intermediate_size"] == moe["moe_intermediate_size"] == 1024


def test_nemotron_h_blocks_are_counted_by_kind_from_either_spelling():
    nano = _import("nemotron-3-nano-30b-a3b")  # hybrid_override_pattern
    assert (nano["linear_attention_layers"], nano["attention_layers"], nano["ffn_layers"], nano["moe_layer_count"]) == (23, 6, 23, 23)
    assert (nano["linear_attention_kind"], nano["ffn_kind"], nano["shared_expert_intermediate_size"]) == ("mamba2", "plain", 3712)
    lightning = _import("nemotron-3.5-lightning-30b-a3b-nvfp4", "nemotron-3.5-lightning-30b-a3b-nvfp4.hf_quant_config")  # layers_block_type
    keys = ("num_layers", "linear_attention_layers", "attention_layers", "ffn_layers", "moe_layer_count", "num_experts", "total_params")
    assert {k: lightning[k] for k in keys} == {k: nano[k] for k in keys}
    assert lightning["checkpoint_format"] == "nvfp4"  # ModelOpt MIXED_PRECISION: NVFP4 experts
    # A config that leaves num_hidden_layers to its block list (Nemotron 3 Ultra's) counts one layer a block.
    unnumbered = {k: v for k, v in _load("nemotron-3.5-lightning-30b-a3b-nvfp4").items() if k != "num_hidden_layers"}
    assert fields_from_hf_config(unnumbered).fields["num_layers"] == lightning["num_layers"] == 52
    dense = _import("nemotron-h-56b")
    assert (dense["linear_attention_layers"], dense["attention_layers"], dense["ffn_layers"], dense["head_dim"]) == (54, 10, 54, 128)


def test_dsa_models_read_their_indexer():
    v32 = _import("deepseek-v3.2")
    assert (v32["sparse_attention_topk"], v32["indexer_num_heads"], v32["indexer_head_dim"], v32["attention_kind"]) == (2048, 64, 128, "mla")
    v3 = _import("deepseek-v3")
    # The indexer (wq_b 1536 x 64*128, wk 7168 x 128, weights_proj 7168 x 64) is V3.2's only new weight: 61 x 13.96M.
    assert v32["total_params"] - v3["total_params"] == 61 * (1536 * 64 * 128 + 7168 * 128 + 7168 * 64)
    glm5 = _import("glm-5")
    assert (glm5["sparse_attention_topk"], glm5["indexer_num_heads"], glm5["head_dim"], glm5["moe_layer_count"]) == (2048, 32, 256, 75)


def test_windowed_layers_of_gemma_olmo_and_exaone():
    gemma = _import("gemma-3-27b")  # no layer_types: every 6th layer global (Gemma3TextConfig's default pattern)
    assert (gemma["sliding_window"], gemma["sliding_window_layers"], gemma["vocab_size"], gemma["tie_word_embeddings"]) == (1024, 52, 262208, True)
    small = _import("gemma-3-4b")  # heads, KV heads and head_dim from the defaults too
    assert (small["num_attention_heads"], small["num_kv_heads"], small["head_dim"], small["sliding_window_layers"]) == (8, 4, 256, 29)
    for fixture in ("olmo-3.1-32b", "exaone-4.0-32b"):
        fields = _import(fixture)
        assert (fields["sliding_window"], fields["sliding_window_layers"]) == (4096, 48)


def test_checkpoint_formats_of_the_new_configs():
    assert _import("kimi-k2.5")["checkpoint_format"] == "int4_g32"  # compressed-tensors, 4-bit int in groups of 32
    assert _import("qwen3.6-27b-nvfp4", "qwen3.6-27b-nvfp4.hf_quant_config")["checkpoint_format"] == "nvfp4"
    assert _import("devstral-small-2-24b")["checkpoint_format"] == "fp8"  # fp8 without block size
    assert _import("minimax-m2.5")["checkpoint_format"] == "fp8_block"
    assert _import("kimi-k2.6-nvfp4")["checkpoint_format"] == "nvfp4"  # quant_method modelopt inside config.json


def test_llada_reads_olmo_keys_and_is_a_diffusion_model():
    fields = _import("llada-8b")
    assert (fields["num_layers"], fields["hidden_size"], fields["intermediate_size"], fields["vocab_size"]) == (32, 4096, 12288, 126464)
    assert fields["generation_kind"] == "diffusion"


def test_dream_is_a_diffusion_model_on_qwen25_shapes():
    dream, qwen = _import("dream-7b"), _import("qwen2.5-7b")
    keys = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "intermediate_size", "vocab_size")
    assert {k: dream[k] for k in (*keys, "total_params")} == {k: qwen[k] for k in (*keys, "total_params")}
    assert dream["generation_kind"] == "diffusion" and "default_block_size" not in dream


def test_sdar_is_a_block_diffusion_model_on_qwen3_shapes_with_its_block_size():
    sdar, qwen = _import("sdar-8b-chat"), _import("qwen3-8b")
    keys = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "intermediate_size", "vocab_size")
    assert {k: sdar[k] for k in (*keys, "total_params")} == {k: qwen[k] for k in (*keys, "total_params")}
    assert (sdar["generation_kind"], sdar["default_block_size"]) == ("block_diffusion", 4)
    with pytest.raises(ConfigError, match="block_size"):  # a block-diffusion model without its block size is refused
        fields_from_hf_config({k: v for k, v in _load("sdar-8b-chat").items() if k != "block_size"})


def test_fast_dllm_v2_is_a_block_diffusion_model_on_qwen25_shapes_with_its_bd_size():
    fast, qwen = _import("fast-dllm-v2-7b"), _import("qwen2.5-7b")
    keys = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "intermediate_size", "vocab_size")
    assert {k: fast[k] for k in (*keys, "total_params")} == {k: qwen[k] for k in (*keys, "total_params")}
    assert (fast["generation_kind"], fast["default_block_size"]) == ("block_diffusion", 32)
    assert "sliding_window_layers" not in fast  # layer_types lists every layer as full_attention
    with pytest.raises(ConfigError, match="bd_size"):  # a block-diffusion model without its block size is refused
        fields_from_hf_config({k: v for k, v in _load("fast-dllm-v2-7b").items() if k != "bd_size"})


def test_diffusion_rows_hold_their_configs_generation_kind_and_block_size(catalog):
    for slug in ("llada-8b", "dream-7b", "sdar-8b-chat", "fast-dllm-v2-7b"):
        fields, row = _import(slug), ModelArch.objects.get(slug=slug)
        assert (row.generation_kind, row.default_block_size) == (fields["generation_kind"], fields.get("default_block_size")), slug


def _mutated(name: str, path: list[str], value) -> dict:
    config = _load(name)
    target = config
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return config


@pytest.mark.parametrize(
    ("config", "key"),
    [
        (_mutated("qwen3.5-27b", ["text_config", "layer_types"], ["full_attention"] * 3), "text_config.layer_types"),
        (_mutated("qwen3.5-27b", ["text_config", "linear_num_value_heads"], 0), "text_config.linear_num_value_heads"),
        (_mutated("qwen3-next-80b-a3b", ["linear_key_head_dim"], "128"), "linear_key_head_dim"),
        (_mutated("nemotron-3-nano-30b-a3b", ["hybrid_override_pattern"], "MEM*X"), "hybrid_override_pattern"),
        (_mutated("nemotron-3-nano-30b-a3b", ["ssm_state_size"], None), "ssm_state_size"),
        (_mutated("nemotron-3-nano-30b-a3b", ["moe_latent_size"], 4096), "moe_latent_size"),
        (_mutated("deepseek-v3.2", ["index_n_heads"], None), "index_n_heads"),
        (_mutated("glm-4.7", ["first_k_dense_replace"], 500), "first_k_dense_replace"),
        (_mutated("gemma-3-27b", ["text_config", "layer_types"], ["sliding_attention"]), "text_config.layer_types"),
        (_mutated("minimax-m2.5", ["shared_intermediate_size"], 1536), "shared_intermediate_size"),
        (_mutated("qwen3.6-27b-nvfp4", ["text_config", "num_hidden_layers"], -1), "text_config.num_hidden_layers"),
    ],
)
def test_a_bad_hybrid_config_names_the_config_key(config, key):
    with pytest.raises(ConfigError) as raised:
        fields_from_hf_config(config)
    assert key in raised.value.errors, raised.value.errors


def test_a_hybrid_config_imports_through_the_api_with_its_layer_kinds(catalog_token_client):
    response = catalog_token_client.post("/api/v1/models/import/", {"slug": "qwen35-27b-imported", "config": _load("qwen3.5-27b")}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["detected_style"] == "qwen3_next"
    model = ModelArch.objects.get(slug="qwen35-27b-imported")
    assert (model.linear_attention_kind, model.linear_attention_layers, model.attention_layers) == ("gated_deltanet", 48, 16)
    # The state is constant per sequence: 48 layers x (48 x 128 x 128 recurrent + 3 x 10240 conv) elements.
    assert model.linear_state_bytes_per_sequence("bf16") == 48 * (48 * 128 * 128 + 3 * (2 * 2048 + 6144)) * 2
    assert model.kv_cache_bytes_per_token("bf16") == 2 * 16 * 4 * 256 * 2


# The new fields a catalog row must share with its config (the older ones: test_hf_import.CATALOG_SHAPE_FIELDS).
NEW_SHAPE_FIELDS = (
    "attention_output_gate", "linear_attention_kind", "linear_attention_layers", "linear_num_key_heads", "linear_key_head_dim",
    "linear_num_value_heads", "linear_value_head_dim", "linear_conv_kernel_dim", "attention_layers", "ffn_layers",
    "shared_expert_intermediate_size", "sparse_attention_topk", "indexer_num_heads", "indexer_head_dim", "ffn_kind",
)  # fmt: skip
# Catalog rows whose fixture is a re-quantised copy (slug -> fixture, hf_quant_config).
ROW_FIXTURES = {"qwen3.6-27b": ("qwen3.6-27b-nvfp4", "qwen3.6-27b-nvfp4.hf_quant_config"), "kimi-k2.6": ("kimi-k2.6-nvfp4", "kimi-k2.6-nvfp4.hf_quant_config")}


def _defaults(fields: dict) -> dict:
    out = {k: fields.get(k) for k in NEW_SHAPE_FIELDS}
    out["linear_attention_kind"] = out["linear_attention_kind"] or ""
    out["attention_output_gate"] = bool(out["attention_output_gate"])
    return out


def test_every_catalog_row_with_a_fixture_holds_its_configs_new_fields(catalog):
    checked = 0
    for row in ModelArch.objects.all():
        fixture, quant = ROW_FIXTURES.get(row.slug, (row.slug, None))
        if not (FIXTURES / f"{fixture}.json").exists():
            continue
        expected = _defaults(_import(fixture, quant))
        assert {k: getattr(row, k) for k in NEW_SHAPE_FIELDS} == expected, row.slug
        checked += 1
    assert checked >= 45


def test_every_catalog_model_counts_within_two_percent_of_its_published_size(catalog):
    models = list(ModelArch.objects.all())
    assert len(models) >= 60
    for model in models:
        assert model.parameter_count() == pytest.approx(model.total_params, rel=0.02), model.slug
        if model.active_params:
            assert model.active_parameter_count() == pytest.approx(model.active_params, rel=0.02), model.slug


def test_the_catalog_reaches_the_new_architectures(catalog):
    kinds = set(ModelArch.objects.values_list("linear_attention_kind", flat=True))
    assert {"gated_deltanet", "mamba2"} <= kinds
    assert ModelArch.objects.filter(sparse_attention_topk__isnull=False).exists()
    assert ModelArch.objects.filter(sliding_window_layers__isnull=False, num_experts__isnull=True).count() >= 3


def test_a_latent_moe_imports_with_its_latent_width():
    """Nemotron 3 Super's LatentMoE: its 512 experts work at moe_latent_size 1024 (1024 -> 2688 -> 1024), between a
    4096 -> 1024 and a 1024 -> 4096 projection per MoE layer (its real config is checked in REAL_CONFIGS). Nano's
    config with a latent width imports as Nano with that width and nothing else changed."""
    plain = fields_from_hf_config(_load("nemotron-3-nano-30b-a3b")).fields
    latent = fields_from_hf_config(_mutated("nemotron-3-nano-30b-a3b", ["moe_latent_size"], 1024)).fields
    assert latent["moe_latent_size"] == 1024 and not plain.get("moe_latent_size")
    counts = ("moe_latent_size", "total_params", "active_params")
    assert {k: v for k, v in latent.items() if k not in counts} == {k: v for k, v in plain.items() if k not in counts}
    # 23 MoE layers of 128 experts of 2 x 1856 squared-ReLU matrices, each 2688 -> 1024 wide, plus two 2688 x 1024
    # projections a layer.
    shrink = 23 * (128 * 2 * 1856 * (2688 - 1024) - 2 * 2688 * 1024)
    assert plain["total_params"] - latent["total_params"] == pytest.approx(shrink, rel=1e-6)
