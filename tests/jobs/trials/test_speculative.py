from __future__ import annotations

from jobs.trials.speculative import run_speculative_trial

from .conftest import KINDS


def test_a_trained_pair_accepts_most_drafts_and_is_lossless(tiny_pair):
    target, draft, corpus = tiny_pair
    r = run_speculative_trial(target=target, draft=draft, prompt=corpus.prompt(16), prompt_tokens=16, new_tokens=40, k=4)
    assert r["lossless"] is True
    assert r["acceptance_rate"] > 0.5
    assert r["mean_accepted_tokens_per_target_step"] > 1
    assert r["target_forwards"] < 40  # fewer target forwards than tokens: the point of speculation
    assert r["tokens_per_s"] > 0 and r["plain_tokens_per_s"] > 0 and r["speedup"] > 0
    assert r["acceptance_meaningful"] is True


def test_the_tiny_pair_trained_below_random_guessing(tiny_pair):
    training = tiny_pair.corpus.training
    assert training["target"]["final_loss"] < 1.5 and training["draft"]["final_loss"] < 1.5  # ln(64) = 4.16


def test_random_weights_stay_lossless_but_acceptance_is_flagged_meaningless():
    r = run_speculative_trial(dict(KINDS["dense_gqa"], num_layers=2), dtype="fp32", prompt_tokens=8, new_tokens=10, k=3)
    assert r["lossless"] is True and r["acceptance_meaningful"] is False and "random weights" in r["acceptance_note"]


def test_the_draft_is_timed_alone_for_the_cost_ratio_the_speedup_formula_takes(tiny_pair):
    target, draft, corpus = tiny_pair
    r = run_speculative_trial(target=target, draft=draft, prompt=corpus.prompt(16), prompt_tokens=16, new_tokens=20, k=4, repeats=2)
    assert r["draft_plain_time_s"] > 0 and r["draft_cost_ratio"] == r["draft_plain_time_s"] / r["plain_time_s"]
    assert r["plain_token_time_s"] == r["plain_time_s"] / 20 and r["draft_token_time_s"] == r["draft_plain_time_s"] / 20
    assert r["speculative_token_time_s"] == r["speculative_time_s"] / 20
