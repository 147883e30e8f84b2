"""What a solved fleet adds up to, month by month: each configuration's cost, each class's capacity in its
busiest slot, the whole fleet's replicas, chips and power at the day's peak, and the tokens each class
asks for (the service only formats these)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..cost import HOURS_PER_MONTH
from .milp import Allocation, Solution
from .specs import Candidate, Horizon, RequestClass

SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600.0


def allocation_usd_per_month(a: Allocation, c: Candidate, horizon: Horizon) -> list[float]:
    """What the candidate's replicas cost each month: committed ones every hour, hourly ones in their slots
    (a slot is 1 / hours of the day). Owned replicas at their whole price per hour, as a plan prices them."""
    out = []
    for t in range(horizon.months):
        slots = sum(a.hourly[t]) / horizon.hours if a.hourly else 0.0
        out.append((a.committed[t] + slots) * c.usd_per_hour * HOURS_PER_MONTH)
    return out


def fleet_peak(solution: Solution, horizon: Horizon, weight: Callable[[Allocation], float]) -> list[float]:
    """Per month: the largest, over the day's slots, of sum(weight x replicas running then)."""
    return [
        max(sum(weight(a) * a.running(t, h) for a in solution.allocations) for h in range(horizon.hours))
        for t in range(horizon.months)
    ]


def class_capacity(solution: Solution, candidates: Sequence[Candidate], horizon: Horizon, class_index: int) -> list[float]:
    """Per month: the requests/s a class's replicas serve in the day's busiest slot."""
    busiest = [h for h in range(horizon.hours) if horizon.shape[h] == max(horizon.shape)]
    mine = [a for a in solution.allocations if candidates[a.candidate].class_index == class_index]
    return [
        max(sum(candidates[a.candidate].requests_per_s * a.running(t, h) for a in mine) for h in busiest)
        for t in range(horizon.months)
    ]


def peak_requests_per_s(rc: RequestClass, horizon: Horizon) -> list[float]:
    return [rc.requests_per_s * g * max(horizon.shape) for g in horizon.growth]


def output_tokens_per_month(rc: RequestClass, horizon: Horizon) -> list[float]:
    mean_shape = sum(horizon.shape) / horizon.hours
    return [rc.requests_per_s * g * mean_shape * rc.output_tokens * SECONDS_PER_MONTH for g in horizon.growth]
