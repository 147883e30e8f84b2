"""Chart data for the pages: pure functions that rearrange plan JSON and catalog values.

No planning math here. The one formula is the roofline's own definition, attainable
FLOP/s = min(peak, intensity x bandwidth), evaluated at a few intensities so the browser can
draw it; everything else (times, intensities, ridges, memory) comes from the planner's output.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from frontend.templatetags.hwformat import duration, num, usd

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


# --- fleet plans: tables and server-drawn SVG charts ---------------------------------------------
# The fleet pages draw their charts on the server as SVG (no script, nothing for the CSP to allow):
# these functions turn a FleetPlan's stored results (planner/fleet_services.py result_json) into
# rows and shapes. Colours are CSS classes (app.css .series-0 ... .series-7), never style attributes.
SERIES_COLOURS = 8
LIMIT_UNITS = {"power": "kW", "racks": "racks", "supply": "chips", "minimum": "chips"}
LIMIT_NAMES = {"power": "Power at the wall", "racks": "Racks", "supply": "Supply of", "minimum": "Minimum of"}


def nice_axis(top: float, ticks: int = 4, *, whole: bool = False) -> list[float]:
    """Round tick values from 0 to at least `top` (steps of 1, 2, 2.5 or 5 x 10^k; whole numbers only
    for counts such as replicas)."""
    if not top or top <= 0:
        return [0.0, 1.0]
    raw = top / ticks
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    if whole:
        step = max(1, math.ceil(step))
    count = math.ceil(top / step - 1e-9)
    return [i * step for i in range(count + 1)]


def _short(value: float) -> str:
    """Axis labels: 0, 250, 1.5k, 2M."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


@dataclass(frozen=True)
class ChartFrame:
    """The plot area inside an SVG of width x height (left margin for the axis labels)."""

    width: int = 640
    height: int = 260
    left: int = 56
    right: int = 16
    top: int = 14
    bottom: int = 40

    @property
    def plot_width(self) -> float:
        return self.width - self.left - self.right

    @property
    def plot_height(self) -> float:
        return self.height - self.top - self.bottom

    def y_of(self, value: float, top_value: float) -> float:
        return self.top + self.plot_height * (1 - value / top_value)


def stacked_bars(*, categories: list[str], series: list[tuple[str, list[float]]], value_text: Callable[[float], str],
                 prefix: str = "", whole: bool = False, frame: ChartFrame = ChartFrame()) -> dict[str, Any]:  # fmt: skip
    """One bar per category, stacked by series (each series: a label and one value per category).
    Returns the SVG's shapes: bars (x, y, w, h, colour class, tooltip), y-axis ticks, category labels, and
    the legend (label and colour class) the page lists under the chart."""
    totals = [sum(values[i] for _, values in series) for i in range(len(categories))]
    ticks = nice_axis(max(totals, default=0.0), whole=whole)
    top_value = ticks[-1]
    slot = frame.plot_width / max(len(categories), 1)
    width = min(slot * 0.6, 90.0)
    bars, legend = [], []
    for s, (label, _values) in enumerate(series):
        legend.append({"label": label, "colour": f"series-{s % SERIES_COLOURS}"})
    for i, category in enumerate(categories):
        base = 0.0
        x = frame.left + slot * i + (slot - width) / 2
        for s, (label, values) in enumerate(series):
            value = values[i]
            if value <= 0:
                continue
            y_top, y_base = frame.y_of(base + value, top_value), frame.y_of(base, top_value)
            bars.append({"x": round(x, 1), "y": round(y_top, 1), "w": round(width, 1), "h": round(y_base - y_top, 1),
                         "colour": f"series-{s % SERIES_COLOURS}", "title": f"{category} · {label}: {value_text(value)}"})  # fmt: skip
            base += value
    return {
        "width": frame.width, "height": frame.height, "frame": frame, "bars": bars, "legend": legend,
        "ticks": [{"y": round(frame.y_of(t, top_value), 1), "label": prefix + _short(t)} for t in ticks],
        "categories": [{"x": round(frame.left + slot * (i + 0.5), 1), "label": c} for i, c in enumerate(categories)],
        "axis": {"x1": frame.left, "x2": frame.width - frame.right, "y": frame.top + frame.plot_height},
    }  # fmt: skip


