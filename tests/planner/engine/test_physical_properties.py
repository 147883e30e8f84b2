"""Properties any honest cost model keeps: longer answers never cost less per request, more replicas of
the same layout never make a request slower, and the bound label agrees with the roofline the times use."""

from __future__ import annotations

import dataclasses

import pytest

from planner.engine import (
    Autoregressive,
    BlockDiffusion,
    Deployment,
    Diffusion,
    DraftHeads,
    Speculative,
    Workload,
    estimate,
)

from .factories import a100_sxm_80gb, block_diffusion_8b, h100_sxm, llama_2_70b, llama_3_1_8b, llama_2_7b

DIFFUSION_8B = dataclasses.replace(llama_3_1_8b(), slug="dlm-8b", generation_kind="diffusion")


@pytest.mark.parametrize(
    ("model", "decoding"),
    [
        (llama_3_1_8b(), Autoregressive()),
        (llama_3_1_8b(), Speculative(draft=llama_3_1_8b(), draft_tokens=3, acceptance_rate=0.7)),
        (llama_3_1_8b(), DraftHeads(head_kind="eagle", draft_tokens=3, acceptance_rate=0.7)),
        (DIFFUSION_8B, Diffusion(steps=64, window_tokens=64)),
        (DIFFUSION_8B, Diffusion(steps=64, adaptive_window=True)),
        (block_diffusion_8b(), BlockDiffusion(block_size=32, steps_per_block=8)),
    ],
    ids=["ar", "speculative", "eagle", "diffusion-window", "diffusion-adaptive", "block-diffusion"],
)
def test_a_longer_answer_never_costs_less_time_per_request(model, decoding):
    seconds = []
    for output in (64, 128, 256, 512, 1024):
        e = estimate(model, Deployment(chip=h100_sxm(), decoding=decoding), Workload(prompt_tokens=256, output_tokens=output), batch=4)
        assert e.fits
        seconds.append(e.ttft_s + (output - 1) * e.tpot_s)
    assert all(later >= earlier for earlier, later in zip(seconds, seconds[1:])), seconds


def test_masked_diffusion_with_a_short_window_makes_a_long_answer_window_by_window():
    work = lambda g: Workload(prompt_tokens=256, output_tokens=g)  # noqa: E731
    short = estimate(DIFFUSION_8B, Deployment(chip=h100_sxm(), decoding=Diffusion(steps=64, window_tokens=64)), work(128), batch=1)
    long = estimate(DIFFUSION_8B, Deployment(chip=h100_sxm(), decoding=Diffusion(steps=64, window_tokens=64)), work(1024), batch=1)
    assert long.ttft_s > 2 * short.ttft_s  # the answer is released when its last window is done


@pytest.mark.parametrize("chips", [2, 4, 8])
def test_more_replicas_of_the_same_layout_never_slow_a_request(chips):
    model, work = llama_2_70b(), Workload(prompt_tokens=1000, output_tokens=200)
    one = estimate(model, Deployment(chip=h100_sxm(), chip_count=2, tensor_parallel=2), work, batch=16)
    more = estimate(model, Deployment(chip=h100_sxm(), chip_count=2 * chips, tensor_parallel=2), work, batch=16)
    assert more.tpot_s <= one.tpot_s and more.ttft_s <= one.ttft_s
    assert more.output_tokens_per_s_total >= one.output_tokens_per_s_total


@pytest.mark.parametrize("batch", [1, 8, 64, 256, 1024])
def test_the_bound_label_agrees_with_the_efficiency_scaled_ridge(batch):
    e = estimate(llama_2_7b(), Deployment(chip=a100_sxm_80gb()), Workload(prompt_tokens=512, output_tokens=128), batch=batch)
    for phase in (e.prefill, e.decode):
        assert phase.effective_ridge_flop_per_byte == pytest.approx(phase.ridge_flop_per_byte * 0.7 / 0.75)
        expected = "compute" if phase.intensity_flop_per_byte >= phase.effective_ridge_flop_per_byte else "memory"
        assert phase.bound == expected, (batch, phase)


def test_tensor_parallelism_across_two_nodes_runs_its_all_reduces_over_the_nics():
    model, work = llama_2_70b(), Workload(prompt_tokens=1000, output_tokens=200)
    within = estimate(model, Deployment(chip=h100_sxm(), chip_count=8, tensor_parallel=8), work, batch=64)
    across = estimate(model, Deployment(chip=h100_sxm(), chip_count=16, tensor_parallel=16), work, batch=64)
    assert across.fits and across.tensor_parallel == 16
    # NVLink 450 GB/s per direction within the node, one 50 GB/s NIC per GPU across nodes.
    assert across.decode.comm_s > within.decode.comm_s
