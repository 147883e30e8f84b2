"""Chart data for the pages: pure functions that rearrange plan JSON and catalog values.

No planning math here. The one formula is the roofline's own definition, attainable
FLOP/s = min(peak, intensity x bandwidth), evaluated at a few intensities so the browser can
draw it; everything else (times, intensities, ridges, memory) comes from the planner's output.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

# The x range of every roofline chart (FLOP per byte): decode of a small batch (~1) to
# prefill of long prompts (~10^4), with every catalog ridge (CPUs ~30, accelerators ~500) inside.
INTENSITY_MIN = 1.0
INTENSITY_MAX = 100_000.0
DTYPE_ORDER = ("bf16", "fp16", "fp8", "int8", "fp4", "int4", "fp32")


def roof_value(*, intensity: float, peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """Attainable FLOP/s at an arithmetic intensity (FLOP/byte): the roofline."""
    return min(peak_flops_per_s, intensity * bandwidth_bytes_per_s)


def roof_points(*, peak_flops_per_s: float, bandwidth_bytes_per_s: float, intensities: Iterable[float] | None = None) -> list[dict[str, float]]:
    """Points of the roof for a log-log line chart. The roof is two straight lines in log-log,
    so the ends of the range and the ridge are enough to draw it exactly."""
    ridge = peak_flops_per_s / bandwidth_bytes_per_s
    if intensities is None:
        intensities = [INTENSITY_MIN, INTENSITY_MAX] + ([ridge] if INTENSITY_MIN < ridge < INTENSITY_MAX else [])
    xs = sorted(set(intensities))
    return [{"x": x, "y": roof_value(intensity=x, peak_flops_per_s=peak_flops_per_s, bandwidth_bytes_per_s=bandwidth_bytes_per_s)} for x in xs]


def chip_peak(chip: Mapping[str, Any], dtype: str | None = None) -> tuple[str, float] | None:
    """(dtype, dense peak FLOP/s) of a chip's values (a catalog snapshot row or model_to_dict):
    the requested dtype if the chip has it, otherwise the first of DTYPE_ORDER it has."""
    for candidate in ([dtype] if dtype else []) + list(DTYPE_ORDER):
        value = chip.get(f"peak_{candidate}_flops_per_s")
        if value:
            return candidate, float(value)
    return None


def chip_roof(chip: Mapping[str, Any], dtype: str | None = None) -> dict[str, Any] | None:
    """One chip's roof for a chart; None when the chip has no peak FLOP/s in the catalog."""
    peak = chip_peak(chip, dtype)
    bandwidth = chip.get("memory_bandwidth_bytes_per_s")
    if peak is None or not bandwidth:
        return None
    used_dtype, peak_flops = peak
    return {
        "slug": chip["slug"],
        "label": f"{chip.get('name') or chip['slug']} ({used_dtype})",
        "dtype": used_dtype,
        "peak_flops_per_s": peak_flops,
        "bandwidth_bytes_per_s": float(bandwidth),
        "ridge_flop_per_byte": peak_flops / float(bandwidth),
        "points": roof_points(peak_flops_per_s=peak_flops, bandwidth_bytes_per_s=float(bandwidth)),
    }


def operating_point(phase: Mapping[str, Any]) -> dict[str, float] | None:
    """Where a phase (prefill or decode) of an estimate sits on the roofline chart:
    its arithmetic intensity and the FLOP/s per chip it achieves in the estimated time."""
    intensity, flops, seconds = phase.get("intensity_flop_per_byte"), phase.get("flops_per_chip"), phase.get("time_s")
    if not intensity or not flops or not seconds:
        return None
    return {"x": float(intensity), "y": float(flops) / float(seconds)}


def memory_breakdown(memory: Mapping[str, Any]) -> dict[str, float | None]:
    """Per-chip memory split for a stacked bar: weights, KV cache, activations, free."""
    weights = float(memory.get("weights_bytes_per_chip") or 0.0)
    kv = float(memory.get("kv_bytes_per_chip") or 0.0)
    activations = float(memory.get("activation_bytes_per_chip") or 0.0)
    usable = float(memory.get("usable_bytes_per_chip") or 0.0)
    used = weights + kv + activations
    free = max(usable - used, 0.0)
    return {
        "weights_bytes": weights,
        "kv_bytes": kv,
        "activation_bytes": activations,
        "free_bytes": free,
        "usable_bytes": usable,
        "over_bytes": max(used - usable, 0.0),
        "headroom_fraction": (free / usable) if usable else None,
    }


def configuration_label(row: Mapping[str, Any]) -> str:
    """'4x intel-gaudi3 · TP4 · fp8 · batch 200 · ar' (replicas and PP only when > 1)."""
    parts = [f"{row.get('total_chips') or row.get('chip_count')}x {row.get('chip_slug')}", f"TP{row.get('tensor_parallel')}"]
    if (row.get("pipeline_parallel") or 1) > 1:
        parts.append(f"PP{row['pipeline_parallel']}")
    if (row.get("replicas") or 1) > 1:
        parts.append(f"{row['replicas']} replicas")
    parts += [str(row.get("weight_dtype")), f"batch {row.get('batch')}", str(row.get("decoding"))]
    return " · ".join(parts)


