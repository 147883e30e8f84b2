"""What the planner predicts for the speculative and block-diffusion validation trials, by hand."""

from __future__ import annotations

import pytest

from planner.engine.decoding import BlockDiffusion, forwards_per_generation
from planner.engine.trial_predictions import block_diffusion_trial_prediction, speculative_trial_prediction


def test_the_assumed_acceptance_gives_eq_1s_tokens_per_target_forward():
    p = speculative_trial_prediction(assumed_acceptance_rate=0.8, measured_acceptance_rate=0.5, draft_tokens=4, draft_cost_ratio=0.1,
                                     plain_token_time_s=0.01)  # fmt: skip
    assert p["acceptance_rate"] == 0.8
    assert p["mean_accepted_tokens_per_target_step"] == pytest.approx((1 - 0.8**5) / (1 - 0.8))  # 3.3616
    assert p["mean_accepted_tokens_per_target_step"] == pytest.approx(3.36, abs=0.002)


def test_the_speedup_is_thm_3_8_fed_the_measured_acceptance_and_cost_ratio_not_the_assumed_one():
    p = speculative_trial_prediction(assumed_acceptance_rate=0.7, measured_acceptance_rate=0.8, draft_tokens=4, draft_cost_ratio=0.1,
                                     plain_token_time_s=0.012)  # fmt: skip
    assert p["speedup"] == pytest.approx(3.3616 / (4 * 0.1 + 1), abs=1e-4)  # 2.4011
    assert p["speculative_token_time_s"] == pytest.approx(0.012 / p["speedup"])
    every_draft_accepted = speculative_trial_prediction(assumed_acceptance_rate=0.7, measured_acceptance_rate=1.0, draft_tokens=4,
                                                        draft_cost_ratio=0.5, plain_token_time_s=None)  # fmt: skip
    assert every_draft_accepted["speedup"] == pytest.approx(5 / 3) and every_draft_accepted["speculative_token_time_s"] is None


def test_without_a_measured_cost_ratio_no_speedup_is_predicted():
    p = speculative_trial_prediction(assumed_acceptance_rate=0.7, measured_acceptance_rate=0.9, draft_tokens=3, draft_cost_ratio=None,
                                     plain_token_time_s=0.01)  # fmt: skip
    assert p["speedup"] is None and p["speculative_token_time_s"] is None and p["acceptance_rate"] == 0.7


def test_block_forwards_are_s_steps_per_block_and_a_commit_for_every_block_but_the_last():
    f = forwards_per_generation(100, 32, 8.0)
    assert (f.blocks, f.denoising_forwards, f.commit_forwards, f.forwards) == (4, 32.0, 3, 35.0)
    early = forwards_per_generation(256, 32, 4.0, answer_tokens=70)  # EOS in block 3: ceil(71/32)
    assert (early.blocks, early.forwards) == (3, 14.0)
    threshold = BlockDiffusion(block_size=32, tokens_per_forward=4.0).forwards(64)
    assert (threshold.blocks, threshold.denoising_forwards, threshold.commit_forwards) == (2, 16.0, 1)
    assert forwards_per_generation(16, 32, 8.0).commit_forwards == 0  # one block: nothing to commit for


def test_a_block_diffusion_trial_prediction_counts_every_sequence_and_the_prefill():
    decoding = BlockDiffusion(block_size=32, steps_per_block=8)
    p = block_diffusion_trial_prediction(decoding=decoding, output_tokens=100, batch=2, prefill_time_s=0.5, decode_token_time_s=0.01)
    assert (p["blocks"], p["denoise_forwards"], p["commit_forwards"], p["forwards"]) == (4, 32.0, 3, 35.0)
    assert p["tokens_per_forward"] == pytest.approx(200 / 35)
    assert p["time_s"] == pytest.approx(0.5 + 100 * 0.01)
    assert p["tokens_per_s"] == pytest.approx(200 / 1.5)
    assert p["steps_per_block"] == 8.0
