"""Locust users for the load test: catalog reads, estimates and plans.

Driven by benchmarks/loadtest.py (see docs/benchmarks.md, "Load test"); it picks the user class
per scenario on the command line:
  Mix           catalog reads, estimates and plans in one closed loop (the issue's mix)
  CatalogReads  catalog reads only (the >= 500 req/s target)
  PacedCatalogReads  the same reads at a pace: each user's requests start as a Poisson process of
                HWPLANNER_LOAD_USER_RATE a second (the plans scenario: reads while big plans run)
  Estimates     estimates only (the >= 200 req/s target)
  WarmUp        every kind of request, before each timed run (discarded)
Every user but PacedCatalogReads sends its next request as soon as the last one is answered (no
think time), so the figures are the service's capacity at that concurrency, queueing included.

Writes (POST /api/v1/plans/) send `Authorization: Token $HWPLANNER_LOAD_TOKEN`. Any answer
other than 2xx is a failure; redirects are not followed, so a stray 3xx shows up too.
Requests are named per endpoint template so locust's statistics group per endpoint.

With HWPLANNER_LOAD_RESULTS=path, every response time is also kept and written there as JSON when
locust quits: exact percentiles, where locust's own (CSV, summary) round to two significant
digits above 100 ms, and final counts, where its CSV is rewritten once a second and can miss the
last one.
"""

from __future__ import annotations

import collections
import json
import os
import random
import time

from locust import FastHttpUser, constant, events

JSON_HEADERS = {"Accept": "application/json"}

# --- catalog reads: the filters a browsing client uses ---------------------------------------
CHIP_SLUGS = ("nvidia-h100-sxm", "nvidia-h200-sxm", "nvidia-b200", "amd-mi300x", "google-tpu-v5e", "groq-lpu", "intel-gaudi3")
CHIP_QUERIES = ("", "?kind=gpu", "?vendor=nvidia", "?kind=tpu&ordering=-memory_bandwidth_bytes_per_s", "?search=h100")
MODEL_QUERIES = ("", "?family=llama", "?generation_kind=diffusion", "?ordering=-total_params&page_size=10")
OFFERING_QUERIES = (
    "?chip=nvidia-h100-sxm", "?pricing_model=spot", "?kind=tpu", "?provider=aws&ordering=usd_per_chip_hour", "?page_size=20",
)  # fmt: skip

# --- estimates: the bodies of tests/planner/test_api_estimates.py and the README -----------
ESTIMATE_BODIES = (
    {"model": "llama-3.1-8b", "chip": "nvidia-h100-sxm", "prompt_tokens": 1000, "output_tokens": 300, "batch": 1},
    {"model": "llama-3.1-70b", "chip": "nvidia-h200-sxm", "chip_count": 8, "weight_dtype": "fp8",
     "prompt_tokens": 1000, "output_tokens": 300, "batch": "max", "ttft_slo_s": 0.5, "tpot_slo_s": 0.05},
    {"model": "llama-3.1-70b", "chip": "nvidia-h100-sxm", "chip_count": 4, "prompt_tokens": 1000, "output_tokens": 300, "batch": 1,
     "decoding": {"method": "speculative", "draft_model": "llama-3.2-1b", "draft_tokens": 4, "acceptance_rate": 0.8}},
    {"model": "mixtral-8x7b", "chip": "amd-mi300x", "prompt_tokens": 2000, "output_tokens": 500, "concurrency": 64},
    {"model": "fast-dllm-v2-7b", "chip": "nvidia-l40s", "prompt_tokens": 1000, "output_tokens": 300, "batch": 1,
     "decoding": {"method": "block_diffusion", "block_size": 32, "tokens_per_forward": 2.5}},
)  # fmt: skip

