"""Attention data parallelism: each attention replica keeps its own KV cache and batch share, the
experts are spread over every rank (expert parallelism) and exchanged all-to-all."""

from __future__ import annotations

import pytest

from planner.engine import ArchShape, ChipSpec, Deployment, ModelSpec, Workload, estimate

from .factories import llama_3_1_8b

# DeepSeek-V3 config.json: 61 layers (3 dense), 256 routed experts + 1 shared, 8 per token, MLA.
DEEPSEEK_V3 = ModelSpec(
    slug="deepseek-v3",
    shape=ArchShape(num_layers=61, hidden_size=7168, num_attention_heads=128, num_kv_heads=128, head_dim=192, intermediate_size=18432,
                    vocab_size=129280, attention_kind="mla", q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
                    qk_rope_head_dim=64, v_head_dim=128, num_experts=256, experts_per_token=8, num_shared_experts=1,
                    moe_layer_count=58, moe_intermediate_size=2048),
    total_params=671e9, active_params=37e9, max_context_tokens=163840,
)  # fmt: skip
# H200 SXM: 141 GB HBM3e at 4.8 TB/s, 989 TFLOP/s bf16 and 1,979 fp8 dense, NVLink 450 GB/s per direction.
H200 = ChipSpec(slug="h200", kind="gpu", vendor="NVIDIA", memory_capacity_bytes=141e9, memory_bandwidth_bytes_per_s=4.8e12,
                peak_flops_per_s={"bf16": 989e12, "fp8": 1979e12}, link_bandwidth_bytes_per_s=450e9, chips_per_node=8, tdp_watts=700)  # fmt: skip
WORK = Workload(prompt_tokens=1024, output_tokens=1024)


def _deepseek(tp: int, adp: int, batch: int):
    deployment = Deployment(chip=H200, chip_count=8, tensor_parallel=tp, attention_data_parallel=adp, weight_dtype="fp8", kv_dtype="fp8")
    return estimate(DEEPSEEK_V3, deployment, WORK, batch=batch)


def test_experts_spread_over_every_rank_and_dense_weights_repeat_per_attention_replica():
    tp8, adp8 = _deepseek(8, 1, 64), _deepseek(1, 8, 64)
    assert tp8.fits and adp8.fits and adp8.attention_data_parallel == 8 and adp8.replicas == 1
    assert adp8.memory.weights_bytes_per_chip > tp8.memory.weights_bytes_per_chip  # dense weights not split
    assert adp8.memory.weights_bytes_per_chip < 1.2 * tp8.memory.weights_bytes_per_chip  # experts are most of it


def test_mla_under_attention_dp_holds_many_more_sequences_than_under_tp():
    # TP replicates MLA's latent cache on every rank; attention DP keeps each sequence on one rank.
    tp8, adp8 = _deepseek(8, 1, 64), _deepseek(1, 8, 64)
    assert adp8.memory.max_concurrency > 4 * tp8.memory.max_concurrency
    # The same cache per sequence, 1/8 of the sequences per rank (the logits row is per rank: not split by TP).
    assert adp8.memory.kv_bytes_per_chip == pytest.approx(tp8.memory.kv_bytes_per_chip / 8, rel=0.01)


def test_expert_parallel_moe_layers_exchange_tokens_all_to_all():
    assert _deepseek(1, 8, 256).decode.comm_s > 0
    assert _deepseek(1, 8, 256).decode.comm_s > _deepseek(1, 8, 16).decode.comm_s


def test_for_a_dense_model_attention_dp_is_data_parallel_replicas():
    model, chip = llama_3_1_8b(), H200
    adp = estimate(model, Deployment(chip=chip, chip_count=2, attention_data_parallel=2), WORK, batch=32)
    replicas = estimate(model, Deployment(chip=chip, chip_count=2), WORK, batch=32)
    assert adp.tpot_s == pytest.approx(replicas.tpot_s, rel=1e-9)
    assert adp.output_tokens_per_s_total == pytest.approx(replicas.output_tokens_per_s_total, rel=1e-9)
    assert adp.memory.max_concurrency == replicas.memory.max_concurrency


def test_a_layout_that_does_not_divide_the_chips_is_refused():
    e = estimate(DEEPSEEK_V3, Deployment(chip=H200, chip_count=8, tensor_parallel=2, attention_data_parallel=3, weight_dtype="fp8"), WORK)
    assert not e.fits and "cannot be split" in e.reasons[0]
