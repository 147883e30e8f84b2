"""What a fleet plan takes and what it chooses from: request classes, candidate replicas, limits, time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..cost import HOURS_PER_MONTH

# Pricing models paid for every hour of the month (bought, or reserved for a term), and those paid
# only for the hours a replica runs (on demand; spot, for classes that tolerate preemption).
COMMITTED_PRICING = ("purchase", "reserved")
HOURLY_PRICING = ("on_demand", "spot")
# A unit of this many chips or more is a rack-scale system (GB200/GB300 NVL72 is one 72-GPU rack):
# it fills a rack by itself, whatever the rack's system count.
RACK_SCALE_CHIPS_PER_UNIT = 32
APPLY_TO = ("owned", "all")


@dataclass(frozen=True, kw_only=True)
class RequestClass:
    """One kind of traffic: its request shape, its rate (requests/s at a load-shape value of 1.0) and SLOs."""

    name: str
    prompt_tokens: int
    output_tokens: int
    requests_per_s: float
    ttft_slo_s: float | None = None
    tpot_slo_s: float | None = None
    interruptible: bool = False  # may run on spot capacity (batch work that tolerates preemption)

    def __post_init__(self) -> None:
        if self.requests_per_s < 0 or self.prompt_tokens < 1 or self.output_tokens < 1:
            raise ValueError(f"{self.name}: requests_per_s >= 0 and prompt/output tokens >= 1 are required")


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One replica that can serve one class: a configuration (its estimate) on one offering.

    A replica serves requests_per_s of its class within the class's SLOs (the planner's closed-loop
    throughput at that batch, times the target utilisation); requests_per_s_low is the same at the low end of
    the throughput's 80% interval."""

    class_index: int
    chip_slug: str  # the catalog chip (a serving engine's variant is named in `label`)
    offering_slug: str
    pricing_model: str
    chips: int  # the configuration's chips
    billed_chips: int  # whole units of the offering
    chips_per_unit: int
    requests_per_s: float
    requests_per_s_low: float
    usd_per_hour: float  # the whole replica, billed chips included (owned: fixed + power at its operating point)
    owned_fixed_usd_per_chip_hour: float = 0.0  # owned: what a chip of the unit costs per hour whether it serves or not
    owned_power_usd_per_hour: float = 0.0  # owned: the replica's accelerator power cost per hour
    wall_kw: float | None = 0.0  # the replica's draw at the wall (accelerators at the operating point + hosts, x PUE); None: unknown
    label: str = ""
    detail: Mapping[str, object] = field(default_factory=dict)

    @property
    def owned(self) -> bool:
        return self.pricing_model == "purchase"

    @property
    def committed(self) -> bool:
        return self.pricing_model in COMMITTED_PRICING

    @property
    def units(self) -> float:
        return self.billed_chips / self.chips_per_unit

    @property
    def usd_per_month(self) -> float:
        return self.usd_per_hour * HOURS_PER_MONTH

    @property
    def usd_per_request_capacity(self) -> float:
        """$/hour per request/s served: the figure the cheapest configuration minimises."""
        return self.usd_per_hour / self.requests_per_s if self.requests_per_s > 0 else float("inf")


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What the fleet must fit in. Power and racks count the offerings `apply_to` names: "owned" (your
    datacentre; rentals sit in the provider's) or "all"."""

    wall_kw_max: float | None = None
    racks_max: int | None = None
    rack_kw_max: float | None = None  # kW at the wall one rack can feed and cool
    systems_per_rack: int | None = None  # servers (units) one rack holds; a rack-scale unit fills one
    chips_max: Mapping[str, int] = field(default_factory=dict)  # supply: at most this many chips of a chip slug
    chips_min: Mapping[str, int] = field(default_factory=dict)  # e.g. already bought or contracted
    apply_to: str = "owned"

    def __post_init__(self) -> None:
        if self.apply_to not in APPLY_TO:
            raise ValueError(f"apply_to must be one of {APPLY_TO}")
        if self.racks_max is not None and self.rack_kw_max is None and self.systems_per_rack is None:
            raise ValueError("racks_max needs rack_kw_max or systems_per_rack (what a rack holds)")
        for slug, low in self.chips_min.items():
            if slug in self.chips_max and self.chips_max[slug] < low:
                raise ValueError(f"chips_min of {slug} ({low}) is above its chips_max ({self.chips_max[slug]})")

    @property
    def racked(self) -> bool:
        return self.rack_kw_max is not None or self.systems_per_rack is not None

    def counts(self, candidate: Candidate) -> bool:
        """Whether the candidate's power and space count against the power and rack limits."""
        return self.apply_to == "all" or candidate.owned

    @property
    def powered(self) -> bool:
        """Whether a limit reads replicas' power (a wall cap, or racks limited by kW)."""
        return self.wall_kw_max is not None or (self.racks_max is not None and self.rack_kw_max is not None)

    def admits(self, candidate: Candidate) -> bool:
        """A replica whose power is unknown cannot be shown to fit a power limit it counts against."""
        return not (self.powered and self.counts(candidate) and candidate.wall_kw is None)


@dataclass(frozen=True, kw_only=True)
class Horizon:
    """Time: month-by-month rate multipliers (growth) and a day's load shape (hourly multipliers).

    Month t's class rate at hour h = requests_per_s x growth[t] x shape[h]. One month and a flat shape
    plan a steady load; a shape lets on-demand capacity follow the day while committed capacity (owned,
    reserved) covers the base."""

    growth: tuple[float, ...] = (1.0,)
    shape: tuple[float, ...] = (1.0,)

    def __post_init__(self) -> None:
        if not self.growth or not self.shape:
            raise ValueError("growth and shape need at least one value")
        if any(g < 0 for g in self.growth) or any(s < 0 for s in self.shape):
            raise ValueError("growth and shape values must be >= 0")

    @classmethod
    def compound(cls, *, months: int, monthly_growth: float, shape: tuple[float, ...] = (1.0,)) -> Horizon:
        return cls(growth=tuple((1.0 + monthly_growth) ** t for t in range(months)), shape=shape)

    @property
    def months(self) -> int:
        return len(self.growth)

    @property
    def hours(self) -> int:
        return len(self.shape)