# --- plans: a narrowed search and the whole catalog (benchplanner's WHOLE_CATALOG_PLAN) -----
NARROWED_PLAN = {
    "model": "llama-3.1-70b",
    "workload": {"prompt_tokens": 1000, "output_tokens": 300, "concurrency": 200, "ttft_slo_s": 0.5, "tpot_slo_s": 0.05},
    "hardware": {"kinds": ["tpu"], "ownership": "rent", "max_chips": 32},
}
WHOLE_CATALOG_PLAN = {
    "model": "llama-3.1-70b",
    "workload": {"prompt_tokens": 1000, "output_tokens": 300, "ttft_slo_s": 0.5, "tpot_slo_s": 0.05},
    "hardware": {"max_chips": 64, "weight_dtypes": ["bf16", "fp8", "int8", "int4"]},
    "decodings": [
        {"method": "ar"},
        {"method": "speculative", "draft_model": "llama-3.2-1b", "draft_tokens": 4, "acceptance_rate": 0.7},
        {"method": "speculative", "draft_model": "llama-3.2-1b", "draft_tokens": 8, "acceptance_rate": 0.7},
    ],
}

# Ids of plans made during the run (shared by the users of this locust process) for GET /plans/{id}/.
PLAN_IDS: collections.deque[str] = collections.deque(maxlen=64)


class Recorder:
    """Every request's response time and outcome, per (method, name), for the run's summary."""

    def __init__(self) -> None:
        self.times_ms: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
        self.failures: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self.started = self.stopped = None

    def on_request(self, request_type: str, name: str, response_time: float, exception, **_) -> None:
        self.times_ms[(request_type, name)].append(response_time)
        if exception is not None:
            self.failures[(request_type, name, str(exception)[:300])] += 1

    def write(self, path: str) -> None:
        elapsed = (self.stopped or time.monotonic()) - (self.started or time.monotonic())
        data = {
            "elapsed_s": elapsed,
            "requests": [{"method": m, "name": n, "times_ms": t} for (m, n), t in sorted(self.times_ms.items())],
            "failures": [{"method": m, "name": n, "error": e, "count": c} for (m, n, e), c in self.failures.most_common()],
        }
        with open(path, "w") as f:
            json.dump(data, f)


RECORDER = Recorder()
events.request.add_listener(RECORDER.on_request)


@events.test_start.add_listener
def _started(**_) -> None:
    RECORDER.started = time.monotonic()


@events.test_stop.add_listener
def _stopped(**_) -> None:
    RECORDER.stopped = time.monotonic()


@events.quit.add_listener
def _write_results(**_) -> None:
    if path := os.environ.get("HWPLANNER_LOAD_RESULTS"):
        RECORDER.write(path)


def _token_headers() -> dict[str, str]:
    token = os.environ.get("HWPLANNER_LOAD_TOKEN", "")
    if not token:
        raise RuntimeError("HWPLANNER_LOAD_TOKEN is not set: plans need a write token (manage.py createtoken USER)")
    return {**JSON_HEADERS, "Authorization": f"Token {token}"}


def _get(user: FastHttpUser, url: str, name: str) -> None:
    with user.client.get(url, name=name, headers=JSON_HEADERS, allow_redirects=False, catch_response=True) as response:
        if not 200 <= response.status_code < 300:
            response.failure(f"HTTP {response.status_code}: {(response.text or '')[:200]}")


def _post(user: FastHttpUser, url: str, body: dict, name: str, headers: dict[str, str]) -> dict | None:
    with user.client.post(url, json=body, name=name, headers=headers, allow_redirects=False, catch_response=True) as response:
        if not 200 <= response.status_code < 300:
            response.failure(f"HTTP {response.status_code}: {(response.text or '')[:200]}")
            return None
        return response.json()


def chip_list(user: FastHttpUser) -> None:
    _get(user, "/api/v1/chips/" + random.choice(CHIP_QUERIES), "/api/v1/chips/")


def chip_detail(user: FastHttpUser) -> None:
    _get(user, f"/api/v1/chips/{random.choice(CHIP_SLUGS)}/", "/api/v1/chips/{slug}/")


