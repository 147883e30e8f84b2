"""Queueing under load: M/D/1 and M/D/c waits, and closed-loop concurrency solved by Little's law."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.engine import Deployment, Workload, estimate
from planner.engine.serving import (closed_loop_rate, erlang_c, in_step_wait_s, md1_closed_loop_rate, md1_wait_s, mdc_wait_s, pool_closed_loop,
                                    seen_share, serving_metrics)
from planner.engine.specs import Scheduler

from .factories import h100_sxm, llama_3_1_8b


def test_erlang_c_matches_the_textbook_values():
    assert erlang_c(np.array([1.0]), np.array([0.5]))[0] == pytest.approx(0.5)  # M/M/1: P(wait) = rho
    assert erlang_c(np.array([2.0]), np.array([1.0]))[0] == pytest.approx(1 / 3)


def test_one_server_m_d_c_is_m_d_1_and_more_servers_wait_less():
    one = mdc_wait_s(np.array([0.8]), np.array([1.0]), np.array([1.0]))[0]
    assert one == pytest.approx(md1_wait_s(np.array([0.8]), np.array([1.0]))[0])
    # Same utilisation (0.8) spread over 4 servers: a far shorter wait.
    assert mdc_wait_s(np.array([3.2]), np.array([1.0]), np.array([4.0]))[0] < 0.3 * one
    assert mdc_wait_s(np.array([4.0]), np.array([1.0]), np.array([4.0]))[0] == np.inf


def test_the_closed_loop_rate_satisfies_littles_law():
    clients, service = 64.0, 0.05

    def time_in_system(x):
        return service + md1_wait_s(x * service, np.full_like(x, service)) + 2.0

    rate = closed_loop_rate(clients, time_in_system, upper=np.array([1 / service]))
    assert rate[0] * time_in_system(rate)[0] == pytest.approx(clients, rel=1e-6)


def test_the_closed_loop_rate_is_found_in_a_few_evaluations_and_is_the_upper_end_where_the_loop_cannot_reach_it():
    clients = np.array([1.0, 8.0, 64.0, 512.0, 8.0])
    service = np.array([0.05, 0.05, 0.05, 0.01, 0.05])
    # The third loop runs near the server's capacity (64 clients, 20 prompts/s at most); the last one's clients pause
    # 1,000 s between requests, 0.008 requests/s, and its bracket ends below that.
    rest = np.array([2.0, 2.0, 2.0, 30.0, 1e3])
    upper = np.array([20.0, 20.0, 20.0, 100.0, 0.004])  # capacity, where the wait is infinite, but for the last
    calls = []

    def time_in_system(x):
        calls.append(1)
        return rest + md1_wait_s(seen_share(clients) * x * service, service)

    rate = closed_loop_rate(clients, time_in_system, upper=upper)
    assert rate[:4] * time_in_system(rate)[:4] == pytest.approx(clients[:4], rel=1e-10)
    assert rate[:4] == pytest.approx(md1_closed_loop_rate(clients, rest, service, np.ones(5))[:4], rel=1e-10)
    assert rate[2] > 0.9 * upper[2]
    assert rate[4] == 0.004
    assert len(calls) <= 30 + 1  # halving the brackets to the same tolerance takes about 55


def test_the_closed_loop_rate_broadcasts_and_survives_an_undefined_end_a_jump_and_no_clients():
    def steady(x):
        return 2.0 + md1_wait_s(0.05 * x, np.full_like(x, 0.05))

    # One upper end for three loops, as bisection broadcast it.
    rates = closed_loop_rate(np.array([1.0, 8.0, 64.0]), steady, upper=np.array([20.0]))
    assert rates.shape == (3,) and rates * steady(rates) == pytest.approx([1.0, 8.0, 64.0], rel=1e-12)
    # Every round in step: the wave's wait times an infinite steady wait is not a number at capacity, which is taken
    # as over the clients there, not as a bracket that never closes.
    wave = closed_loop_rate(8.0, lambda x: 2.0 + in_step_wait_s(md1_wait_s(0.05 * x, np.full_like(x, 0.05)), 0.3, 1.0), upper=np.array([20.0]))
    assert wave[0] == pytest.approx(8.0 / 2.3, rel=1e-12)
    # A time in system that jumps (1 s below 3 requests/s, 100 s above): the clients' rate is the jump.
    jump = closed_loop_rate(8.0, lambda x: np.where(x < 3.0, 1.0, 100.0), upper=np.array([20.0]))
    assert jump[0] == pytest.approx(3.0, rel=1e-12)
    assert closed_loop_rate(np.array([0.0, 8.0]), steady, upper=np.array([20.0, 20.0]))[0] == 0.0


def test_a_replica_of_one_attention_rank_holds_no_prompt_for_the_others_and_one_of_four_does():
    def served(ranks: float, timeout_steps: float, share: float = 0.0):
        return serving_metrics(concurrency=np.array([64.0]), replicas=np.array([1.0]), batch_per_replica=np.array([64.0]),
                               chips_per_replica=np.array([4.0]), prefill_one_s=np.array([0.05]),
                               prefill_batched_per_prompt_s=np.array([0.04]), token_time_s=np.array([0.02]),
                               first_token_extra_s=np.array([0.0]), needs_prefill=True, delivered_tokens=256.0,
                               request_rate_per_s=None, disaggregated=False, closed_loop=True, clients=64.0,
                               prefill_tokens=np.array([1000.0]), attention_data_parallel=ranks, in_step_share=share,
                               balance_timeout_steps=timeout_steps)  # fmt: skip

    for share in (0.0, 0.3):
        alone, timed = served(1.0, 0.0, share), served(1.0, 60.0, share)
        assert timed.ttft_s == pytest.approx(alone.ttft_s, rel=1e-12)
        assert timed.output_tokens_per_s_total == pytest.approx(alone.output_tokens_per_s_total, rel=1e-12)
    assert served(4.0, 60.0).ttft_s[0] > served(4.0, 0.0).ttft_s[0]  # four ranks: a prompt waits for the others


def test_a_closed_loop_rate_at_zero_closes_within_1e_30_of_the_brackets_end():
    # A time in system that is infinite everywhere is over the clients at any rate: the rate is as near zero as the
    # bracket's floor lets it be.
    rate = closed_loop_rate(8.0, lambda x: np.full_like(x, np.inf), upper=np.array([20.0]))
    assert 0.0 < rate[0] <= 20.0 * 1e-30


def test_the_closed_form_m_d_1_loop_rate_matches_bisection_and_a_loop_of_one_never_waits():
    clients, service, rest = 64.0, 0.05, 2.0
    seen = seen_share(clients)

    def time_in_system(x):
        return rest + md1_wait_s(seen * x * service, np.full_like(x, service))

    bisected = closed_loop_rate(clients, time_in_system, upper=np.array([1 / service]))
    assert md1_closed_loop_rate(clients, rest, np.array([service]), np.array([1.0]))[0] == pytest.approx(bisected[0], rel=1e-9)
    assert md1_closed_loop_rate(1.0, rest, np.array([service]), np.array([1.0]))[0] == pytest.approx(1 / rest)
    # Erlang C in closed form agrees with the textbook recurrence at a thousand servers.
    b = 1.0
    for k in range(1, 1001):
        b = 990.0 * b / (k + 990.0 * b)
    assert erlang_c(np.array([1000.0]), np.array([990.0]))[0] == pytest.approx(1000 * b / (1000 - 990 * (1 - b)), rel=1e-9)


def _closed(concurrency: int, in_step_share: float = 0.1, **kwargs):
    work = Workload(prompt_tokens=2048, output_tokens=256, concurrency=concurrency, closed_loop=True, in_step_share=in_step_share)
    return estimate(llama_3_1_8b(), Deployment(chip=h100_sxm()), work, **kwargs)


def test_a_closed_loop_of_one_waits_for_nothing_and_more_clients_wait_longer():
    alone = _closed(1)
    open_loop = estimate(llama_3_1_8b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=2048, output_tokens=256), batch=1)
    assert alone.ttft_s == pytest.approx(open_loop.ttft_s, rel=1e-9) and alone.queue_wait_s == 0
    ttfts = [_closed(c).ttft_s for c in (1, 4, 16, 64)]
    assert ttfts == sorted(ttfts) and ttfts[-1] > 3 * ttfts[0]


def test_a_wave_of_prompts_prefills_in_chunks_of_the_token_budget():
    # Every request in step: 16 prompts x 2048 tokens = 4 chunks of 8,192, and a prompt's first
    # token comes, on average, after (4 + 1) / 8 of the wave's prefill.
    e, single = _closed(16, in_step_share=1.0), _closed(1)
    # Batched prefill per prompt is a little cheaper than one prompt alone (weights read once).
    assert e.ttft_s == pytest.approx(16 * single.ttft_s * 5 / 8, rel=0.25)
    assert e.queue_wait_s == pytest.approx(e.ttft_s - single.ttft_s, rel=0.05)


def test_staggered_requests_see_the_steady_queue_and_the_in_step_share_mixes_the_two():
    staggered, wave, single = _closed(16, in_step_share=0.0), _closed(16, in_step_share=1.0), _closed(1)
    # Staggered, a prompt mostly finds the prefill idle: far less than the wave's wait.
    assert single.ttft_s < staggered.ttft_s < single.ttft_s + 0.2 * (wave.ttft_s - single.ttft_s)
    mixed = _closed(16, in_step_share=0.25)
    # A quarter of the rounds wait in the wave, so the clients send more slowly than staggered ones and the staggered
    # arrivals meet a shorter queue: the mean wait lies above the staggered one and a little under the straight mix.
    assert staggered.queue_wait_s < mixed.queue_wait_s < 0.75 * staggered.queue_wait_s + 0.25 * wave.queue_wait_s
    assert mixed.queue_wait_s > 0.98 * (0.75 * staggered.queue_wait_s + 0.25 * wave.queue_wait_s)
    # Little's law at that mixed wait: the rate the loop sends times a request's time in system is its 16 clients.
    for loop in (staggered, mixed, wave):
        rate = loop.output_tokens_per_s_total / 256
        assert rate * (loop.ttft_s + 255 * loop.tpot_s) == pytest.approx(16, rel=1e-6)


def test_a_closed_loop_sends_at_the_rate_its_mixed_wait_allows():
    """Eight clients on one replica, 1,000-token prompts (0.1 s alone, 0.08 s each in a batch), 128 tokens each: a quarter
    of the rounds arrive in one wave (8,000 tokens, one chunk of the 8,192-token budget, so every prompt waits for the
    whole chunk), the rest staggered. The rate is the one at which the staggered arrivals' M/D/1 wait, at the load the
    rate itself sets, and the wave's, mixed, close Little's law; below the rate the steady queue alone would give."""
    one, batched = np.array([0.1]), np.array([0.08])
    m = serving_metrics(concurrency=np.array([8.0]), replicas=np.array([1.0]), batch_per_replica=np.array([8.0]),
                        chips_per_replica=np.array([1.0]), prefill_one_s=one, prefill_batched_per_prompt_s=batched,
                        token_time_s=np.array([0.02]), first_token_extra_s=np.array([0.0]), needs_prefill=True,
                        delivered_tokens=128.0, request_rate_per_s=None, disaggregated=False, closed_loop=True, clients=8.0,
                        prefill_tokens=np.array([1000.0]), in_step_share=0.25)  # fmt: skip
    served = m.output_tokens_per_s_total / 128
    base = one + 127 * m.tpot_s  # its own prefill and its stream
    wave = 8 * batched - one
    steady = md1_wait_s(seen_share(8.0) * served * batched, batched)
    mixed = 0.75 * steady + 0.25 * np.maximum(wave, steady)
    assert served * (base + mixed) == pytest.approx(np.array([8.0]), rel=1e-9)
    assert m.queue_wait_s == pytest.approx(mixed, rel=1e-9)
    assert served < md1_closed_loop_rate(8.0, base, batched, 1.0)  # the steady queue's rate, corrected once before
    # The in-step share is a share.
    with pytest.raises(ValueError, match="in_step_share"):
        Workload(prompt_tokens=1, output_tokens=1, in_step_share=1.5)


def test_clients_beyond_the_batch_wait_for_a_slot_by_littles_law():
    inside = _closed(32, batch=32)
    crowded = _closed(64, batch=32)
    # Twice the clients on the same 32 slots: the extra 32 wait about one request's lifetime.
    lifetime = inside.ttft_s + 255 * inside.tpot_s
    assert crowded.ttft_s - inside.ttft_s == pytest.approx(lifetime, rel=0.05)
    assert crowded.output_tokens_per_s_total == pytest.approx(inside.output_tokens_per_s_total, rel=1e-6)


def test_a_search_over_no_chips_is_empty_not_an_error():
    from planner.engine import SearchOptions, search

    result = search(llama_3_1_8b(), [], {}, Workload(prompt_tokens=100, output_tokens=100, request_rate_per_s=5e6), SearchOptions())
    assert result.candidates == 0 and len(result.ranked) == 0 and result.infeasible == ()


def test_a_closed_loop_runs_what_memory_holds_and_queues_the_rest_where_a_batch_is_refused():
    """16,000-token prompts: one H100 holds some dozen 8B sequences, not 256. A batch of 256 is refused; a closed loop of
    256 clients runs what the KV cache holds, and its TTFT carries the others' wait (admission, not refusal)."""
    from planner.engine.estimate import evaluate_batches

    chip, model = h100_sxm(), llama_3_1_8b()
    static = estimate(model, Deployment(chip=chip), Workload(prompt_tokens=16000, output_tokens=256, concurrency=256))
    held = static.memory.max_concurrency
    assert not static.feasible and 1 <= held < 256
    looped = Workload(prompt_tokens=16000, output_tokens=256, concurrency=256, closed_loop=True)
    results = evaluate_batches(model, Deployment(chip=chip), looped, [256, held, 8])
    assert list(results.grid.batch) == [held, held, 8]  # what it holds; a batch within it stays as given
    crowded, at_capacity = (estimate(model, Deployment(chip=chip), looped, batch=b) for b in (256, held))
    assert crowded.feasible and crowded.batch == held and crowded.tpot_s == pytest.approx(at_capacity.tpot_s)
    assert crowded.ttft_s == pytest.approx(at_capacity.ttft_s)  # the same loop, read at the batch it runs
    lifetime = crowded.ttft_s - crowded.queue_wait_s + 255 * crowded.tpot_s
    assert crowded.queue_wait_s >= (256 - held) / held * lifetime * 0.95  # Little's law: the rest wait their turns
    assert any(f"runs {held} of the 256 clients' requests at once" in w for w in crowded.warnings)


