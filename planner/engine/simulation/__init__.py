"""Iteration-level serving simulation (docs/simulation.md): continuous batching with chunked prefill,
paged KV blocks, preemption by recompute and prefix caching, disaggregated prefill and decode pools, each step priced by the planner's own
forward model, so one set of parameters serves estimates and simulation."""

from __future__ import annotations

from .disaggregated import KvTransfer, kv_transfer_for, simulate_disaggregated_with_cost
from .results import LittlesLaw, Percentiles, SimulationResult, Slos, TimeSeries, latency_cdf
from .scheduler import RequestTooLarge, Schedule, StepBudgetSpent, check_fits, run_schedule, step_budget
from .simulate import MAX_SWEEP_RATES, SchedulerOptions, mean_lengths, rate_sweep, simulate, simulate_disaggregated, simulate_with_cost
from .step_cost import StepCost, kv_block_capacity, step_cost_for
from .workload import Arrivals, Lengths, Requests, SimulationWorkload, Trace, WorkloadError

__all__ = [
    "Arrivals", "KvTransfer", "Lengths", "LittlesLaw", "Percentiles", "RequestTooLarge", "Requests", "Schedule", "SchedulerOptions",
    "SimulationResult", "SimulationWorkload", "Slos", "StepBudgetSpent", "StepCost", "TimeSeries", "Trace", "WorkloadError",
    "check_fits", "kv_block_capacity", "run_schedule", "simulate", "simulate_disaggregated", "simulate_disaggregated_with_cost",
    "simulate_with_cost", "step_cost_for", "kv_transfer_for", "latency_cdf", "mean_lengths", "rate_sweep", "step_budget",
    "MAX_SWEEP_RATES",
]  # fmt: skip
