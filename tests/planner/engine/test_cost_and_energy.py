"""Prices per chip-hour, $ per million tokens, and energy per token."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engine import Deployment, Workload, estimate
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