def test_one_token_answers_keep_the_prefill_saturated_and_their_loop_obeys_littles_law():
    """Requests that end at their first token keep the prefill busy: each of C clients waits for all the others, so its
    time in the system is C / X (Little's law), which the M/D/1 wait at the seen load, half of it, fell short of. A
    one-token answer has no time per output token, so a TPOT target cannot fail it."""
    for clients in (8, 64, 512):
        looped = Workload(prompt_tokens=1000, output_tokens=1, concurrency=clients, closed_loop=True, tpot_slo_s=0.001)
        e = estimate(llama_3_1_8b(), Deployment(chip=h100_sxm()), looped)
        assert e.feasible, e.reasons
        assert e.output_tokens_per_s_total * e.ttft_s == pytest.approx(clients, rel=0.01)
    largest = estimate(llama_3_1_8b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=1000, output_tokens=1, tpot_slo_s=0.001),
                       batch="max")  # fmt: skip
    assert largest.feasible and largest.batch == largest.memory.max_concurrency  # what memory holds, no TPOT to bound it
    two_tokens = Workload(prompt_tokens=1000, output_tokens=2, concurrency=8, tpot_slo_s=0.001)
    two = estimate(llama_3_1_8b(), Deployment(chip=h100_sxm()), two_tokens)
    assert two.reasons and two.reasons[0].startswith("TPOT")


