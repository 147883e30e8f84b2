"""A fleet plan: the cheapest mix, what it costs at the pessimistic end, what each limit costs, and the
best single-chip fleet beside it (the saving of the mix is a measured figure, not a claim)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..cost import HOURS_PER_MONTH, owned_terms_usd_per_chip_hour
from ..specs import OfferingSpec
from .milp import DEFAULT_TIME_LIMIT_S, Solution, limit_groups, solve
from .specs import Candidate, Horizon, Limits, RequestClass

CAPEX_TERMS = ("accelerators", "system", "host", "network", "rack")


@dataclass(frozen=True, kw_only=True)
class SingleType:
    chip_slug: str
    usd_total: float | None  # over the horizon; None: this chip alone cannot serve the traffic within the limits
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class LimitCost:
    group: str
    binding: bool | None  # None: the lifted solve stopped at its time limit without showing a saving
    saving_usd_total: float | None  # what lifting the limit would save over the horizon (None: unsolved)


@dataclass(frozen=True, kw_only=True)
class FleetResult:
    solution: Solution
    pessimistic: Solution
    limit_costs: tuple[LimitCost, ...]
    single_types: tuple[SingleType, ...]  # cheapest first; unsolvable last
    infeasible_because: tuple[str, ...]  # limit groups that, each lifted alone, make an infeasible fleet feasible
    seconds: float
    skipped: tuple[str, ...] = ()  # the analyses the plan's time budget left no time for (fleet_plan's budget_s)

    @property
    def best_single(self) -> SingleType | None:
        solved = [s for s in self.single_types if s.usd_total is not None]
        return solved[0] if solved else None


# A solve beyond the first two is not started with less than this left of the plan's budget.
MIN_SOLVE_S = 0.5
SKIPPED_LIMITS = "what each limit costs"
SKIPPED_DIAGNOSIS = "which limits make the fleet infeasible"
SKIPPED_SINGLES = "the single-chip fleets"


def _relative_saving(base: float, other: Solution) -> float | None:
    return base - other.usd_total if other.solved else None


def fleet_plan(
    classes: Sequence[RequestClass],
    candidates: Sequence[Candidate],
    limits: Limits,
    horizon: Horizon = Horizon(),
    *,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    budget_s: float | None = None,
    compare_single_types: bool = True,
) -> FleetResult:
    """The fleet, its pessimistic twin, what each limit costs (or, infeasible, which limits make it so) and each chip's fleet
    alone: up to 3 + limits + chips solves of up to `time_limit_s` each. With `budget_s` the whole plan keeps within it: the
    fleet gets at most half of it, its twin half of what is left, every later solve what is left then, and an analysis
    reached with under MIN_SOLVE_S left is not run (`skipped` names it; a chip not compared says so in its reason). A later
    solve stopped at its time limit says only what it proved: a limit binds where the lifted fleet found is cheaper, and is
    unknown (None) where it is not and not proven optimal."""
    started = time.perf_counter()

    def left() -> float | None:
        return None if budget_s is None else budget_s - (time.perf_counter() - started)

    def limit(share: float = 1.0) -> float:
        rest = left()
        return time_limit_s if rest is None else min(time_limit_s, max(rest * share, MIN_SOLVE_S / 10))

    skipped: list[str] = []

    def affordable(analysis: str) -> bool:
        rest = left()
        if rest is None or rest >= MIN_SOLVE_S:
            return True
        if analysis not in skipped:
            skipped.append(analysis)
        return False

    solution = solve(classes, candidates, limits, horizon, time_limit_s=limit(1 / 2))
    pessimistic = solve(classes, candidates, limits, horizon, capacity="pessimistic", time_limit_s=limit(1 / 2))
    groups = limit_groups(limits)
    costs: list[LimitCost] = []
    because: list[str] = []
    if solution.solved:
        for group in groups:
            if not affordable(SKIPPED_LIMITS):
                break
            lifted = solve(classes, candidates, limits, horizon, dropped=frozenset({group}), time_limit_s=limit())
            saving = _relative_saving(solution.usd_total, lifted)
            # Binding: lifting it saves more than the solver's own tolerance on the cost. A lifted solve stopped at its time
            # limit proves a saving it found, never the absence of one.
            binding = saving is not None and saving > 1e-6 * max(solution.usd_total, 1.0)
            proven = binding or (lifted.status == "optimal" and solution.status == "optimal")
            costs.append(LimitCost(group=group, binding=binding if proven else None, saving_usd_total=saving if proven else None))
    elif solution.status == "infeasible" and groups:
        unsettled = False  # a solve that stopped without a fleet proves neither way
        for group in groups:
            if not affordable(SKIPPED_DIAGNOSIS):
                break
            lifted = solve(classes, candidates, limits, horizon, dropped=frozenset({group}), time_limit_s=limit())
            if lifted.solved:
                because.append(group)
            unsettled = unsettled or lifted.status == "failed"
        if not because and affordable(SKIPPED_DIAGNOSIS):
            lifted = solve(classes, candidates, limits, horizon, dropped=frozenset(groups), time_limit_s=limit())
            if lifted.solved:
                because.append("+".join(groups))
            unsettled = unsettled or lifted.status == "failed"
        if unsettled and SKIPPED_DIAGNOSIS not in skipped:
            skipped.append(SKIPPED_DIAGNOSIS)
    singles: list[SingleType] = []
    if compare_single_types:
        needed = {i for i, rc in enumerate(classes) if rc.requests_per_s > 0}
        for slug in sorted({c.chip_slug for c in candidates}):
            own = [c for c in candidates if c.chip_slug == slug]
            missing = needed - {c.class_index for c in own}
            if missing:
                names = ", ".join(classes[i].name for i in sorted(missing))
                singles.append(SingleType(chip_slug=slug, usd_total=None, reason=f"cannot serve {names} within its SLOs"))
                continue
            if not affordable(SKIPPED_SINGLES):
                singles.append(SingleType(chip_slug=slug, usd_total=None, reason="not compared: the plan's time budget was spent"))
                continue
            alone = solve(classes, own, limits, horizon, time_limit_s=limit())
            reason = "" if alone.solved else "not within the limits" if alone.status == "infeasible" else f"not solved in its time ({alone.status})"
            singles.append(SingleType(chip_slug=slug, usd_total=alone.usd_total if alone.solved else None, reason=reason))
    singles.sort(key=lambda s: (s.usd_total is None, s.usd_total or 0.0, s.chip_slug))
    return FleetResult(solution=solution, pessimistic=pessimistic, limit_costs=tuple(costs), single_types=tuple(singles),
                       infeasible_because=tuple(because), seconds=time.perf_counter() - started, skipped=tuple(skipped))  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class RentOrBuy:
    chip_slug: str
    purchase_offering: str
    rent_offering: str
    rent_pricing_model: str
    capex_usd_per_chip: float
    own_running_usd_per_chip_month: float  # datacentre and power, at full TDP
    rent_usd_per_chip_month: float
    break_even_months: float | None  # None: renting never costs more than running an owned chip


def rent_or_buy(offerings: Mapping[str, Sequence[OfferingSpec]], tdp_watts: Mapping[str, float | None]) -> tuple[RentOrBuy, ...]:
    """Per chip with both: the months of rent (cheapest rental of each pricing model, spot left out) that
    buy the cheapest owned unit's chip, net of what running it costs."""
    out = []
    for slug in sorted(offerings):
        owned = [o for o in offerings[slug] if o.owned]
        rented = [o for o in offerings[slug] if not o.owned and o.pricing_model != "spot"]
        if not owned or not rented:
            continue
        buy = min(owned, key=lambda o: o.capex_usd_per_unit / o.chips_per_unit)
        terms = owned_terms_usd_per_chip_hour(buy, tdp_watts.get(slug))
        running = sum(v for k, v in terms.items() if k not in CAPEX_TERMS) * (buy.utilisation or 1.0) * HOURS_PER_MONTH
        capex = buy.capex_usd_per_unit / buy.chips_per_unit
        for model in sorted({o.pricing_model for o in rented}):
            rent = min((o for o in rented if o.pricing_model == model), key=lambda o: o.usd_per_chip_hour)
            monthly = float(rent.usd_per_chip_hour) * HOURS_PER_MONTH
            months = capex / (monthly - running) if monthly > running else None
            out.append(RentOrBuy(chip_slug=slug, purchase_offering=buy.slug, rent_offering=rent.slug, rent_pricing_model=model,
                                 capex_usd_per_chip=capex, own_running_usd_per_chip_month=running, rent_usd_per_chip_month=monthly,
                                 break_even_months=months))  # fmt: skip
    return tuple(out)
