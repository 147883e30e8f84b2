"""From a schedule to what people ask of a deployment: latency percentiles, throughput, goodput,
KV use and queue over time, and two checks on the run itself (Little's law, overload).

Latencies are what a client sees: from sending the request (before the request overhead) to its first
token (TTFT), to its last (end-to-end), and the mean gap between its tokens after the first
(TPOT = (last - first) / (output tokens - 1), as vLLM's benchmark_serving reports it; undefined for
one-token answers). Goodput is DistServe's: completed requests per second that meet every SLO
(hao-ai-lab.github.io/blogs/distserve: "the number of completed requests per second adhering to the
Service Level Objectives").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .scheduler import Schedule
from .workload import Requests

PERCENTILES = (50, 90, 95, 99)
SERIES_POINTS = 500
# Overload: over the second half of the arrivals, the requests in the system grow by more than this
# share of the requests that arrived then (and by more than OVERLOAD_MIN_GROWTH requests). A stable
# queue fluctuates around a level; an overloaded one grows by (arrival rate - service rate) x time.
OVERLOAD_GROWTH_SHARE = 0.1
OVERLOAD_MIN_GROWTH = 10.0


@dataclass(frozen=True, kw_only=True)
class Slos:
    """Per-request latency objectives (None: not asked)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s", "e2e_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"slos.{name} must be > 0, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class Percentiles:
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float

    @classmethod
    def of(cls, values: np.ndarray) -> Percentiles:
        v = np.asarray(values, dtype=float)
        v = v[np.isfinite(v)]
        if len(v) == 0:
            return cls(mean=np.nan, p50=np.nan, p90=np.nan, p95=np.nan, p99=np.nan)
        p50, p90, p95, p99 = np.percentile(v, PERCENTILES)
        return cls(mean=float(v.mean()), p50=float(p50), p90=float(p90), p95=float(p95), p99=float(p99))


@dataclass(frozen=True, kw_only=True)
class LittlesLaw:
    """L = lambda W on the scheduler's side of the request overhead: the time-averaged requests in
    the system (from the step records) against the completion rate times the mean time in system
    (from the requests). Both are measured independently; they agree up to the arrivals that land
    inside a step, counted from the next step's start."""

    mean_in_system: float
    arrival_rate_per_s: float
    mean_time_in_system_s: float
    relative_error: float


@dataclass(frozen=True, kw_only=True)
class TimeSeries:
    """The run on an even time grid (the value of the step running at each instant)."""

    time_s: np.ndarray
    queue_length: np.ndarray
    running: np.ndarray
    kv_utilisation: np.ndarray


@dataclass(frozen=True, kw_only=True)
class SimulationResult:
    requests: int
    completed: int
    arrival_s: np.ndarray  # per request, client side
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray  # NaN for one-token answers
    e2e_s: np.ndarray
    preemptions_per_request: np.ndarray
    ttft: Percentiles
    tpot: Percentiles
    e2e: Percentiles
    duration_s: float  # first arrival to last finish
    request_throughput_per_s: float
    output_tokens_per_s: float
    input_tokens_per_s: float
    preemptions: int
    steps: int
    kv_blocks: int
    mean_kv_utilisation: float  # time-weighted over the steps
    peak_kv_utilisation: float
    slos: Slos
    slo_attainment: float  # share of requests meeting every SLO
    goodput_requests_per_s: float
    overloaded: bool
    overload_reason: str
    queue_growth_per_s: float  # slope of the requests in the system over the second half of the arrivals
    littles_law: LittlesLaw
    series: TimeSeries
    notes: tuple[str, ...]  # what the run approximated or did not model


def summarise(schedule: Schedule, requests: Requests, *, offset_s: float, slos: Slos, notes: tuple[str, ...] = ()) -> SimulationResult:
    sched_arrival = schedule.arrival_s
    client_arrival = sched_arrival - offset_s
    ttft = schedule.first_token_s - client_arrival
    e2e = schedule.finish_s - client_arrival
    out = requests.output_tokens
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (schedule.finish_s - schedule.first_token_s) / (out - 1), np.nan)
    done = np.isfinite(schedule.finish_s)
    start = float(np.nanmin(client_arrival)) if len(client_arrival) else 0.0
    end = float(np.nanmax(schedule.finish_s)) if done.any() else start
    duration = max(end - start, 1e-12)
    meets = done.copy()
    if slos.ttft_s is not None:
        meets &= ttft <= slos.ttft_s
    if slos.tpot_s is not None:
        meets &= ~(tpot > slos.tpot_s)  # a one-token answer has no TPOT to miss
    if slos.e2e_s is not None:
        meets &= e2e <= slos.e2e_s
    dt = schedule.step_duration_s
    busy = float(dt.sum())
    kv_used = (schedule.step_kv_blocks_used / max(schedule.kv_blocks, 1)) if len(dt) else np.zeros(1)
    growth, overloaded, reason = _overload(schedule, client_arrival, closed=bool(requests.closed_loop_concurrency))
    return SimulationResult(
        requests=len(requests),
        completed=int(done.sum()),
        arrival_s=client_arrival,
        prompt_tokens=requests.prompt_tokens,
        output_tokens=out,
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=e2e,
        preemptions_per_request=schedule.preemptions,
        ttft=Percentiles.of(ttft),
        tpot=Percentiles.of(tpot),
        e2e=Percentiles.of(e2e),
        duration_s=duration,
        request_throughput_per_s=float(done.sum()) / duration,
        output_tokens_per_s=float(out[done].sum()) / duration,
        input_tokens_per_s=float(requests.prompt_tokens[done].sum()) / duration,
        preemptions=int(schedule.preemptions.sum()),
        steps=schedule.steps,
        kv_blocks=schedule.kv_blocks,
        mean_kv_utilisation=float((kv_used * dt).sum() / busy) if busy > 0 else 0.0,
        peak_kv_utilisation=float(kv_used.max()) if len(dt) else 0.0,
        slos=slos,
        slo_attainment=float(meets.sum()) / max(len(requests), 1),
        goodput_requests_per_s=float(meets.sum()) / duration,
        overloaded=overloaded,
        overload_reason=reason,
        queue_growth_per_s=growth,
        littles_law=littles_law(schedule),
        series=time_series(schedule),
        notes=notes,
    )