def test_the_kv_refusal_offers_a_closed_loop_only_where_one_would_queue():
    model, chip = llama_3_1_8b(), h100_sxm()
    batch = estimate(model, Deployment(chip=chip), Workload(prompt_tokens=16000, output_tokens=256, concurrency=256))
    rated_load = Workload(prompt_tokens=16000, output_tokens=256, concurrency=256, request_rate_per_s=0.1)
    rated = estimate(model, Deployment(chip=chip), rated_load)
    assert "closed loop (workload closed_loop)" in batch.reasons[0]
    assert rated.reasons[0].startswith("batch 256 does not fit") and "closed loop" not in rated.reasons[0]
    # A closed loop nothing fits: no slot to queue for, and the loop is already one.
    from planner.engine import reasons
    from planner.engine.estimate import evaluate_batches

    looped = Workload(prompt_tokens=16000, output_tokens=256, concurrency=256, closed_loop=True)
    facts = evaluate_batches(model, Deployment(chip=chip), looped, [256]).reason_facts(0)
    for held, loop in ((0, True), (0, False), (5, True)):
        said = reasons.reason_text(reasons.KV_DOESNT_FIT, dataclasses.replace(facts, batch=256, max_concurrency=held, closed_loop=loop))
        assert said.startswith("batch 256 does not fit") and "closed loop" not in said


