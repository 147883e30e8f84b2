from __future__ import annotations

import json
import statistics
import time

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.test.utils import override_settings
from rest_framework.test import APIClient

from accounts.services import api_token_create
from hwcatalog.models import Chip
from planner.engine.bench import benchmark_search, benchmark_simulation
from planner.engine.fleet.bench import benchmark_fleet, fleet_line
from planner.engine.simulation.bench import simulation_line

# A whole-catalog plan: every chip x chip counts 1-64 x TP x all weight dtypes x batch 1-1024 x
# four weight dtypes x three decoding settings (~195,000 candidate configurations with the starting catalog).
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

# A whole-catalog fleet: three request classes (chat, RAG, batch) over every chip, through POST /api/v1/fleets/.
WHOLE_CATALOG_FLEET = {
    "model": "llama-3.1-70b",
    "classes": [
        {"name": "chat", "prompt_tokens": 1000, "output_tokens": 250, "requests_per_s": 20, "ttft_slo_s": 1.0, "tpot_slo_s": 0.05},
        {"name": "rag", "prompt_tokens": 8000, "output_tokens": 400, "requests_per_s": 5, "ttft_slo_s": 3.0, "tpot_slo_s": 0.08},
        {"name": "batch", "prompt_tokens": 2000, "output_tokens": 800, "requests_per_s": 2, "interruptible": True},
    ],
    "hardware": {"max_chips": 64},
    "limits": {"wall_kw_max": 60, "apply_to": "all"},
}


class Command(BaseCommand):
    help = "Benchmark the planner: engine configurations/s and POST /api/v1/plans/ latency over the whole catalog."

    def add_arguments(self, parser):
        parser.add_argument("--repeats", type=int, default=10)
        parser.add_argument("--json", action="store_true", dest="as_json")

    def handle(self, *args, repeats: int, as_json: bool, **options):
        engine = benchmark_search(repeats=5)
        simulation = benchmark_simulation()  # needs no catalog: its 8B model and H100 are literal specs
        fleet = benchmark_fleet()  # nor does this: a synthetic 60-chip catalog
        if not Chip.objects.exists():
            self.stdout.write(simulation_line(simulation) + "\n" + fleet_line(fleet))
            self.stderr.write("The catalog is empty: run manage.py loadcatalog first.")
            return
        latencies, body = [], None
        # Measured inside the request (as before plans over PLAN_INLINE_MAX_CANDIDATES went to a worker):
        # the figure is the search itself, the same code a worker runs.
        with transaction.atomic(), override_settings(PLAN_INLINE_MAX_CANDIDATES=10**12):  # the benchmark's plans are rolled back
            user = get_user_model().objects.create_user("benchplanner-user")
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user, 'benchplanner', 'write')[1]}")
            client.post("/api/v1/plans/", WHOLE_CATALOG_PLAN, format="json")  # warm-up, discarded
            for _ in range(repeats):
                started = time.perf_counter()
                response = client.post("/api/v1/plans/", WHOLE_CATALOG_PLAN, format="json")
                latencies.append(time.perf_counter() - started)
                body = response.json()
            with override_settings(FLEET_INLINE_MAX_CANDIDATES=10**12):
                started = time.perf_counter()
                fleet_body = client.post("/api/v1/fleets/", WHOLE_CATALOG_FLEET, format="json").json()
                fleet_post_s = time.perf_counter() - started
            transaction.set_rollback(True)
        figures = {
            "engine_synthetic_configurations": engine["configurations"],
            "engine_synthetic_configs_per_s": engine["configs_per_s"],
            "plan_candidates": body["candidate_count"],
            "plan_feasible": body["feasible_count"],
            "plan_search_seconds": body["results"]["search_seconds"],
            "plan_configs_per_s": body["candidate_count"] / body["results"]["search_seconds"],
            "plan_post_median_s": statistics.median(latencies),
            "plan_post_p90_s": sorted(latencies)[max(int(0.9 * len(latencies)) - 1, 0)],
            "repeats": repeats,
            "simulation_requests": simulation["requests"],
            "simulation_seconds": simulation["seconds"],
            "simulation_requests_per_s": simulation["requests_per_s"],
            "fleet_bench": fleet,
            "fleet_catalog_post_s": fleet_post_s,
            "fleet_catalog_configurations": fleet_body["candidate_count"],
            "fleet_catalog_solve_s": fleet_body["results"]["solver"]["solve_seconds"],
        }
        if as_json:
            self.stdout.write(json.dumps(figures, indent=1))
            return
        self.stdout.write(
            f"engine, synthetic 25-chip catalog: {figures['engine_synthetic_configurations']:,} configurations at "
            f"{figures['engine_synthetic_configs_per_s']:,.0f} configurations/s (best of 5, one core)\n"
            f"POST /api/v1/plans/ over the whole catalog: {figures['plan_candidates']:,} configurations "
            f"({figures['plan_feasible']:,} feasible); search {figures['plan_search_seconds'] * 1e3:.0f} ms "
            f"= {figures['plan_configs_per_s']:,.0f} configurations/s; request median {figures['plan_post_median_s'] * 1e3:.0f} ms, "
            f"p90 {figures['plan_post_p90_s'] * 1e3:.0f} ms over {repeats} requests\n"
            f"{simulation_line(simulation)}\n"
            f"{fleet_line(fleet)}\n"
            f"POST /api/v1/fleets/ over the whole catalog (3 classes): {figures['fleet_catalog_configurations']:,} configurations searched, "
            f"program solved in {figures['fleet_catalog_solve_s']:.2f} s, request {figures['fleet_catalog_post_s']:.1f} s\n"
        )
