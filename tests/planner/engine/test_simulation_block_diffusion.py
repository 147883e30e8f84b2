"""Block diffusion in the simulator: blocks denoised in forwards of B positions, released when their denoising ends,
worked by hand on a toy cost, then against the estimate's own forwards on a block-diffusion model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.engine import BlockDiffusion, Deployment, Workload, estimate
from planner.engine.simulation import Arrivals, Lengths, SimulationWorkload, Trace, simulate, simulate_with_cost
from planner.engine.simulation.multi_token import DiffusionBlocks

from .factories import block_diffusion_8b, h100_sxm
from .test_simulation_scheduler import toy_cost

LITTLE_TOLERANCE = 0.02


def _blocks(cost, *, block: int, steps: float):
    return dataclasses.replace(cost, multi_token=DiffusionBlocks(label=f"toy(B={block})", block_size=block, steps_per_block=steps))


def _run(cost, arrival_s, prompt_tokens, output_tokens):
    return simulate_with_cost(cost, SimulationWorkload(trace=Trace(arrival_s=arrival_s, prompt_tokens=prompt_tokens, output_tokens=output_tokens)))


def test_a_block_is_released_when_its_denoising_ends_and_blocks_are_committed_between():
    # Toy steps of 1 s. 8 tokens in blocks of 4 with 2 denoising forwards each: the prefill (0-1 s), block 1
    # denoised (1-3 s, released at 3 s), its commit (3-4 s), block 2 denoised (4-6 s, released at 6 s).
    result = _run(_blocks(toy_cost(), block=4, steps=2), [0.0], [10], [8])
    assert result.ttft_s[0] == 3.0 and result.e2e_s[0] == 6.0
    assert result.tpot_s[0] == pytest.approx(3.0 / 7.0)


def test_a_block_spends_its_b_positions_of_the_token_budget_per_sequence():
    # A budget of 8 holds two sequences denoising blocks of 4: the third is admitted when one finishes.
    result = _run(_blocks(toy_cost(token_budget=8), block=4, steps=1), [0.0, 0.0, 0.0], [2, 2, 2], [4, 4, 4])
    assert result.ttft_s[2] > result.e2e_s[0] - 1e-9


def test_a_fractional_step_count_keeps_its_mean_across_blocks():
    planner = DiffusionBlocks(label="t", block_size=32, steps_per_block=10.5).planner(0, np.random.default_rng(4))
    release, forwards = planner.plan(32 * 400)
    assert 10 <= release <= 11
    assert (forwards - 399) / 400 == pytest.approx(10.5, abs=0.1)  # 400 blocks' denoising and 399 commits


def test_at_near_zero_load_ttft_is_the_estimates_and_the_answer_takes_its_forwards_less_the_last_commit():
    model = block_diffusion_8b()
    decoding = BlockDiffusion(block_size=32, steps_per_block=8)
    deployment = Deployment(chip=h100_sxm(), decoding=decoding)
    light = SimulationWorkload(requests=30, arrivals=Arrivals.poisson(0.01), prompt=Lengths.fixed(1000), output=Lengths.fixed(256), seed=3)
    result = simulate(model, deployment, light)
    alone = estimate(model, deployment, Workload(prompt_tokens=1000, output_tokens=256), batch=1)
    assert result.ttft.p50 == pytest.approx(alone.ttft_s, rel=0.005)  # the prefill and the first block's 8 forwards
    # After the first release the simulation runs 7 x (8 + 1) forwards (no commit after the last block), the
    # estimate's TPOT those forwards over the other 255 tokens; its replica's time per token spreads all 8 x 8 + 7.
    assert result.e2e.p50 - result.ttft.p50 == pytest.approx(alone.tpot_s * 255, rel=0.01)
    assert alone.decode_token_time_s * 256 == pytest.approx(alone.tpot_s * 255 * (8 * 8 + 7) / (7 * 9), rel=0.01)
    assert any("denoising forwards" in note for note in result.notes)


def test_littles_law_holds_under_load_and_nothing_is_preempted():
    model = block_diffusion_8b()
    deployment = Deployment(chip=h100_sxm(), decoding=BlockDiffusion(block_size=32, tokens_per_forward=3.0))
    busy = SimulationWorkload(requests=1200, arrivals=Arrivals.poisson(10.0), prompt=Lengths.lognormal(800, 400), output=Lengths.lognormal(200, 100), seed=5)
    result = simulate(model, deployment, busy)
    assert result.completed == result.requests and result.preemptions == 0
    assert result.littles_law.relative_error < LITTLE_TOLERANCE


def test_separate_prefill_and_decode_pools_are_refused_for_block_diffusion_with_the_reason():
    from planner.engine.simulation import simulate_disaggregated

    deployment = Deployment(chip=h100_sxm(), decoding=BlockDiffusion(block_size=32, steps_per_block=8))
    light = SimulationWorkload(requests=10, arrivals=Arrivals.poisson(1.0), prompt=Lengths.fixed(100), output=Lengths.fixed(64))
    with pytest.raises(ValueError, match="first block"):
        simulate_disaggregated(block_diffusion_8b(), deployment, light, prefill_replicas=1)
