"""Attention types answer KV bytes, reads and FLOPs at a context; the engine uses their answers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.engine import (
    Chunked,
    Deployment,
    FullAttention,
    Hybrid,
    LatentAttention,
    LinearState,
    SlidingWindow,
    SparseTopK,
    Workload,
    estimate,
)
from planner.engine.attention import Attention, attention_for

from .factories import h100_sxm, llama_3_1_8b

LLAMA_8B = FullAttention(num_layers=32, num_heads=32, num_kv_heads=8, head_dim=128)
# DeepSeek-V3 config.json: 61 layers, 128 heads, kv_lora_rank 512, qk_rope_head_dim 64, q/k head 192.
DEEPSEEK_V3 = LatentAttention(num_layers=61, num_heads=128, head_dim=192, kv_lora_rank=512, qk_rope_head_dim=64)


def test_every_type_answers_the_protocol():
    types = [LLAMA_8B, DEEPSEEK_V3, SlidingWindow(inner=LLAMA_8B, window_tokens=4096), Chunked(inner=LLAMA_8B, chunk_tokens=8192),
             LinearState(num_layers=48, state_elements_per_layer=2.0e6, flops_per_token_per_layer=8.0e6),
             SparseTopK(inner=DEEPSEEK_V3, top_k=2048), Hybrid(parts=(LLAMA_8B, DEEPSEEK_V3))]  # fmt: skip
    for attention in types:
        assert isinstance(attention, Attention), attention.name


def test_gqa_caches_k_and_v_of_its_kv_heads_only():
    # Llama-3.1-8B: 2 x 32 layers x 8 KV heads x 128 = 65,536 elements = 128 KiB per token at bf16.
    assert LLAMA_8B.name == "gqa"
    assert LLAMA_8B.kv_elements_per_token * 2 == 128 * 1024
    assert FullAttention(num_layers=1, num_heads=8, num_kv_heads=8, head_dim=64).name == "mha"
    assert FullAttention(num_layers=1, num_heads=8, num_kv_heads=1, head_dim=64).name == "mqa"


def test_kv_heads_are_replicated_once_tensor_parallel_exceeds_them():
    share = LLAMA_8B.kv_share_per_chip(np.array([1.0, 2.0, 8.0, 16.0]))
    assert list(share) == [1.0, 0.5, 0.125, 0.125]


def test_mla_caches_one_latent_and_a_rope_key_per_layer():
    # DeepSeek-V2 Table 1: (d_c + d_h^R) = 576 elements per token and layer.
    assert DEEPSEEK_V3.kv_elements_per_token == 61 * 576
    assert list(DEEPSEEK_V3.kv_share_per_chip(np.array([1.0, 8.0]))) == [1.0, 1.0]


def test_full_attention_passes_the_context_through_unchanged():
    context = np.array([10.0, 5000.0])
    assert LLAMA_8B.kv_read_tokens(context) is context
    assert LLAMA_8B.causal_pairs(100.0) == 5000.0
    assert LLAMA_8B.resident_tokens(101.0) == 112.0  # seven 16-token pages


def test_a_sliding_window_caps_what_is_held_read_and_attended():
    window = SlidingWindow(inner=LLAMA_8B, window_tokens=4096)
    assert window.kv_held_tokens(32768.0) == 4096
    assert window.kv_read_tokens(1000.0) == 1000
    assert window.causal_pairs(4096.0) == LLAMA_8B.causal_pairs(4096.0)
    assert window.causal_pairs(8192.0) == pytest.approx(4096**2 / 2 + 4096 * 4096)


def test_chunked_attention_sees_its_own_chunk_only():
    chunked = Chunked(inner=LLAMA_8B, chunk_tokens=8192)
    assert chunked.kv_read_tokens(4000.0) == 4000
    assert chunked.kv_read_tokens(100_000.0) == 4096  # half a chunk on average
    assert chunked.causal_pairs(16384.0) == pytest.approx(2 * 8192**2 / 2)


def test_a_linear_state_does_not_grow_with_the_context():
    ssm = LinearState(num_layers=48, state_elements_per_layer=2.0e6, flops_per_token_per_layer=8.0e6)
    assert ssm.resident_tokens(10.0) == ssm.resident_tokens(1e6) == 1.0  # one state, not paged
    assert ssm.attended_positions(np.array([10.0, 1e6])).tolist() == [1.0, 1.0]
    assert ssm.causal_pairs(4096.0) == 4096.0


def test_sparse_top_k_reads_k_entries_plus_the_indexer_keys_but_holds_everything():
    sparse = SparseTopK(inner=DEEPSEEK_V3, top_k=2048, indexer_elements_per_token=61 * 128)
    assert sparse.kv_held_tokens(131072.0) == 131072.0
    read = sparse.kv_read_tokens(131072.0)
    assert read < 0.25 * 131072  # the main cache read is capped at k
    assert read == pytest.approx(2048 * 576 / 704 + 131072 * 128 / 704)


def test_a_hybrid_weights_its_parts_by_their_share_of_the_cache():
    # gpt-oss-120b: 36 layers alternating a 128-token window with full attention, 8 KV heads of 64.
    full, banded = (FullAttention(num_layers=18, num_heads=64, num_kv_heads=8, head_dim=64) for _ in range(2))
    gpt_oss = Hybrid(parts=(full, SlidingWindow(inner=banded, window_tokens=128)))
    assert gpt_oss.kv_elements_per_token == 2 * 36 * 8 * 64
    assert gpt_oss.kv_held_tokens(8192.0) == pytest.approx((8192 + 128) / 2)


def test_the_catalog_shape_names_gqa_or_mla():
    assert attention_for(llama_3_1_8b().shape) == LLAMA_8B
    with pytest.raises(ValueError, match="attention_kind"):
        attention_for(dataclasses.replace(llama_3_1_8b().shape, attention_kind="ring"))


def test_a_sliding_window_model_decodes_long_contexts_faster_and_fits_more_sequences():
    full = llama_3_1_8b()
    windowed = dataclasses.replace(full, attention=SlidingWindow(inner=full.attention, window_tokens=4096))
    work = Workload(prompt_tokens=32000, output_tokens=256)
    a = estimate(full, Deployment(chip=h100_sxm()), work, batch=8)
    b = estimate(windowed, Deployment(chip=h100_sxm()), work, batch=8)
    assert b.tpot_s < a.tpot_s
    assert b.memory.max_concurrency > 6 * a.memory.max_concurrency
    assert b.ttft_s < a.ttft_s


def test_a_linear_state_model_decodes_as_fast_at_100k_tokens_as_at_1k():
    ssm = dataclasses.replace(
        llama_3_1_8b(), max_context_tokens=200_000,
        attention=LinearState(num_layers=32, state_elements_per_layer=32 * 128 * 128, flops_per_token_per_layer=4 * 32 * 128 * 128),
    )  # fmt: skip
    short = estimate(ssm, Deployment(chip=h100_sxm()), Workload(prompt_tokens=1000, output_tokens=100), batch=16)
    long = estimate(ssm, Deployment(chip=h100_sxm()), Workload(prompt_tokens=100_000, output_tokens=100), batch=16)
    assert long.decode.time_s == pytest.approx(short.decode.time_s, rel=1e-9)
    assert long.memory.kv_bytes_per_sequence_per_chip == short.memory.kv_bytes_per_sequence_per_chip
