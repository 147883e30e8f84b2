"""The attention objects the catalog's hybrid, sparse and windowed shapes build (attention_for, via model_spec): a
hybrid's cache grows only on its attention layers, a Mamba / Gated DeltaNet layer keeps one constant state, a DSA
decode reads the top-k tokens' latents plus every token's indexer key, Gemma 3's local layers stop at the window."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from hwcatalog import architecture
from hwcatalog.importers.huggingface import fields_from_hf_config
from planner.engine import FullAttention, Hybrid, LatentAttention, LinearState, ModelSpec, SlidingWindow, SparseTopK
from planner.engine.attention import attention_for

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hf_configs"


def shape_of(name: str) -> architecture.ArchShape:
    fields = fields_from_hf_config(json.loads((FIXTURES / f"{name}.json").read_text())).fields
    return architecture.ArchShape(**{k: fields.get(k) for k in architecture.ArchShape.__dataclass_fields__ if k in fields})


def spec_of(name: str) -> ModelSpec:
    shape = shape_of(name)
    return ModelSpec(slug=name, shape=shape, total_params=float(architecture.parameter_count(shape)),
                     active_params=float(architecture.active_parameter_count(shape)), max_context_tokens=131072)  # fmt: skip


def cache_bytes(attention, tokens: float, dtype_bytes: float = 2.0) -> float:
    """What one sequence of `tokens` keeps resident (the engine's memory.py: resident tokens x elements)."""
    return float(attention.resident_tokens(tokens)) * attention.kv_elements_per_token * dtype_bytes


def test_a_gated_deltanet_hybrid_is_full_attention_on_its_full_layers_and_a_state_on_the_rest():
    att = attention_for(shape_of("qwen3.5-27b"))
    assert isinstance(att, Hybrid)
    full, linear = att.parts
    assert full == FullAttention(num_layers=16, num_heads=24, num_kv_heads=4, head_dim=256)
    assert isinstance(linear, LinearState) and linear.num_layers == 48
    assert linear.state_elements_per_layer == architecture.linear_state_elements_per_layer(shape_of("qwen3.5-27b"))


@pytest.mark.parametrize("name", ["qwen3.5-27b", "qwen3-next-80b-a3b", "nemotron-3-nano-30b-a3b", "nemotron-h-56b"])
def test_a_hybrids_cache_grows_only_by_its_attention_layers_kv(name):
    shape = shape_of(name)
    att = attention_for(shape)
    per_token = 2 * architecture.attention_layer_count(shape) * shape.num_kv_heads * shape.head_dim * 2  # bf16 bytes
    state = architecture.linear_state_elements(shape) * 2
    for short, long in [(16_384, 32_768), (32_768, 131_072)]:  # whole PagedAttention blocks
        assert cache_bytes(att, long) - cache_bytes(att, short) == pytest.approx(per_token * (long - short), rel=1e-9)
    # and what stays is the constant state: one sequence holds state + KV of its tokens
    assert cache_bytes(att, 16_384) == pytest.approx(state + per_token * 16_384, rel=1e-9)


def test_a_hybrid_holds_far_less_than_the_same_layers_all_attention():
    # Qwen3-Next-80B-A3B at 256K: 12 of 48 layers cache K and V (2 KV heads of 256) -> a quarter of the all-attention cache
    shape = shape_of("qwen3-next-80b-a3b")
    hybrid = cache_bytes(attention_for(shape), 262_144)
    all_attention = cache_bytes(FullAttention(num_layers=48, num_heads=16, num_kv_heads=2, head_dim=256), 262_144)
    state = architecture.linear_state_elements(shape) * 2
    assert hybrid == pytest.approx(all_attention / 4 + state, rel=1e-9)
    assert state / hybrid < 0.02  # at long context the recurrent state is a rounding term


def test_a_linear_layer_decode_reads_its_state_not_the_context():
    att = attention_for(shape_of("nemotron-3-nano-30b-a3b"))
    full, linear = att.parts
    context = np.array([1_000.0, 100_000.0])
    assert list(linear.kv_read_tokens(context)) == [1.0, 1.0]
    # the reads of the whole model: the attention layers' K and V of every token plus the fixed state
    read = att.kv_read_tokens(context) * att.kv_elements_per_token
    assert list(read) == pytest.approx(list(context * full.kv_elements_per_token + linear.kv_elements_per_token))


def test_deepseek_sparse_attention_reads_the_top_k_latents_and_every_indexer_key():
    shape = shape_of("deepseek-v3.2")
    att = attention_for(shape)
    assert isinstance(att, SparseTopK) and isinstance(att.inner, LatentAttention)
    assert att.top_k == 2048
    # DeepSeek-V3.2-Exp report sec. 2.1: the main attention reads k = 2048 selected tokens' latents (576 elements per layer);
    # the indexer's 128-dim key is read for every cached token.
    context = np.array([1_000.0, 2_048.0, 131_072.0])
    read_elements = att.kv_read_tokens(context) * att.kv_elements_per_token
    expected = np.minimum(context, 2048) * 61 * 576 + context * 61 * 128
    assert list(read_elements) == pytest.approx(list(expected))
    # the cache still holds every token (latent and indexer key)
    assert att.kv_held_tokens(131_072.0) == 131_072.0 and att.kv_elements_per_token == 61 * (576 + 128)
    # at 128K a dense MLA decode reads 131072 latents per layer; DSA reads 2048 latents + 131072 small keys: 4.7x fewer bytes
    dense = LatentAttention(num_layers=61, num_heads=128, head_dim=192, kv_lora_rank=512, qk_rope_head_dim=64)
    ratio = (dense.kv_read_tokens(131_072.0) * dense.kv_elements_per_token) / read_elements[-1]
    assert ratio == pytest.approx(131_072 * 576 / (2048 * 576 + 131_072 * 128), rel=1e-9)


def test_dsa_attention_flops_cap_the_main_attention_at_top_k():
    att = attention_for(shape_of("glm-5"))
    per_position = att.decode_flops_per_position
    short, long = att.attended_positions(np.array([2_048.0, 200_000.0])) * per_position
    # past k the main attention costs no more; only the indexer (2 x 32 heads x 128 per token and layer) grows
    assert long - short == pytest.approx((200_000 - 2_048) * 2 * 78 * 32 * 128, rel=1e-9)


def test_a_dsa_prefill_pays_the_indexer_on_every_pair_and_the_main_attention_on_k_per_query():
    """DeepSeek-V3.2 (report sec. 2.1): the lightning indexer scores every earlier token of every query (64 heads of
    128, 2 FLOPs per multiply-add, 61 layers), so a 128K prefill's indexer work grows as P^2/2 while the main MLA
    attention stops at k = 2,048 keys a query."""
    att = attention_for(shape_of("deepseek-v3.2"))
    prompt = 131_072.0
    flops = float(att.causal_pairs(prompt)) * att.prefill_flops_per_pair
    main = (2048.0**2 / 2.0 + (prompt - 2048.0) * 2048.0) * att.inner.prefill_flops_per_pair
    indexer = prompt**2 / 2.0 * 2 * 61 * 64 * 128
    assert flops == pytest.approx(main + indexer, rel=1e-9)
    assert indexer > main  # at 128K the indexer is most of the attention work


def test_each_tensor_parallel_rank_runs_the_dsa_indexer_whole():
    """vLLM's and SGLang's DSA Indexer is replicated, not split by heads: at TP 8 each rank of a 128K DeepSeek-V3.2
    prefill does an eighth of the main attention and all 8.6 PFLOP of the indexer (the engine divides a rank's
    attention FLOPs by TP, so the per-rank view counts the indexer TP times); a decode query likewise scores every
    cached token's indexer key on every rank."""
    from planner.engine.attention import at_ranks

    att = attention_for(shape_of("deepseek-v3.2"))
    prompt, tp = 131_072.0, 8.0
    main = (2048.0**2 / 2.0 + (prompt - 2048.0) * 2048.0) * att.inner.prefill_flops_per_pair
    indexer = prompt**2 / 2.0 * 2 * 61 * 64 * 128
    per_rank = float(at_ranks(att, tp).causal_pairs(prompt)) * att.prefill_flops_per_pair / tp
    assert per_rank == pytest.approx(main / tp + indexer, rel=1e-9)
    decode = float(at_ranks(att, tp).attended_positions(prompt)) * att.decode_flops_per_position / tp
    assert decode == pytest.approx(2048.0 * att.inner.decode_flops_per_position / tp + prompt * 2 * 61 * 64 * 128, rel=1e-9)
    assert float(at_ranks(att, 1.0).causal_pairs(prompt)) == pytest.approx(float(att.causal_pairs(prompt)), rel=1e-12)


def test_gemma3_local_layers_stop_at_the_window():
    att = attention_for(shape_of("gemma-3-27b"))
    assert isinstance(att, Hybrid)
    glob, local = att.parts
    assert glob.num_layers == 10 and isinstance(local, SlidingWindow) and local.inner.num_layers == 52 and local.window_tokens == 1024
    # beyond 1024 tokens only the 10 global layers grow: 2 x 10 x 16 x 128 x 2 bytes per token
    assert cache_bytes(att, 65_536) - cache_bytes(att, 32_768) == pytest.approx(2 * 10 * 16 * 128 * 2 * 32_768, rel=1e-9)


def test_model_spec_defaults_to_the_hybrid_attention():
    spec = spec_of("qwen3.5-27b")
    assert spec.attention == attention_for(spec.shape)
    assert spec.kv_cache_elements_per_token == 2 * 16 * 4 * 256 + 48 * architecture.linear_state_elements_per_layer(spec.shape)


def test_a_scaled_copy_keeps_each_layer_kind():
    from planner.catalog_specs import scaled_shape

    nano = shape_of("nemotron-3-nano-30b-a3b")
    small = scaled_shape(nano, 13)  # a quarter of the 52 blocks
    assert (small.linear_attention_layers, small.attention_layers, small.ffn_layers, small.moe_layer_count) == (6, 2, 6, 6)
    tiny = scaled_shape(shape_of("qwen3.5-27b"), 2)
    assert (tiny.linear_attention_layers, tiny.attention_layers) == (1, 1)
    assert isinstance(attention_for(tiny), Hybrid)
    gemma = scaled_shape(shape_of("gemma-3-27b"), 31)
    assert gemma.sliding_window_layers == 26
    dense = shape_of("llama-3.1-8b")
    assert scaled_shape(dense, 8) == dataclasses.replace(dense, num_layers=8)


def test_under_tensor_parallelism_each_part_of_a_hybrid_splits_as_its_own_kind():
    """Qwen3.5-397B-A17B at TP 8: its 15 full-attention layers keep 2 KV heads, so past TP 2 every rank holds a
    whole head (half the cache), while its 45 Gated DeltaNet layers' states split eight ways. What a rank holds is
    the sum of the two, not the cache's tokens' worth times an average share (7.6x too little for Kimi K3)."""
    from planner.engine import ChipSpec, Deployment, Workload, estimate

    model = spec_of("qwen3.5-397b-a17b")
    full, linear = model.attention.parts
    chip = ChipSpec(slug="big", kind="gpu", vendor="x", memory_capacity_bytes=4e12, memory_bandwidth_bytes_per_s=8e12,
                    peak_flops_per_s={"bf16": 2.25e15}, link_bandwidth_bytes_per_s=900e9, chips_per_node=8, tdp_watts=1000)  # fmt: skip
    prompt = 131_072
    held = estimate(model, Deployment(chip=chip, chip_count=8, tensor_parallel=8, weight_dtype="bf16", kv_dtype="bf16"),
                    Workload(prompt_tokens=prompt, output_tokens=1), batch=1).memory.kv_bytes_per_sequence_per_chip  # fmt: skip
    by_hand = (full.resident_tokens(prompt + 1) * full.kv_elements_per_token / 2 + linear.kv_elements_per_token / 8) * 2
    assert float(np.asarray(held).ravel()[0]) == pytest.approx(by_hand, rel=0.01)
    assert full.kv_share_per_chip(np.array([8.0]))[0] == 0.5 and linear.kv_share_per_chip(np.array([8.0]))[0] == 0.125
