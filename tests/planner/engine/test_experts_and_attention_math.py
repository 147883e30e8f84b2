"""Three pieces of the forward cost held against first principles: the busiest expert-parallel rank sets a
MoE layer's time (checked against a seeded simulation of uniform routing), attention runs in 16-bit math
whatever the weights' format, and the time before the first token grows with the routed experts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.engine import Deployment, Workload, estimate
from planner.engine.efficiency import Efficiency
from planner.engine.forward import expert_imbalance

from .factories import h100_sxm, llama_3_1_8b
from .test_attention_data_parallel import DEEPSEEK_V3, H200

WORK = Workload(prompt_tokens=1024, output_tokens=256)


def _busiest_rank_by_simulation(experts: int, top_k: int, tokens: int, ranks: int, trials: int = 400) -> tuple[float, float]:
    """Mean over trials of the busiest rank's distinct experts and token-expert pairs, relative to the mean
    rank's, with each token picking top_k distinct experts uniformly and rank r holding a contiguous block."""
    rng = np.random.default_rng(7)
    weights, pairs = [], []
    for _ in range(trials):
        picks = np.array([rng.choice(experts, top_k, replace=False) for _ in range(tokens)]).ravel()
        rank_of = picks // (experts // ranks)
        touched = np.unique(picks)
        per_rank_touched = np.bincount(touched // (experts // ranks), minlength=ranks)
        per_rank_pairs = np.bincount(rank_of, minlength=ranks)
        weights.append(per_rank_touched.max() / per_rank_touched.mean())
        pairs.append(per_rank_pairs.max() / per_rank_pairs.mean())
    return float(np.mean(weights)), float(np.mean(pairs))


@pytest.mark.parametrize("tokens,ranks", [(4, 8), (32, 8), (16, 32)])
def test_the_busiest_expert_parallel_rank_matches_a_simulation_of_uniform_routing(tokens, ranks):
    weights, flops = expert_imbalance(DEEPSEEK_V3, np.array([float(tokens)]), np.array([float(ranks)]))
    simulated_weights, simulated_pairs = _busiest_rank_by_simulation(256, 8, tokens, ranks)
    assert weights[0] == pytest.approx(simulated_weights, rel=0.12)
    assert flops[0] == pytest.approx(simulated_pairs, rel=0.12)


def test_no_expert_parallelism_and_saturated_routing_leave_the_mean():
    weights, flops = expert_imbalance(DEEPSEEK_V3, np.array([64.0, 4096.0]), np.array([1.0, 8.0]))
    assert weights[0] == flops[0] == 1.0  # every expert sharded over the TP ranks: all read the same share
    assert weights[1] == pytest.approx(1.0, abs=1e-6)  # 4,096 tokens touch every expert on every rank
    assert 1.0 < flops[1] < 1.05  # 32,768 picks over 8 ranks: a few percent of skew


def test_whole_experts_per_gpu_decode_slower_than_each_expert_sharded_over_eight():
    sharded = Deployment(chip=H200, chip_count=8, tensor_parallel=8, weight_dtype="fp8", kv_dtype="fp8")
    whole = dataclasses.replace(sharded, expert_parallel=8)
    a, b = estimate(DEEPSEEK_V3, sharded, WORK, batch=8), estimate(DEEPSEEK_V3, whole, WORK, batch=8)
    assert b.decode.memory_s > 1.3 * a.decode.memory_s  # about 4 experts a GPU on average, its busiest about 7
    assert b.decode.bytes_per_chip == pytest.approx(a.decode.bytes_per_chip)  # the mean work a chip does is the same
    assert b.tpot_s > a.tpot_s
    assert b.memory.weights_bytes_per_chip == a.memory.weights_bytes_per_chip  # the same weights held, read unevenly


def test_attention_data_parallel_spreads_whole_experts_over_every_rank_by_default():
    adp = Deployment(chip=H200, chip_count=8, attention_data_parallel=8, weight_dtype="fp8", kv_dtype="fp8")
    assert estimate(DEEPSEEK_V3, adp, WORK, batch=64).decode.memory_s > estimate(
        DEEPSEEK_V3, dataclasses.replace(adp, expert_parallel=1), WORK, batch=64).decode.memory_s  # fmt: skip


def test_attention_runs_at_the_16_bit_peak_whatever_the_weights_format():
    # A long prompt: attention is a large share of the prefill's FLOPs. fp8 weights halve the GEMMs' time;
    # the attention's time does not move (its QK^T and PV multiply by the cache, in 16 bits).
    chip, model = h100_sxm(), llama_3_1_8b()
    work = Workload(prompt_tokens=32768, output_tokens=16)
    bf16 = estimate(model, Deployment(chip=chip, weight_dtype="bf16", kv_dtype="bf16"), work, efficiency={"compute_fraction": 0.5})
    fp8 = estimate(model, Deployment(chip=chip, weight_dtype="fp8", kv_dtype="fp8"), work, efficiency={"compute_fraction": 0.5})
    gemm_s = 32768 * 2 * model.matmul_params / (0.5 * 989.4e12)
    attention_s = bf16.prefill.compute_s - gemm_s
    assert attention_s > 0.5 * gemm_s  # about 57% of the GEMMs' time at 32k tokens
    # The fp8 format keeps the LM head in 16 bits (architecture.SIXTEEN_BIT_HEAD_FORMATS): its GEMM keeps its time too.
    head_s = gemm_s * model.lm_head_params / model.matmul_params
    assert fp8.prefill.compute_s == pytest.approx((gemm_s - head_s) / 2 + head_s + attention_s, rel=1e-4)


def test_the_time_before_the_first_token_grows_with_the_routed_experts_and_not_for_a_dense_model():
    per_expert_layer = 10e-6
    factors = {"request_overhead_s": 0.02, "request_overhead_per_expert_layer_s": per_expert_layer}
    moe = Deployment(chip=H200, chip_count=8, tensor_parallel=8, weight_dtype="fp8", kv_dtype="fp8")
    with_term = estimate(DEEPSEEK_V3, moe, WORK, efficiency=factors)
    without = estimate(DEEPSEEK_V3, moe, WORK, efficiency={"request_overhead_s": 0.02})
    assert DEEPSEEK_V3.routed_expert_layers == 256 * 58
    assert with_term.ttft_s - without.ttft_s == pytest.approx(per_expert_layer * 256 * 58, rel=1e-9)  # 148 ms
    assert with_term.tpot_s == without.tpot_s
    dense = Deployment(chip=h100_sxm())
    assert estimate(llama_3_1_8b(), dense, WORK, efficiency=factors).ttft_s == estimate(
        llama_3_1_8b(), dense, WORK, efficiency={"request_overhead_s": 0.02}).ttft_s  # fmt: skip


def test_the_per_expert_time_must_not_be_negative():
    with pytest.raises(ValueError, match="request_overhead_per_expert_layer_s"):
        Efficiency(compute_fraction=0.5, bandwidth_fraction=0.5, step_overhead_s=0.0, link_bandwidth_fraction=0.5,
                   request_overhead_per_expert_layer_s=-1e-6)  # fmt: skip
