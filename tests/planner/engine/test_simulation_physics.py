"""The simulator against physics: Little's law, the zero-load limit of the cost model, overload,
preemption when the KV cache runs out, and reproducibility from the seed."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.engine import Deployment, Workload, estimate
from planner.engine.simulation import Arrivals, Lengths, SchedulerOptions, SimulationWorkload, Slos, simulate
from planner.engine.specs import Scheduler

from .factories import h100_sxm, llama_3_1_8b

# Little's law is an identity over a run that ends empty; what the check measures is the bookkeeping: the
# requests in the system integrated over the steps against the completions' times in system. The only
# gap is an arrival inside a step, counted from the next step's start (a few ms of seconds-long stays).
LITTLE_TOLERANCE = 0.02
# At near-zero load each decode step sees a context one token from the estimate's mean P + G/2.
ZERO_LOAD_TOLERANCE = 0.005


def _chat(**overrides) -> SimulationWorkload:
    values = dict(requests=2000, arrivals=Arrivals.poisson(10.0), prompt=Lengths.lognormal(1000, 600), output=Lengths.lognormal(250, 150),
                  seed=7)  # fmt: skip
    return SimulationWorkload(**{**values, **overrides})


@pytest.mark.parametrize(
    "arrivals",
    [Arrivals.poisson(10.0), Arrivals.gamma(10.0, cv=3.0), Arrivals.closed_loop(concurrency=32, think_time_s=0.5)],
    ids=["poisson", "bursty-gamma", "closed-loop"],
)
def test_littles_law_holds_mean_in_system_is_rate_times_time_in_system(arrivals):
    result = simulate(llama_3_1_8b(), Deployment(chip=h100_sxm()), _chat(arrivals=arrivals))
    law = result.littles_law
    assert result.completed == result.requests
    assert law.mean_in_system == pytest.approx(law.arrival_rate_per_s * law.mean_time_in_system_s, rel=LITTLE_TOLERANCE)
    assert law.relative_error < LITTLE_TOLERANCE


def test_a_closed_loop_never_has_more_requests_in_flight_than_clients():
    result = simulate(llama_3_1_8b(), Deployment(chip=h100_sxm()), _chat(arrivals=Arrivals.closed_loop(concurrency=16), requests=300))
    assert (result.series.running + result.series.queue_length).max() <= 16  # both read at the same step's start
    assert not result.overloaded


def test_at_near_zero_load_ttft_is_one_prefill_and_tpot_one_decode_step_of_the_cost_model():
    model, deployment = llama_3_1_8b(), Deployment(chip=h100_sxm())
    overhead = {"request_overhead_s": 0.015, "step_overhead_s": 0.002, "prefill_layer_overhead_s": 1e-5}
    light = _chat(requests=40, arrivals=Arrivals.poisson(0.01), prompt=Lengths.fixed(1000), output=Lengths.fixed(200))
    result = simulate(model, deployment, light, efficiency=overhead)
    alone = estimate(model, deployment, Workload(prompt_tokens=1000, output_tokens=200), batch=1, efficiency=overhead)
    assert result.ttft.p50 == pytest.approx(alone.ttft_s, rel=ZERO_LOAD_TOLERANCE)
    assert result.tpot.p50 == pytest.approx(alone.tpot_s, rel=ZERO_LOAD_TOLERANCE)
    assert result.preemptions == 0


def test_above_capacity_the_queue_grows_and_the_result_says_so():
    model, deployment = llama_3_1_8b(), Deployment(chip=h100_sxm())
    fine = simulate(model, deployment, _chat(arrivals=Arrivals.poisson(5.0)))
    flooded = simulate(model, deployment, _chat(arrivals=Arrivals.poisson(200.0)))
    assert not fine.overloaded
    assert flooded.overloaded and "grows without bound" in flooded.overload_reason
    assert flooded.queue_growth_per_s > 10 * max(fine.queue_growth_per_s, 1.0)
    # Growing without bound: while requests arrive, the queue at the last arrival is about twice the queue halfway.
    series, last = flooded.series, flooded.arrival_s.max()
    at_half, at_end = np.interp([last / 2.0, last], series.time_s, series.queue_length)
    assert at_end > 1.5 * at_half > 100


def test_preemption_happens_when_the_kv_blocks_run_out():
    model = llama_3_1_8b()
    long_answers = _chat(requests=300, arrivals=Arrivals.poisson(4.0), prompt=Lengths.fixed(500), output=Lengths.fixed(2000))
    roomy = simulate(model, Deployment(chip=h100_sxm()), long_answers)
    # A 24 GB chip leaves ~5 GB of cache after the 16 GB of weights: ~40,000 tokens for ~30 sequences of 2,500.
    small = dataclasses.replace(h100_sxm(), slug="h100-24gb", memory_capacity_bytes=24e9)
    tight = simulate(model, Deployment(chip=small), long_answers)
    assert roomy.preemptions == 0
    assert tight.preemptions > 0
    assert tight.peak_kv_utilisation > 0.99
    assert tight.completed == tight.requests  # recompute lets every preempted request finish


def test_the_same_seed_gives_the_same_result_and_another_seed_another():
    model, deployment = llama_3_1_8b(), Deployment(chip=h100_sxm())
    workload = _chat(requests=500, arrivals=Arrivals.gamma(12.0, cv=2.0))
    a, b = simulate(model, deployment, workload), simulate(model, deployment, workload)
    other = simulate(model, deployment, dataclasses.replace(workload, seed=8))
    for name in ("arrival_s", "ttft_s", "tpot_s", "e2e_s", "prompt_tokens"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True)
    assert a.ttft == b.ttft
    assert not np.array_equal(a.prompt_tokens, other.prompt_tokens)


def test_goodput_counts_the_requests_per_second_that_meet_every_slo():
    model, deployment = llama_3_1_8b(), Deployment(chip=h100_sxm())
    result = simulate(model, deployment, _chat(requests=1000), slos=Slos(ttft_s=0.2, tpot_s=0.03))
    meets = (result.ttft_s <= 0.2) & ~(result.tpot_s > 0.03)
    assert result.goodput_requests_per_s == pytest.approx(meets.sum() / result.duration_s)
    assert 0 < result.goodput_requests_per_s <= result.request_throughput_per_s
    strict = simulate(model, deployment, _chat(requests=1000), slos=Slos(ttft_s=1e-3))
    assert strict.goodput_requests_per_s == 0.0


def test_the_scheduler_options_mean_what_vllms_knobs_mean():
    model, deployment = llama_3_1_8b(), Deployment(chip=h100_sxm())
    capped = simulate(model, deployment, _chat(requests=500, arrivals=Arrivals.poisson(30.0)), options=SchedulerOptions(max_sequences=8))
    assert capped.series.running.max() <= 8
    assert capped.overloaded  # eight at a time cannot keep up with 30 requests/s


def test_a_memory_fraction_sizes_the_kv_cache_under_the_engines_own_rule():
    model, deployment = llama_3_1_8b(), Deployment(chip=h100_sxm())
    light = _chat(requests=20, arrivals=Arrivals.poisson(1.0))
    blocks = {f: simulate(model, deployment, light, options=SchedulerOptions(memory_fraction=f)).kv_blocks for f in (0.5, 0.9)}
    # vLLM's gpu_memory_utilization (the rule with no engine named): a share of the chip's memory, here 0.4 x 80 GB of
    # 16-token blocks of Llama-3.1-8B's bf16 KV (32 layers x 8 KV heads x 128 x 2 x 2 bytes = 128 KiB a token)
    block_bytes = 16 * 32 * 8 * 128 * 2 * 2
    assert blocks[0.9] - blocks[0.5] == pytest.approx(0.4 * deployment.chip.memory_capacity_bytes / block_bytes, rel=0.01)
    # TensorRT-LLM's free_gpu_memory_fraction: a share of what the weights and activations leave
    trtllm = Scheduler(engine="TensorRT-LLM", kv_memory_fraction=0.9, kv_memory_of_free=True)
    on_free = Deployment(chip=dataclasses.replace(h100_sxm(), scheduler=trtllm))
    free = {f: simulate(model, on_free, light, options=SchedulerOptions(memory_fraction=f)).kv_blocks for f in (0.45, 0.9)}
    assert free[0.9] == pytest.approx(2 * free[0.45], abs=2)
    with pytest.raises(ValueError, match="memory_fraction"):
        SchedulerOptions(memory_fraction=1.5)


def test_prefills_run_alone_keep_a_closed_loop_of_fixed_lengths_in_step():
    # vLLM's V0 scheduler with chunked prefill off (and SGLang's) runs the waiting prefills before any decode: the clients
    # of a benchmark that start together finish together and send their next prompts together, so each round's prompts
    # queue behind one another and the median TTFT grows with the clients. Decodes first with chunked prefill (vLLM V1)
    # lets the first round's stagger persist: each later prompt arrives alone and waits for about one prefill.
    model, deployment = llama_3_1_8b(), Deployment(chip=h100_sxm())
    loop = _chat(requests=320, arrivals=Arrivals.closed_loop(concurrency=32), prompt=Lengths.fixed(3000), output=Lengths.fixed(300))
    alone = simulate(model, deployment, loop, options=SchedulerOptions(prefill_alone=True, token_budget=8192))
    mixed = simulate(model, deployment, loop, options=SchedulerOptions(prefill_alone=False, token_budget=8192))
    one_prefill = simulate(model, deployment, _chat(requests=5, arrivals=Arrivals.poisson(0.01), prompt=Lengths.fixed(3000),
                                                    output=Lengths.fixed(300))).ttft.p50  # fmt: skip
    assert alone.ttft.p50 > 8 * one_prefill
    assert mixed.ttft.p50 < 3 * one_prefill
    assert any("prefills run alone" in note for note in alone.notes)
    assert not any("prefills run alone" in note for note in mixed.notes)


def test_a_windowed_model_runs_at_the_mean_context_and_the_result_says_so():
    from planner.engine import FullAttention, SlidingWindow

    full = llama_3_1_8b()
    inner = FullAttention(num_layers=full.num_layers, num_heads=full.num_attention_heads, num_kv_heads=full.num_kv_heads,
                          head_dim=full.head_dim)  # fmt: skip
    windowed = dataclasses.replace(full, slug="windowed-8b", attention=SlidingWindow(inner=inner, window_tokens=512))
    long_prompts = _chat(requests=300, prompt=Lengths.fixed(4000), output=Lengths.fixed(200))
    a = simulate(windowed, Deployment(chip=h100_sxm()), long_prompts)
    b = simulate(full, Deployment(chip=h100_sxm()), long_prompts)
    assert a.completed == a.requests
    assert any("mean context" in note for note in a.notes) and not b.notes
    assert a.tpot.p50 < b.tpot.p50  # a 512-token window reads far less than 4,000 tokens of cache per step


def test_replicas_share_the_load_round_robin_and_the_checks_read_the_whole_deployment():
    model = llama_3_1_8b()
    busy = _chat(requests=2000, arrivals=Arrivals.poisson(60.0))
    one = simulate(model, Deployment(chip=h100_sxm()), busy)
    four = simulate(model, Deployment(chip=h100_sxm(), chip_count=4), busy)
    quarter = simulate(model, Deployment(chip=h100_sxm()), dataclasses.replace(busy, arrivals=Arrivals.poisson(15.0)))
    assert four.completed == four.requests
    assert four.littles_law.relative_error < LITTLE_TOLERANCE
    assert four.kv_blocks == 4 * one.kv_blocks
    assert four.ttft.p50 < one.ttft.p50 and four.tpot.p50 < one.tpot.p50
    # Each replica sees a quarter of the rate (every 4th arrival: gaps of Erlang-4, calmer than Poisson).
    assert four.tpot.p50 == pytest.approx(quarter.tpot.p50, rel=0.1)
    assert any("round-robin" in note for note in four.notes)


def test_a_rate_sweep_changes_only_the_rate_and_latency_grows_with_it():
    from planner.engine.simulation import latency_cdf, rate_sweep

    model, deployment = llama_3_1_8b(), Deployment(chip=h100_sxm())
    base = _chat(requests=600, arrivals=Arrivals.gamma(1.0, cv=2.0))
    points = rate_sweep(lambda w: simulate(model, deployment, w), base, [2.0, 10.0, 40.0])
    assert [round(p.requests) for p in points] == [600, 600, 600]
    assert points[0].prompt_tokens.tolist() == points[2].prompt_tokens.tolist()  # the same draw, only the gaps scaled
    assert points[0].ttft.p99 < points[1].ttft.p99 < points[2].ttft.p99
    assert points[0].request_throughput_per_s < points[2].request_throughput_per_s
    cdf = latency_cdf(points[1])
    assert cdf["ttft_s"][50] == pytest.approx(points[1].ttft.p50) and cdf["e2e_s"] == sorted(cdf["e2e_s"])
    for bad in ([4.0, 2.0], [], [1.0] * 13):
        with pytest.raises(ValueError):
            rate_sweep(lambda w: simulate(model, deployment, w), base, bad)
    with pytest.raises(ValueError, match="closed loop"):
        rate_sweep(lambda w: simulate(model, deployment, w), _chat(arrivals=Arrivals.closed_loop(concurrency=4)), [1.0])
