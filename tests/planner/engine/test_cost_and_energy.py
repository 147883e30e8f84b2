"""Prices per chip-hour, $ per million tokens, and energy per token."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engine import Deployment, Workload, estimate
from planner.engine.estimate import evaluate_deployment
from planner.engine.cost import IDLE_POWER_FRACTION, offering_usd_per_chip_hour, usd_per_million_tokens

from .factories import h100_purchase, h100_reserved, h100_sxm, llama_2_7b


def test_rented_chip_costs_its_hourly_price_whatever_the_load():
    assert offering_usd_per_chip_hour(h100_reserved(), 700, 0.3) == 4.916


def test_owned_chip_costs_amortisation_plus_power_times_pue():
    # 30,000 / (4 x 8766 h) + 0.7 kW x 1.3 x $0.10 at full power
    assert offering_usd_per_chip_hour(h100_purchase(), 700, 1.0) == pytest.approx(30000 / (4 * 8766) + 0.7 * 1.3 * 0.10)


def test_dollars_per_million_tokens_follow_chip_hours_over_tokens():
    # 2 chips x $4 / (1,000 tok/s x 3600) x 1e6 = $2.22
    assert usd_per_million_tokens(np.array([2.0]), np.array([4.0]), np.array([1000.0]))[0] == pytest.approx(2.2222, abs=1e-4)


def test_estimate_prices_output_and_input_tokens_with_an_offering():
    e = estimate(llama_2_7b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=1024, output_tokens=256), batch=32, offering=h100_reserved())
    expected = 4.916 / (e.output_tokens_per_s_total * 3600) * 1e6
    assert e.cost.usd_per_million_output_tokens == pytest.approx(expected)
    assert 0 < e.cost.usd_per_million_input_tokens < e.cost.usd_per_million_output_tokens


def test_energy_per_token_sits_between_idle_power_and_the_tdp_upper_bound():
    e = estimate(llama_2_7b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=128, output_tokens=128), batch=16)
    per_token_at_tdp = 700 / e.output_tokens_per_s_total
    assert e.energy_per_output_token_upper_j == pytest.approx(per_token_at_tdp)
    assert IDLE_POWER_FRACTION * per_token_at_tdp < e.energy_per_output_token_j < per_token_at_tdp


def test_mbu_of_batch_one_decode_matches_bytes_over_time():
    e = estimate(llama_2_7b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=16, output_tokens=256))
    assert e.mbu == pytest.approx(e.decode.bytes_per_chip / e.decode_token_time_s / 3.35e12)
    assert e.mbu < 0.75 and e.mfu < 0.01


@pytest.mark.parametrize(("tensor_parallel", "rate"), [(1, None), (2, None), (1, 8.0), (2, 20.0)])
def test_a_disaggregated_prefill_pool_draws_at_its_own_operating_point_for_the_share_of_the_time_it_prefills(tensor_parallel, rate):
    """The decode chips step all the time, memory-bound (without a rate; under one, for the share of the time a sequence
    is in flight); the prefill pool runs compute-bound prompts for the share of the time the requests they serve ask
    (requests/s x one prefill's time over its replicas), idle the rest. The reported draw per chip is the chip-weighted
    mean of the two."""
    chip, work = h100_sxm(), Workload(prompt_tokens=2048, output_tokens=128, request_rate_per_s=rate)
    deployment = Deployment(chip=chip, chip_count=tensor_parallel, tensor_parallel=tensor_parallel)
    evaluation = evaluate_deployment(llama_2_7b(), deployment, work, batch=64, disaggregated=True)
    split, arrays = evaluation.estimate(), evaluation.results
    pool = split.total_chips - split.chip_count
    assert pool >= tensor_parallel and pool % tensor_parallel == 0
    p = split.prefill
    prefill_utilisation = max(p.flops_per_chip / (p.time_s * 989.4e12), p.bytes_per_chip / (p.time_s * 3.35e12))
    requests_per_s = rate if rate else split.output_tokens_per_s_total / 128
    busy = requests_per_s * p.time_s / (pool / tensor_parallel)
    assert 0.3 < prefill_utilisation < 1.0 and 0.0 < busy < 1.0
    if rate:  # the pool's utilisation, as the serving model queues on it
        assert busy == pytest.approx(float(arrays.prefill_utilisation[0]), rel=1e-6)
    pool_fraction = IDLE_POWER_FRACTION + (1 - IDLE_POWER_FRACTION) * busy * prefill_utilisation
    decode_busy = -np.expm1(-float(arrays.concurrency_needed[0])) if rate else 1.0  # one replica: its occupancy is not zero
    decode_fraction = IDLE_POWER_FRACTION + (1 - IDLE_POWER_FRACTION) * decode_busy * max(split.mfu, split.mbu)
    expected = 700 * (split.chip_count * decode_fraction + pool * pool_fraction) / split.total_chips
    assert split.power_w_per_chip == pytest.approx(expected, rel=1e-6)
    served = split.served_output_tokens_per_s
    assert split.energy_per_output_token_j == pytest.approx(split.total_chips * expected / served, rel=1e-6)


def test_without_a_rate_the_prefill_pool_keeps_the_decode_batch_fed():
    """At its full batch the decode replica finishes batch / (output tokens x TPOT) requests a second; the pool has the
    replicas to prefill them: for 2,048-token prompts and 16-token answers at a batch of 48 on one H100, about 115
    requests a second and 5.2 replicas' work, so six prefill chips (one before, at five times its capacity)."""
    work = Workload(prompt_tokens=2048, output_tokens=16)
    split = estimate(llama_2_7b(), Deployment(chip=h100_sxm()), work, batch=48, disaggregated=True)
    work_in_replicas = split.output_tokens_per_s_total / 16 * split.prefill.time_s
    pool_replicas = split.total_chips - split.chip_count
    assert work_in_replicas > 5.0
    assert work_in_replicas < pool_replicas <= work_in_replicas + 1.0
