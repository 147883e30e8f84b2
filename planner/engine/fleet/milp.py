"""The fleet as a mixed-integer program, solved by HiGHS (scipy.optimize.milp).

Variables (all integers >= 0), for each month t of the horizon:
  x[k, t]     replicas of candidate k running the whole month (owned, reserved; every candidate on a flat day)
  y[k, t, h]  replicas of an hourly candidate k (on demand, spot) running in hour h of the day shape
  u[o, t]     units of owned offering o held in month t, never fewer than the month before (bought, not sold)
  r[t]        racks used in month t (only with racks_max)

Minimise  sum_t [ sum_k rented x * $/h * H + sum_k owned x * power $/h * H + sum_o u * unit $/h * H
                  + sum_(k,h) y * $/h * H / hours ]                                     (H = 730.5 h a month)
subject to, in every month t and hour h:
  demand      sum_(k of class c) capacity_k * (x + y) >= rate_c * growth_t * shape_h
  ownership   sum_(k of owned offering o) chips_k / chips per unit * x <= u[o, t];  u[o, t] >= u[o, t - 1]
              (replicas share a unit: two 4-chip replicas fill one 8-chip server)
  power       sum_(k counted) wall kW_k * (x + y) <= wall_kw_max
  racks       sum kW <= rack_kw_max * r[t];  systems held <= systems_per_rack * r[t];  r[t] <= racks_max
  supply      chips of each chip slug (rented replicas' billed chips + owned units' chips) within [min, max]

Every limit is a named group of rows, so a result can say how much of each is used, what is left, and
what lifting it would save (the same program solved without it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from ..cost import HOURS_PER_MONTH
from .specs import RACK_SCALE_CHIPS_PER_UNIT, Candidate, Horizon, Limits, RequestClass

DEFAULT_TIME_LIMIT_S = 20.0
DEFAULT_MIP_REL_GAP = 1e-3  # stop within 0.1% of the proven optimum: far inside the estimates' own error bands
CAPACITIES = ("expected", "pessimistic")


@dataclass(frozen=True, kw_only=True)
class LimitUse:
    """One limit at its tightest month and hour: how much is used, the limit, what is left."""

    group: str  # "power", "racks", "supply:<chip>", "minimum:<chip>"
    used: float
    limit: float
    month: int
    hour: int

    @property
    def slack(self) -> float:
        return self.used - self.limit if self.group.startswith("minimum:") else self.limit - self.used


@dataclass(frozen=True, kw_only=True)
class Allocation:
    """What one candidate runs: replicas all month (per month) and hourly replicas (per month, per hour)."""

    candidate: int
    committed: tuple[int, ...]  # per month
    hourly: tuple[tuple[int, ...], ...]  # per month, per hour (empty for a committed candidate)

    def running(self, month: int, hour: int) -> int:
        """Replicas running in that month and slot of the day."""
        return self.committed[month] + (self.hourly[month][hour] if self.hourly else 0)

    def peak(self, month: int) -> int:
        return self.committed[month] + (max(self.hourly[month]) if self.hourly else 0)


@dataclass(frozen=True, kw_only=True)
class Solution:
    status: str  # "optimal", "feasible" (stopped at the time limit with a solution), "infeasible", "failed"
    message: str
    usd_per_month: tuple[float, ...] = ()  # per month of the horizon
    allocations: tuple[Allocation, ...] = ()
    owned_units: dict[str, tuple[int, ...]] = field(default_factory=dict)  # owned offering -> units per month
    racks: tuple[int, ...] = ()
    limits: tuple[LimitUse, ...] = ()
    mip_gap: float | None = None
    variables: int = 0
    constraints: int = 0
    seconds: float = 0.0

    @property
    def solved(self) -> bool:
        return self.status in ("optimal", "feasible")

    @property
    def usd_total(self) -> float:
        return float(sum(self.usd_per_month))


class _Program:
    """Rows and columns of the program as they are added; each row carries its limit group."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.upper: list[float] = []
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.low: list[float] = []
        self.high: list[float] = []
        self.groups: list[str] = []
        self.where: list[tuple[int, int]] = []  # (month, hour) of each row

    def variable(self, cost: float, upper: float = math.inf) -> int:
        self.cost.append(cost)
        self.upper.append(upper)
        return len(self.cost) - 1

    def row(self, terms: Sequence[tuple[int, float]], *, low: float = -math.inf, high: float = math.inf, group: str, at: tuple[int, int]) -> None:
        index = len(self.low)
        for col, val in terms:
            if val:
                self.rows.append(index)
                self.cols.append(col)
                self.vals.append(val)
        self.low.append(low)
        self.high.append(high)
        self.groups.append(group)
        self.where.append(at)

    def solve(self, *, dropped: frozenset[str], time_limit_s: float, mip_rel_gap: float):
        keep = np.array([g not in dropped for g in self.groups], dtype=bool)
        n = len(self.cost)
        rows, cols, vals = (np.asarray(a) for a in (self.rows, self.cols, self.vals))
        mask = keep[rows] if len(rows) else np.zeros(0, dtype=bool)
        renumber = np.cumsum(keep) - 1
        m = int(keep.sum())
        options = {"time_limit": time_limit_s, "mip_rel_gap": mip_rel_gap, "presolve": True}
        constraints = ()
        if m:
            matrix = coo_array((vals[mask], (renumber[rows[mask]], cols[mask])), shape=(m, n)).tocsr()
            constraints = (LinearConstraint(matrix, np.asarray(self.low)[keep], np.asarray(self.high)[keep]),)
        return milp(np.asarray(self.cost), integrality=np.ones(n), bounds=Bounds(np.zeros(n), np.asarray(self.upper)),
                    constraints=constraints, options=options)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class _Layout:
    x: dict[tuple[int, int], int]  # (candidate, month) -> column
    y: dict[tuple[int, int, int], int]  # (candidate, month, hour) -> column
    u: dict[tuple[str, int], int]  # (owned offering, month) -> column
    r: dict[int, int]  # month -> column


