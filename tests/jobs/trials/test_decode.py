from __future__ import annotations

import json

import torch

from jobs.trials import decode
from jobs.trials.decode import greedy_generate, run_decode_trial
from jobs.trials.model import ModelConfig, build_model

from .conftest import KINDS

FAST = dict(dtype="fp32", prompt_tokens=12, decode_steps=8, warmup_steps=2)


def test_the_decode_trial_reports_plausible_metrics():
    steps = []
    r = run_decode_trial(KINDS["dense_gqa"], peak_bandwidth_bytes_per_s=1e15, peak_flops_per_s=1e18,
                         progress=lambda f, m: steps.append(f), **FAST)
    assert r["ttft_s"] > 0 and r["tpot_s_median"] > 0 and r["tpot_s_p90"] >= r["tpot_s_median"]
    assert r["tokens_per_s_total"] > 0 and r["bytes_per_step"] > 0 and r["flops_per_step"] > 0
    assert 0 < r["mbu"] <= 1 and 0 < r["mfu"] <= 1
    assert r["achieved_bandwidth_bytes_per_s"] == r["bytes_per_step"] / r["tpot_s_median"]
    assert r["scaled"] is None and r["compile_used"] is False and r["device_type"] == "cpu"
    assert steps[0] == 0.0 and steps[-1] == 1.0 and steps == sorted(steps)
    json.dumps(r)  # a Celery result must serialise


def test_the_trial_times_five_repetitions_after_the_warm_up_and_reports_their_median_and_spread():
    r = run_decode_trial(KINDS["dense_gqa"], **FAST)
    assert r["repetitions"] == 5 and len(r["tpot_s_repetitions"]) == len(r["ttft_s_repetitions"]) == 5
    reps = sorted(r["tpot_s_repetitions"])
    assert r["tpot_s"] == reps[2] and r["ttft_s"] == sorted(r["ttft_s_repetitions"])[2]
    assert r["tpot_spread"] == (reps[-1] - reps[0]) / reps[2] >= 0
    assert run_decode_trial(KINDS["dense_gqa"], repetitions=1, **FAST)["tpot_spread"] == 0.0


def test_mbu_and_mfu_are_null_without_peaks():
    r = run_decode_trial(KINDS["mqa"], **FAST)
    assert r["mbu"] is None and r["mfu"] is None


def test_a_model_over_the_memory_cap_runs_as_a_scaled_copy():
    desc = dict(KINDS["dense_gqa"], num_layers=12)
    r = run_decode_trial(desc, max_bytes=700_000, **FAST)
    s = r["scaled"]
    assert 1 <= s["layers_run"] < s["layers_full"] == 12
    assert s["scale_factor"] == 12 / s["layers_run"] and r["model"]["layers_run"] == s["layers_run"]


def test_moe_and_mla_decode_and_say_what_they_approximate():
    moe = run_decode_trial(KINDS["moe"], **FAST)
    mla = run_decode_trial(KINDS["mla"], **FAST)
    assert any("experts touched" in a for a in moe["approximations"])
    assert any("MLA approximated" in a for a in mla["approximations"])


def test_a_failing_compile_falls_back_to_eager_and_says_so(monkeypatch):
    def broken_compile(fn, **kwargs):
        def fail(*a, **k):
            raise RuntimeError("no compiler here")
        return fail

    monkeypatch.setattr(decode.torch, "compile", broken_compile)
    r = run_decode_trial(KINDS["dense_gqa"], compile=True, **FAST)
    assert r["compile"]["requested"] and not r["compile_used"] and "no compiler here" in r["compile"]["error"]
    assert r["tpot_s_median"] > 0


def test_greedy_generate_matches_a_cache_free_greedy_loop():
    cfg = ModelConfig.from_dict(KINDS["dense_gqa"])
    model = build_model(cfg, seed=5)
    prompt = torch.randint(0, 97, (1, 6))
    model.setup_caches(1, 16)
    with torch.inference_mode():
        fast = greedy_generate(model, prompt, 6)
        seq = prompt
        for _ in range(6):
            seq = torch.cat([seq, model(seq)[:, -1:].argmax(-1)], dim=1)
    assert fast.tolist() == seq[:, 6:].tolist()
