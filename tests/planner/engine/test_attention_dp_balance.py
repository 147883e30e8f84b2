"""An engine that balances its attention-DP ranks (TensorRT-LLM's attention_dp_config.enable_balance) holds a new
prompt, while every rank is decoding, until each rank has one or its timeout of steps has passed."""

from __future__ import annotations

import dataclasses

import pytest

from planner.engine import Deployment, Workload, estimate
from planner.engine.serving import balance_hold_s
from planner.engine.specs import Scheduler

from .test_attention_data_parallel import DEEPSEEK_V3, H200


def _hold(rate, ranks=8, per_rank=8.0, timeout=60, step=0.02, busy=0.0):
    return float(balance_hold_s(rate_per_replica=rate, step_s=step, timeout_steps=timeout, ranks=ranks, sequences_per_rank=per_rank,
                                busy=busy))  # fmt: skip


def test_a_prompt_that_rarely_meets_others_waits_out_the_rest_of_the_engines_timeout_cycle():
    # The engine counts every step on which not every rank has a prompt, prompts or none, and releases at 60: a lone
    # prompt arrives at a uniform point of that cycle of 1.2 s (60 steps of 20 ms) and waits out the rest, 0.6 s.
    assert _hold(1 / 60) == pytest.approx(0.6, rel=0.01)


def test_prompts_that_arrive_fast_cover_every_rank_long_before_the_timeout():
    # 8 ranks: 8 x H(8) = 21.7 prompts cover them all (the coupon collector's mean); at 1,000 a second a cycle lasts
    # 21.7 ms and a prompt waits half of it.
    covering = 8 * sum(1 / i for i in range(1, 9))
    assert _hold(1000.0) == pytest.approx(covering / 1000.0 / 2, rel=1e-9)
    assert _hold(1000.0) < 0.02 < _hold(30.0) < _hold(4.0) == _hold(0.5) == pytest.approx(0.6)


def test_an_open_loops_arrivals_routed_to_the_least_loaded_rank_cover_the_ranks_one_after_another():
    # Eight arrivals cover eight ranks when each goes to the rank with the fewest: at 1,000 a second, 8 ms a cycle.
    routed = float(balance_hold_s(rate_per_replica=1000.0, step_s=0.02, timeout_steps=60, ranks=8, sequences_per_rank=8.0, routed=True))
    assert routed == pytest.approx(8 / 1000.0 / 2, rel=1e-9) and routed < _hold(1000.0)


def test_no_hold_without_attention_dp_without_a_timeout_while_a_rank_may_run_no_decode_or_behind_a_busy_prefill():
    assert _hold(4.0, ranks=1) == 0.0
    assert _hold(4.0, timeout=0) == 0.0
    # One sequence a rank: the rank whose sequence has ended runs no decode, and the engine releases every prompt then.
    assert _hold(4.0, per_rank=1.0) == 0.0
    assert _hold(4.0, per_rank=1.5) == pytest.approx(_hold(4.0, per_rank=2.0) / 2)
    assert _hold(4.0, per_rank=2.0) == _hold(4.0, per_rank=64.0)
    # A prefill busy 90% of the time has prompts queued for every rank: a tenth of the hold.
    assert _hold(4.0, busy=0.9) == pytest.approx(_hold(4.0) / 10)


def _eight_h200s(balance: int, *, adp: int = 8, **deployment) -> Deployment:
    """DeepSeek-V3's layout on eight H200s (tp x attention DP = 8, fp8) under a TensorRT-LLM-like scheduler holding
    prompts `balance` steps."""
    scheduler = Scheduler(engine="TensorRT-LLM-like", kv_memory_fraction=0.9, kv_memory_of_free=True, attention_dp_balance_timeout_steps=balance)
    return Deployment(chip=dataclasses.replace(H200, scheduler=scheduler), chip_count=8, tensor_parallel=8 // adp, attention_data_parallel=adp,
                      weight_dtype="fp8", kv_dtype="fp8", **deployment)  # fmt: skip