def fleet_class_chip_chart(allocation: list[Mapping[str, Any]], *, measure: str, month: int = 0) -> dict[str, Any]:
    """Month `month`'s $/month ("usd") or peak replicas ("replicas") by class, stacked by chip."""
    classes = list(dict.fromkeys(row["class"] for row in allocation))
    chips = list(dict.fromkeys(row["chip_slug"] for row in allocation))
    values = {chip: [0.0] * len(classes) for chip in chips}
    for row in allocation:
        per_month = (row.get("usd_per_month") or []) if measure == "usd" else (row.get("replicas") or [])
        if month < len(per_month):
            values[row["chip_slug"]][classes.index(row["class"])] += float(per_month[month])
    series = [(chip, values[chip]) for chip in chips]
    if measure == "usd":
        return stacked_bars(categories=classes, series=series, value_text=lambda v: f"{usd(v)}/month", prefix="$")
    return stacked_bars(categories=classes, series=series, value_text=lambda v: f"{num(v)} replicas", whole=True)


def fleet_month_chart(usd_per_month: list[float], replicas_per_month: list[int], frame: ChartFrame = ChartFrame(right=56)) -> dict[str, Any]:
    """Bars of $/month per month (left axis) and a line of the replicas running at the peak (right axis)."""
    months = len(usd_per_month)
    usd_ticks = nice_axis(max(usd_per_month, default=0.0))
    replica_ticks = nice_axis(max(replicas_per_month, default=0), whole=True)
    slot = frame.plot_width / max(months, 1)
    width = min(slot * 0.6, 60.0)
    bars, points = [], []
    for t, usd_value in enumerate(usd_per_month):
        x = frame.left + slot * t + (slot - width) / 2
        y = frame.y_of(usd_value, usd_ticks[-1])
        bars.append({"x": round(x, 1), "y": round(y, 1), "w": round(width, 1), "h": round(frame.top + frame.plot_height - y, 1),
                     "title": f"month {t + 1}: {usd(usd_value)}/month"})  # fmt: skip
    for t, replicas in enumerate(replicas_per_month):
        points.append({"x": round(frame.left + slot * (t + 0.5), 1), "y": round(frame.y_of(replicas, replica_ticks[-1]), 1),
                       "title": f"month {t + 1}: {num(replicas)} replicas at the peak"})  # fmt: skip
    every = max(1, math.ceil(months / 12))  # at most ~12 month labels
    return {
        "width": frame.width, "height": frame.height, "frame": frame, "bars": bars, "points": points,
        "polyline": " ".join(f"{p['x']},{p['y']}" for p in points),
        "usd_ticks": [{"y": round(frame.y_of(v, usd_ticks[-1]), 1), "label": "$" + _short(v)} for v in usd_ticks],
        "replica_ticks": [{"y": round(frame.y_of(v, replica_ticks[-1]), 1), "label": _short(v)} for v in replica_ticks],
        "months": [{"x": round(frame.left + slot * (t + 0.5), 1), "label": str(t + 1)} for t in range(0, months, every)],
        "axis": {"x1": frame.left, "x2": frame.width - frame.right, "y": frame.top + frame.plot_height, "right_x": frame.width - frame.right + 6},
    }  # fmt: skip


def limit_label(group: str) -> tuple[str, str]:
    """("Power at the wall", "kW") for "power"; ("Supply of nvidia-h100-sxm", "chips") for "supply:nvidia-h100-sxm"."""
    kind, _, slug = group.partition(":")
    return (f"{LIMIT_NAMES.get(kind, kind)} {slug}".strip(), LIMIT_UNITS.get(kind, ""))