def _slot(c: Candidate, systems_per_rack: int | None) -> float:
    """Rack space of one unit, in systems: a rack-scale unit fills a rack."""
    if c.chips_per_unit >= RACK_SCALE_CHIPS_PER_UNIT and systems_per_rack:
        return float(systems_per_rack)
    return 1.0


def build(
    classes: Sequence[RequestClass], candidates: Sequence[Candidate], limits: Limits, horizon: Horizon, *, capacity: str = "expected"
) -> tuple[_Program, _Layout]:
    if capacity not in CAPACITIES:
        raise ValueError(f"capacity must be one of {CAPACITIES}")
    p = _Program()
    hours, months = horizon.hours, horizon.months
    hourly_shape = hours > 1
    usable = [c for c in candidates if not (c.pricing_model == "spot" and not classes[c.class_index].interruptible) and limits.admits(c)]
    index = {id(c): i for i, c in enumerate(candidates)}
    x: dict[tuple[int, int], int] = {}
    y: dict[tuple[int, int, int], int] = {}
    u: dict[tuple[str, int], int] = {}
    r: dict[int, int] = {}
    owned_offerings: dict[str, Candidate] = {}
    for c in usable:
        if c.owned:
            owned_offerings.setdefault(c.offering_slug, c)
    for t in range(months):
        for c in usable:
            k = index[id(c)]
            if c.committed or not hourly_shape:
                x[k, t] = p.variable((c.owned_power_usd_per_hour if c.owned else c.usd_per_hour) * HOURS_PER_MONTH)
            else:
                for h in range(hours):
                    y[k, t, h] = p.variable(c.usd_per_hour * HOURS_PER_MONTH / hours)
        for slug, c in owned_offerings.items():
            u[slug, t] = p.variable(c.owned_fixed_usd_per_chip_hour * c.chips_per_unit * HOURS_PER_MONTH)
        if limits.racks_max is not None:
            r[t] = p.variable(0.0, upper=float(limits.racks_max))

    def running(k: int, t: int, h: int) -> list[int]:
        return [col for col in (x.get((k, t)), y.get((k, t, h))) if col is not None]

    by_class: dict[int, list[tuple[int, Candidate]]] = {}
    by_offering: dict[str, list[int]] = {}
    for c in usable:
        by_class.setdefault(c.class_index, []).append((index[id(c)], c))
        if c.owned:
            by_offering.setdefault(c.offering_slug, []).append(index[id(c)])
    for t in range(months):
        for slug, c in owned_offerings.items():
            # replicas share a unit: two 4-chip replicas fill one 8-chip server
            members = [(x[k, t], candidates[k].chips / candidates[k].chips_per_unit) for k in by_offering[slug]]
            p.row([*members, (u[slug, t], -1.0)], high=0.0, group="ownership", at=(t, 0))
            if t:
                p.row([(u[slug, t], 1.0), (u[slug, t - 1], -1.0)], low=0.0, group="ownership", at=(t, 0))
        for h in range(hours):
            at = (t, h)
            for ci, rc in enumerate(classes):
                need = rc.requests_per_s * horizon.growth[t] * horizon.shape[h]
                if need <= 0:
                    continue
                terms = []
                for k, c in by_class.get(ci, ()):
                    rate = c.requests_per_s if capacity == "expected" else c.requests_per_s_low
                    terms += [(col, rate) for col in running(k, t, h)]
                p.row(terms, low=need, group=f"demand:{rc.name}", at=at)
            counted = [c for c in usable if limits.counts(c)]
            power = [(col, c.wall_kw or 0.0) for c in counted for col in running(index[id(c)], t, h)]
            if limits.wall_kw_max is not None:
                p.row(power, high=limits.wall_kw_max, group="power", at=at)
            if limits.racks_max is not None:
                if limits.rack_kw_max is not None:
                    p.row([*power, (r[t], -limits.rack_kw_max)], high=0.0, group="racks", at=at)
                if limits.systems_per_rack is not None:
                    space = [(u[slug, t], _slot(c, limits.systems_per_rack)) for slug, c in owned_offerings.items() if limits.counts(c)]
                    space += [(col, c.units * _slot(c, limits.systems_per_rack)) for c in counted if not c.owned
                              for col in running(index[id(c)], t, h)]  # fmt: skip
                    p.row([*space, (r[t], -float(limits.systems_per_rack))], high=0.0, group="racks", at=at)
            for slug in sorted(set(limits.chips_max) | set(limits.chips_min)):
                terms = [(col, float(c.billed_chips)) for c in usable if c.chip_slug == slug and not c.owned for col in running(index[id(c)], t, h)]
                terms += [(u[o, t], float(c.chips_per_unit)) for o, c in owned_offerings.items() if c.chip_slug == slug]
                if slug in limits.chips_max:
                    p.row(terms, high=float(limits.chips_max[slug]), group=f"supply:{slug}", at=at)
                if slug in limits.chips_min:
                    p.row(terms, low=float(limits.chips_min[slug]), group=f"minimum:{slug}", at=at)
    return p, _Layout(x=x, y=y, u=u, r=r)