def test_a_request_rate_is_charged_for_the_tokens_it_asks_for_idle_capacity_included():
    """One H100 serving 1,000 / 300-token requests at 0.1 or 1 per second produces 30 or 300 tokens/s whatever batch it
    could run: the hour is paid for all the same, so a tenth of the traffic costs ten times more per token, and every
    batch that serves the rate costs the same. Without a rate the configuration is priced running full."""
    from .factories import h100_reserved

    def at(rate, batch):
        workload = Workload(prompt_tokens=1000, output_tokens=300, request_rate_per_s=rate)
        return estimate(llama_3_1_8b(), Deployment(chip=h100_sxm()), workload, batch=batch, offering=h100_reserved())

    slow, busy = at(0.1, 64), at(1.0, 64)
    assert slow.served_output_tokens_per_s == pytest.approx(30.0) and busy.served_output_tokens_per_s == pytest.approx(300.0)
    assert slow.output_tokens_per_s_total == busy.output_tokens_per_s_total > 1000  # the capacity does not depend on the rate
    assert slow.cost.usd_per_million_output_tokens == pytest.approx(10 * busy.cost.usd_per_million_output_tokens, rel=1e-6)
    assert at(0.1, 8).cost.usd_per_million_output_tokens == pytest.approx(slow.cost.usd_per_million_output_tokens, rel=1e-6)
    # Mostly idle, the chip draws little more than its idle power, and each token's share of it is large.
    assert slow.power_w_per_chip < busy.power_w_per_chip < at(None, 64).power_w_per_chip
    full = at(None, 64)
    assert full.served_output_tokens_per_s == full.output_tokens_per_s_total
    assert full.cost.usd_per_million_output_tokens < busy.cost.usd_per_million_output_tokens / 3


