"""Fleet planning: the cheapest mix of configurations for a traffic mix, under power, rack and supply
limits, over time (docs/fleet.md). Candidates come from the planner's own search (candidates.py); the
choice is a mixed-integer program solved by HiGHS (milp.py); plan.py adds the pessimistic cost, what each
limit costs and the best single-chip fleet beside the mix."""

from .candidates import DEFAULT_KEEP_PER_CLASS, DEFAULT_TARGET_UTILISATION, ClassCandidates, class_candidates
from .milp import Allocation, LimitUse, Solution, limit_groups, solve
from .plan import FleetResult, LimitCost, RentOrBuy, SingleType, fleet_plan, rent_or_buy
from .specs import COMMITTED_PRICING, HOURLY_PRICING, Candidate, Horizon, Limits, RequestClass

__all__ = [
    "Allocation", "COMMITTED_PRICING", "Candidate", "ClassCandidates", "DEFAULT_KEEP_PER_CLASS", "DEFAULT_TARGET_UTILISATION",
    "FleetResult", "HOURLY_PRICING", "Horizon", "LimitCost", "LimitUse", "Limits", "RentOrBuy", "RequestClass", "SingleType", "Solution",
    "class_candidates", "fleet_plan", "limit_groups", "rent_or_buy", "solve",
]  # fmt: skip
