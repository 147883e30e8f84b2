"""An owned configuration is priced as a whole system, and every configuration pays for whole units.

The figures are worked by hand from the formula in docs/planner_math.md#cost-power-and-energy."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engine import Deployment, OfferingSpec, Workload, estimate
from planner.engine.cost import (
    HOURS_PER_MONTH,
    billed_chips,
    cheapest_offering,
    cost_split_usd_per_chip_hour,
    offering_table,
    offering_usd_per_chip_hour,
)
from planner.engine.units import HOURS_PER_YEAR

from .factories import h100_sxm, llama_2_7b

# An 8-GPU server: $25,000 a GPU, a $40,000 host, $20,000 of networking, 4 years; 3 kW of host power;
# $150 per kW-month of colocation; PUE 1.3 at $0.10/kWh; in service 80% of the hours.
SERVER = OfferingSpec(
    slug="hgx-server", pricing_model="purchase", purchase_usd_per_chip=25_000.0, amortisation_years=4.0, chips_per_unit=8,
    system_parts_usd=(("host", 40_000.0), ("network", 20_000.0)), host_watts_per_unit=3_000.0, datacentre_usd_per_kw_month=150.0,
    pue=1.3, power_usd_per_kwh=0.10, utilisation=0.8,
)  # fmt: skip
SERVED_HOURS = 4 * HOURS_PER_YEAR * 0.8


def test_an_owned_server_costs_its_accelerators_host_network_datacentre_and_power_per_chip_hour_served():
    it_kw = (8 * 0.7 + 3.0)  # eight 700 W GPUs and the host
    expected = {
        "accelerators": 8 * 25_000 / SERVED_HOURS / 8,
        "host": 40_000 / SERVED_HOURS / 8,
        "network": 20_000 / SERVED_HOURS / 8,
        "datacentre": it_kw * 150 / HOURS_PER_MONTH / 0.8 / 8,
        "host_power": 3.0 * 1.3 * 0.10 / 0.8 / 8,
        "accelerator_power": 0.7 * 1.3 * 0.10 / 0.8 * 0.5,  # at half of TDP
    }
    split = cost_split_usd_per_chip_hour(SERVER, 700, 0.5)
    assert split == pytest.approx(expected)
    assert offering_usd_per_chip_hour(SERVER, 700, 0.5) == pytest.approx(sum(expected.values()))


def test_the_host_and_network_raise_an_owned_chip_hour_above_its_accelerator_alone():
    alone = OfferingSpec(slug="gpu-alone", pricing_model="purchase", purchase_usd_per_chip=25_000.0, amortisation_years=4.0)
    assert offering_usd_per_chip_hour(SERVER, 700) > 1.5 * offering_usd_per_chip_hour(alone, 700)


def test_a_complete_system_part_prices_the_accelerators_with_their_host():
    mac = OfferingSpec(slug="mac", pricing_model="purchase", system_parts_usd=(("system", 4_000.0),), amortisation_years=4.0,
                       power_usd_per_kwh=0.12)  # fmt: skip
    assert cost_split_usd_per_chip_hour(mac, 300, 1.0)["system"] == pytest.approx(4_000 / (4 * HOURS_PER_YEAR))


def test_a_rental_costs_its_rate_and_says_so_in_its_split():
    rent = OfferingSpec(slug="rent", pricing_model="on_demand", usd_per_chip_hour=2.5, chips_per_unit=8)
    assert cost_split_usd_per_chip_hour(rent, 700, 0.4) == {"rent": 2.5}


def test_a_configuration_pays_for_whole_units():
    assert billed_chips(np.array([1, 4, 8, 9, 72]), 8).tolist() == [8, 8, 8, 16, 72]
    assert billed_chips(3, 1) == 3


def test_the_cheapest_offering_is_chosen_for_the_whole_configuration_not_per_chip():
    # Four chips: an 8-GPU instance at $2/chip-h costs $16/h; four 1-GPU instances at $3 cost $12/h.
    chip = h100_sxm()
    offerings = {chip.slug: (
        OfferingSpec(slug="eight-pack", pricing_model="on_demand", usd_per_chip_hour=2.0, chips_per_unit=8),
        OfferingSpec(slug="single", pricing_model="on_demand", usd_per_chip_hour=3.0),
    )}  # fmt: skip
    table = offering_table([chip], offerings)
    priced = cheapest_offering(table, np.array([0, 0]), np.array([1.0, 1.0]), np.array([4, 8]))
    assert priced.column.tolist() == [1, 0]  # four chips rent singles; eight take the 8-pack
    assert priced.billed_chips.tolist() == [4, 8]
    assert priced.usd_per_chip_hour.tolist() == [3.0, 2.0]


def test_an_estimate_on_part_of_a_server_pays_for_the_whole_server_and_shows_its_hour_and_month():
    one_gpu = estimate(llama_2_7b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=512, output_tokens=128), batch=8, offering=SERVER)
    cost = one_gpu.cost
    assert (cost.ownership, cost.chips_per_unit, cost.billed_chips) == ("own", 8, 8)
    assert cost.usd_per_hour == pytest.approx(8 * cost.usd_per_chip_hour)
    assert cost.usd_per_month == pytest.approx(cost.usd_per_hour * 730.5)
    assert cost.utilisation == 0.8
    per_token_at_one_chip = cost.usd_per_chip_hour / (one_gpu.output_tokens_per_s_total * 3600) * 1e6
    assert cost.usd_per_million_output_tokens == pytest.approx(8 * per_token_at_one_chip)
    assert {"accelerators", "host", "network", "datacentre", "host_power", "accelerator_power"} == set(cost.cost_split)


def test_an_offering_spec_refuses_a_purchase_with_no_price_and_a_utilisation_out_of_range():
    with pytest.raises(ValueError, match="purchase price"):
        OfferingSpec(slug="x", pricing_model="purchase", amortisation_years=4.0)
    with pytest.raises(ValueError, match="utilisation"):
        OfferingSpec(slug="x", pricing_model="purchase", purchase_usd_per_chip=1.0, amortisation_years=4.0, utilisation=1.5)
    with pytest.raises(ValueError, match="chips_per_unit"):
        OfferingSpec(slug="x", pricing_model="on_demand", usd_per_chip_hour=1.0, chips_per_unit=0)
