"""Shape arithmetic and validation of hybrid (linear attention / Mamba-2), FFN-less and sparse-attention layers."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwcatalog import architecture
from hwcatalog.importers.huggingface import fields_from_hf_config
from hwcatalog.validation import validate_arch

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"


def _fields(name: str) -> dict:
    return fields_from_hf_config(json.loads((FIXTURES / f"{name}.json").read_text())).fields


def _shape(fields: dict) -> architecture.ArchShape:
    return architecture.ArchShape(**{k: fields.get(k) for k in architecture.ArchShape.__dataclass_fields__ if k in fields})


def test_a_gated_deltanet_layer_counts_its_projections_convolution_and_output():
    shape = _shape(_fields("qwen3-next-80b-a3b"))
    d, key, value, heads = 2048, 16 * 128, 32 * 128, 32
    # in_proj_qkvz (q, k, v, z), in_proj_ba (beta, decay per value head), conv over q, k, v, out_proj
    assert architecture.linear_params_per_layer(shape) == d * (2 * key + 2 * value + 2 * heads) + (2 * key + value) * 4 + value * d
    # the recurrent state is a key-dim x value-dim matrix per value head
    assert architecture.linear_state_elements_per_layer(shape) == 32 * 128 * 128 + 3 * (2 * key + value)


def test_a_mamba2_layer_counts_z_x_b_c_and_dt():
    shape = _shape(_fields("nemotron-3-nano-30b-a3b"))
    d, groups_state, inner, heads = 2688, 8 * 128, 64 * 64, 64
    assert architecture.linear_params_per_layer(shape) == d * (2 * inner + 2 * groups_state + heads) + (2 * groups_state + inner) * 4 + inner * d
    assert architecture.linear_state_elements_per_layer(shape) == 64 * 128 * 64 + 3 * (2 * groups_state + inner)


def test_the_gated_attention_output_doubles_the_query_projection():
    fields = _fields("qwen3.5-27b")
    gated = _shape(fields)
    plain = _shape({**fields, "attention_output_gate": False})
    assert architecture.attention_params_per_layer(gated) - architecture.attention_params_per_layer(plain) == 5120 * 24 * 256


def test_ffn_less_blocks_and_a_wider_shared_expert_are_counted():
    shape = _shape(_fields("nemotron-3-nano-30b-a3b"))
    # 23 MoE blocks: 128 routed experts and one shared expert twice as wide, all up/down (2 matrices); no dense MLP.
    expert, shared = 2 * 2688 * 1856, 2 * 2688 * 3712
    assert architecture.params_per_expert(shape) == expert and architecture.params_per_shared_expert(shape) == shared
    layers = (architecture.attention_layer_count(shape) * architecture.attention_params_per_layer(shape)
              + 23 * architecture.linear_params_per_layer(shape) + 23 * (128 * expert + shared + 2688 * 128))  # fmt: skip
    assert architecture.parameter_count(shape) == layers + 2 * 131072 * 2688


def test_kv_grows_only_on_the_attention_layers_of_a_hybrid():
    shape = _shape(_fields("nemotron-h-56b"))
    assert architecture.attention_layer_count(shape) == 10 and architecture.linear_layer_count(shape) == 54
    assert architecture.kv_cache_elements_per_token(shape) == 2 * 10 * 8 * 128
    assert architecture.linear_state_elements(shape) == 54 * (256 * 256 * 64 + 3 * (2 * 8 * 256 + 256 * 64))


def test_a_dense_transformer_is_unchanged_by_the_new_fields():
    fields = _fields("llama-3.1-8b")
    shape = _shape(fields)
    assert architecture.attention_layer_count(shape) == 32 and architecture.linear_state_elements(shape) == 0
    assert architecture.parameter_count(shape) == fields["total_params"] == pytest.approx(8.03e9, rel=0.001)


BASE = {
    "num_layers": 48, "hidden_size": 2048, "num_attention_heads": 16, "num_kv_heads": 2, "head_dim": 256, "intermediate_size": 512,
    "vocab_size": 151936, "max_context_tokens": 262144, "total_params": 80e9, "attention_kind": "gqa",
    "linear_attention_kind": "gated_deltanet", "linear_attention_layers": 36, "attention_layers": 12, "linear_num_key_heads": 16,
    "linear_key_head_dim": 128, "linear_num_value_heads": 32, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
}  # fmt: skip


def test_a_complete_hybrid_shape_validates():
    assert validate_arch(BASE) == {}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"linear_attention_kind": "rwkv"}, "linear_attention_kind"),
        ({"linear_attention_layers": None}, "linear_attention_layers"),
        ({"linear_key_head_dim": None}, "linear_key_head_dim"),
        ({"linear_num_value_heads": 24, "linear_num_key_heads": 16}, "linear_num_value_heads"),
        ({"linear_attention_layers": 49, "attention_layers": None}, "linear_attention_layers"),
        ({"attention_layers": 13}, "attention_layers"),
        ({"linear_attention_kind": ""}, "linear_attention_layers"),
        ({"ffn_layers": 60}, "ffn_layers"),
        ({"ffn_layers": -1}, "ffn_layers"),
        ({"num_experts": 8, "experts_per_token": 2, "moe_layer_count": 30, "ffn_layers": 20}, "moe_layer_count"),
        ({"shared_expert_intermediate_size": 512}, "shared_expert_intermediate_size"),
        ({"sparse_attention_topk": 2048}, "indexer_num_heads"),
        ({"sliding_window": 1024, "sliding_window_layers": 20}, "sliding_window_layers"),
        # A malformed value is named, not compared with the layer counts (a TypeError before).
        ({"sliding_window": 1024, "sliding_window_layers": "x"}, "sliding_window_layers"),
        ({"sliding_window": 1024, "sliding_window_layers": 2.5}, "sliding_window_layers"),
        ({"sliding_window": "x", "sliding_window_layers": 2}, "sliding_window"),
    ],
)
def test_an_inconsistent_hybrid_shape_is_refused_naming_the_field(change, field):
    assert field in validate_arch({**BASE, **change})
