from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from hwcatalog.models import ModelArch

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"

# (fixture, published total parameters, published active or None, KV bytes/token at bf16)
REAL_CONFIGS = [
    ("llama-3.1-8b.json", 8.03e9, None, 131_072),
    ("mistral-7b-v0.1.json", 7.24e9, None, 131_072),
    ("qwen2.5-7b.json", 7.61e9, None, 57_344),
    ("mixtral-8x7b.json", 46.7e9, 12.9e9, 131_072),
    ("deepseek-v3.json", 671e9, 37e9, 61 * 576 * 2),
    ("gpt-j-6b.json", 6.05e9, None, 458_752),
    ("qwen3-32b.json", 32.8e9, None, 2 * 64 * 8 * 128 * 2),
    ("qwen3-235b-a22b-fp8.json", 235e9, 22e9, 2 * 94 * 4 * 128 * 2),
    ("gpt-oss-120b.json", 116.83e9, None, 2 * 36 * 8 * 64 * 2),  # its card's 5.13B active leaves out the embedding
    ("deepseek-v3.1-nvfp4.json", 671e9, 37e9, 61 * 576 * 2),
    # the published counts of each catalog row (hwcatalog/data/models/*.yaml cites the card)
    ("llama-3.1-70b.json", 70.6e9, None, 2 * 80 * 8 * 128 * 2),
    ("llama-3.1-405b.json", 405e9, None, 2 * 126 * 8 * 128 * 2),
    ("llama-3.2-3b.json", 3.21e9, None, 2 * 28 * 8 * 128 * 2),
    ("llama-4-scout.json", 109e9, 17e9, 2 * 48 * 8 * 128 * 2),  # 109B includes the vision encoder
    ("llama-4-maverick.json", 400e9, 17e9, 2 * 48 * 8 * 128 * 2),
    ("qwen2.5-3b.json", 3.09e9, None, 2 * 36 * 2 * 128 * 2),
    ("qwen2.5-14b.json", 14.7e9, None, 2 * 48 * 8 * 128 * 2),
    ("qwen2.5-32b.json", 32.5e9, None, 2 * 64 * 8 * 128 * 2),
    ("qwen3-0.6b.json", 0.6e9, None, 2 * 28 * 8 * 128 * 2),
    ("qwen3-1.7b.json", 1.7e9, None, 2 * 28 * 8 * 128 * 2),
    ("qwen3-4b.json", 4.0e9, None, 2 * 36 * 8 * 128 * 2),
    ("qwen3-8b.json", 8.2e9, None, 2 * 36 * 8 * 128 * 2),
    ("qwen3-14b.json", 14.8e9, None, 2 * 40 * 8 * 128 * 2),
    ("qwen3-30b-a3b.json", 30.5e9, 3.3e9, 2 * 48 * 4 * 128 * 2),
    ("qwen3-30b-a3b-fp8.json", 30.5e9, 3.3e9, 2 * 48 * 4 * 128 * 2),
    ("qwen3-235b-a22b.json", 235e9, 22e9, 2 * 94 * 4 * 128 * 2),
    ("qwen3-coder-480b-a35b.json", 480e9, 35e9, 2 * 62 * 8 * 128 * 2),
    ("mixtral-8x22b.json", 141e9, 39e9, 2 * 56 * 8 * 128 * 2),
    ("gpt-oss-20b.json", 20.91e9, 4.19e9, 2 * 24 * 8 * 64 * 2),  # the card's 3.61B active + the 0.58B input embedding
    ("kimi-k2.json", 1.04e12, 32.6e9, 61 * 576 * 2),  # DeepSeek-V3 architecture, model_type kimi_k2
    ("dream-7b.json", 7.62e9, None, 2 * 28 * 4 * 128 * 2),  # masked diffusion on Qwen2.5-7B shapes
    ("sdar-8b-chat.json", 8.2e9, None, 2 * 36 * 8 * 128 * 2),  # block diffusion on Qwen3-8B shapes
    ("fast-dllm-v2-7b.json", 7.61e9, None, 2 * 28 * 4 * 128 * 2),  # block diffusion on Qwen2.5-7B-Instruct shapes
]


def _load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


@pytest.mark.parametrize(("fixture", "total", "active", "kv_bytes"), REAL_CONFIGS)
def test_importing_a_real_config_gives_the_published_sizes(catalog_token_client, fixture, total, active, kv_bytes):
    slug = fixture.removesuffix(".json").replace("_", "-") + "-imported"
    response = catalog_token_client.post("/api/v1/models/import/", {"slug": slug, "config": _load(fixture)}, format="json")
    assert response.status_code == 201, response.json()
    model = ModelArch.objects.get(slug=slug)
    assert model.total_params == pytest.approx(total, rel=0.02)
    if active:
        assert model.active_params == pytest.approx(active, rel=0.02)
    assert model.kv_cache_bytes_per_token("bf16") == kv_bytes


CATALOG_SHAPE_FIELDS = (
    "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "intermediate_size", "vocab_size",
    "tie_word_embeddings", "attention_kind", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
    "v_head_dim", "num_experts", "experts_per_token", "num_shared_experts", "moe_layer_count", "moe_intermediate_size",
    "sliding_window", "sliding_window_layers", "moe_latent_size",
)  # fmt: skip
CATALOG_FIXTURES = sorted(p.stem for p in FIXTURES.glob("*.json") if not p.stem.endswith("hf_quant_config"))