def fleet_view(results: Mapping[str, Any]) -> dict[str, Any]:
    """What the fleet page shows, rearranged from the stored results: allocation rows with their peak
    replicas per month, the month-by-month plan, limits with units, and both charts."""
    allocation = list(results.get("allocation") or [])
    months = int((results.get("horizon") or {}).get("months") or len(results.get("usd_per_month") or []) or 1)
    rows = []
    for row in allocation:
        replicas = list(row.get("replicas") or [])  # per month, at the day's peak
        rows.append({**row, "peak_replicas": replicas, "first_replicas": replicas[0] if replicas else 0,
                     "first_usd_per_month": (row.get("usd_per_month") or [None])[0], "hourly": bool(row.get("hourly_replicas")),
                     "replica_range": f"{min(replicas)}–{max(replicas)}" if replicas and min(replicas) != max(replicas) else ""})  # fmt: skip
    usd = list(results.get("usd_per_month") or [])
    pessimistic = list((results.get("pessimistic") or {}).get("usd_per_month") or [])
    growth = list((results.get("horizon") or {}).get("growth") or [])
    peak_kw = list(results.get("peak_wall_kw") or [])
    idle = list(results.get("idle_owned_usd_per_month") or [])
    classes = list(results.get("classes") or [])
    replicas_per_month = list(results.get("replicas_per_month") or [])  # the whole fleet at the day's busiest slot
    chips_per_month = list(results.get("chips_per_month") or [])

    def at(values: list, t: int):
        return values[t] if t < len(values) else None

    month_rows = [{
        "month": t + 1, "growth": at(growth, t), "usd_per_month": at(usd, t), "pessimistic_usd_per_month": at(pessimistic, t),
        "replicas": at(replicas_per_month, t), "chips": at(chips_per_month, t), "peak_wall_kw": at(peak_kw, t), "idle_owned_usd_per_month": at(idle, t),
        "class_usd": [at(c.get("usd_per_month") or [], t) for c in classes],
    } for t in range(months)]  # fmt: skip
    limits = [{**limit, "label": limit_label(limit["group"])[0], "unit": limit_label(limit["group"])[1]} for limit in results.get("limits") or []]
    usd_total = results.get("usd_total")
    singles = [{**s, "usd_per_month_mean": s["usd_total"] / months if s.get("usd_total") is not None else None,
                "over_mix_share": (s["usd_total"] - usd_total) / usd_total if s.get("usd_total") is not None and usd_total else None}
               for s in results.get("single_chip_fleets") or []]  # fmt: skip
    pessimistic_total = (results.get("pessimistic") or {}).get("usd_total")
    return {
        "months": months, "allocation": rows, "month_rows": month_rows, "limits": limits, "classes": classes, "single_chip_fleets": singles,
        "usd_first_month": at(usd, 0), "usd_per_month_mean": usd_total / months if usd_total is not None else None,
        "pessimistic_usd_per_month_mean": pessimistic_total / months if pessimistic_total is not None else None,
        "pessimistic_first_month": at(pessimistic, 0),
        "usd_chart": fleet_class_chip_chart(allocation, measure="usd"), "replicas_chart": fleet_class_chip_chart(allocation, measure="replicas"),
        "month_chart": fleet_month_chart(usd, replicas_per_month) if months > 1 else None,
    }  # fmt: skip


# --- serving simulations: tables and chart data ------------------------------------------------------
# A SimulationRun's stored results (planner/simulation_services.py result_json) rearranged for its page and
# for static/frontend/js/simulation.js (Chart.js). Older runs lack `cdf` and `sweep` (and a plan's candidates
# `series`): each shaping function answers None then, and the page leaves that chart out.
LATENCY_METRICS = (("ttft_s", "TTFT", "time to first token"), ("tpot_s", "TPOT", "time per output token after the first"),
                   ("e2e_s", "End to end", "from sending the request to its last token"))  # fmt: skip
LATENCY_STATS = ("mean", "p50", "p90", "p95", "p99")
SLO_METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "End to end"))
# The percentiles a run reports at each swept rate besides p50 and p99: an SLO stated at one of them is drawn there too.
SWEEP_SLO_STATS = {90.0: "p90", 95.0: "p95"}


