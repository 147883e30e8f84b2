"""Speculative decoding in the simulator: rounds worked by hand on a toy cost, then the physics on real models
against the estimate's own speculative figures."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.engine import Deployment, DraftHeads, Speculative, Workload, estimate
from planner.engine.simulation import Arrivals, Lengths, SimulationWorkload, Trace, simulate, simulate_with_cost, step_cost_for
from planner.engine.simulation.multi_token import Speculation

from .factories import h100_sxm, llama_3_1_8b
from .test_simulation_scheduler import toy_cost

LITTLE_TOLERANCE = 0.02


def _speculating(cost, *, k: int, alpha: float):
    return dataclasses.replace(cost, multi_token=Speculation(label=f"toy(k={k})", draft_tokens=k, acceptance_rate=alpha,
                                                             draft_s_by_sequences=[0.0] * (cost.token_budget + 1)))  # fmt: skip


def _run(cost, arrival_s, prompt_tokens, output_tokens, **workload):
    trace = Trace(arrival_s=arrival_s, prompt_tokens=prompt_tokens, output_tokens=output_tokens)
    return simulate_with_cost(cost, SimulationWorkload(trace=trace, **workload))


def test_every_draft_accepted_a_round_emits_k_plus_one_tokens():
    # Toy steps of 1 s: the prefill step gives the first token, then 6 more at 3 a round take 2 rounds.
    result = _run(_speculating(toy_cost(), k=2, alpha=1.0), [0.0], [10], [7])
    assert result.ttft_s[0] == 1.0 and result.e2e_s[0] == 3.0
    assert result.tpot_s[0] == pytest.approx(2.0 / 6.0)


def test_every_draft_rejected_a_round_emits_one_token_as_plain_decoding_does():
    plain = _run(toy_cost(), [0.0, 0.5], [10, 30], [9, 5])
    rejected = _run(_speculating(toy_cost(), k=3, alpha=0.0), [0.0, 0.5], [10, 30], [9, 5])
    assert list(rejected.e2e_s) == list(plain.e2e_s)


def test_a_round_spends_k_plus_one_tokens_of_the_budget_per_sequence():
    # A budget of 8 holds two sequences verifying 4 positions each: a third waits for a slot.
    result = _run(_speculating(toy_cost(token_budget=8), k=3, alpha=1.0), [0.0, 0.0, 0.0], [2, 2, 2], [9, 9, 9])
    assert result.ttft_s[2] > result.ttft_s[1]


def test_the_whole_answer_is_reserved_at_admission_so_nothing_is_preempted():
    # 6 blocks of 4 tokens; each request needs ceil((4 + 12 + 2) / 4) = 5: the second waits for the first.
    result = _run(_speculating(toy_cost(block_tokens=4, kv_blocks=6), k=2, alpha=0.5), [0.0, 0.0], [4, 4], [12, 12])
    assert result.preemptions == 0
    assert result.ttft_s[1] > result.e2e_s[0] - 1e-9


def test_the_rounds_follow_the_acceptance_rate_on_average():
    spec = Speculation(label="t", draft_tokens=4, acceptance_rate=0.7, draft_s_by_sequences=[0.0])
    drawer = spec.drawer(200 * 1000, np.random.default_rng(1))
    rounds = np.array([drawer.rounds(1000) for _ in range(200)])
    assert drawer.rounds(0) == 0
    short = spec.drawer(0, np.random.default_rng(2))  # drawn ahead for no tokens: extended as it is used
    assert sum(short.rounds(500) for _ in range(20)) * spec.tokens_per_round == pytest.approx(20 * 500, rel=0.05)
    assert 1000 / rounds.mean() == pytest.approx(spec.tokens_per_round, rel=0.02)  # tau = (1 - 0.7^5) / 0.3 = 2.77
    assert spec.emitted_probabilities.sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "decoding, pays_off",
    [(Speculative(draft=llama_3_1_8b(), draft_tokens=4, acceptance_rate=0.8), False),
     (DraftHeads(head_kind="eagle", draft_tokens=3, acceptance_rate=0.7), True)],
    ids=["draft-model", "eagle-heads"],
)
def test_at_near_zero_load_tpot_is_the_estimates_speculative_token_time(decoding, pays_off):
    # The draft model is the target's own shape, a deliberately heavy draft: four of its steps cost more
    # than the tokens they save. The comparison with the estimate is the same cycle either way.
    model = llama_3_1_8b()
    deployment = Deployment(chip=h100_sxm(), decoding=decoding)
    light = SimulationWorkload(requests=30, arrivals=Arrivals.poisson(0.01), prompt=Lengths.fixed(1000), output=Lengths.fixed(400), seed=3)
    result = simulate(model, deployment, light)
    alone = estimate(model, deployment, Workload(prompt_tokens=1000, output_tokens=400), batch=1)
    # The estimate prices every round at the mean context; the simulation at each round's: within a few %.
    assert result.tpot.mean == pytest.approx(alone.tpot_s, rel=0.05)
    assert any(decoding.label in note for note in result.notes)
    plain = simulate(model, Deployment(chip=h100_sxm()), light)
    assert (result.tpot.p50 < plain.tpot.p50) == pays_off


def test_littles_law_holds_and_acceptance_spreads_tpot_across_requests():
    model = llama_3_1_8b()
    deployment = Deployment(chip=h100_sxm(), decoding=DraftHeads(head_kind="eagle", draft_tokens=3, acceptance_rate=0.6))
    busy = SimulationWorkload(requests=1500, arrivals=Arrivals.poisson(8.0), prompt=Lengths.lognormal(1000, 600), output=Lengths.fixed(200), seed=7)
    result = simulate(model, deployment, busy)
    assert result.completed == result.requests and result.preemptions == 0
    assert result.littles_law.relative_error < LITTLE_TOLERANCE
    plain = simulate(model, Deployment(chip=h100_sxm()), busy)
    # Equal answers: a plain decode's TPOT spreads only with the load; acceptance spreads the speculative one more.
    spread = lambda r: r.tpot.p99 / r.tpot.p50  # noqa: E731
    assert spread(result) > spread(plain)


def test_the_draft_models_weights_and_cache_take_their_share_of_the_kv_memory():
    model = llama_3_1_8b()
    light = Workload(prompt_tokens=1000, output_tokens=200)
    plain = step_cost_for(model, Deployment(chip=h100_sxm()))
    drafted = step_cost_for(model, Deployment(chip=h100_sxm(), decoding=Speculative(draft=llama_3_1_8b(), draft_tokens=4)), workload=light)
    assert drafted.kv_blocks < plain.kv_blocks / 2 + 1  # a second 8B model and its cache: less than half the blocks left
    with pytest.raises(ValueError, match="mean lengths"):
        step_cost_for(model, Deployment(chip=h100_sxm(), decoding=Speculative(draft=llama_3_1_8b(), draft_tokens=4)))


def test_speculative_decode_pools_receive_the_kv_and_speculate_on_it():
    from planner.engine.simulation import simulate_disaggregated

    model = llama_3_1_8b()
    heads = Deployment(chip=h100_sxm(), decoding=DraftHeads(head_kind="eagle", draft_tokens=3, acceptance_rate=0.7))
    busy = SimulationWorkload(requests=800, arrivals=Arrivals.poisson(6.0), prompt=Lengths.fixed(2000), output=Lengths.fixed(200), seed=2)
    apart = simulate_disaggregated(model, heads, busy, prefill_replicas=1)
    plain = simulate_disaggregated(model, Deployment(chip=h100_sxm()), busy, prefill_replicas=1)
    assert apart.completed == apart.requests and apart.preemptions == 0
    assert apart.littles_law.relative_error < LITTLE_TOLERANCE
    assert apart.tpot.p50 < plain.tpot.p50