@pytest.mark.parametrize("slug", CATALOG_FIXTURES)
def test_a_catalog_row_with_a_real_config_has_that_configs_shapes(catalog, slug):
    """Each catalog row whose config.json is a fixture (tests/fixtures/hf_configs/<slug>.json) holds the
    shapes the importer reads from it, and its published counts are within 2% of the shape counts."""
    from hwcatalog.importers.huggingface import fields_from_hf_config

    row = ModelArch.objects.filter(slug=slug).first()
    if row is None:
        pytest.skip(f"{slug}.json is an importer fixture with no catalog row of that slug")
    fields = fields_from_hf_config(_load(f"{slug}.json")).fields
    assert {k: getattr(row, k) for k in CATALOG_SHAPE_FIELDS} == {k: fields.get(k) for k in CATALOG_SHAPE_FIELDS}
    assert row.parameter_count() == pytest.approx(row.total_params, rel=0.02)
    assert row.active_parameter_count() == pytest.approx(row.active_params, rel=0.02)


def test_a_config_json_upload_works_as_multipart(catalog_token_client):
    upload = io.BytesIO((FIXTURES / "mixtral-8x7b.json").read_bytes())
    upload.name = "config.json"
    response = catalog_token_client.post("/api/v1/models/import/", {"slug": "mixtral-upload", "config_file": upload}, format="multipart")
    assert response.status_code == 201
    assert response.json()["detected_style"] == "mixtral"


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"model_type": "llama", "hidden_size": 4096}, "num_hidden_layers"),
        ({**json.loads((FIXTURES / "llama-3.1-8b.json").read_text()), "num_hidden_layers": -2}, "num_hidden_layers"),
        ({**json.loads((FIXTURES / "llama-3.1-8b.json").read_text()), "hidden_size": "4096"}, "hidden_size"),
        ({**json.loads((FIXTURES / "llama-3.1-8b.json").read_text()), "num_key_value_heads": 7}, "num_kv_heads"),
        ({"model_type": "unicorn"}, "model_type"),
        ([1, 2, 3], "config"),
    ],
)
def test_a_bad_config_gets_400_naming_the_field_and_stores_nothing(catalog_token_client, config, field):
    response = catalog_token_client.post("/api/v1/models/import/", {"slug": "bad-one", "config": config}, format="json")
    assert response.status_code == 400
    assert field in json.dumps(response.json())
    assert not ModelArch.objects.filter(slug="bad-one").exists()


def test_a_config_sent_twice_gets_400_and_stores_nothing(catalog_token_client):
    text = (FIXTURES / "mixtral-8x7b.json").read_text()
    upload = io.BytesIO(text.encode())
    upload.name = "config.json"
    response = catalog_token_client.post("/api/v1/models/import/", {"slug": "twice", "config_file": upload, "config": text}, format="multipart")
    assert response.status_code == 400 and "config" in response.json()
    assert not ModelArch.objects.filter(slug="twice").exists()


def test_a_file_that_is_not_json_gets_400(catalog_token_client):
    upload = io.BytesIO(b"\x89PNG not json at all")
    upload.name = "config.json"
    response = catalog_token_client.post("/api/v1/models/import/", {"slug": "png", "config_file": upload}, format="multipart")
    assert response.status_code == 400 and "config_file" in response.json()


def test_a_ten_megabyte_upload_gets_400(catalog_token_client):
    upload = io.BytesIO(b"{" + b" " * 10_000_000 + b"}")
    upload.name = "config.json"
    response = catalog_token_client.post("/api/v1/models/import/", {"slug": "huge", "config_file": upload}, format="multipart")
    assert response.status_code == 400 and "config_file" in response.json()
    assert not ModelArch.objects.filter(slug="huge").exists()


def test_an_anonymous_import_gets_401(db, anonymous_client):
    response = anonymous_client.post("/api/v1/models/import/", {"slug": "x", "config": _load("llama-3.1-8b.json")}, format="json")
    assert response.status_code == 401


def test_importing_over_an_existing_slug_gets_400(catalog, catalog_token_client):
    response = catalog_token_client.post("/api/v1/models/import/", {"slug": "llama-3.1-8b", "config": _load("llama-3.1-8b.json")}, format="json")
    assert response.status_code == 400 and "slug" in response.json()


def test_the_importmodel_command_imports_and_rejects(db, tmp_path, capsys):
    call_command("importmodel", str(FIXTURES / "deepseek-v3.json"), "--slug", "dsv3-cli")
    assert "dsv3-cli" in capsys.readouterr().out
    assert ModelArch.objects.get(slug="dsv3-cli").attention_kind == "mla"
    bad = tmp_path / "bad.json"
    bad.write_text('{"model_type": "llama", "hidden_size": -1}')
    with pytest.raises(CommandError, match="hidden_size"):
        call_command("importmodel", str(bad), "--slug", "bad-cli")
    assert not ModelArch.objects.filter(slug="bad-cli").exists()


def test_the_admin_imports_a_config(admin_client):
    with (FIXTURES / "gpt-j-6b.json").open("rb") as handle:
        response = admin_client.post("/admin/hwcatalog/modelarch/import-hf/", {"slug": "gptj-admin", "config_file": handle})
    assert response.status_code == 302
    assert ModelArch.objects.get(slug="gptj-admin").ffn_kind == "plain"