def _limit_uses(p: _Program, values: np.ndarray, dropped: frozenset[str]) -> tuple[LimitUse, ...]:
    """Each limit group at its tightest row (least slack)."""
    rows, cols, vals = (np.asarray(a) for a in (p.rows, p.cols, p.vals))
    activity = np.zeros(len(p.low))
    if len(rows):
        np.add.at(activity, rows, vals * values[cols])
    best: dict[str, LimitUse] = {}
    for i, group in enumerate(p.groups):
        if group in dropped or not group.split(":")[0] in ("power", "racks", "supply", "minimum"):
            continue
        if group == "racks":
            # the rack rows read "load - capacity * racks <= 0": report racks needed against racks_max instead
            continue
        limit = p.low[i] if group.startswith("minimum:") else p.high[i]
        use = LimitUse(group=group, used=float(activity[i]), limit=float(limit), month=p.where[i][0], hour=p.where[i][1])
        if group not in best or use.slack < best[group].slack:
            best[group] = use
    return tuple(best.values())


def solve(
    classes: Sequence[RequestClass],
    candidates: Sequence[Candidate],
    limits: Limits,
    horizon: Horizon = Horizon(),
    *,
    capacity: str = "expected",
    dropped: frozenset[str] = frozenset(),
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    mip_rel_gap: float = DEFAULT_MIP_REL_GAP,
) -> Solution:
    """The cheapest fleet over the horizon (limit groups named in `dropped` are left out)."""
    started = time.perf_counter()
    program, layout = build(classes, candidates, limits, horizon, capacity=capacity)
    return _solution(program, layout, candidates, limits, horizon, dropped=dropped, time_limit_s=time_limit_s, mip_rel_gap=mip_rel_gap,
                     started=started)  # fmt: skip


