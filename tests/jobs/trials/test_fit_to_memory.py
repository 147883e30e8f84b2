"""A trial too large for the worker's memory fits itself before it fails (issue 14, item 1): fewer layers first,
then bf16 for fp32, then a shorter prompt and decode run, and the result says what it changed."""
from __future__ import annotations

import pytest
import torch

from jobs.trials.costs import param_counts
from jobs.trials.decode import run_decode_trial
from jobs.trials.memory import ACTIVATION_SLACK, fit_trial, plan_layers
from jobs.trials.model import ModelConfig

from .conftest import KINDS

CPU = torch.device("cpu")
GB = 1e9
# Llama-3.1-70B's shapes (its config.json): the README's validation example on a 24 GB machine, whose trial budget
# is half of MemAvailable, about 11.4 GB.
LLAMA_70B = dict(num_layers=80, hidden_size=8192, num_attention_heads=64, num_kv_heads=8, head_dim=128, intermediate_size=28672,
                 vocab_size=128256, max_context_tokens=131072, attention_kind="gqa")  # fmt: skip


def _one_layer_need_bytes(cfg: ModelConfig, bytes_per_el: int) -> float:
    c = param_counts(cfg)
    layer = (c.total - c.embedding - c.head - cfg.hidden_size) / cfg.num_layers
    return (c.embedding + c.head + cfg.hidden_size + layer) * bytes_per_el * ACTIVATION_SLACK


def test_the_readme_70b_trial_runs_bf16_on_a_24_gb_machine_where_fp32_cannot_hold_one_layer(monkeypatch):
    cfg = ModelConfig.from_dict(LLAMA_70B, slug="llama-3.1-70b")
    monkeypatch.setattr("jobs.trials.memory.mem_available_bytes", lambda: int(22.8 * GB))  # a 24 GB machine, idle
    budget = 11.4 * GB  # half of MemAvailable
    with pytest.raises(ValueError, match="needs 14.8 GB"):  # the failure the issue reported
        plan_layers(cfg, batch=1, max_seq=48, bytes_per_el=4, budget_bytes=budget, max_layers=2)
    fit = fit_trial(cfg, device=CPU, dtype=torch.float32, batch=1, prompt_tokens=32, decode_steps=16, max_layers=2)
    assert fit.dtype == torch.bfloat16 and (fit.prompt_tokens, fit.decode_steps) == (32, 16)
    assert fit.adjustments == ["fp32 did not fit the memory budget (11.4 GB, 50% of MemAvailable): ran bf16"]
    assert plan_layers(cfg, batch=1, max_seq=48, bytes_per_el=2, budget_bytes=budget, max_layers=2)["layers_run"] == 2


def test_a_trial_that_fits_is_left_as_asked():
    cfg = ModelConfig.from_dict(KINDS["dense_gqa"])
    fit = fit_trial(cfg, device=CPU, dtype=torch.float32, batch=1, prompt_tokens=32, decode_steps=16, max_bytes=1 * GB)
    assert fit.dtype == torch.float32 and (fit.prompt_tokens, fit.decode_steps) == (32, 16) and fit.adjustments == []


def test_the_sequence_is_halved_when_even_bf16_cannot_hold_its_kv_cache():
    cfg = ModelConfig.from_dict(KINDS["dense_gqa"])
    # One bf16 layer with a 64-token cache fits; with a 100,000-token cache it does not.
    budget = _one_layer_need_bytes(cfg, 2) * 1.5
    fit = fit_trial(cfg, device=CPU, dtype=torch.bfloat16, batch=8, prompt_tokens=90_000, decode_steps=10_000, max_bytes=budget)
    assert fit.dtype == torch.bfloat16 and fit.prompt_tokens < 90_000
    plan_layers(cfg, batch=8, max_seq=fit.prompt_tokens + fit.decode_steps, bytes_per_el=2, budget_bytes=budget)  # now fits
    assert "a 90000-token prompt and 10000 new tokens did not fit" in fit.adjustments[-1]


def test_a_trial_that_cannot_fit_at_all_still_fails_with_a_sentence_a_person_can_act_on():
    cfg = ModelConfig.from_dict(KINDS["dense_gqa"])
    with pytest.raises(ValueError, match="the budget is"):
        run_decode_trial(KINDS["dense_gqa"], dtype="fp32", prompt_tokens=16, decode_steps=8, max_bytes=1_000, repetitions=1)
    fit = fit_trial(cfg, device=CPU, dtype=torch.float32, batch=1, prompt_tokens=16, decode_steps=8, max_bytes=1_000)
    assert fit.dtype == torch.bfloat16 and (fit.prompt_tokens, fit.decode_steps) == (8, 8)  # tried everything it may


def test_a_decode_trial_fitted_to_memory_runs_and_says_what_it_changed():
    cfg = ModelConfig.from_dict(KINDS["dense_gqa"])
    budget = (_one_layer_need_bytes(cfg, 2) + _one_layer_need_bytes(cfg, 4)) / 2  # bf16 holds a layer, fp32 does not
    r = run_decode_trial(KINDS["dense_gqa"], dtype="fp32", prompt_tokens=8, decode_steps=4, max_bytes=budget, repetitions=1)
    assert r["dtype"] == "bf16" and r["fitted_to_memory"][0].startswith("fp32 did not fit")
    assert r["tpot_s"] > 0 and r["scaled"]["layers_run"] >= 1


def test_a_block_diffusion_trial_fits_itself_too():
    from jobs.trials.block_diffusion import run_block_diffusion_trial

    cfg = ModelConfig.from_dict(KINDS["dense_gqa"])
    budget = (_one_layer_need_bytes(cfg, 2) + _one_layer_need_bytes(cfg, 4)) / 2
    r = run_block_diffusion_trial(KINDS["dense_gqa"], dtype="fp32", prompt_tokens=8, gen_length=8, block_size=4, steps=2,
                                  max_bytes=budget, compare_whole_window=False)  # fmt: skip
    assert r["dtype"] == "bf16" and r["fitted_to_memory"][0].startswith("fp32 did not fit")


def test_a_block_diffusion_trial_shrinks_its_prompt_and_generation_around_a_block_it_keeps():
    from jobs.trials.block_diffusion import run_block_diffusion_trial
    from jobs.trials.costs import kv_elements_per_token

    cfg = ModelConfig.from_dict(KINDS["dense_gqa"])

    def need_bytes(tokens: int) -> float:  # one bf16 layer at batch 8 with a cache of `tokens`
        kv_layer = 8 * tokens * kv_elements_per_token(cfg) / cfg.num_layers * 2
        return _one_layer_need_bytes(cfg, 2) + kv_layer * ACTIVATION_SLACK

    # A 512-token block must stay whole; the 512-token prompt and 64-token generation beside it must shrink.
    r = run_block_diffusion_trial(KINDS["dense_gqa"], dtype="bf16", batch=8, prompt_tokens=512, gen_length=64, block_size=512,
                                  steps=8, max_bytes=need_bytes(812), compare_whole_window=False)  # fmt: skip
    assert r["prompt_tokens"] + r["gen_length"] + 512 <= 812 and r["gen_length"] >= 1
    assert "did not fit" in r["fitted_to_memory"][-1]