CDF_PERCENTS = tuple(range(101))


def latency_cdf(result: SimulationResult) -> dict[str, list[float | None]]:
    """Each latency's empirical distribution at every whole percent (0 = the fastest request, 100 = the
    slowest), for a CDF chart: {"quantiles": [0..100], "ttft_s": [...], "tpot_s": [...], "e2e_s": [...]};
    a metric with no finite value (TPOT of one-token answers only) is all None."""
    out: dict[str, list[float | None]] = {"quantiles": [float(q) for q in CDF_PERCENTS]}
    for name in ("ttft_s", "tpot_s", "e2e_s"):
        v = np.asarray(getattr(result, name), dtype=float)
        v = v[np.isfinite(v)]
        out[name] = [float(x) for x in np.percentile(v, CDF_PERCENTS)] if len(v) else [None] * len(CDF_PERCENTS)
    return out


def littles_law(schedule: Schedule) -> LittlesLaw:
    done = np.isfinite(schedule.finish_s)
    if not done.any() or len(schedule.step_duration_s) == 0:
        return LittlesLaw(mean_in_system=0.0, arrival_rate_per_s=0.0, mean_time_in_system_s=0.0, relative_error=0.0)
    horizon = float(schedule.finish_s[done].max() - np.nanmin(schedule.arrival_s))
    in_system = schedule.step_waiting + schedule.step_running
    mean_in_system = float((in_system * schedule.step_duration_s).sum()) / horizon
    rate = float(done.sum()) / horizon
    sojourn = float((schedule.finish_s[done] - schedule.arrival_s[done]).mean())
    error = abs(mean_in_system - rate * sojourn) / max(rate * sojourn, 1e-30)
    return LittlesLaw(mean_in_system=mean_in_system, arrival_rate_per_s=rate, mean_time_in_system_s=sojourn, relative_error=error)


def _overload(schedule: Schedule, client_arrival: np.ndarray, *, closed: bool) -> tuple[float, bool, str]:
    if closed:
        return 0.0, False, "closed loop: the clients bound the requests in the system"
    t, dt = schedule.step_start_s, schedule.step_duration_s
    last = float(np.nanmax(client_arrival)) if len(client_arrival) else 0.0
    window = (t >= last / 2.0) & (t <= last)
    if window.sum() < 3 or last <= 0:
        return 0.0, False, "too few steps while requests arrived to judge"
    x = t[window]
    y = (schedule.step_waiting + schedule.step_running)[window].astype(float)
    w = dt[window]  # time-weighted: a long step stands for more of the window
    xm, ym = np.average(x, weights=w), np.average(y, weights=w)
    slope = float(np.sum(w * (x - xm) * (y - ym)) / max(np.sum(w * (x - xm) ** 2), 1e-30))
    arrived = int(((client_arrival >= last / 2.0) & (client_arrival <= last)).sum())
    growth = slope * last / 2.0
    threshold = max(OVERLOAD_MIN_GROWTH, OVERLOAD_GROWTH_SHARE * arrived)
    if growth > threshold:
        return slope, True, (f"overloaded: over the second half of the arrivals the requests in the system grew by {growth:.0f} "
                             f"({slope:.2f}/s) against {arrived} arrivals; the queue grows without bound at this rate")  # fmt: skip
    return slope, False, f"stable: the requests in the system changed by {growth:+.0f} over the second half of the arrivals"


def time_series(schedule: Schedule, points: int = SERIES_POINTS) -> TimeSeries:
    t = schedule.step_start_s
    if len(t) == 0:
        empty = np.zeros(0)
        return TimeSeries(time_s=empty, queue_length=empty, running=empty, kv_utilisation=empty)
    grid = np.linspace(t[0], t[-1] + schedule.step_duration_s[-1], points)
    at = np.clip(np.searchsorted(t, grid, side="right") - 1, 0, len(t) - 1)
    busy = grid <= t[at] + schedule.step_duration_s[at]  # else idle: nothing queued or running
    kv = np.where(busy, schedule.step_kv_blocks_used[at], schedule.prefix_blocks)
    return TimeSeries(
        time_s=grid,
        queue_length=np.where(busy, schedule.step_waiting[at], 0).astype(float),
        running=np.where(busy, schedule.step_running[at], 0).astype(float),
        kv_utilisation=kv / max(schedule.kv_blocks, 1),
    )