def _deepseek(balance: int, *, clients: int, adp: int = 8, disaggregated: bool = False):
    work = Workload(prompt_tokens=1024, output_tokens=1024, concurrency=clients, closed_loop=True, in_step_share=0.1)
    return estimate(DEEPSEEK_V3, _eight_h200s(balance, adp=adp), work, batch=clients, disaggregated=disaggregated)


def test_a_closed_loop_of_deepseek_under_attention_dp_waits_for_the_balance_from_two_sequences_a_rank():
    """128 clients on eight H200s as attention DP 8 (16 sequences a rank): the loop's prompts cover the eight ranks more
    slowly than the 60-step timeout, so each staggered prompt (nine rounds in ten) waits out half a timeout cycle, less
    the share of the time the prefill is busy; at 8 clients (one a rank) nothing is held."""
    held, free = _deepseek(60, clients=128), _deepseek(0, clients=128)
    half_cycle = 0.5 * 60 * held.decode.time_s
    assert 0.9 * 0.5 * half_cycle < held.ttft_s - free.ttft_s < 0.9 * half_cycle
    assert held.tpot_s == free.tpot_s
    assert _deepseek(60, clients=8).ttft_s == pytest.approx(_deepseek(0, clients=8).ttft_s, rel=1e-12)


def test_a_request_rate_holds_a_prompt_only_where_the_ranks_it_keeps_busy_are_decoding():
    """Under a request rate the sequences in flight are what the rate keeps there (Little's law), not the slots: at a
    request every twenty seconds no rank is decoding when a prompt arrives, and nothing is held; at twenty a second
    (over a hundred in flight, a dozen a rank) a prompt is held."""

    def at(rate, balance):
        return estimate(DEEPSEEK_V3, _eight_h200s(balance), Workload(prompt_tokens=1024, output_tokens=1024, request_rate_per_s=rate), batch=256)

    assert at(0.05, 60).ttft_s == pytest.approx(at(0.05, 0).ttft_s, rel=1e-9)
    assert at(20.0, 60).ttft_s > at(20.0, 0).ttft_s + 0.05


def test_a_speculative_engine_counts_its_timeout_in_steps_not_tokens():
    """MTP commits several tokens a verify cycle: the 60 steps of the timeout are 60 cycles, each longer than a token's
    time, so the hold is longer than 60 tokens' time would make it."""
    from planner.engine import DraftHeads

    def closed(balance):
        deployment = _eight_h200s(balance, decoding=DraftHeads(head_kind="mtp", draft_tokens=3, acceptance_rate=0.8))
        work = Workload(prompt_tokens=1024, output_tokens=1024, concurrency=128, closed_loop=True, in_step_share=0.0)
        return estimate(DEEPSEEK_V3, deployment, work, batch=128)

    held, free = closed(60), closed(0)
    assert held.tokens_per_step > 2.0
    assert held.ttft_s - free.ttft_s > 1.5 * 0.5 * 60 * held.tpot_s


@pytest.mark.django_db
def test_the_catalog_records_tensorrt_llms_hold_as_its_deployments_set_it_and_a_server_setting_turns_it_off():
    from hwcatalog.services import catalog_load
    from planner import catalog_specs
    from planner.engine.simulation import SchedulerOptions

    catalog_load()
    schedulers = catalog_specs.engine_schedulers()
    trt = schedulers["TensorRT-LLM"]
    assert trt.attention_dp_balance_timeout_steps == 60
    others = {s.engine: s.attention_dp_balance_timeout_steps for s in schedulers.values() if s.engine != "TensorRT-LLM"}
    assert others and set(others.values()) == {0}
    chip = dataclasses.replace(H200, scheduler=trt)
    assert SchedulerOptions(attention_dp_balance_steps=0).configured(chip).scheduler.attention_dp_balance_timeout_steps == 0
    assert SchedulerOptions().configured(chip).scheduler.attention_dp_balance_timeout_steps == 60
    with pytest.raises(ValueError, match="attention_dp_balance_steps"):
        SchedulerOptions(attention_dp_balance_steps=-1)
