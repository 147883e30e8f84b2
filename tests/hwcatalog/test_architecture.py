"""Derived values from shapes, against published figures."""
from __future__ import annotations

import pytest

from hwcatalog.architecture import (
    ArchShape,
    active_parameter_count,
    kv_cache_bytes_per_token,
    kv_cache_elements_per_token,
    parameter_count,
    tp_replicated_params,
)

LLAMA_31_8B = ArchShape(num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8, head_dim=128,
                        intermediate_size=14336, vocab_size=128256, attention_kind="gqa")
LLAMA_2_70B = ArchShape(num_layers=80, hidden_size=8192, num_attention_heads=64, num_kv_heads=8, head_dim=128,
                        intermediate_size=28672, vocab_size=32000, attention_kind="gqa")
OPT_13B = ArchShape(num_layers=40, hidden_size=5120, num_attention_heads=40, num_kv_heads=40, head_dim=128,
                    intermediate_size=20480, vocab_size=50272, tie_word_embeddings=True, ffn_kind="plain", attention_kind="mha")
MIXTRAL_8X7B = ArchShape(num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8, head_dim=128,
                         intermediate_size=14336, vocab_size=32000, attention_kind="gqa", num_experts=8, experts_per_token=2,
                         num_shared_experts=0, moe_layer_count=32, moe_intermediate_size=14336)
DEEPSEEK_V3 = ArchShape(num_layers=61, hidden_size=7168, num_attention_heads=128, num_kv_heads=128, head_dim=192,
                        intermediate_size=18432, vocab_size=129280, attention_kind="mla", q_lora_rank=1536, kv_lora_rank=512,
                        qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, num_experts=256, experts_per_token=8,
                        num_shared_experts=1, moe_layer_count=58, moe_intermediate_size=2048)


def test_llama_31_8b_has_about_8_03e9_parameters():
    assert parameter_count(LLAMA_31_8B) == pytest.approx(8.03e9, rel=0.01)


def test_llama_2_70b_kv_cache_is_327680_bytes_per_token_in_bf16():
    # Databricks inference blog, Table 3: 0.312 GiB at 1024 tokens = 320 KiB/token.
    assert kv_cache_bytes_per_token(LLAMA_2_70B, "bf16") == 327_680


def test_opt_13b_kv_cache_is_819200_bytes_per_token_in_fp16():
    # vLLM paper §3: "800 KB" per token for OPT-13B.
    assert kv_cache_bytes_per_token(OPT_13B, "fp16") == 819_200


def test_mixtral_counts_all_experts_in_total_and_top_two_in_active():
    # Mistral AI: 46.7B total, 12.9B active per token.
    assert parameter_count(MIXTRAL_8X7B) == pytest.approx(46.7e9, rel=0.02)
    assert active_parameter_count(MIXTRAL_8X7B) == pytest.approx(12.9e9, rel=0.02)


def test_deepseek_v3_mla_and_moe_counts_match_the_paper():
    # DeepSeek-V3 technical report: 671B total, 37B activated; MLA caches 576 elements per layer.
    assert parameter_count(DEEPSEEK_V3) == pytest.approx(671e9, rel=0.02)
    assert active_parameter_count(DEEPSEEK_V3) == pytest.approx(37e9, rel=0.02)
    assert kv_cache_elements_per_token(DEEPSEEK_V3) == 61 * 576


def test_int4_weights_take_a_quarter_of_bf16_kv_bytes_scale_with_dtype():
    assert kv_cache_bytes_per_token(LLAMA_2_70B, "fp8") == 163_840
    with pytest.raises(ValueError, match="unknown dtype"):
        kv_cache_bytes_per_token(LLAMA_2_70B, "fp7")


def test_deepseek_v3_keeps_its_mla_down_projections_and_routers_whole_on_every_tensor_parallel_rank():
    # vLLM deepseek_v2.py: q_a_proj (7168 x 1536) and kv_a_proj_with_mqa (7168 x (512 + 64)) on each of the 61 layers
    # and the router gate (7168 x 256) on each of the 58 MoE layers are ReplicatedLinear: about 1.03e9 parameters.
    assert tp_replicated_params(DEEPSEEK_V3) == 61 * 7168 * (1536 + 576) + 58 * 7168 * 256
    assert tp_replicated_params(LLAMA_31_8B) == 0  # every projection of a GQA model splits by heads or columns
    assert tp_replicated_params(MIXTRAL_8X7B) == 32 * 4096 * 8  # its routers only
    # Of them, those a checkpoint keeps in 16 bits: the attention's (its inputs), the routers.
    assert tp_replicated_params(DEEPSEEK_V3, ("attention_inputs",)) == 61 * 7168 * (1536 + 576)
    assert tp_replicated_params(DEEPSEEK_V3, ("router",)) == 58 * 7168 * 256
    assert tp_replicated_params(DEEPSEEK_V3, ()) == 0
