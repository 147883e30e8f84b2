"""Every field the Hugging Face importer reads is checked: a wrong type or an out-of-range value is a
400 naming that config.json key, and nothing is stored. A last test holds the table to the importer:
each key it reads from any of the real configs must be in FIELDS."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from hwcatalog.importers.huggingface import fields_from_hf_config
from hwcatalog.models import ModelArch

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
DEEPSEEK, GPTJ, GPT_OSS, LLAMA, MISTRAL, MIXTRAL, QWEN3_MOE = (
    "deepseek-v3.json", "gpt-j-6b.json", "gpt-oss-120b.json", "llama-3.1-8b.json", "mistral-7b-v0.1.json", "mixtral-8x7b.json",
    "qwen3-235b-a22b-fp8.json",
)  # fmt: skip
NVFP4, NVFP4_QUANT = "deepseek-v3.1-nvfp4.json", "deepseek-v3.1-nvfp4.hf_quant_config.json"
LLAMA4 = "llama-4-scout.json"
REAL_CONFIGS = sorted(p.name for p in FIXTURES.glob("*.json") if not p.name.endswith("hf_quant_config.json"))

NOT_INTEGERS = ["abc", 1.5, True, {}]
NOT_POSITIVE = [0, -1]
TOO_LARGE = [10**12]
NOT_A_COUNT = [*NOT_INTEGERS, -1, *TOO_LARGE]  # counts that may be zero
BAD_POSITIVE = [*NOT_INTEGERS, *NOT_POSITIVE, *TOO_LARGE]
BAD_REQUIRED = [*BAD_POSITIVE, None]

# config.json key -> (a real config whose style reads it, values it must refuse)
FIELDS: dict[str, tuple[str, list[Any]]] = {
    # every Llama-like style
    "hidden_size": (LLAMA, BAD_REQUIRED),
    "num_attention_heads": (LLAMA, BAD_REQUIRED),
    "num_key_value_heads": (LLAMA, BAD_POSITIVE),
    "num_hidden_layers": (LLAMA, [*BAD_REQUIRED, 10_001]),
    "head_dim": (LLAMA, BAD_POSITIVE),
    "intermediate_size": (LLAMA, BAD_REQUIRED),
    "vocab_size": (LLAMA, BAD_REQUIRED),
    "max_position_embeddings": (LLAMA, [*BAD_REQUIRED, 100_000_001]),
    "tie_word_embeddings": (LLAMA, ["abc", 1, None, []]),
    "model_type": (LLAMA, [5, [], {}]),
    "sliding_window": (MISTRAL, BAD_POSITIVE),
    # mixtral, gpt-oss
    "num_local_experts": (MIXTRAL, BAD_REQUIRED),
    "num_experts_per_tok": (MIXTRAL, BAD_REQUIRED),
    "layer_types": (GPT_OSS, ["abc", ["sliding_attention"], ["dense"] * 36, {}]),
    # qwen3-moe
    "num_experts": (QWEN3_MOE, BAD_REQUIRED),
    "moe_intermediate_size": (QWEN3_MOE, BAD_REQUIRED),
    "mlp_only_layers": (QWEN3_MOE, ["abc", 3, [1.5], [-1], [94], [True], {}]),
    "decoder_sparse_step": (QWEN3_MOE, [*BAD_POSITIVE, 2]),
    # deepseek-v3 (MLA, routed and shared experts)
    "first_k_dense_replace": (DEEPSEEK, ["abc", 1.5, True, -1, 62, None]),
    "q_lora_rank": (DEEPSEEK, BAD_POSITIVE),
    "kv_lora_rank": (DEEPSEEK, BAD_REQUIRED),
    "qk_nope_head_dim": (DEEPSEEK, BAD_REQUIRED),
    "qk_rope_head_dim": (DEEPSEEK, BAD_REQUIRED),
    "v_head_dim": (DEEPSEEK, BAD_REQUIRED),
    "n_routed_experts": (DEEPSEEK, BAD_REQUIRED),
    "n_shared_experts": (DEEPSEEK, NOT_A_COUNT),
    # gpt-j
    "n_embd": (GPTJ, BAD_REQUIRED),
    "n_head": (GPTJ, BAD_REQUIRED),
    "n_layer": (GPTJ, [*BAD_REQUIRED, 10_001]),
    "n_inner": (GPTJ, BAD_POSITIVE),
    "n_positions": (GPTJ, [*BAD_REQUIRED, 100_000_001]),
    # deepseek-v3.2 (DeepSeek Sparse Attention; GLM-5 too): read for every DeepSeek-style config, required for deepseek_v32
    "index_topk": ("deepseek-v3.2.json", [*BAD_REQUIRED, 100_000_001]),
    "index_n_heads": ("deepseek-v3.2.json", BAD_REQUIRED),
    "index_head_dim": ("deepseek-v3.2.json", BAD_REQUIRED),
    # qwen3-next (Gated DeltaNet; Qwen3.5 has the same keys under text_config, checked in test_importer_hybrid.py)
    "full_attention_interval": ("qwen3-next-80b-a3b.json", [*NOT_INTEGERS, *NOT_POSITIVE, 10_001]),
    "linear_num_key_heads": ("qwen3-next-80b-a3b.json", BAD_REQUIRED),
    "linear_key_head_dim": ("qwen3-next-80b-a3b.json", BAD_REQUIRED),
    "linear_num_value_heads": ("qwen3-next-80b-a3b.json", BAD_REQUIRED),
    "linear_value_head_dim": ("qwen3-next-80b-a3b.json", BAD_REQUIRED),
    "linear_conv_kernel_dim": ("qwen3-next-80b-a3b.json", BAD_REQUIRED),
    "attn_output_gate": ("qwen3-next-80b-a3b.json", ["abc", 1, None, []]),
    "shared_expert_intermediate_size": ("qwen3-next-80b-a3b.json", NOT_A_COUNT),
    # nemotron-h (Mamba-2 hybrid blocks)
    "hybrid_override_pattern": ("nemotron-3-nano-30b-a3b.json", ["abc", 5, [], "MEM", None, "M" * 51 + "X"]),
    "layers_block_type": ("nemotron-3.5-lightning-30b-a3b-nvfp4.json", ["abc", 5, ["mamba"], ["mamba"] * 51 + ["ffn"], [1] * 52]),
    "n_groups": ("nemotron-3-nano-30b-a3b.json", BAD_REQUIRED),
    "ssm_state_size": ("nemotron-3-nano-30b-a3b.json", BAD_REQUIRED),
    "mamba_num_heads": ("nemotron-3-nano-30b-a3b.json", BAD_REQUIRED),
    "mamba_head_dim": ("nemotron-3-nano-30b-a3b.json", BAD_REQUIRED),
    "conv_kernel": ("nemotron-3-nano-30b-a3b.json", BAD_REQUIRED),
    "attention_head_dim": ("nemotron-3-nano-30b-a3b.json", BAD_POSITIVE),
    "moe_shared_expert_intermediate_size": ("nemotron-3-nano-30b-a3b.json", BAD_POSITIVE),
    "moe_latent_size": ("nemotron-3-nano-30b-a3b.json", ["abc", 0, 1.5, 2689]),  # at most hidden_size (2688)
    # minimax-m2
    "shared_intermediate_size": ("minimax-m2.5.json", [1536, "abc", 1.5]),
    # llada (OLMo-style keys)
    "d_model": ("llada-8b.json", BAD_REQUIRED),
    "n_heads": ("llada-8b.json", BAD_REQUIRED),
    "n_kv_heads": ("llada-8b.json", BAD_POSITIVE),
    "n_layers": ("llada-8b.json", [*BAD_REQUIRED, 10_001]),
    "mlp_hidden_size": ("llada-8b.json", BAD_REQUIRED),
    "embedding_size": ("llada-8b.json", BAD_POSITIVE),
    "weight_tying": ("llada-8b.json", ["abc", 1, None, []]),
    "max_sequence_length": ("llada-8b.json", [*BAD_REQUIRED, 100_000_001]),
    # sdar (block diffusion on Qwen3 shapes)
    "block_size": ("sdar-8b-chat.json", BAD_REQUIRED),
    # Fast_dLLM_Qwen (block diffusion on Qwen2.5 shapes)
    "bd_size": ("fast-dllm-v2-7b.json", BAD_REQUIRED),
    # llama 4 (its shapes under text_config; the keys inside are checked in test_hf_import_formats.py)
    "text_config": (LLAMA4, ["abc", [], 5]),
    # the checkpoint's weight format
    "quantization_config": (DEEPSEEK, [
        "abc", [], {"quant_method": 5}, {"quant_method": "unicorn"}, {"quant_method": "awq", "bits": "4"},
        {"quant_method": "fp8", "weight_block_size": "abc"}, {"quant_method": "fp8", "weight_block_size": [0, 128]},
        {"quant_method": "fp8", "weight_block_size": [128]},
    ]),
}  # fmt: skip
# Read only when model_type does not name a style.
ARCHITECTURES_BAD = ["LlamaForCausalLM", [1], {}, [["LlamaForCausalLM"]]]
QUANT_CONFIG_BAD = ["abc", [], {"quantization": "abc"}, {"quantization": {"quant_algo": 5}}, {"quantization": {"quant_algo": "SPARSE"}}]


@pytest.fixture
def staff_client(db) -> APIClient:
    """Sam is staff (a session; no password, so no password hashing: there are 250 cases here)."""
    client = APIClient()
    client.force_login(get_user_model().objects.create_user("sam", is_staff=True))
    return client


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def import_config(client, config: Any, **extra):
    return client.post("/api/v1/models/import/", {"slug": "checked", "config": config, **extra}, format="json")


def refused_naming(response, key: str) -> bool:
    return response.status_code == 400 and key in response.json() and not ModelArch.objects.filter(slug="checked").exists()


CASES = [pytest.param(key, fixture, value, id=f"{key}={value!r}") for key, (fixture, values) in FIELDS.items() for value in values]


@pytest.mark.parametrize(("key", "fixture", "value"), CASES)
def test_a_wrong_value_is_a_400_naming_its_key_and_stores_nothing(staff_client, key, fixture, value):
    response = import_config(staff_client, {**load(fixture), key: value})
    assert refused_naming(response, key), response.json()


@pytest.mark.parametrize("value", ARCHITECTURES_BAD)
def test_architectures_are_checked_when_model_type_does_not_name_a_style(staff_client, value):
    config = {key: v for key, v in load(LLAMA).items() if key != "model_type"}
    assert refused_naming(import_config(staff_client, {**config, "architectures": value}), "architectures")


def test_architectures_name_the_style_when_model_type_does_not(staff_client):
    config = {**load(LLAMA), "model_type": "llama-derivative"}
    assert import_config(staff_client, config).status_code == 201


@pytest.mark.parametrize("value", QUANT_CONFIG_BAD)
def test_a_wrong_hf_quant_config_is_a_400_naming_quant_config(staff_client, value):
    assert refused_naming(import_config(staff_client, load(NVFP4), quant_config=value), "quant_config")


def test_the_deepseek_config_with_a_word_for_its_shared_experts_is_a_400(staff_client):
    response = import_config(staff_client, {**load(DEEPSEEK), "n_shared_experts": "abc"})
    assert response.status_code == 400
    assert response.json() == {"n_shared_experts": ["Must be an integer, got str."]}


@pytest.mark.parametrize("shared", [0, None])
def test_zero_or_null_shared_experts_and_no_dense_layers_are_allowed(staff_client, shared):
    response = import_config(staff_client, {**load(DEEPSEEK), "n_shared_experts": shared, "first_k_dense_replace": 0})
    assert response.status_code == 201
    assert ModelArch.objects.get(slug="checked").num_shared_experts == 0


def test_the_web_forms_import_names_the_key_too(db, catalog):
    client = Client()
    client.force_login(get_user_model().objects.create_user("stella", is_staff=True))
    upload = SimpleUploadedFile("config.json", json.dumps({**load(DEEPSEEK), "n_shared_experts": "abc"}).encode())
    response = client.post("/", {"model": "", "prompt_tokens": "100", "output_tokens": "10", "config_file": upload})
    assert response.status_code == 200
    assert "n_shared_experts: Must be an integer, got str." in response.context["errors"]["config_file"]


class ReadRecorder(dict):
    """A config.json that records each key the importer asks it for."""

    def __init__(self, *args):
        super().__init__(*args)
        self.read: set[str] = set()

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)


@pytest.mark.parametrize("fixture", REAL_CONFIGS)
def test_every_key_the_importer_reads_is_in_the_table(fixture):
    config = ReadRecorder(load(fixture))
    fields_from_hf_config(config, load(NVFP4_QUANT) if fixture == NVFP4 else None)
    assert config.read - set(FIELDS) - {"architectures"} == set()
