"""Each scheduler rule pinned by a tiny case worked by hand, on a toy cost where every step takes 1 s."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.engine import FullAttention
from planner.engine.simulation import (
    RequestTooLarge,
    SimulationWorkload,
    StepBudgetSpent,
    StepCost,
    Trace,
    run_schedule,
    simulate_with_cost,
    step_budget,
)


def toy_cost(
    *, token_budget: int = 100, kv_blocks: int = 1000, block_tokens: int = 16, max_sequences: int | None = None, state_blocks: int = 0
) -> StepCost:
    zeros = [0.0] * (token_budget + 1)
    return StepCost(
        model_slug="toy", chip_slug="toy", token_budget=token_budget, compute_s_by_tokens=zeros, memory_s_by_tokens=zeros,
        fixed_s_by_tokens=[1.0] * (token_budget + 1), compute_s_per_prefill_pair=0.0, compute_s_per_decode_pair=0.0,
        memory_s_per_kv_token=0.0, prefill_overhead_s=0.0, request_overhead_s=0.0, kv_block_tokens=block_tokens, kv_blocks=kv_blocks,
        max_sequences=max_sequences, full_context=True, attention=FullAttention(num_layers=1, num_heads=1, num_kv_heads=1, head_dim=1),
        state_blocks=state_blocks,
    )  # fmt: skip


def run(cost: StepCost, arrival_s, prompt_tokens, output_tokens, **workload):
    trace = Trace(arrival_s=arrival_s, prompt_tokens=prompt_tokens, output_tokens=output_tokens)
    return simulate_with_cost(cost, SimulationWorkload(trace=trace, **workload))


def test_a_lone_request_gets_its_first_token_after_one_prefill_step_then_one_per_step():
    result = run(toy_cost(), [0.0], [10], [3])
    assert result.ttft_s[0] == 1.0  # step 0 prefills and samples the first token
    assert result.e2e_s[0] == 3.0  # steps 1 and 2 decode the other two
    assert result.tpot_s[0] == 1.0


def test_a_prompt_longer_than_the_token_budget_is_prefilled_in_chunks():
    assert run(toy_cost(token_budget=100), [0.0], [250], [1]).ttft_s[0] == 3.0  # chunks of 100, 100, 50


def test_decodes_spend_the_token_budget_before_prefill_chunks():
    # A decodes one token per step from step 1; B (200 tokens, arriving at 0.5 s) gets 99 + 99 + 2.
    result = run(toy_cost(token_budget=100), [0.0, 0.5], [10, 200], [100, 2])
    assert result.ttft_s[1] == pytest.approx(4.0 - 0.5)


def test_the_cap_on_running_sequences_makes_the_next_request_wait():
    result = run(toy_cost(max_sequences=1), [0.0, 0.0], [10, 10], [2, 2])
    assert list(result.ttft_s) == [1.0, 3.0]  # B is admitted when A finishes at 2 s


def test_when_blocks_run_out_the_newest_sequence_is_preempted_and_recomputed():
    # Blocks of 4 tokens, 6 in all. A and B each hold 1 block after prefill and grow a block every
    # 4 steps; at step 9 both need a 4th block with none free, so B (admitted last) is preempted.
    # It returns once A finishes at 20 s, prefills its 4 + 9 tokens again and decodes its last 10.
    result = run(toy_cost(block_tokens=4, kv_blocks=6), [0.0, 0.0], [4, 4], [20, 20])
    assert list(result.preemptions_per_request) == [0, 1]
    assert result.e2e_s[0] == 20.0
    assert result.e2e_s[1] == 31.0
    assert result.ttft_s[1] == 1.0  # the first token it had already streamed stands


def test_a_recurrent_state_is_held_once_per_sequence_beside_its_growing_blocks():
    # Blocks of 4 tokens, 5 in all, and a state of 2 blocks a sequence: A takes 1 + 2 and grows a 4th block at
    # step 1; B needs 3 and waits for A to finish at 2 s. Without a state both fit at once.
    stateful = run(toy_cost(block_tokens=4, kv_blocks=5, state_blocks=2), [0.0, 0.0], [4, 4], [2, 2])
    assert list(stateful.ttft_s) == [1.0, 3.0]
    assert list(run(toy_cost(block_tokens=4, kv_blocks=5), [0.0, 0.0], [4, 4], [2, 2]).ttft_s) == [1.0, 1.0]


def test_a_hybrids_kv_blocks_hold_as_many_sequences_as_the_estimate_admits():
    """Qwen3.5-27B (16 full-attention layers, 48 Gated DeltaNet layers of 1.6 MB state each in bf16): a block of
    16 tokens adds 1 MB, the state is 78 MB a sequence once. The simulator charged the state once per block,
    which left an H200 holding about 3 sequences of 5,000 tokens where the estimate admits 177."""
    from planner.engine import ChipSpec, Deployment, Workload, estimate
    from planner.engine.simulation import step_cost_for

    from .test_attention_catalog_shapes import spec_of

    chip = ChipSpec(slug="h200", kind="gpu", vendor="x", memory_capacity_bytes=141e9, memory_bandwidth_bytes_per_s=4.8e12,
                    peak_flops_per_s={"bf16": 0.99e15}, link_bandwidth_bytes_per_s=900e9, chips_per_node=8, tdp_watts=700)  # fmt: skip
    model = spec_of("qwen3.5-27b")
    deployment = Deployment(chip=chip, chip_count=1, tensor_parallel=1, weight_dtype="bf16", kv_dtype="bf16")
    cost = step_cost_for(model, deployment)
    full, linear = model.attention.parts
    assert cost.state_blocks == -(-linear.kv_elements_per_token // (16 * full.kv_elements_per_token))  # whole blocks: 75
    sequences = cost.kv_blocks / (5_000 / 16 + cost.state_blocks)
    admitted = estimate(model, deployment, Workload(prompt_tokens=4_000, output_tokens=1_000), batch=1).memory.max_concurrency
    assert sequences == pytest.approx(admitted, rel=0.01)


@pytest.mark.parametrize(
    ("name", "tensor_parallel"), [("gpt-oss-120b", 2), ("gemma-3-27b", 1), ("exaone-4.0-32b", 1), ("llama-4-scout", 2), ("mistral-7b-v0.1", 1)]
)
@pytest.mark.parametrize("prompt_tokens", [200, 4_000, 60_000])
def test_a_windowed_layer_holds_its_window_or_the_whole_sequence_if_shorter(name, tensor_parallel, prompt_tokens):
    """The engines free a sliding-window (or chunked) layer's blocks behind its window: gpt-oss-120b's 128 tokens,
    Gemma 3's 1,024, EXAONE 4's 4,096, Llama 4's 8,192-token chunks. The simulator had charged those layers every
    token (about half the sequences of 61,000 tokens that fit), then, for a while, the whole window from the first
    token (Llama 4 Scout held 29 sequences of 1,250 tokens where 152 fit): a request now takes its windows at its
    own length, min(length, window), and its sequences match the estimate's at every length."""
    from planner.engine import ChipSpec, Deployment, Workload, estimate
    from planner.engine.simulation import step_cost_for

    from .test_attention_catalog_shapes import spec_of

    chip = ChipSpec(slug="h200", kind="gpu", vendor="x", memory_capacity_bytes=141e9, memory_bandwidth_bytes_per_s=4.8e12,
                    peak_flops_per_s={"bf16": 0.99e15}, link_bandwidth_bytes_per_s=900e9, chips_per_node=8, tdp_watts=700)  # fmt: skip
    model = spec_of(name)
    deployment = Deployment(chip=chip, chip_count=tensor_parallel, tensor_parallel=tensor_parallel, weight_dtype="bf16", kv_dtype="bf16")
    cost = step_cost_for(model, deployment)
    tokens = prompt_tokens + 1_000
    growing = -(-tokens // 16) if cost.grows else 0  # Mistral-7B-v0.1: every layer windowed, nothing grows past 4,096
    sequences = cost.kv_blocks / (growing + cost.fixed_blocks(tokens))
    admitted = estimate(model, deployment, Workload(prompt_tokens=prompt_tokens, output_tokens=1_000), batch=1).memory.max_concurrency
    assert abs(sequences - admitted) <= max(1.0, 0.05 * admitted)  # the estimate counts whole sequences and their logits rows


@pytest.mark.parametrize("name", ["llama-3.1-8b", "gemma-3-27b", "qwen3.5-27b"])
def test_the_caches_capacity_is_the_same_whatever_the_block_size(name):
    """SGLang pages its cache a token at a time; vLLM's blocks are 16 tokens. The estimate's memory pages in 16s,
    so the simulator read a 1-token block's growth as 16 tokens' and held 16x too few tokens at block size 1."""
    from planner.engine import ChipSpec, Deployment
    from planner.engine.simulation import step_cost_for

    from .test_attention_catalog_shapes import spec_of

    chip = ChipSpec(slug="h200", kind="gpu", vendor="x", memory_capacity_bytes=141e9, memory_bandwidth_bytes_per_s=4.8e12,
                    peak_flops_per_s={"bf16": 0.99e15}, link_bandwidth_bytes_per_s=900e9, chips_per_node=8, tdp_watts=700)  # fmt: skip
    deployment = Deployment(chip=chip, chip_count=1, tensor_parallel=1, weight_dtype="bf16", kv_dtype="bf16")
    model = spec_of(name)
    sixteen = step_cost_for(model, deployment)
    for block_tokens in (1, 8, 24, 64):
        cost = step_cost_for(model, deployment, kv_block_tokens=block_tokens)
        assert cost.kv_blocks * block_tokens == pytest.approx(sixteen.kv_blocks * 16, rel=1e-3), block_tokens
        assert cost.state_blocks * block_tokens == pytest.approx(sixteen.state_blocks * 16, abs=64), block_tokens


def test_a_request_takes_its_windows_at_its_own_length_through_preemption_and_finish():
    # Blocks of 4 tokens, 9 in all; a window worth 1 block a sequence up to 4 tokens long and 3 past it. A (4 + 2
    # tokens: 2 growing blocks at most and 3 fixed) and B (2 + 1: 1 and 1) fit together, and every block returns.
    from planner.engine.simulation import StepCost

    cost = dataclasses.replace(toy_cost(block_tokens=4, kv_blocks=9), state_blocks=3, window_blocks=(0, 1))
    assert [cost.fixed_blocks(t) for t in (3, 4, 5, 100)] == [1, 1, 3, 3]
    trace = Trace(arrival_s=[0.0, 0.0], prompt_tokens=[4, 2], output_tokens=[2, 1])
    schedule = run_schedule(cost, SimulationWorkload(trace=trace).sample())
    assert list(schedule.first_token_s) == [1.0, 1.0]
    assert int(schedule.step_kv_blocks_used[0]) == (1 + 3) + (1 + 1)
    assert isinstance(cost, StepCost)


def test_a_cache_that_never_grows_holds_only_its_fixed_blocks():
    # Every layer windowed (a window of 2 blocks): two sequences of 4 + 12 tokens hold 2 blocks each whatever
    # their context, so 4 blocks run both at once; a cache that grew a block every 4 tokens would not fit one.
    cost = dataclasses.replace(toy_cost(block_tokens=4, kv_blocks=4), state_blocks=2, window_blocks=(0, 1), grows=False)
    result = run(cost, [0.0, 0.0], [4, 4], [12, 12])
    assert list(result.ttft_s) == [1.0, 1.0] and list(result.preemptions_per_request) == [0, 0]
    with pytest.raises(ValueError, match="needs 6 KV blocks"):  # 4 growing and its 2 fixed
        run(dataclasses.replace(cost, grows=True), [0.0], [4], [12])


def test_a_cached_shared_prefix_is_not_prefilled_again():
    cost = toy_cost(token_budget=50)
    cold = run(cost, [0.0], [100], [1], shared_prefix_tokens=64, shared_prefix_fraction=1.0, seed=0)
    warm_schedule = run_schedule(cost, SimulationWorkload(trace=Trace(arrival_s=[0.0], prompt_tokens=[100], output_tokens=[1]),
                                                          shared_prefix_tokens=64, shared_prefix_fraction=1.0).sample())  # fmt: skip
    assert cold.ttft_s[0] == 1.0  # 64 of the 100 tokens come from the cache: one step of 36
    assert list(warm_schedule.step_prefill_tokens) == [36]
    one = SimulationWorkload(trace=Trace(arrival_s=[0.0], prompt_tokens=[100], output_tokens=[1]), shared_prefix_tokens=64,
                             shared_prefix_fraction=1.0)  # fmt: skip
    uncached = simulate_with_cost(cost, one, prefix_caching=False)
    assert uncached.ttft_s[0] == 2.0


def test_a_request_too_long_for_the_whole_cache_is_refused_up_front():
    with pytest.raises(RequestTooLarge, match="request 0 needs 7 KV blocks"):
        run(toy_cost(block_tokens=16, kv_blocks=6), [0.0], [100], [1])


def test_an_idle_gap_costs_no_steps():
    result = run(toy_cost(), [0.0, 100.0], [10, 10], [1, 1])
    assert result.steps == 2
    assert np.allclose(result.ttft_s, [1.0, 1.0])


def test_where_prefills_run_alone_a_prefill_step_pauses_the_decodes():
    # SGLang's default: A decodes at 1 s; B arrives at 1.5 s and is prefilled alone in the step from 2 s, so A's
    # second token waits a step. A then decodes at 3, 4 and 5 s and ends at 6 s, a step later than when
    # they share steps (vLLM, TensorRT-LLM: B's prefill rides in A's decode step).
    alone = dataclasses.replace(toy_cost(), prefill_runs_alone=True)
    schedule = run_schedule(alone, SimulationWorkload(trace=Trace(arrival_s=[0.0, 1.5], prompt_tokens=[10, 10], output_tokens=[5, 2])).sample())
    assert list(schedule.step_prefill_tokens) == [10, 0, 10, 0, 0, 0]
    assert list(schedule.step_decode_sequences) == [0, 1, 0, 2, 1, 1]
    assert list(schedule.first_token_s) == [1.0, 3.0] and list(schedule.finish_s) == [6.0, 4.0]
    shared = run(toy_cost(), [0.0, 1.5], [10, 10], [5, 2])
    assert list(shared.e2e_s) == [5.0, 2.5]


def test_where_prefills_run_alone_a_request_waits_until_its_whole_prompt_fits():
    # Blocks of 4 tokens, 4 in all, 8 tokens a step. A (4 + 10 tokens) holds 1 block after its prefill and grows to
    # 4 by the end. B (15 prompt tokens, 4 blocks) arrives at 0.5 s: its first chunk of 8 (2 blocks) would fit at
    # once, but SGLang counts the whole prompt, so B waits for A to finish at 10 s and is prefilled in two steps
    # (8 and 7 tokens), never preempted.
    alone = dataclasses.replace(toy_cost(token_budget=8, block_tokens=4, kv_blocks=4), prefill_runs_alone=True)
    result = run(alone, [0.0, 0.5], [4, 15], [10, 1])
    assert result.e2e_s[0] == 10.0 and result.ttft_s[1] == pytest.approx(12.0 - 0.5)
    assert list(result.preemptions_per_request) == [0, 0]


def test_where_prefills_run_alone_the_running_answers_are_reserved_before_a_request_is_admitted():
    # SGLang's PrefillAdder, blocks of one token, 21 in all. A (1 + 11 tokens) decodes from 1 s with 10 tokens to
    # come, 0.7 x 10 = 7 blocks reserved for them. B (1 + 14) arriving at 1 s needs its prompt's block and 13 for
    # its answer: 1 + 13 + 7 = 21 > the 20 free. As A decodes, the blocks it takes outrun the reserve it frees, so
    # B waits for A to finish at 11 s (with vLLM's rule it would be prefilled at once, its first block free).
    alone = dataclasses.replace(toy_cost(token_budget=64, block_tokens=1, kv_blocks=21), prefill_runs_alone=True)
    result = run(alone, [0.0, 1.0], [1, 1], [11, 14])
    assert result.e2e_s[0] == 11.0 and result.ttft_s[1] == 11.0
    assert list(result.preemptions_per_request) == [0, 0]
    assert run(dataclasses.replace(alone, prefill_runs_alone=False), [0.0, 1.0], [1, 1], [11, 14]).ttft_s[1] == 1.0


def test_where_prefills_run_alone_a_sequence_preempted_and_prefilled_again_between_decoding_steps_finishes_once():
    # Blocks of one token, 21 in all. A (1 + 11 tokens) is prefilled from 0 s. B (1 + 12) arrives at 1 s: its block
    # and 11 for its answer, beside 0.7 x 10 reserved for A's, fit the 20 free (19), so it is prefilled alone while
    # A waits; both decode from 2 s. The reserve was short of what A takes: at the decoding step from 11 s both need
    # a block and one is free, so B (the newer) is preempted and A finishes at 12 s. B is prefilled again (its
    # prompt and the 10 tokens it had) from 12 s, before any decode, so its finishing entry from before the
    # preemption falls on the same decoding step as its new one, from 13 s: it finishes once, at 14 s.
    alone = dataclasses.replace(toy_cost(token_budget=64, block_tokens=1, kv_blocks=21), prefill_runs_alone=True)
    result = run(alone, [0.0, 1.0], [1, 1], [11, 12])
    assert list(result.preemptions_per_request) == [0, 1]
    assert list(result.ttft_s) == [1.0, 1.0] and list(result.e2e_s) == [12.0, 13.0]


def test_a_step_budget_is_shared_by_every_schedule_inside_it_and_stops_the_one_that_would_pass_it():
    # A lone request of 10 prompt tokens and 3 answer tokens takes three steps (test above).
    with step_budget(7):
        run(toy_cost(), [0.0], [10], [3])  # 3 steps: 4 left
        with step_budget(100):  # a block inside draws on the same steps, however many it asks for
            run(toy_cost(), [0.0], [10], [3])  # 3 more: 1 left
        with pytest.raises(StepBudgetSpent, match="1 steps left"):
            run(toy_cost(), [0.0], [10], [3])
    with step_budget(3):
        assert run(toy_cost(), [0.0], [10], [3]).e2e_s[0] == 3.0  # a schedule that needs exactly the steps left finishes
    # A prompt of 250 tokens at a token budget of 1 takes 250 steps, whatever its tokens say: the budget counts steps.
    with step_budget(100), pytest.raises(StepBudgetSpent):
        run(toy_cost(token_budget=1), [0.0], [250], [1])
    assert run(toy_cost(), [0.0], [10], [3]).e2e_s[0] == 3.0  # outside a budget nothing is counted