def _solution(program, layout, candidates, limits, horizon, *, dropped, time_limit_s, mip_rel_gap, started) -> Solution:
    size = {"variables": len(program.cost), "constraints": len(program.low)}
    with_terms = {program.groups[row] for row in set(program.rows)}
    missing = [g for g in dict.fromkeys(program.groups) if g.startswith("demand:") and g not in dropped and g not in with_terms]
    if missing:
        names = ", ".join(g.split(":", 1)[1] for g in missing)
        return Solution(status="infeasible", message=f"no configuration can serve {names} within its SLOs", seconds=time.perf_counter() - started,
                        **size)  # fmt: skip
    out = program.solve(dropped=dropped, time_limit_s=time_limit_s, mip_rel_gap=mip_rel_gap)
    if out.x is None:
        status = "infeasible" if out.status == 2 else "failed"
        return Solution(status=status, message=str(out.message), seconds=time.perf_counter() - started, **size)
    values = np.round(out.x).astype(float)
    months, hours = horizon.months, horizon.hours
    cost = np.asarray(program.cost)
    per_month = [0.0] * months
    for (k, t), col in layout.x.items():
        per_month[t] += float(cost[col] * values[col])
    for (k, t, h), col in layout.y.items():
        per_month[t] += float(cost[col] * values[col])
    for (o, t), col in layout.u.items():
        per_month[t] += float(cost[col] * values[col])
    allocations = []
    for k, c in enumerate(candidates):
        committed = tuple(int(values[layout.x[k, t]]) if (k, t) in layout.x else 0 for t in range(months))
        hourly = tuple(tuple(int(values[layout.y[k, t, h]]) for h in range(hours)) for t in range(months)) if (k, 0, 0) in layout.y else ()
        if any(committed) or any(any(row) for row in hourly):
            allocations.append(Allocation(candidate=k, committed=committed, hourly=hourly))
    owned = {}
    for (o, t), col in layout.u.items():
        owned.setdefault(o, [0] * months)[t] = int(values[col])
    racks = tuple(int(values[layout.r[t]]) for t in range(months)) if layout.r else ()
    uses = list(_limit_uses(program, values, dropped))
    if limits.racks_max is not None and "racks" not in dropped:
        peak = int(np.argmax(racks)) if racks else 0
        uses.append(LimitUse(group="racks", used=float(max(racks, default=0)), limit=float(limits.racks_max), month=peak, hour=0))
    gap = getattr(out, "mip_gap", None)
    status = "optimal" if out.status == 0 else "feasible"
    return Solution(
        status=status, message=str(out.message), usd_per_month=tuple(per_month), allocations=tuple(allocations),
        owned_units={o: tuple(v) for o, v in owned.items() if any(v)}, racks=racks, limits=tuple(uses),
        mip_gap=None if gap is None or not math.isfinite(gap) else float(gap), seconds=time.perf_counter() - started, **size,
    )  # fmt: skip


def limit_groups(limits: Limits) -> tuple[str, ...]:
    """The limit groups a program built with these limits holds, in a fixed order."""
    groups = []
    if limits.wall_kw_max is not None:
        groups.append("power")
    if limits.racks_max is not None:
        groups.append("racks")
    groups += [f"supply:{s}" for s in sorted(limits.chips_max)]
    groups += [f"minimum:{s}" for s in sorted(limits.chips_min)]
    return tuple(groups)
