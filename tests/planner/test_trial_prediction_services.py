"""The planner's predictions for a finished speculative or block-diffusion trial (planner.services), from measured
dicts shaped like the trials' own output (jobs/trials/speculative.py, jobs/trials/block_diffusion.py)."""

from __future__ import annotations

import pytest

from hwcatalog.models import Chip, ModelArch
from planner.services import block_diffusion_trial_prediction, speculative_trial_prediction

# What jobs.runner._speculative returned on a CPU worker (the tiny trained pair, k = 4), trimmed.
SPECULATIVE_MEASURED = {
    "trial": "speculative", "dtype": "fp32", "batch": 1, "prompt_tokens": 16, "draft_tokens_k": 4, "new_tokens": 16,
    "acceptance_rate": 0.9, "mean_accepted_tokens_per_target_step": 4.6, "rounds": 3, "proposed": 12, "accepted": 11,
    "speculative_time_s": 0.0124, "plain_time_s": 0.0250, "speedup": 2.02, "draft_plain_time_s": 0.0150,
    "plain_token_time_s": 0.0250 / 16, "draft_token_time_s": 0.0150 / 16, "speculative_token_time_s": 0.0124 / 16,
    "draft_cost_ratio": 0.6, "target": {"slug": "tiny-pair-target", "layers": 2}, "draft": {"slug": "tiny-pair-draft", "layers": 1},
    "note": "acceptance measured on the tiny trained pair, not on llama-3.1-70b (random weights would say nothing)",
}  # fmt: skip
# What run_block_diffusion_trial returned for a 2-layer fp32 copy of Fast-dLLM v2 7B on a CPU worker, trimmed.
BLOCK_DIFFUSION_MEASURED = {
    "trial": "block_diffusion", "dtype": "fp32", "batch": 1, "prompt_tokens": 32, "gen_length": 16, "block_size": 32,
    "steps_per_block": 8, "threshold": None, "scaled": {"layers_run": 2, "layers_full": 28}, "denoise_forwards": 8,
    "commit_forwards": 0, "blocks": 1, "forwards": 8, "prefill_forwards": 1, "tokens_committed": 16, "time_s": 12.3,
    "tokens_per_forward": 2.0, "tokens_per_s": 1.30, "mfu": 0.047,
}  # fmt: skip


def test_a_speculative_prediction_assumes_the_methods_default_acceptance_for_a_plain_row(db):
    p = speculative_trial_prediction(configuration={"decoding": "ar", "decoding_fields": {}}, measured=SPECULATIVE_MEASURED)
    assert p["acceptance_rate"] == 0.7 and "default" in p["acceptance_rate_source"] and "Leviathan" in p["acceptance_rate_source"]
    assert p["mean_accepted_tokens_per_target_step"] == pytest.approx((1 - 0.7**5) / 0.3)
    # The formula fed the pair's measured acceptance (0.9) and cost ratio (0.6), not the assumed 0.7.
    assert p["speedup"] == pytest.approx((1 - 0.9**5) / 0.1 / (4 * 0.6 + 1))
    assert p["speculative_token_time_s"] == pytest.approx(0.0250 / 16 / p["speedup"])
    assert "checks the formula, not the assumption" in p["basis"]


def test_a_speculative_prediction_takes_the_acceptance_the_plans_row_assumes(db):
    row = {"decoding": "speculative(k=4)", "decoding_fields": {"draft_model": "llama-3.2-1b", "draft_tokens": 4, "acceptance_rate": 0.8}}
    p = speculative_trial_prediction(configuration=row, measured=SPECULATIVE_MEASURED)
    assert p["acceptance_rate"] == 0.8 and p["acceptance_rate_source"] == "the plan's row (speculative(k=4))"
    assert p["mean_accepted_tokens_per_target_step"] == pytest.approx(3.36, abs=0.002)


def test_a_block_diffusion_prediction_is_for_the_chip_dtype_and_scaled_copy_that_ran(catalog):
    model, chip = ModelArch.objects.get(slug="fast-dllm-v2-7b"), Chip.objects.get(slug="amd-epyc-9654")
    p = block_diffusion_trial_prediction(model=model, chip=chip, configuration={}, measured=BLOCK_DIFFUSION_MEASURED, num_layers=2)
    assert {"blocks", "denoise_forwards", "commit_forwards", "forwards", "tokens_per_forward", "time_s", "tokens_per_s", "basis"} <= set(p)
    # One block of 32 (16 tokens asked), 8 steps and no commit forward: the trial's own count (commit_forwards 0).
    assert (p["blocks"], p["denoise_forwards"], p["commit_forwards"], p["forwards"]) == (1, 8, 0, 8)
    assert p["tokens_per_forward"] == pytest.approx(16 / 8)
    assert 0.01 < p["time_s"] < 600 and p["tokens_per_s"] == pytest.approx(16 / p["time_s"])
    assert "block_diffusion(B=32, S_eff=8)" in p["basis"] and "amd-epyc-9654" in p["basis"] and "fp32" in p["basis"]
    whole = block_diffusion_trial_prediction(model=model, chip=chip, configuration={}, measured=BLOCK_DIFFUSION_MEASURED)
    assert whole["time_s"] > 5 * p["time_s"]  # 28 layers, not the 2 that ran


def test_a_threshold_trial_takes_the_tokens_per_forward_the_plans_row_assumes(catalog):
    model, chip = ModelArch.objects.get(slug="fast-dllm-v2-7b"), Chip.objects.get(slug="amd-epyc-9654")
    measured = {**BLOCK_DIFFUSION_MEASURED, "steps_per_block": None, "threshold": 0.9}
    row = {"decoding": "block_diffusion(B=32, S_eff=4)", "decoding_fields": {"block_size": 32, "effective_steps": 4.0}}
    p = block_diffusion_trial_prediction(model=model, chip=chip, configuration=row, measured=measured, num_layers=2)
    assert p["denoise_forwards"] == 4 and "8 tokens per forward, assumed by the plan's row" in p["basis"]
    default = block_diffusion_trial_prediction(model=model, chip=chip, configuration={}, measured=measured, num_layers=2)
    assert default["denoise_forwards"] == 32 and "one token per step" in default["basis"]