def sweep_lines(results: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """(metric, stat, label) of each latency percentile a sweep shows: p50 and p99 of TTFT and TPOT, and the percentile
    each SLO is stated at where the run reports it (p90, p95), so a p95 bound is read against the p95."""
    bounds = slo_bounds(results)
    lines = []
    for metric, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT")):
        asked = SWEEP_SLO_STATS.get(_as_float((bounds.get(metric) or {}).get("p")))
        stats = ("p50", asked, "p99") if asked else ("p50", "p99")
        lines += [(metric, stat, f"{label} {stat}") for stat in stats]
    return tuple(lines)


def _as_float(value: Any) -> float | None:
    return float(value) if _finite(value) else None
# A swept range wider than this ratio is drawn on a log axis.
LOG_RATE_RATIO = 20.0


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def latency_rows(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """TTFT, TPOT and end-to-end latency at mean, p50, p90, p95, p99 (seconds; None where the run has none,
    e.g. TPOT when every answer is one token)."""
    rows = []
    for key, label, description in LATENCY_METRICS:
        stats = results.get(key) or {}
        rows.append({"key": key, "label": label, "description": description, "values": [stats.get(s) for s in LATENCY_STATS]})
    return rows


def slo_rows(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each percentile SLO asked, as simulated: {metric, label, p, s, value_s, met}, in TTFT, TPOT, e2e order."""
    checks = results.get("slo_percentiles") or {}
    return [{"metric": metric, "label": label, **checks[metric]} for metric, label in SLO_METRICS if metric in checks]


def slo_bounds(results: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The SLO bound of each latency, for the charts' lines: {"ttft_s": {"p": 95, "s": 0.5}, ...}; a per-request
    bound without a percentile (`slos`) has p None. Percentile SLOs win where both are given."""
    out: dict[str, dict[str, Any]] = {}
    for metric, bound in (results.get("slos") or {}).items():
        if _finite(bound):
            out[metric if metric.endswith("_s") else f"{metric}_s"] = {"p": None, "s": bound}
    for metric, check in (results.get("slo_percentiles") or {}).items():
        if _finite(check.get("s")):
            out[f"{metric}_s"] = {"p": check.get("p"), "s": check["s"]}
    return out


def goodput_bounds_label(results: Mapping[str, Any]) -> str:
    """The per-request bounds goodput counted: 'TTFT ≤ 500 ms, TPOT ≤ 50 ms' ('' when none)."""
    labels = dict(SLO_METRICS)
    return ", ".join(f"{labels[metric.removesuffix('_s')]} ≤ {duration(bound)}" for metric, bound in (results.get("slos") or {}).items()
                     if metric.removesuffix("_s") in labels and _finite(bound))  # fmt: skip


def cdf_chart(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """The latency CDFs: per metric, points (x = latency in s, y = share of requests at or under it, 0-1) from
    results["cdf"] (each latency at every whole percent), and the metric's SLO bound. None without a cdf."""
    cdf = results.get("cdf") or {}
    quantiles = cdf.get("quantiles") or []
    if not quantiles:
        return None
    bounds = slo_bounds(results)
    metrics = []
    for key, label, _description in LATENCY_METRICS:
        points = [{"x": v, "y": q / 100.0} for q, v in zip(quantiles, cdf.get(key) or []) if _finite(v) and _finite(q)]
        if points:
            metrics.append({"key": key, "label": label, "points": points, "slo": bounds.get(key)})
    return {"metrics": metrics} if metrics else None


def stage_row_meets(simulation: Mapping[str, Any]) -> bool:
    """Whether a simulated plan row meets its percentile SLOs as the stage ranked it: under a rate sweep, by having a
    knee (a swept rate meeting them, with every lower one); else at the plan's load, not overloaded."""
    if simulation.get("sweep"):
        return (simulation["sweep"] or {}).get("knee_rate_per_s") is not None
    return bool(simulation.get("meets_slo_percentiles")) and not simulation.get("overloaded")


# A plan's candidate CDFs drawn at first (the legend shows the others): more lines than colours to tell apart read as one.
STAGE_CDF_SHOWN = 5


def stage_cdf_chart(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """A plan's simulation stage as latency CDFs, one line per simulated candidate in ranked order (points as
    cdf_chart's), per metric, with the SLO bound: how each candidate's requests spread, not only its percentile
    checks. None when no ranked row carries a simulated CDF (no stage, or one stored before the stage kept them)."""
    simulated = [(rank, row) for rank, row in enumerate(results.get("ranked") or [], start=1) if (row.get("simulation") or {}).get("cdf")]
    if not simulated:
        return None
    bounds = slo_bounds(simulated[0][1]["simulation"])
    metrics = []
    for key, label, _description in LATENCY_METRICS:
        candidates = []
        for rank, row in simulated:
            cdf = row["simulation"]["cdf"]
            points = [{"x": v, "y": q / 100.0} for q, v in zip(cdf.get("quantiles") or [], cdf.get(key) or []) if _finite(v) and _finite(q)]
            if points:
                candidates.append({"rank": rank, "label": f"#{rank} {configuration_label(row)}", "points": points,
                                   "meets": stage_row_meets(row["simulation"])})  # fmt: skip
        if candidates:
            metrics.append({"key": key, "label": label, "slo": bounds.get(key), "candidates": candidates})
    return {"metrics": metrics, "shown": STAGE_CDF_SHOWN, "candidates": len(simulated)} if metrics else None


def series_chart(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """Queue length and running sequences (counts) and KV utilisation (as %) against time, from results["series"]."""
    series = results.get("series") or {}
    times = series.get("time_s") or []
    if not times:
        return None

    def line(name: str, scale: float = 1.0) -> list[dict[str, float]]:
        return [{"x": t, "y": v * scale} for t, v in zip(times, series.get(name) or []) if _finite(t) and _finite(v)]

    return {"queue": line("queue_length"), "running": line("running"), "kv_percent": line("kv_utilisation", 100.0),
            "duration_s": times[-1]}  # fmt: skip


def sweep_chart(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """A rate sweep's pictures: p50/p99 TTFT and TPOT (and each SLO's percentile: sweep_lines) against the request
    rate (points with no positive value left out: the axis is logarithmic), goodput and the offered rate against it,
    the overloaded points, the SLO bounds and the knee. None when the run was not a sweep."""
    sweep = results.get("sweep") or {}
    points = [p for p in sweep.get("points") or [] if _finite(p.get("rate_per_s"))]
    if not points:
        return None
    rates = [p["rate_per_s"] for p in points]
    lines = []
    for metric, stat, label in sweep_lines(results):
        values = [{"x": p["rate_per_s"], "y": (p.get(metric) or {}).get(stat)} for p in points]
        values = [v for v in values if _finite(v["y"]) and v["y"] > 0]
        if values:
            lines.append({"metric": metric, "stat": stat, "label": label, "points": values})
    goodput = [{"x": p["rate_per_s"], "y": p["goodput_requests_per_s"]} for p in points if _finite(p.get("goodput_requests_per_s"))]
    bounds = slo_bounds(results)
    low, high = min(rates), max(rates)
    return {
        "lines": lines, "goodput": goodput, "offered": [{"x": r, "y": r} for r in rates],
        "overloaded": [{"x": p["rate_per_s"], "y": p["goodput_requests_per_s"]} for p in points
                       if p.get("overloaded") and _finite(p.get("goodput_requests_per_s"))],
        "knee_rate_per_s": sweep.get("knee_rate_per_s"),
        "slo": {key: bounds[key] for key in ("ttft_s", "tpot_s") if key in bounds},
        "rate_range": [low, high], "x_scale": "logarithmic" if low > 0 and high / low >= LOG_RATE_RATIO else "linear",
    }  # fmt: skip


def sweep_rows(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The swept points for a table, each marked where it is the knee, with `latencies` in sweep_lines' order."""
    sweep = results.get("sweep") or {}
    knee = sweep.get("knee_rate_per_s")
    lines = sweep_lines(results)
    return [{**p, "is_knee": knee is not None and p.get("rate_per_s") == knee,
             "latencies": [(p.get(metric) or {}).get(stat) for metric, stat, _ in lines]} for p in sweep.get("points") or []]  # fmt: skip


def _lengths_label(spec: Mapping[str, Any] | None) -> str:
    spec = spec or {}
    kind = spec.get("kind", "fixed")
    if kind == "fixed":
        return num(spec.get("tokens"))
    if kind in ("normal", "lognormal"):
        return f"{kind} {num(spec.get('mean_tokens'))} ± {num(spec.get('std_tokens'))}"
    return kind


def simulation_workload_label(inputs: Mapping[str, Any], *, request_count: int | None = None, trace_rows: int | None = None) -> str:
    """'1,000 requests · Poisson 5 req/s · prompt 1,000 · output lognormal 200 ± 100 tokens' (a trace: its rows)."""
    if "candidate_rank" in inputs and "plan" in inputs:
        return f"a plan's simulation stage, candidate #{inputs['candidate_rank']}"
    workload = inputs.get("workload") or {}
    if trace_rows:
        return f"a trace of {num(trace_rows)} requests"
    arrivals = workload.get("arrivals") or {}
    kind = arrivals.get("kind", "poisson")
    if kind == "closed_loop":
        load = f"closed loop of {num(arrivals.get('concurrency'))} clients"
        if arrivals.get("think_time_s"):
            load += f", {num(arrivals['think_time_s'])} s think time"
    elif kind == "gamma":
        load = f"bursty {num(arrivals.get('rate_per_s'))} req/s (CV {num(arrivals.get('cv'))})"
    else:
        load = f"Poisson {num(arrivals.get('rate_per_s'))} req/s"
    requests = workload.get("requests", request_count)
    return (f"{num(requests)} requests · {load} · prompt {_lengths_label(workload.get('prompt'))} · "
            f"output {_lengths_label(workload.get('output'))} tokens")  # fmt: skip
