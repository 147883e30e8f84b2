"""Prices, power and energy.

Power at the operating point: P = TDP * (idle + (1 - idle) * utilisation), with
utilisation = max(MFU, MBU) of the decode phase and idle = 0.3. This is a simple
linear model of our own: a busy accelerator never drops to its true idle draw
(the HBM, clocks and host keep running), and it reaches TDP only when a unit is
saturated. TDP itself is an upper bound, reported alongside.

$ per 1M output tokens = chips * $/chip-h / (output tokens/s * 3600) * 1e6
(docs/planner_math.md#cost-power-and-energy). Owned hardware: purchase / (years * 8766 h) + power (kW) *
PUE * $/kWh per chip-hour.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .specs import ChipSpec, OfferingSpec
from .units import HOURS_PER_YEAR

IDLE_POWER_FRACTION = 0.3
DEFAULT_PUE = 1.0  # purchase offerings without a PUE: the chip's own draw only


def power_fraction(mfu: np.ndarray, mbu: np.ndarray) -> np.ndarray:
    utilisation = np.clip(np.maximum(mfu, mbu), 0.0, 1.0)
    return IDLE_POWER_FRACTION + (1.0 - IDLE_POWER_FRACTION) * utilisation


def offering_fixed_and_power_usd_per_hour(offering: OfferingSpec, tdp_watts: float | None) -> tuple[float, float]:
    """(fixed $/chip-h, extra $/chip-h at full TDP): cost = fixed + extra * power fraction."""
    if offering.usd_per_chip_hour is not None:
        return float(offering.usd_per_chip_hour), 0.0  # rent includes power
    fixed = offering.purchase_usd_per_chip / (offering.amortisation_years * HOURS_PER_YEAR)
    if not (tdp_watts and offering.power_usd_per_kwh):
        return fixed, 0.0
    pue = offering.pue or DEFAULT_PUE
    return fixed, tdp_watts / 1000.0 * pue * offering.power_usd_per_kwh


def offering_usd_per_chip_hour(offering: OfferingSpec, tdp_watts: float | None, power_fraction_value: float = 1.0) -> float:
    fixed, power = offering_fixed_and_power_usd_per_hour(offering, tdp_watts)
    return fixed + power * power_fraction_value


@dataclass(frozen=True, kw_only=True)
class OfferingTable:
    """[n_chips, max offerings] arrays; +inf marks an empty slot."""

    fixed_usd_per_hour: np.ndarray
    power_usd_per_hour: np.ndarray
    slugs: tuple[tuple[str, ...], ...]


def offering_table(
    chips: Sequence[ChipSpec],
    offerings: Mapping[str, Sequence[OfferingSpec]],
    pricing_models: Sequence[str] | None = None,
) -> OfferingTable:
    """Offerings per chip slug, filtered by pricing model (None: all)."""
    chosen = [
        [o for o in offerings.get(chip.slug, ()) if pricing_models is None or o.pricing_model in pricing_models] for chip in chips
    ]
    width = max([len(c) for c in chosen] + [1])
    fixed = np.full((len(chips), width), np.inf)
    power = np.zeros((len(chips), width))
    for i, (chip, row) in enumerate(zip(chips, chosen)):
        for j, offering in enumerate(row):
            fixed[i, j], power[i, j] = offering_fixed_and_power_usd_per_hour(offering, chip.tdp_watts)
    return OfferingTable(fixed_usd_per_hour=fixed, power_usd_per_hour=power, slugs=tuple(tuple(o.slug for o in row) for row in chosen))


def cheapest_offering(table: OfferingTable, chip_index: np.ndarray, fraction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """($/chip-h of the cheapest offering, its column) per candidate; NaN, -1 if none."""
    hourly = table.fixed_usd_per_hour[chip_index] + table.power_usd_per_hour[chip_index] * np.nan_to_num(fraction, nan=1.0)[:, None]
    column = np.argmin(hourly, axis=1)
    best = hourly[np.arange(len(chip_index)), column]
    found = np.isfinite(best)
    return np.where(found, best, np.nan), np.where(found, column, -1)


def usd_per_million_tokens(chips: np.ndarray, usd_per_chip_hour: np.ndarray, tokens_per_s: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return chips * usd_per_chip_hour / (tokens_per_s * 3600.0) * 1e6


def usd_per_million_input_tokens(
    chips_per_replica: np.ndarray, usd_per_chip_hour: np.ndarray, prefill_s_per_prompt: np.ndarray, prompt_tokens: int
) -> np.ndarray:
    """The chip time one prompt's (batched) prefill takes, charged to its tokens."""
    return chips_per_replica * usd_per_chip_hour * prefill_s_per_prompt / 3600.0 / max(prompt_tokens, 1) * 1e6


def energy_per_token_j(chips: np.ndarray, watts_per_chip: np.ndarray, tokens_per_s: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return chips * watts_per_chip / tokens_per_s
