from __future__ import annotations

import torch

from jobs.trials.block_diffusion import commit_counts, run_block_diffusion_trial
from jobs.trials.model import ModelConfig, build_model

from .conftest import KINDS

EOS = 7


def _model(seed: int = 0):
    return build_model(ModelConfig.from_dict(KINDS["dense_gqa"]), seed=seed)


def test_the_fixed_schedule_runs_steps_per_block_plus_one_commit_between_blocks():
    r = run_block_diffusion_trial(model=_model(), prompt_tokens=6, gen_length=24, block_size=8, steps=4,
                                  peak_flops_per_s=1e15)
    assert r["blocks"] == 3 and r["per_block_forwards"] == [4, 4, 4]
    assert r["denoise_forwards"] == 3 * 4 and r["commit_forwards"] == 3 - 1
    assert r["forwards"] == r["full_schedule_forwards"] == 14
    assert r["tokens_committed"] == 24 and r["tokens_per_forward"] == 24 / 14
    assert r["time_s"] > 0 and r["tokens_per_s"] > 0 and 0 < r["mfu"] < 1
    ww = r["whole_window"]
    assert ww["forwards"] == 12 and ww["time_s"] > 0 and ww["flops"] > r["flops"]


def test_a_block_with_eos_stops_generation_early():
    model = _model()
    bias = torch.zeros(97)
    bias[EOS] = 50.0  # the model now always prefers EOS, so the first block contains it
    model.output.register_forward_hook(lambda module, inputs, out: out + bias)
    r = run_block_diffusion_trial(model=model, prompt_tokens=6, gen_length=32, block_size=8, steps=4, eos_id=EOS,
                                  compare_whole_window=False)
    assert r["stopped_early"] is True and r["blocks"] == 1
    assert r["forwards"] == 4 < r["full_schedule_forwards"] == 4 * 4 + 3
    assert r["tokens_committed"] == 1  # the answer is just EOS


def test_the_confidence_threshold_commits_at_least_one_token_per_forward():
    r = run_block_diffusion_trial(model=_model(), prompt_tokens=6, gen_length=16, block_size=8, threshold=0.99,
                                  compare_whole_window=False)
    assert all(1 <= f <= 8 for f in r["per_block_forwards"]) and r["tokens_committed"] == 16


def test_commit_counts_spread_the_remainder():
    assert commit_counts(8, 4) == [2, 2, 2, 2] and commit_counts(10, 4) == [3, 3, 2, 2]
