"""Disaggregated prefill and decode pools in the simulator: toy cases worked by hand, then the physics on a real model."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engine import Deployment, Workload, estimate
from planner.engine.simulation import (
    Arrivals,
    KvTransfer,
    Lengths,
    SimulationWorkload,
    Trace,
    kv_transfer_for,
    run_schedule,
    simulate,
    simulate_disaggregated,
    simulate_disaggregated_with_cost,
)
from planner.engine.simulation.workload import Requests

from .factories import h100_sxm, llama_3_1_8b
from .test_simulation_scheduler import toy_cost

LITTLE_TOLERANCE = 0.02
NO_TRANSFER = KvTransfer(bytes_per_token=0.0, bytes_per_s=1.0, latency_s=0.0)


def _trace(arrival_s, prompt_tokens, output_tokens) -> SimulationWorkload:
    return SimulationWorkload(trace=Trace(arrival_s=arrival_s, prompt_tokens=prompt_tokens, output_tokens=output_tokens))


def _toy(workload, *, transfer=NO_TRANSFER, prefill_replicas=1, decode_replicas=1, **cost):
    return simulate_disaggregated_with_cost(toy_cost(**cost), toy_cost(**cost), workload, prefill_replicas=prefill_replicas,
                                            decode_replicas=decode_replicas, transfer=transfer)  # fmt: skip


def test_a_lone_request_prefills_on_one_pool_moves_its_kv_and_decodes_on_the_other():
    # Every toy step takes 1 s: the prefill step ends at 1 s, the KV takes 10 tokens x 0.05 s + 0.5 s = 1 s
    # to move, so the first token reaches the client at 2 s; the decode replica's steps 2-3 and 3-4 give
    # tokens 2 and 3.
    transfer = KvTransfer(bytes_per_token=5.0, bytes_per_s=100.0, latency_s=0.5)
    result = _toy(_trace([0.0], [10], [3]), transfer=transfer)
    assert result.ttft_s[0] == pytest.approx(2.0)
    assert result.e2e_s[0] == pytest.approx(4.0)
    assert result.tpot_s[0] == pytest.approx(1.0)
    assert result.steps == 1 + 2


def test_the_decode_pool_holds_the_transferred_kv_and_never_prefills_it_again():
    # A decode replica of 2 blocks of 16 tokens: a 20-token prompt's KV fills both, so the second request
    # waits for the first to finish instead of being prefilled there.
    result = _toy(_trace([0.0, 0.0], [20, 20], [3, 3]), kv_blocks=2)
    assert result.preemptions == 0
    assert result.ttft_s[0] == pytest.approx(1.0)  # one prefill step (the pools do not share blocks)
    assert result.e2e_s[0] == pytest.approx(3.0)
    assert result.e2e_s[1] == pytest.approx(5.0)  # decodes after the first has freed its blocks at 3 s


def test_a_transferred_request_that_is_preempted_recomputes_its_whole_context():
    decode = toy_cost(block_tokens=4, kv_blocks=8)
    received = Requests(arrival_s=np.zeros(2), prompt_tokens=np.array([5, 5]), output_tokens=np.array([14, 14]),
                        prefix_tokens=np.zeros(2, dtype=int), kv_transferred_tokens=np.array([4, 4]))  # fmt: skip
    schedule = run_schedule(decode, received)
    assert list(schedule.preemptions) == [0, 1]
    # B's recompute prefills its 5 tokens and those it had generated: more prefill tokens than the 1 + 1 of the arrival.
    assert int(schedule.step_prefill_tokens.sum()) > 2


def test_a_one_token_answer_ends_on_the_prefill_pool_and_never_moves():
    transfer = KvTransfer(bytes_per_token=1.0, bytes_per_s=1.0, latency_s=100.0)
    result = _toy(_trace([0.0], [10], [1]), transfer=transfer)
    assert result.ttft_s[0] == pytest.approx(1.0) and result.e2e_s[0] == pytest.approx(1.0)


def test_a_closed_loop_is_refused_with_the_reason():
    closed = SimulationWorkload(requests=10, arrivals=Arrivals.closed_loop(concurrency=4), prompt=Lengths.fixed(10), output=Lengths.fixed(3))
    with pytest.raises(ValueError, match="closed loop"):
        _toy(closed)


def test_the_kv_transfer_moves_every_layer_of_every_rank_over_one_nic_per_chip():
    model = llama_3_1_8b()
    transfer = kv_transfer_for(model, Deployment(chip=h100_sxm(), chip_count=2, tensor_parallel=2))
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 dims x (K and V) x 2 bytes (bf16 KV) = 128 KiB a token.
    assert transfer.bytes_per_token == pytest.approx(32 * 8 * 128 * 2 * 2)
    assert transfer.bytes_per_s == pytest.approx(2 * 50e9)  # two ranks, one 400 Gb/s NIC each
    assert float(transfer.seconds(np.array([1000]))[0]) == pytest.approx(20e-6 + 1000 * 131072 / 100e9)


def test_a_hybrids_kv_transfer_grows_with_its_attention_layers_only_and_carries_its_state_once():
    """Qwen3.5-27B (16 full-attention layers, 48 Gated DeltaNet layers) at TP 2: the prompt's K/V of the full
    layers grows with its tokens, the recurrent state is one fixed size whatever the prompt. The transfer
    moved the whole cache's per-token elements times the prompt, counting the state once per token."""
    from .test_attention_catalog_shapes import spec_of

    model = spec_of("qwen3.5-27b")
    full, linear = model.attention.parts
    transfer = kv_transfer_for(model, Deployment(chip=h100_sxm(), chip_count=2, tensor_parallel=2))
    # Both kinds split over the two ranks (4 KV heads; the state's heads), so all ranks together hold it once.

    def seconds_by_hand(tokens):
        return 20e-6 + (tokens * full.kv_elements_per_token + linear.kv_elements_per_token) * 2 / transfer.bytes_per_s

    for tokens in (1_000, 32_000):
        assert float(transfer.seconds(np.array([tokens]))[0]) == pytest.approx(seconds_by_hand(tokens), rel=1e-9)


