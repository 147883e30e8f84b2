"""Speculative decoding (Leviathan et al., ICML 2023), diffusion and block diffusion."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.engine import (
    Autoregressive,
    BlockDiffusion,
    Deployment,
    Diffusion,
    Speculative,
    Workload,
    acceptance_rate_from_mean_accepted,
    blocks_computed,
    blocks_saved_by_early_stop,
    estimate,
    expected_tokens_per_step,
    speculative_speedup,
)
from planner.engine.forward import sum_of_max_linear

from .factories import a100_sxm_80gb, block_diffusion_8b, h100_sxm, llama_2_7b, llama_2_70b, llama_3_1_8b


def test_leviathan_eq1_alpha_0_8_with_4_draft_tokens_gives_3_3616_tokens():
    assert expected_tokens_per_step(0.8, 4) == pytest.approx(3.3616, abs=1e-4)


def test_leviathan_eq1_is_one_token_without_acceptance_and_k_plus_one_with_full_acceptance():
    assert expected_tokens_per_step(0.0, 4) == 1.0
    assert expected_tokens_per_step(1.0, 4) == 5.0


def test_theorem_3_8_speedup_for_alpha_0_8_k_4_and_cost_ratio_0_05():
    # (1 - 0.8^5) / ((1 - 0.8) * (4 * 0.05 + 1)) = 3.3616 / 1.2
    assert speculative_speedup(0.8, 4, 0.05) == pytest.approx(2.8013, abs=1e-4)


def test_mean_accepted_tokens_converts_back_to_the_acceptance_rate():
    assert acceptance_rate_from_mean_accepted(3.3616, 4) == pytest.approx(0.8, abs=1e-6)
    with pytest.raises(ValueError):
        acceptance_rate_from_mean_accepted(6.0, 4)


def test_speculative_decoding_speeds_up_memory_bound_batch_one_decode():
    draft = Speculative(draft=llama_2_7b(), draft_tokens=4, acceptance_rate=0.8)
    e = estimate(llama_2_70b(), Deployment(chip=a100_sxm_80gb(), chip_count=4, tensor_parallel=4, decoding=draft), Workload(prompt_tokens=128, output_tokens=256))
    assert e.tokens_per_step == pytest.approx(3.3616, abs=1e-4)
    assert 1.5 < e.speedup_vs_ar < 3.3616
    assert e.memory.weights_bytes_per_chip == pytest.approx((68.98e9 + 6.74e9) * 2 / 4, rel=1e-9)  # draft counts


def test_speculative_verification_gets_expensive_once_past_the_ridge():
    draft = Speculative(draft=llama_2_7b(), draft_tokens=4, acceptance_rate=0.8)
    deployment = Deployment(chip=h100_sxm(), chip_count=4, tensor_parallel=4, decoding=draft)
    small = estimate(llama_2_70b(), deployment, Workload(prompt_tokens=128, output_tokens=256), batch=1)
    large = estimate(llama_2_70b(), deployment, Workload(prompt_tokens=128, output_tokens=256), batch=256)
    assert small.decode.bound == "memory" and large.decode.bound == "compute"
    assert large.speedup_vs_ar < 1.0 < small.speedup_vs_ar


def test_speculative_without_an_acceptance_rate_assumes_one_and_warns():
    draft = Speculative(draft=llama_2_7b(), draft_tokens=4)
    e = estimate(llama_2_70b(), Deployment(chip=h100_sxm(), chip_count=2, tensor_parallel=2, decoding=draft), Workload(prompt_tokens=128, output_tokens=128))
    assert any("acceptance rate not given" in w for w in e.warnings)


def test_block_diffusion_early_stop_saves_whole_blocks():
    # G = 256, B = 32: 8 blocks; an answer of 70 tokens + EOS fits in 3.
    assert blocks_computed(256, 32) == 8
    assert blocks_computed(256, 32, 70) == 3
    assert blocks_saved_by_early_stop(256, 32, 70) == 5
    assert blocks_saved_by_early_stop(256, 32, 63) == 6  # 63 tokens + EOS = exactly 2 blocks


@pytest.mark.parametrize("output,block,answer", [(256, 32, 70), (100, 16, 31), (1024, 64, 500), (40, 8, 0)])
def test_blocks_saved_equals_the_formula_of_planner_math(output, block, answer):
    assert blocks_saved_by_early_stop(output, block, answer) == math.ceil(output / block) - math.ceil((answer + 1) / block)


def test_block_diffusion_early_stop_cuts_generation_time_by_the_saved_blocks():
    model, chip = block_diffusion_8b(), h100_sxm()
    full = BlockDiffusion(block_size=32, steps_per_block=8)
    early = BlockDiffusion(block_size=32, steps_per_block=8, expected_answer_tokens=70)
    work = Workload(prompt_tokens=16, output_tokens=256)
    t_full = estimate(model, Deployment(chip=chip, decoding=full), work).decode_token_time_s * 256
    t_early = estimate(model, Deployment(chip=chip, decoding=early), work).decode_token_time_s * 70
    assert t_early / t_full == pytest.approx(3 / 8, rel=0.05)  # 3 of 8 blocks, context barely matters


def test_block_diffusion_at_batch_one_runs_about_tau_times_faster_than_autoregressive():
    # Below the ridge a step costs about one decode step. The replica's time per token is B / (S_eff + 1) times shorter:
    # 8 blocks of 8 denoising forwards and 7 commits for 256 tokens. A user's TPOT after the first token is shorter still:
    # the first block's 32 tokens are out with the first, the other 255 come in 7 x (8 + 1) forwards.
    decoding = BlockDiffusion(block_size=32, tokens_per_forward=4.0)
    e = estimate(block_diffusion_8b(), Deployment(chip=h100_sxm(), decoding=decoding), Workload(prompt_tokens=16, output_tokens=256))
    assert e.speedup_vs_ar == pytest.approx(255 / (7 * 9), rel=0.1)
    assert e.speedup_vs_ar * e.tpot_s / e.decode_token_time_s == pytest.approx(256 / (8 * 8 + 7), rel=0.1)


def test_focus_cuts_block_diffusion_flops_but_not_weight_bytes():
    model, chip, work = block_diffusion_8b(), h100_sxm(), Workload(prompt_tokens=16, output_tokens=256)
    plain_decoding = BlockDiffusion(block_size=32, steps_per_block=32)
    focus_decoding = BlockDiffusion(block_size=32, steps_per_block=32, focus_fraction=0.25)
    plain = estimate(model, Deployment(chip=chip, decoding=plain_decoding), work, batch=64)
    focus = estimate(model, Deployment(chip=chip, decoding=focus_decoding), work, batch=64)
    expected = (2 + 30 * 0.25) / 32
    assert focus.decode.flops_per_chip / plain.decode.flops_per_chip == pytest.approx(expected, rel=1e-6)
    assert focus.decode.bytes_per_chip > 0.9 * plain.decode.bytes_per_chip
    assert focus.decode_token_time_s < plain.decode_token_time_s


def test_sum_of_max_linear_matches_a_loop():
    rng = np.random.default_rng(0)
    a0, a1, b0, b1 = (rng.uniform(0, 10, 200) for _ in range(4))
    for count in (1, 2, 7, 33):
        loop = sum(np.maximum(a0 + (a1 - a0) * j / max(count - 1, 1), b0 + (b1 - b0) * j / max(count - 1, 1)) for j in range(count))
        np.testing.assert_allclose(sum_of_max_linear(a0, a1, b0, b1, count), loop, rtol=1e-9)


def test_masked_diffusion_costs_steps_over_prompt_plus_window_and_no_prefill():
    model, chip = llama_3_1_8b(), h100_sxm()
    e = estimate(model, Deployment(chip=chip, decoding=Diffusion(steps=256)), Workload(prompt_tokens=128, output_tokens=256))
    assert e.tokens_per_step == 1.0
    assert e.ttft_s == pytest.approx(e.decode.time_s * 256, rel=1e-9)  # tokens appear when the window is done
    assert e.memory.kv_bytes_per_sequence_per_chip > 0  # activations and logits of the window


def test_adaptive_diffusion_window_is_cheaper_than_a_full_window_for_long_outputs():
    model, chip, work = llama_3_1_8b(), h100_sxm(), Workload(prompt_tokens=64, output_tokens=1024)
    fixed = estimate(model, Deployment(chip=chip, decoding=Diffusion(steps=1024)), work, batch=8)
    adaptive = estimate(model, Deployment(chip=chip, decoding=Diffusion(steps=1024, adaptive_window=True)), work, batch=8)
    assert adaptive.decode_token_time_s < fixed.decode_token_time_s


def test_autoregressive_speedup_against_itself_is_one():
    e = estimate(llama_3_1_8b(), Deployment(chip=h100_sxm(), decoding=Autoregressive()), Workload(prompt_tokens=128, output_tokens=128))
    assert e.speedup_vs_ar == 1.0