def chart_row(row: Mapping[str, Any], rank: int | None) -> dict[str, Any]:
    """The part of a ranked row the page's charts need."""
    return {
        "rank": rank,
        "label": configuration_label(row),
        "chip_slug": row.get("chip_slug"),
        "compute_dtype": row.get("compute_dtype") or row.get("weight_dtype"),
        "usd_per_million_output_tokens": row.get("usd_per_million_output_tokens"),
        "ttft_s": row.get("ttft_s"),
        "tpot_s": row.get("tpot_s"),
        "prefill": operating_point(row.get("prefill") or {}),
        "decode": operating_point(row.get("decode") or {}),
        "prefill_bound": (row.get("prefill") or {}).get("bound"),
        "decode_bound": (row.get("decode") or {}).get("bound"),
        "memory": memory_breakdown(row.get("memory") or {}),
        "intervals": interval_ranges(row.get("intervals") or {}),
        "cost": cost_summary(row),
    }


COST_SPLIT_LABELS = {
    "rent": "Rent (host, network, power, building included)", "accelerators": "Accelerators", "system": "System",
    "host": "Host server", "network": "Networking", "rack": "Rack and installation", "datacentre": "Datacentre (per kW-month)",
    "host_power": "Host power", "accelerator_power": "Accelerator power",
}  # fmt: skip


def cost_summary(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the selected configuration costs as a whole, and where a chip-hour's price goes (USD per
    chip-hour by part, largest first). None for an unpriced row."""
    cost = row.get("cost") or {}
    if not row.get("offering"):
        return None
    split = sorted((cost.get("cost_split") or {}).items(), key=lambda kv: -kv[1])
    return {
        "ownership": row.get("ownership"), "offering": row.get("offering"), "provider": row.get("provider"),
        "pricing_model": row.get("pricing_model"), "usd_per_chip_hour": row.get("usd_per_chip_hour"),
        "chips_per_unit": row.get("chips_per_unit"), "billed_chips": row.get("billed_chips"),
        "usd_per_hour": row.get("usd_per_hour"), "usd_per_month": row.get("usd_per_month"), "utilisation": cost.get("utilisation"),
        "split": [[COST_SPLIT_LABELS.get(name, name), value] for name, value in split],
    }  # fmt: skip


CHARTED_INTERVALS = ("usd_per_million_output_tokens", "ttft_s", "tpot_s")


def interval_ranges(intervals: Mapping[str, Any]) -> dict[str, list[float]]:
    """The 80% range [low, high] of each charted figure that has one (the cost-latency chart's error bars)."""
    out = {}
    for figure in CHARTED_INTERVALS:
        band = intervals.get(figure) or {}
        if band.get("low") is not None and band.get("high") is not None:
            out[figure] = [band["low"], band["high"]]
    return out


def plan_chart_data(results: Mapping[str, Any], snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the results page draws: ranked rows, both Pareto fronts (sorted by latency
    for a line), and the roof of each chip that appears among the ranked configurations,
    at the compute dtype its best configuration uses."""
    ranked = list(results.get("ranked") or [])
    chips = {c["slug"]: c for c in snapshot.get("chips") or []}
    roofs: dict[str, dict[str, Any]] = {}
    for row in ranked:
        key = f"{row.get('chip_slug')}/{row.get('compute_dtype')}"
        if key in roofs or row.get("chip_slug") not in chips:
            continue
        roof = chip_roof(chips[row["chip_slug"]], row.get("compute_dtype"))
        if roof:
            roofs[key] = {**roof, "key": key}

    def front(rows: list[Mapping[str, Any]], latency: str) -> list[dict[str, float]]:
        points = [{"x": r[latency], "y": r["usd_per_million_output_tokens"]} for r in rows
                  if r.get(latency) and r.get("usd_per_million_output_tokens") is not None]  # fmt: skip
        return sorted(points, key=lambda p: p["x"])

    return {
        "rows": [chart_row(row, rank) for rank, row in enumerate(ranked, start=1)],
        "pareto_tpot": front(results.get("pareto_cost_tpot") or [], "tpot_s"),
        "pareto_ttft": front(results.get("pareto_cost_ttft") or [], "ttft_s"),
        "roofs": roofs,
    }


def chips_roofs(chips: Iterable[Mapping[str, Any]], dtype: str = "bf16") -> list[dict[str, Any]]:
    """Roofs of several chips at one dtype (each falls back to its best-known dtype)."""
    return [roof for roof in (chip_roof(chip, dtype) for chip in chips) if roof]