def _chat(**overrides) -> SimulationWorkload:
    values = dict(requests=1500, arrivals=Arrivals.poisson(8.0), prompt=Lengths.lognormal(1000, 600), output=Lengths.lognormal(250, 150), seed=7)
    return SimulationWorkload(**{**values, **overrides})


def test_littles_law_holds_across_both_pools_and_the_wire():
    result = simulate_disaggregated(llama_3_1_8b(), Deployment(chip=h100_sxm()), _chat(), prefill_replicas=1)
    assert result.completed == result.requests
    assert result.littles_law.relative_error < LITTLE_TOLERANCE
    assert any("disaggregated" in note for note in result.notes)


def test_at_near_zero_load_ttft_is_one_prefill_and_the_transfer_and_tpot_one_decode_step():
    model, deployment = llama_3_1_8b(), Deployment(chip=h100_sxm())
    overhead = {"request_overhead_s": 0.015, "step_overhead_s": 0.002, "prefill_layer_overhead_s": 1e-5}
    light = _chat(requests=30, arrivals=Arrivals.poisson(0.01), prompt=Lengths.fixed(1000), output=Lengths.fixed(200))
    result = simulate_disaggregated(model, deployment, light, prefill_replicas=1, efficiency=overhead)
    alone = estimate(model, deployment, Workload(prompt_tokens=1000, output_tokens=200), batch=1, efficiency=overhead)
    moved = float(kv_transfer_for(model, deployment).seconds(np.array([1000]))[0])
    assert result.ttft.p50 == pytest.approx(alone.ttft_s + moved, rel=0.005)
    assert result.tpot.p50 == pytest.approx(alone.tpot_s, rel=0.005)


def test_separate_pools_keep_tpot_free_of_prefill_interference():
    # At a load where colocated steps carry arriving prompts' chunks, disaggregated decode steps carry none:
    # the p99 TPOT falls, at the cost of a second replica.
    model = llama_3_1_8b()
    busy = _chat(arrivals=Arrivals.poisson(12.0), prompt=Lengths.fixed(4000), output=Lengths.fixed(200))
    colocated = simulate(model, Deployment(chip=h100_sxm(), chip_count=2), busy)
    apart = simulate_disaggregated(model, Deployment(chip=h100_sxm()), busy, prefill_replicas=1)
    assert apart.tpot.p99 < colocated.tpot.p99
    assert apart.kv_blocks == colocated.kv_blocks  # two replicas' caches either way


def test_too_few_prefill_replicas_overload_and_the_result_says_so():
    model = llama_3_1_8b()
    flood = _chat(requests=3000, arrivals=Arrivals.poisson(200.0), prompt=Lengths.fixed(8000), output=Lengths.fixed(20))
    result = simulate_disaggregated(model, Deployment(chip=h100_sxm(), chip_count=4), flood, prefill_replicas=1)
    assert result.overloaded