def test_arrivals_wait_for_a_free_slot_as_the_batch_fills():
    """Poisson arrivals into a batch of slots: with room to spare no one waits; a batch just above what Little's law
    needs makes arrivals wait for a slot (Erlang C), and the wait shrinks as slots are added."""
    def at(batch):
        workload = Workload(prompt_tokens=1000, output_tokens=300, request_rate_per_s=10.0)
        return estimate(llama_3_1_8b(), Deployment(chip=h100_sxm()), workload, batch=batch)

    # 10 requests/s each holding a slot about 3.4 s keep some 34 of 40 slots busy (Little's law).
    tight, roomier, roomy = at(40), at(48), at(128)
    assert tight.feasible and roomier.feasible and roomy.feasible
    prefill_wait = roomy.queue_wait_s  # 128 slots: the prefill's own queue alone
    assert tight.queue_wait_s > prefill_wait + 0.05 > roomier.queue_wait_s > prefill_wait + 0.005
    assert tight.ttft_s - roomy.ttft_s == pytest.approx(tight.queue_wait_s - prefill_wait, rel=0.05)


def test_each_replica_queues_its_own_arrivals_for_its_own_slots():
    """Two replicas of 40 slots at 20 requests/s wait as one replica of 40 at 10/s does (a load balancer splits the
    arrivals; no request takes a slot of the other replica), not as one pool of 80, which would hardly wait."""
    def at(chips, rate, batch):
        workload = Workload(prompt_tokens=1000, output_tokens=300, request_rate_per_s=rate)
        return estimate(llama_3_1_8b(), Deployment(chip=h100_sxm(), chip_count=chips, tensor_parallel=1), workload, batch=batch)

    one, two = at(1, 10.0, 40), at(2, 20.0, 80)
    assert two.replicas == 2 and one.queue_wait_s > 0.05
    assert two.queue_wait_s == pytest.approx(one.queue_wait_s, rel=1e-6)


