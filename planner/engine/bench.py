"""Search throughput benchmark on a synthetic catalog of ~25 chips.

Run: PYTHONPATH=. python -m planner.engine.bench
Timing is honest in the gpt-fast sense: one warm-up search is discarded, then the
best of `repeats` runs is reported (one core; NumPy does not thread these ops).
"""

from __future__ import annotations

import time

from .search import SearchOptions, search
from hwcatalog.architecture import ArchShape

from .decoding import Autoregressive, BlockDiffusion, Speculative
from .specs import ChipSpec, ModelSpec, OfferingSpec, Workload

_KINDS = ("gpu", "gpu", "gpu", "tpu", "cpu", "other")


def synthetic_chips(count: int = 25) -> tuple[ChipSpec, ...]:
    """A spread of chips from 16 GB / 0.4 TB/s to 192 GB / 8 TB/s; one LPU."""
    chips = []
    for i in range(count - 1):
        kind = _KINDS[i % len(_KINDS)]
        scale = 1.0 + i / 4.0
        peaks = {"bf16": 100e12 * scale, "fp16": 100e12 * scale, "int8": 200e12 * scale}
        if i % 2:
            peaks["fp8"] = 200e12 * scale
        chips.append(
            ChipSpec(
                slug=f"chip-{i:02d}", kind=kind, vendor="Synthetic", memory_capacity_bytes=16e9 * (1 + i % 12),
                memory_bandwidth_bytes_per_s=0.4e12 * scale, peak_flops_per_s=peaks,
                link_bandwidth_bytes_per_s=None if kind == "cpu" else 100e9 * scale,
                chips_per_node=2 if kind == "cpu" else 8, tdp_watts=300 + 25 * i,
            )
        )  # fmt: skip
    chips.append(
        ChipSpec(slug="lpu", kind="lpu", vendor="Synthetic", memory_capacity_bytes=230e6, memory_bandwidth_bytes_per_s=80e12,
                 peak_flops_per_s={"bf16": 188e12, "int8": 750e12}, on_chip_sram_bytes=230e6, chips_per_node=8)  # fmt: skip
    )
    return tuple(chips)


def _model(slug: str, params: float, layers: int, d: int, heads: int, kv_heads: int) -> ModelSpec:
    shape = ArchShape(num_layers=layers, hidden_size=d, num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=d // heads,
                      intermediate_size=4 * d, vocab_size=128256)  # fmt: skip
    return ModelSpec(slug=slug, shape=shape, total_params=params, active_params=params, max_context_tokens=131072)


def benchmark_search(chip_count: int = 25, repeats: int = 5) -> dict:
    """Search a 70B model over a synthetic catalog with three decoding settings."""
    chips = synthetic_chips(chip_count)
    target = _model("bench-70b", 70.6e9, 80, 8192, 64, 8)
    draft = _model("bench-8b", 8.03e9, 32, 4096, 32, 8)
    offerings = {c.slug: (OfferingSpec(slug=f"{c.slug}-rent", pricing_model="on_demand", usd_per_chip_hour=1.0 + i / 10),)
                 for i, c in enumerate(chips)}  # fmt: skip
    options = SearchOptions(
        decodings=(Autoregressive(), Speculative(draft=draft, draft_tokens=4, acceptance_rate=0.8),
                   BlockDiffusion(block_size=32, tokens_per_forward=2.0, expected_answer_tokens=200)),
    )  # fmt: skip
    workload = Workload(prompt_tokens=1024, output_tokens=256, tpot_slo_s=0.1)
    search(target, chips, offerings, workload, options)  # warm-up, discarded
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        result = search(target, chips, offerings, workload, options)
        best = min(best, time.perf_counter() - started)
    return {
        "configurations": result.candidates,
        "feasible": int(result.results.feasible.sum()),
        "seconds": best,
        "configs_per_s": result.candidates / best,
    }


def benchmark_simulation() -> dict:
    """The serving simulator's figure (simulation/bench.py), imported only when asked for."""
    from .simulation.bench import benchmark_simulation as run

    return run()


if __name__ == "__main__":
    figures = benchmark_search()
    print(
        f"{figures['configurations']:,} configurations ({figures['feasible']:,} feasible) in "
        f"{figures['seconds']:.3f} s: {figures['configs_per_s']:,.0f} configurations/s"
    )
    from .simulation.bench import simulation_line

    print(simulation_line(benchmark_simulation()))
