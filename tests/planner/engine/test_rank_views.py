"""What one tensor-parallel rank multiplies: the projections it keeps whole at their own width's rate, and, in the
decoding methods that build their own forwards (masked diffusion, a draft model's step), a DSA indexer whole."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.engine import ChipSpec, Deployment, Diffusion, SparseTopK, Speculative, Workload
from planner.engine.decoding.base import DecodeInputs
from planner.engine.forward import forward_cost
from planner.engine.simulation.arrays import deployment_arrays

from .test_attention_catalog_shapes import spec_of

BF16_PEAK_FLOP_PER_S, FP4_PEAK_FLOP_PER_S = 2.25e15, 9e15
# DeepSeek-V3.2's indexer (config.json): 64 heads of 128 dims on each of 61 layers, 2 FLOPs a multiply-add.
INDEXER_FLOP_PER_POSITION = 2 * 61 * 64 * 128


def b200() -> ChipSpec:
    # NVIDIA B200 datasheet (HGX B200): dense peaks 2.25 PFLOP/s bf16, 4.5 fp8, 9 fp4; memory ample for these FLOP checks.
    return ChipSpec(slug="b200", kind="gpu", vendor="NVIDIA", memory_capacity_bytes=2e12, memory_bandwidth_bytes_per_s=8e12,
                    peak_flops_per_s={"bf16": BF16_PEAK_FLOP_PER_S, "fp8": 4.5e15, "fp4": FP4_PEAK_FLOP_PER_S},
                    link_bandwidth_bytes_per_s=900e9, chips_per_node=8)  # fmt: skip


def test_replicated_mla_down_projections_kept_in_bf16_multiply_at_the_bf16_peak_on_every_rank():
    """NVIDIA's NVFP4 DeepSeek keeps the attention's input projections in BF16. At TP 8 a rank multiplies the
    replicated MLA down-projections (q_a, kv_a: 61 x 7168 x 2112 = 0.923e9) whole and its eighth of the up-projections
    (q_b, kv_b: 3.326e9) in 16-bit math: 1.339e9 parameters a token at 2.25 PFLOP/s, not 9 (FP4). Counting only the
    1/8 share of the down-projections at 16 bits would give 0.531e9, 2.5x too little."""
    plain = spec_of("deepseek-v3")
    kept = dataclasses.replace(plain, sixteen_bit_modules={"nvfp4": ("attention_inputs",)})
    deployment, tokens = Deployment(chip=b200(), chip_count=8, tensor_parallel=8, weight_dtype="fp4"), 1024.0

    def prefill_compute_s(model) -> tuple[float, float]:
        hw = deployment_arrays(model, deployment)[2]
        cost = forward_cost(model, hw, sequences=np.ones(1), new_tokens=tokens, attention_pairs=0.0, kv_read_tokens=0.0, kv_write_tokens=0.0)
        return float(cost.compute_s[0]), float(hw.compute_fraction[0])

    (with_bf16_s, fraction), (without_s, _) = prefill_compute_s(kept), prefill_compute_s(plain)
    mla_down = 61 * 7168 * (1536 + 576)
    mla_up = 61 * (1536 * 128 * (128 + 64) + 512 * 128 * (128 + 128))
    bf16_flop_per_rank = tokens * 2.0 * (mla_down + mla_up / 8)  # 2.743e12
    slower_by_s = bf16_flop_per_rank / fraction * (1.0 / BF16_PEAK_FLOP_PER_S - 1.0 / FP4_PEAK_FLOP_PER_S)
    assert with_bf16_s - without_s == pytest.approx(slower_by_s, rel=0.01)


def _decode(model, decoding, tp: int, workload: Workload):
    deployment = Deployment(chip=b200(), chip_count=tp, tensor_parallel=tp, weight_dtype="fp8", decoding=decoding)
    grid, compute, hw = deployment_arrays(model, deployment)
    return decoding.decode(DecodeInputs(model=model, hw=hw, workload=workload, grid=grid, compute=compute))


def _without_indexer_flops(model):
    assert isinstance(model.attention, SparseTopK)
    return dataclasses.replace(model, attention=dataclasses.replace(model.attention, indexer_flops_per_position=0.0))


def test_a_masked_diffusion_step_runs_the_dsa_indexer_whole_on_every_tensor_parallel_rank():
    """A diffusion step of DeepSeek-V3.2 over a 1,024-token prompt and a 256-token window scores all 1,280 x 1,280
    (query, key) pairs with the indexer: 1.6384e6 x 999,424 = 1.637e12 FLOPs, on each rank at TP 8 as at TP 1
    (the indexer is replicated; split over the ranks it would be 0.205e12)."""
    dsa = spec_of("deepseek-v3.2")
    workload, diffusion = Workload(prompt_tokens=1024, output_tokens=256), Diffusion(steps=64)
    indexer_flop = 1280.0**2 * INDEXER_FLOP_PER_POSITION
    for tp in (1, 8):
        step = _decode(dsa, diffusion, tp, workload).step.flops_per_chip[0]
        blind = _decode(_without_indexer_flops(dsa), diffusion, tp, workload).step.flops_per_chip[0]
        assert step - blind == pytest.approx(indexer_flop, rel=0.01), f"TP {tp}"


def test_a_dsa_draft_models_step_runs_its_indexer_whole_on_every_tensor_parallel_rank():
    """A DeepSeek-V3.2-shaped draft proposing a token at the mean context of 1,024 + 256/2 = 1,152 tokens scores every
    cached token with its indexer: 1,152 x 999,424 = 1.151e9 FLOPs a draft step, on each rank at TP 8 as at TP 1.
    A draft step's FLOPs are the cycle's (achieved FLOP/s x token time x tokens a cycle) less the verification's, over k."""
    dsa = spec_of("deepseek-v3.2")
    workload, k = Workload(prompt_tokens=1024, output_tokens=256), 3
    indexer_flop = (1024 + 256 / 2) * INDEXER_FLOP_PER_POSITION

    def draft_step_flop(draft, tp: int) -> float:
        outcome = _decode(dsa, Speculative(draft=draft, draft_tokens=k, acceptance_rate=0.7), tp, workload)
        cycle_flop = outcome.achieved_flops_per_s_per_chip[0] * outcome.token_time_s[0] * outcome.tokens_per_step
        return (cycle_flop - outcome.step.flops_per_chip[0]) / k

    for tp in (1, 8):
        difference = draft_step_flop(dsa, tp) - draft_step_flop(_without_indexer_flops(dsa), tp)
        assert difference == pytest.approx(indexer_flop, rel=0.01), f"TP {tp}"