def test_a_batch_too_slow_for_the_rates_tokens_is_short_of_slots():
    """Ten-token answers at 11.3 requests/s ask 113 tokens/s of a single slot that produces about 112: Little's law on
    each stay alone would let it through, the tokens it must produce do not."""
    workload = Workload(prompt_tokens=1000, output_tokens=10, request_rate_per_s=11.3)
    e = estimate(llama_3_1_8b(), Deployment(chip=h100_sxm()), workload, batch=1)
    assert e.output_tokens_per_s_total < 11.3 * 10
    assert not e.feasible and "batch 1 is too small" in e.reasons[0]


def test_a_saturated_prefill_pool_waits_what_littles_law_leaves():
    """64 clients on one prefill server of 0.5 s, each streaming 1 s after it: the pool is the bottleneck, X = 2/s, so a
    client's turn lasts C / X = 32 s, of which 1.5 s is its own prefill and stream and the rest its wait (the M/D/c wait
    at the seen load alone gave 15.75 s)."""
    loop = pool_closed_loop(clients=64.0, service_s=np.array([0.5]), servers=np.array([1.0]), streamed_s=1.0)
    assert loop.rate_per_s[0] == pytest.approx(2.0, rel=1e-6)
    assert loop.wait_s[0] == pytest.approx(64 / 2.0 - 1.5, rel=1e-6) and loop.steady_wait_s[0] < loop.wait_s[0]


def test_a_wave_on_an_attention_dp_pool_takes_whole_forwards():
    """Eight prompts at once on four servers whose forward (1 s) carries a prompt on every attention replica, a prompt's
    own forward 0.4 s: two rounds, every forward whole, s (R + 1) / 2 = 1.5 s before the first token on average."""
    loop = pool_closed_loop(clients=8.0, service_s=np.array([1.0]), servers=np.array([4.0]), streamed_s=100.0, own_s=np.array([0.4]))
    assert loop.own_s[0] + loop.wave_wait_s[0] == pytest.approx(1.5, rel=1e-9)


def test_a_closed_loop_in_step_keeps_littles_law_in_its_throughput():
    """Whatever share of the rounds arrives in a wave, the admitted clients are rate x time in system: the rate is
    the one the mean TTFT allows, not the steady queue's."""
    for share in (0.0, 0.5, 1.0):
        e = _closed(64, in_step_share=share)
        rate = e.output_tokens_per_s_total / 256
        assert rate * (e.ttft_s + 255 * e.tpot_s) == pytest.approx(64, rel=1e-6)


def test_a_wave_of_prompts_longer_than_the_budget_completes_one_prompt_at_a_time():
    """Four prompts of 8,192 tokens in steps of 2,048: each is done only at its last chunk (steps 4, 8, 12, 16), on
    average 5/8 of the wave's prefill, not 17/32 as sixteen chunks of whole prompts would give."""
    scheduler = Scheduler(engine="small-budget", kv_memory_fraction=0.9, prefill_token_budget=2048)
    chip = dataclasses.replace(h100_sxm(), scheduler=scheduler)
    work = Workload(prompt_tokens=8192, output_tokens=64, concurrency=4, closed_loop=True, in_step_share=1.0)
    waved = estimate(llama_3_1_8b(), Deployment(chip=chip), work)
    alone = estimate(llama_3_1_8b(), Deployment(chip=chip), dataclasses.replace(work, concurrency=None, closed_loop=False), batch=4)
    wave = 4 * alone.prefill_batched_s_per_prompt * 5 / 8 - alone.prefill.time_s
    assert waved.queue_wait_s == pytest.approx(wave, rel=1e-6)


def test_a_layout_refusal_names_every_degree_of_the_replica():
    from planner.engine import reasons
    from planner.engine.estimate import evaluate_batches

    facts = evaluate_batches(llama_3_1_8b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=100, output_tokens=10), [1]).reason_facts(0)
    split = reasons.reason_text(reasons.INVALID_LAYOUT, dataclasses.replace(facts, chip_count=2, attention_data_parallel=4))
    assert "tensor_parallel=1 x pipeline_parallel=1 x attention_data_parallel=4" in split and "tp*pp*attention_dp" in split
    assert "attention_data_parallel" not in reasons.reason_text(reasons.INVALID_LAYOUT, dataclasses.replace(facts, chip_count=3))
