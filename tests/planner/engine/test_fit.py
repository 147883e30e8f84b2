"""Serving-engine profiles: six physically meaningful parameters per engine and one shared by every engine,
fitted by least squares on a surrogate that reproduces the engine's own predictions at the defaults."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engine.fit import POOLED, Parts, cv_folds, fit_profile, fit_profiles, profile_for, surrogate


def _parts(n: int = 60, seed: int = 0) -> Parts:
    rng = np.random.default_rng(seed)
    decode_memory = rng.uniform(2e-3, 20e-3, n)
    prefill_compute = rng.uniform(20e-3, 500e-3, n)
    metric = np.where(np.arange(n) % 2 == 0, "ttft_s", "tpot_s")
    decode = decode_memory + 0.3e-3 + 1e-4
    prefill = prefill_compute + 5e-3 + 0.3e-3
    expert_share = rng.uniform(0.0, 0.8, n)  # dense models 0, large MoE most of the weights
    # Routed experts x MoE layers: a dense model, gpt-oss-120b (128 x 36), DeepSeek-V3 (256 x 58).
    expert_layers = rng.choice([0.0, 4608.0, 14848.0], n)
    # TTFT: a staggered queue, or a wave when every request is in step; TPOT: interleaved prefill.
    staggered = np.where(metric == "ttft_s", prefill * 1.2, decode + 1e-3)
    in_step = np.where(metric == "ttft_s", prefill * 6.0, staggered)
    predicted = staggered + 0.1 * (in_step - staggered)
    return Parts(
        metric=metric, measured=predicted.copy(), predicted=predicted, staggered=staggered, in_step=in_step, compute_fraction0=np.full(n, 0.7),
        bandwidth_fraction0=np.full(n, 0.75), step_overhead0=np.full(n, 0.3e-3), expert_efficiency0=np.ones(n),
        decode_compute_s=decode_memory / 10, decode_memory_s=decode_memory, decode_expert_compute_s=expert_share * decode_memory / 10,
        decode_fixed_s=np.full(n, 1e-4), prefill_compute_s=prefill_compute,
        prefill_memory_s=prefill_compute / 20, prefill_expert_compute_s=expert_share * prefill_compute,
        prefill_fixed_s=np.full(n, 5e-3), decode_s=decode, prefill_s=prefill, expert_layers=expert_layers,
    )  # fmt: skip


def test_the_surrogate_reproduces_the_engines_predictions_at_the_defaults():
    p = _parts()
    assert surrogate(np.array([0.7, 0.75, 0.3e-3, 0.0, 1.0, 0.1, 0.0]), p) == pytest.approx(p.predicted, rel=1e-12)


def test_the_expert_term_adds_its_time_to_every_ttft_of_a_moe_model_and_to_nothing_else():
    p = _parts()
    plain = surrogate(np.array([0.7, 0.75, 0.3e-3, 0.0, 1.0, 0.1, 0.0]), p)
    with_term = surrogate(np.array([0.7, 0.75, 0.3e-3, 0.0, 1.0, 0.1, 10e-6]), p)
    added = with_term - plain
    assert added == pytest.approx(np.where(p.metric == "ttft_s", 10e-6 * p.expert_layers, 0.0), abs=1e-15)
    assert added[(p.metric == "ttft_s") & (p.expert_layers == 14848.0)] == pytest.approx(0.14848)


def test_the_fit_recovers_known_factors_a_request_overhead_the_experts_share_and_the_in_step_share():
    p = _parts()
    truth = np.array([0.5, 0.6, 0.5e-3, 0.04, 0.7, 0.3, 8e-6])
    measured = surrogate(truth, p)
    fitted = fit_profile(Parts(**{**p.__dict__, "measured": measured}))
    assert fitted.request_overhead_per_expert_layer_s == pytest.approx(8e-6, rel=0.05)
    assert fitted.compute_fraction == pytest.approx(0.5, rel=0.02)
    assert fitted.bandwidth_fraction == pytest.approx(0.6, rel=0.02)
    assert fitted.request_overhead_s == pytest.approx(0.04, rel=0.05)
    assert fitted.in_step_share == pytest.approx(0.3, rel=0.05)
    assert fitted.expert_efficiency == pytest.approx(0.7, rel=0.05)
    assert fitted.values == len(p)


def test_every_engine_holds_the_shared_term_the_pooled_fit_finds():
    p = _parts(n=80)
    engines = np.array(["vLLM"] * 40 + ["SGLang"] * 40)
    # The engines differ in their constant; the time per routed expert and layer is one for both.
    measured = np.where(engines == "vLLM", surrogate(np.array([0.5, 0.6, 0.5e-3, 0.01, 0.7, 0.3, 8e-6]), p),
                        surrogate(np.array([0.5, 0.6, 0.5e-3, 0.05, 0.7, 0.3, 8e-6]), p))  # fmt: skip
    profiles = fit_profiles(Parts(**{**p.__dict__, "measured": measured}), engines)
    shared = {profile.request_overhead_per_expert_layer_s for profile in profiles.values()}
    assert len(shared) == 1 and shared.pop() == pytest.approx(8e-6, rel=0.1)
    assert profiles["vLLM"].request_overhead_s == pytest.approx(0.01, abs=3e-3)
    assert profiles["SGLang"].request_overhead_s == pytest.approx(0.05, abs=3e-3)


def test_the_share_is_identified_by_the_values_whose_loops_can_drift_apart():
    # Values read in step (a colocated loop of an engine that runs its prefills alone: planner/accuracy.py gives them
    # staggered = in_step) are waves whatever the share; the others drift apart by it, here 0.3, and fix it.
    p = _parts(n=80)
    in_step_loop = np.arange(80) < 40
    p = Parts(**{**p.__dict__, "staggered": np.where(in_step_loop, p.in_step, p.staggered)})
    measured = surrogate(np.array([0.5, 0.6, 0.5e-3, 0.05, 0.7, 0.3, 8e-6]), p)
    fitted = fit_profile(Parts(**{**p.__dict__, "measured": measured}))
    assert fitted.in_step_share == pytest.approx(0.3, rel=0.05)
    assert fitted.request_overhead_s == pytest.approx(0.05, rel=0.05)
    waves = measured[in_step_loop & (p.metric == "ttft_s")]
    assert waves == pytest.approx(surrogate(np.array([0.5, 0.6, 0.5e-3, 0.05, 0.7, 1.0, 8e-6]), p)[in_step_loop & (p.metric == "ttft_s")])


def test_a_share_no_value_responds_to_is_held_at_its_default_not_left_to_the_machines_rounding():
    # Every value of one engine read in step (all its loops colocated under a scheduler that runs prefills alone) and
    # no MoE model among them: its in-step share and its experts' efficiency change none of its predictions, so the
    # fit keeps their spec defaults (0.1, 1.0) wherever it starts and whatever the measurements, while the other
    # engine, whose loops drift apart, fits its share.
    p = _parts(n=80)
    engines = np.array(["SGLang"] * 40 + ["vLLM"] * 40)
    alone = engines == "SGLang"
    p = Parts(**{**p.__dict__, "staggered": np.where(alone, p.in_step, p.staggered),
                 "expert_layers": np.where(alone, 0.0, p.expert_layers),
                 "decode_expert_compute_s": np.where(alone, 0.0, p.decode_expert_compute_s),
                 "prefill_expert_compute_s": np.where(alone, 0.0, p.prefill_expert_compute_s)})  # fmt: skip
    truth = np.array([0.5, 0.6, 0.5e-3, 0.05, 0.7, 0.3, 8e-6])
    profiles = fit_profiles(Parts(**{**p.__dict__, "measured": surrogate(truth, p)}), engines)
    assert profiles["SGLang"].in_step_share == 0.1 and profiles["SGLang"].expert_efficiency == 1.0
    assert profiles["SGLang"].request_overhead_s == pytest.approx(0.05, rel=0.05)
    assert profiles["vLLM"].in_step_share == pytest.approx(0.3, rel=0.05)
    assert profiles["vLLM"].expert_efficiency == pytest.approx(0.7, rel=0.05)


def test_the_time_per_routed_expert_is_held_at_zero_where_no_engine_ran_a_moe_model():
    p = _parts(n=80)
    dense = Parts(**{**p.__dict__, "expert_layers": np.zeros(80), "decode_expert_compute_s": np.zeros(80),
                     "prefill_expert_compute_s": np.zeros(80)})  # fmt: skip
    engines = np.array(["SGLang"] * 40 + ["vLLM"] * 40)
    profiles = fit_profiles(Parts(**{**dense.__dict__, "measured": surrogate(np.array([0.5, 0.6, 0.5e-3, 0.05, 0.7, 0.3, 8e-6]), dense)}), engines)
    assert {profile.request_overhead_per_expert_layer_s for profile in profiles.values()} == {0.0}
    assert profiles["vLLM"].request_overhead_s == pytest.approx(0.05, rel=0.05)


def test_an_engine_with_too_few_values_falls_back_to_the_pooled_profile():
    p = _parts()
    engines = np.array(["vLLM"] * 50 + ["SGLang"] * 10)
    profiles = fit_profiles(p, engines)
    assert set(profiles) == {POOLED, "vLLM"}
    assert profile_for(profiles, "SGLang") is profiles[POOLED]


def test_leave_one_group_out_holds_out_each_group_once():
    folds = cv_folds(["a", "b", "a", "c"])
    assert [g for g, _ in folds] == ["a", "b", "c"]
    assert sum(mask.sum() for _, mask in folds) == 4


def test_a_stored_profile_that_predates_a_parameter_gets_its_spec_default(tmp_path):
    import json

    from planner.engine.fit import load_profiles

    old = {"compute_fraction": 0.8, "bandwidth_fraction": 0.7, "step_overhead_s": 0.002, "request_overhead_s": 0.1, "values": 40}
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps({"source": "an older fit", "profiles": {"vLLM": old}}))
    profiles, source = load_profiles(path)
    assert source == "an older fit"
    assert profiles["vLLM"].expert_efficiency == 1.0 and profiles["vLLM"].in_step_share == 0.1
    assert profiles["vLLM"].request_overhead_per_expert_layer_s == 0.0
    assert load_profiles(tmp_path / "missing.json") == ({}, "")