def model_list(user: FastHttpUser) -> None:
    _get(user, "/api/v1/models/" + random.choice(MODEL_QUERIES), "/api/v1/models/")


def offering_list(user: FastHttpUser) -> None:
    _get(user, "/api/v1/offerings/" + random.choice(OFFERING_QUERIES), "/api/v1/offerings/")


def estimate(user: FastHttpUser) -> None:
    _post(user, "/api/v1/estimates/", random.choice(ESTIMATE_BODIES), "/api/v1/estimates/", JSON_HEADERS)


def _plan_create(user: FastHttpUser, body: dict, name: str) -> None:
    plan = _post(user, "/api/v1/plans/", body, name, _token_headers())
    if plan is not None:
        PLAN_IDS.append(plan["id"])


def plan_narrowed(user: FastHttpUser) -> None:
    _plan_create(user, NARROWED_PLAN, "/api/v1/plans/ [narrowed]")


def plan_whole_catalog(user: FastHttpUser) -> None:
    _plan_create(user, WHOLE_CATALOG_PLAN, "/api/v1/plans/ [whole catalog]")


def plan_detail(user: FastHttpUser) -> None:
    if not PLAN_IDS:
        plan_narrowed(user)
        return
    _get(user, f"/api/v1/plans/{random.choice(PLAN_IDS)}/", "/api/v1/plans/{id}/")


CATALOG_TASKS = {chip_list: 3, chip_detail: 3, model_list: 2, offering_list: 3}


class CatalogReads(FastHttpUser):
    """Reads only: the four catalog endpoints with filters."""

    wait_time = constant(0)
    tasks = CATALOG_TASKS


def poisson_starts(rate_per_user: float):
    """A wait_time under which a user's requests start as a Poisson process of rate_per_user: each start an
    exponential gap after the last one was due, or at once when an answer took longer than the gap. Users so
    paced offer users x rate requests a second with no phase between them, as independent clients do;
    constant_throughput users fall into step (24 of them at 200 req/s arrived in bursts, and the bursts'
    queue, 35 ms at the median, was the load generator's, not the service's)."""

    def wait_time(user) -> float:
        now = time.monotonic()
        due = max(getattr(user, "_last_start_due", now) + random.expovariate(rate_per_user), now)
        user._last_start_due = due
        return due - now

    return wait_time


class PacedCatalogReads(FastHttpUser):
    """CatalogReads at a pace: each user's requests start as a Poisson process of HWPLANNER_LOAD_USER_RATE a
    second (poisson_starts), so the offered load is users x rate, below the capacity, and the latency is the
    service's own, not a queue that clients with no think time build in front of a saturated server."""

    wait_time = poisson_starts(float(os.environ.get("HWPLANNER_LOAD_USER_RATE") or 1.0))
    tasks = CATALOG_TASKS


class Estimates(FastHttpUser):
    """Estimates only: five bodies (batch 1, batch "max" with SLOs, speculative, MoE with concurrency, block diffusion)."""

    wait_time = constant(0)
    tasks = {estimate: 1}


class Mix(FastHttpUser):
    """The mix, by requests: ~60% catalog reads, ~30% estimates, ~4% plans made (3 narrowed : 1 whole
    catalog), ~6% plans fetched. The whole-catalog plans are ~1% of requests and most of the CPU."""

    wait_time = constant(0)
    tasks = {
        chip_list: 16, chip_detail: 17, model_list: 11, offering_list: 16,
        estimate: 30,
        plan_narrowed: 3, plan_whole_catalog: 1, plan_detail: 6,
    }  # fmt: skip

    def on_start(self) -> None:
        _token_headers()  # fail at start, not as 401s, when the token is missing


class WarmUp(FastHttpUser):
    """Every request kind in equal measure, whole-catalog plans included, so that before the timed
    run each worker has imported, connected and grown to its working size (the RSS baseline)."""

    wait_time = constant(0)
    tasks = dict.fromkeys([*CATALOG_TASKS, estimate, plan_narrowed, plan_whole_catalog, plan_detail], 1)
