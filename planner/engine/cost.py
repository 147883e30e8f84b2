"""Prices, power and energy.

Power at the operating point: P = TDP * (idle + (1 - idle) * utilisation), with
utilisation = max(MFU, MBU) of the decode phase and idle = 0.3. This is a simple
linear model of our own: a busy accelerator never drops to its true idle draw
(the HBM, clocks and host keep running), and it reaches TDP only when a unit is
saturated. TDP itself is an upper bound, reported alongside.

$ per 1M output tokens = billed chips * $/chip-h / (output tokens/s * 3600) * 1e6
(docs/planner_math.md#cost-power-and-energy), where billed chips = whole units (an 8-GPU instance or
server, a TPU slice, an NVL72 rack) covering the configuration's chips.

Owned hardware is priced as a whole system: per chip-hour served,
  (capex / (years * 8766 h) + IT kW * datacentre $/kW-month / 730.5 h + (accelerator + host power) * PUE * $/kWh)
  / utilisation / chips per unit,
with capex = the accelerators + host + network + rack of one unit (each part with its source in the catalog).
The accelerators' power follows the operating point; the host's is drawn whenever the unit is on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .specs import ChipSpec, OfferingSpec
from .units import HOURS_PER_YEAR

IDLE_POWER_FRACTION = 0.3
DEFAULT_PUE = 1.0  # purchase offerings without a PUE: the IT load's own draw only
HOURS_PER_MONTH = HOURS_PER_YEAR / 12.0  # 730.5
RENT = "rent"
OWN = "own"


def power_fraction(mfu: np.ndarray, mbu: np.ndarray, busy: np.ndarray | float = 1.0) -> np.ndarray:
    """The mean draw as a share of TDP: idle, plus the operating point's utilisation for the share of the time `busy`
    that the chip steps at all (a request rate that leaves it without a sequence in flight the rest of the time)."""
    utilisation = np.clip(np.maximum(mfu, mbu), 0.0, 1.0)
    return IDLE_POWER_FRACTION + (1.0 - IDLE_POWER_FRACTION) * busy * utilisation


def ownership(offering: OfferingSpec) -> str:
    return OWN if offering.owned else RENT


def billed_chips(chips: np.ndarray | int, chips_per_unit: np.ndarray | int) -> np.ndarray:
    """The chips paid for: whole units covering the configuration's chips."""
    unit = np.maximum(np.asarray(chips_per_unit), 1)
    return np.ceil(np.asarray(chips) / unit) * unit


def owned_terms_usd_per_chip_hour(offering: OfferingSpec, tdp_watts: float | None) -> dict[str, float]:
    """An owned unit's cost per chip-hour served, term by term, with the accelerators at full TDP
    ("accelerator_power" scales with the operating point; every other term is fixed). Capex terms are
    named by the part's kind ("accelerators" for the chips bought alone)."""
    unit = offering.chips_per_unit
    served_hours_per_unit = (offering.amortisation_years or 0.0) * HOURS_PER_YEAR * (offering.utilisation or 1.0)
    terms: dict[str, float] = {}

    def add(name: str, usd_per_unit_hour: float) -> None:
        terms[name] = terms.get(name, 0.0) + usd_per_unit_hour / unit

    if offering.purchase_usd_per_chip:
        add("accelerators", unit * offering.purchase_usd_per_chip / served_hours_per_unit)
    for kind, usd in offering.system_parts_usd:
        add(kind, usd / served_hours_per_unit)
    utilisation = offering.utilisation or 1.0
    chip_kw = (tdp_watts or 0.0) / 1000.0
    host_kw = (offering.host_watts_per_unit or 0.0) / 1000.0
    if offering.datacentre_usd_per_kw_month:
        add("datacentre", (unit * chip_kw + host_kw) * offering.datacentre_usd_per_kw_month / HOURS_PER_MONTH / utilisation)
    if offering.power_usd_per_kwh:
        energy_usd_per_kwh = (offering.pue or DEFAULT_PUE) * offering.power_usd_per_kwh / utilisation
        add("host_power", host_kw * energy_usd_per_kwh)
        add("accelerator_power", unit * chip_kw * energy_usd_per_kwh)
    return {name: value for name, value in terms.items() if value}


def offering_fixed_and_power_usd_per_hour(offering: OfferingSpec, tdp_watts: float | None) -> tuple[float, float]:
    """(fixed $/chip-h, extra $/chip-h at full TDP): cost = fixed + extra * power fraction."""
    if not offering.owned:
        return float(offering.usd_per_chip_hour), 0.0  # rent includes host, network, power and the building
    terms = owned_terms_usd_per_chip_hour(offering, tdp_watts)
    power = terms.pop("accelerator_power", 0.0)
    return sum(terms.values()), power


def offering_usd_per_chip_hour(offering: OfferingSpec, tdp_watts: float | None, power_fraction_value: float = 1.0) -> float:
    fixed, power = offering_fixed_and_power_usd_per_hour(offering, tdp_watts)
    return fixed + power * power_fraction_value


def cost_split_usd_per_chip_hour(offering: OfferingSpec, tdp_watts: float | None, power_fraction_value: float = 1.0) -> dict[str, float]:
    """Where a chip-hour's price goes: {"rent": ...} for a rental; each capex part, the datacentre,
    the host's and the accelerators' power (at this operating point) for an owned system."""
    if not offering.owned:
        return {"rent": float(offering.usd_per_chip_hour)}
    terms = owned_terms_usd_per_chip_hour(offering, tdp_watts)
    if "accelerator_power" in terms:
        terms["accelerator_power"] *= power_fraction_value
    return terms


@dataclass(frozen=True, kw_only=True)
class OfferingTable:
    """[n_chips, max offerings] arrays; +inf marks an empty slot."""

    fixed_usd_per_hour: np.ndarray
    power_usd_per_hour: np.ndarray
    chips_per_unit: np.ndarray
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
    units = np.ones((len(chips), width))
    for i, (chip, row) in enumerate(zip(chips, chosen)):
        for j, offering in enumerate(row):
            fixed[i, j], power[i, j] = offering_fixed_and_power_usd_per_hour(offering, chip.tdp_watts)
            units[i, j] = offering.chips_per_unit
    return OfferingTable(
        fixed_usd_per_hour=fixed, power_usd_per_hour=power, chips_per_unit=units, slugs=tuple(tuple(o.slug for o in row) for row in chosen)
    )


@dataclass(frozen=True, kw_only=True)
class Priced:
    """Per candidate: the cheapest offering's column (-1: none), its $/chip-hour, the chips paid for."""

    usd_per_chip_hour: np.ndarray
    column: np.ndarray
    billed_chips: np.ndarray


def cheapest_offering(table: OfferingTable, chip_index: np.ndarray, fraction: np.ndarray, chips: np.ndarray) -> Priced:
    """The offering with the lowest cost for the whole configuration: its $/chip-hour times the chips of
    the whole units it sells (four chips on an 8-GPU server pay for eight). NaN, -1, NaN if none."""
    hourly = table.fixed_usd_per_hour[chip_index] + table.power_usd_per_hour[chip_index] * np.nan_to_num(fraction, nan=1.0)[:, None]
    billed = billed_chips(np.asarray(chips, dtype=float)[:, None], table.chips_per_unit[chip_index])
    column = np.argmin(hourly * billed, axis=1)
    rows = np.arange(len(chip_index))
    best = hourly[rows, column]
    found = np.isfinite(best)
    return Priced(
        usd_per_chip_hour=np.where(found, best, np.nan),
        column=np.where(found, column, -1),
        billed_chips=np.where(found, billed[rows, column], np.nan),
    )


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
