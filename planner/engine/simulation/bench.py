"""The simulator's benchmark (issue 15): a 10,000-request trace for an 8B model (Llama-3.1-8B's shapes)
on one H100 at 20 requests/s, timed on one core the gpt-fast way (a warm-up run discarded, then the
best of `repeats`). The timed call is the whole simulate(): step-cost tables, sampling, scheduling and
the summary. Lengths are log-normal, prompts 1,000 +- 500 tokens and answers 250 +- 125 (a chat mix;
the issue names none)."""

from __future__ import annotations

import time

from hwcatalog.architecture import ArchShape

from ..deployment import Deployment
from ..specs import ChipSpec, ModelSpec
from .simulate import simulate
from .workload import Arrivals, Lengths, SimulationWorkload

BENCH_REQUESTS = 10_000
BENCH_RATE_PER_S = 20.0


def _llama_3_1_8b() -> ModelSpec:
    # meta-llama/Llama-3.1-8B config.json; 8.03e9 parameters published.
    shape = ArchShape(num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8, head_dim=128, intermediate_size=14336,
                      vocab_size=128256)  # fmt: skip
    return ModelSpec(slug="llama-3.1-8b", shape=shape, total_params=8.03e9, active_params=8.03e9, max_context_tokens=131072)


def _h100_sxm() -> ChipSpec:
    # NVIDIA H100 SXM datasheet: 80 GB (80 GiB, 81,559 MiB as nvidia-smi reports; hwcatalog/data/chips/nvidia.yaml)
    # HBM3 at 3.35 TB/s, 989.4 dense bf16 TFLOP/s.
    return ChipSpec(slug="nvidia-h100-sxm", kind="gpu", vendor="NVIDIA", memory_capacity_bytes=81559 * 2**20, memory_bandwidth_bytes_per_s=3.35e12,
                    peak_flops_per_s={"bf16": 989.4e12, "fp8": 1978.9e12}, link_bandwidth_bytes_per_s=450e9, chips_per_node=8,
                    tdp_watts=700)  # fmt: skip


def benchmark_simulation(requests: int = BENCH_REQUESTS, rate_per_s: float = BENCH_RATE_PER_S, repeats: int = 3) -> dict:
    model, deployment = _llama_3_1_8b(), Deployment(chip=_h100_sxm())
    workload = SimulationWorkload(requests=requests, arrivals=Arrivals.poisson(rate_per_s), prompt=Lengths.lognormal(1000, 500),
                                  output=Lengths.lognormal(250, 125), seed=0)  # fmt: skip
    simulate(model, deployment, workload)  # warm-up, discarded
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = simulate(model, deployment, workload)
        best = min(best, time.perf_counter() - started)
    return {
        "requests": requests,
        "rate_per_s": rate_per_s,
        "seconds": best,
        "requests_per_s": requests / best,
        "steps": result.steps,
        "steps_per_s": result.steps / best,
        "ttft_p50_s": result.ttft.p50,
        "ttft_p99_s": result.ttft.p99,
        "tpot_p50_s": result.tpot.p50,
        "tpot_p99_s": result.tpot.p99,
        "overloaded": result.overloaded,
    }


def simulation_line(figures: dict) -> str:
    return (f"simulation: {figures['requests_per_s']:,.0f} simulated requests/s ({figures['requests']:,} requests, "
            f"{figures['steps']:,} steps in {figures['seconds']:.3f} s, one core; 8B on one H100 at {figures['rate_per_s']:g} requests/s: "
            f"TTFT p50 {figures['ttft_p50_s'] * 1e3:.0f} ms p99 {figures['ttft_p99_s'] * 1e3:.0f} ms, "
            f"TPOT p50 {figures['tpot_p50_s'] * 1e3:.1f} ms p99 {figures['tpot_p99_s'] * 1e3:.1f} ms)")  # fmt: skip


if __name__ == "__main__":
    print(simulation_line(benchmark_simulation()))
