"""docs/accuracy.md's generated tables: `manage.py accuracy FILE --cv --markdown` renders an accuracy report
(planner/accuracy.py) as the doc prints it, and the tests that run each file's cross-validation hold the doc to it
(tests/planner/accuracy_doc.py).

Every table gives the median absolute percentage error (MdAPE) of its values and, beside it, the median of
predicted / measured (above 1: predicted too high), so that a miss says its direction. Pure: a report in, text out."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from planner.engine import group_stats
from planner.engine.family_fit import pooled_kind
from planner.model_configs import report_lines

# Why a profile that transfers speaks beyond the chips it was fitted on (planner/accuracy.py, _transfers).
TRANSFER_REASON = "each architecture held out is predicted better than at the spec defaults"


def speaks_for_words(profile: Mapping) -> str:
    """Which chips a fitted chip-family profile (a report's `family_profiles` entry) speaks for, in words
    (catalog_specs.family_calibration)."""
    if pooled_kind(profile["family"]):
        return "these chips, and a chip of their vendors that no profile of its family speaks for" if profile["transfers"] else "these chips"
    return "the family" if profile["transfers"] else "these chips and the chips of their architecture"


class MetricLabel(NamedTuple):
    name: str  # as the tables head it
    unit: str  # the unit its values print in
    scale: float  # from the measured unit to that one


METRIC_LABELS = {
    "tpot_s": MetricLabel("TPOT", "ms", 1e3),
    "ttft_s": MetricLabel("TTFT", "ms", 1e3),
    "decode_tokens_per_s_per_user": MetricLabel("decode tokens/s per user", "tok/s", 1.0),
    "output_tokens_per_s": MetricLabel("output tokens/s", "tok/s", 1.0),
    "speedup_vs_ar": MetricLabel("speed-up over autoregressive", "x", 1.0),
}
SILICON_CV = ("engine", "chip", "model family")
MISSES_PER_METRIC = 8
MISSES_HEADER = "| metric | id | engine | chip | measured | predicted | predicted / measured |"
# Each band: its upper end (included; None for the last) and its label.
Bands = tuple[tuple[float | None, str], ...]
CONCURRENCY_BANDS: Bands = ((4, "1-4"), (32, "5-32"), (256, "33-256"), (None, "257 and more"))
REPLICA_BANDS: Bands = ((16, "up to 16"), (64, "16-64"), (128, "64-128"), (256, "128-256"), (None, "over 256"))


def _banded(value: float | None, bands: Bands) -> tuple[int, str] | None:
    """The band a value falls in (the first whose upper end it does not pass), ranked from the lowest, and its label."""
    if value is None:
        return None
    for rank, (high, label) in enumerate(bands):
        if high is None or value <= high:
            return rank, label
    return None


def concurrency_band(row: Mapping) -> tuple[int, str] | None:
    """The row's closed-loop concurrency band, ranked from the lowest."""
    return _banded(row.get("concurrency"), CONCURRENCY_BANDS)


def replica_band(row: Mapping) -> tuple[int, str] | None:
    """A colocated row's clients per attention replica, banded: its concurrency over its attention replicas as the
    planner reads the layout (`attention_data_parallel` of the row's estimate: a published TP that does not divide the
    heads read as attention DP, a squared expert layout as the node's GPUs; planner/engine/silicon.py). None for a
    disaggregated row, whose decode workers the columns mostly leave out."""
    if row.get("mode") != "agg" or row.get("concurrency") is None:
        return None
    return _banded(row["concurrency"] / max(row.get("attention_data_parallel") or 1, 1), REPLICA_BANDS)


def _missing(value: float | None) -> bool:
    return value is None or value != value


def _number(value: float | None) -> str:
    """Four significant digits, whole numbers from 1,000 up, thousands separated."""
    if _missing(value):
        return "n/a"
    digits = 3 - math.floor(math.log10(abs(value))) if value else 0
    return f"{value:,.{min(max(digits, 0), 6)}f}"


def _pct(value: float | None) -> str:
    return "n/a" if _missing(value) else f"{value:.1f}%"


def stats_cell(stats: Mapping | None) -> str:
    """A ratio_stats cell: MdAPE (median predicted / measured, values); empty without values."""
    if not stats or not stats.get("count"):
        return ""
    ratio = "n/a" if _missing(stats.get("ratio")) else f"{stats['ratio']:.2f}x"
    return f"{_pct(stats['mdape'])} ({ratio}, {stats['count']:,})"


def _fitted(report: Mapping) -> bool:
    return report.get("fit") is not None


def _metrics(report: Mapping) -> list[str]:
    return [m for m in METRIC_LABELS if m in report["summary"]["by_metric"]]


def _headline(report: Mapping, groups: tuple[str, ...]) -> list[str]:
    header = ["MdAPE", *(f"leave one {g} out" for g in groups), "in-sample, fitted" if _fitted(report) else "as predicted"]
    header += ["spec defaults"] if report.get("spec_defaults") is not None else []
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    cv, fitted, spec = report.get("cv", {}), report["summary"], report.get("spec_defaults")

    def row(label: str, pick) -> str:
        cells = [pick(cv.get(g, {})) for g in groups] + [pick(fitted)] + ([pick(spec)] if spec is not None else [])
        return f"| {label} | " + " | ".join(_pct(c) for c in cells) + " |"

    for m in _metrics(report):
        lines.append(row(METRIC_LABELS[m].name, lambda s, m=m: s.get("by_metric", {}).get(m, {}).get("mdape")))
    lines.append(row("all values", lambda s: s.get("mdape")))
    how = "; each group held out in turn is predicted with profiles fitted to the rest" if groups else ""
    return lines + ["", f"({fitted['count']:,} values predicted of {fitted['total']:,}{how}.)"]


def _group_table(title: str, stats: Mapping[str, Mapping[str, Mapping]], metrics: list[str]) -> list[str]:
    header = [title, *(METRIC_LABELS[m].name for m in metrics)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for group, by_metric in stats.items():
        lines.append(f"| {group} | " + " | ".join(stats_cell(by_metric.get(m)) for m in metrics) + " |")
    return lines


def _misses(rows: list[Mapping], metrics: list[str], per_metric: int) -> list[str]:
    lines = [MISSES_HEADER, "|---|---|---|---|---|---|---|"]
    for m in metrics:
        label = METRIC_LABELS[m]
        worst = sorted((r for r in rows if r["metric"] == m), key=lambda r: (-round(float(r["ape"]), 1), r["id"]))[:per_metric]
        for r in worst:
            measured, predicted = float(r["measured"]), float(r["predicted"])
            lines.append(f"| {label.name} | `{r['id']}` | {r['engine']} | {r['chip']} | {_number(measured * label.scale)} {label.unit} | "
                         f"{_number(predicted * label.scale)} {label.unit} | {predicted / measured:.2f} |")  # fmt: skip
    return lines


def _coverage(report: Mapping, *, silicon: bool) -> list[str]:
    intervals = report.get("intervals") or {}
    cv = intervals.get("coverage_cv") or {}
    if not cv:
        return []
    splits = intervals.get("coverage_cv_by_serving") or intervals.get("coverage_cv_by_chip_kind") or {}
    parts = sorted({p for modes in splits.values() for p in modes})
    header = ["80% intervals, held out", "all", *parts]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for group, share in cv.items():
        by = splits.get(group, {})
        lines.append(f"| leave one {group} out | {share * 100:.0f}% | " + " | ".join(f"{by[p] * 100:.0f}%" if p in by else "" for p in parts) + " |")
    if silicon:
        whose = ("the bands of the predictions at the spec defaults, as an estimate that names no serving engine gets them" if _fitted(report)
                 else "the bands of these predictions")  # fmt: skip
    else:
        whose = "the chip-family bands of the chips outside the silicon file, from predictions with each architecture held out"
    return [f"Share of measured values inside their 80% interval, the bands rebuilt without the held-out group ({whose}):", "", *lines, ""]


def _profiles(report: Mapping) -> list[str]:
    fit = report.get("fit") or {}
    if fit.get("profiles"):
        lines = ["The serving-engine profiles fitted to the whole file (what `--profiles-out` writes; \"The fit\" below):", "",
                 "| engine | compute fraction | experts' share of it | bandwidth fraction | step overhead | request overhead | in-step share | values |",
                 "|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for p in fit["profiles"]:
            lines.append(f"| {'pooled' if p['engine'] == '*' else p['engine']} | {p['compute_fraction']:.3f} | {p['expert_efficiency']:.3f} | "
                         f"{p['bandwidth_fraction']:.3f} | {p['step_overhead_s'] * 1e3:.2f} ms | {p['request_overhead_s'] * 1e3:.1f} ms | "
                         f"{p['in_step_share']:.2f} | {p['values']:,} |")  # fmt: skip
        shared = fit["profiles"][0]["request_overhead_per_expert_layer_s"] * 1e6
        return [*lines, "", f"Shared by every engine: {shared:.2f} µs per routed expert and MoE layer before the first token.", ""]
    if fit.get("family_profiles"):
        lines = ["The chip-family profiles fitted to the whole file (bf16 fractions; what `--profiles-out` writes):", "",
                 "| family | compute fraction | bandwidth fraction | step overhead | values | chips | speaks for |", "|---|---|---|---|---|---|---|"]  # fmt: skip
        for p in fit["family_profiles"]:
            speaks = speaks_for_words(p) + (f" ({TRANSFER_REASON})" if p["transfers"] else "")
            lines.append(f"| {p['family']} | {p['compute_fraction']:.3f} | {p['bandwidth_fraction']:.3f} | {p['step_overhead_s'] * 1e3:.2f} ms | "
                         f"{p['values']:,} | {', '.join(p['chips'])} | {speaks} |")  # fmt: skip
        return [*lines, ""]
    return []


def _below_roofline(report: Mapping, groups: tuple[str, ...]) -> list[str]:
    below = (report.get("below_roofline") or {}).get("tpot_s")
    if not below:
        return []
    total = report["summary"]["by_metric"].get("tpot_s", {}).get("count", 0)
    by = ", ".join(f"{label} {n}" for label, n in below["by_mode_engine"].items()) or "none"
    held = [(g, report.get("cv", {}).get(g, {}).get("tpot_within_roofline", {}).get("mdape")) for g in groups]
    held = [(g, v) for g, v in held if not _missing(v)]
    held_text = f" and {' / '.join(_pct(v) for _, v in held)} held out ({' / '.join(g for g, _ in held)})" if held else ""
    return [f"Below the roofline: {below['count']:,} of the {total:,} TPOT values lie below the least TPOT the planner's physics "
            f"allows their measurements: one decode step of the published layout at 100% of every peak, no fixed cost and no "
            f"prefill beside it, holding the sequences that by Little's law decode at a time when each client sends its next "
            f"request as the last ends (the measured TTFT and TPOT), one a worker where the row leaves the decode workers out "
            f"({by}). They stay in every table; without them TPOT MdAPE is {_pct(below['within']['mdape'])} in-sample{held_text}.", ""]  # fmt: skip


def _unpredicted(report: Mapping) -> list[str]:
    missing = report.get("unpredicted") or []
    if not missing:
        return ["Every value is predicted."]
    reasons: dict[str, int] = {}
    for u in missing:
        reasons[u["reason"]] = reasons.get(u["reason"], 0) + 1
    return [f"{len(missing)} values not predicted:", "", *(f"- {n} x {reason}" for reason, n in sorted(reasons.items(), key=lambda x: (-x[1], x[0])))]


def is_silicon_report(report: Mapping) -> bool:
    """A report of AIConfigurator's silicon layout (it carries the replicate floor); else this project's format."""
    return "replicates" in report


def markdown_report(report: Mapping[str, Any]) -> str:
    """The report (with --cv: fitted, cross-validated, spec defaults) as docs/accuracy.md's tables."""
    rows, metrics = report["rows"], _metrics(report)
    silicon = is_silicon_report(report)
    groups = tuple(g for g in SILICON_CV if g in report.get("cv", {})) if silicon else tuple(report.get("cv", {}))
    out = ["Cross-validated first (MdAPE):" if groups else "MdAPE:", "", *_headline(report, groups), ""]
    cells = "Cells: MdAPE (median predicted / measured, values)."
    for label in groups:
        by_group = report["cv"][label].get("by_group")
        if by_group:
            out += [f"Each {label} held out, predicted with profiles fitted without it. {cells}", "", *_group_table(f"{label} held out", by_group, metrics), ""]
    out += _profiles(report)
    out += _coverage(report, silicon=silicon)
    slices: tuple[tuple[str, Any], ...] = (("engine", "engine"), ("chip", "chip"))
    if silicon:
        slices += (("serving mode", "mode"), ("model family", "family"), ("weights", "weight_dtype"), ("concurrency", concurrency_band),
                   ("clients per attention replica, colocated (a band includes its upper end)", replica_band))  # fmt: skip
    else:
        slices = (("chip kind", "chip_kind"), *slices, ("chip family", "family"))
    fitted = "In-sample, fitted" if _fitted(report) else "As predicted"
    for title, key in slices:
        out += [f"{fitted}, by {title}. {cells}", "", *_group_table(title, group_stats(rows, key), metrics), ""]
    replicates = report.get("replicates") or {}
    if replicates.get("groups"):
        floors = ", ".join(f"{METRIC_LABELS[m].name} {replicates[m]['mdape']:.1f}% ({replicates[m]['count']} values)"
                           for m in metrics if replicates.get(m, {}).get("count"))  # fmt: skip
        out += [f"The floor: {replicates['groups']} configurations are published more than once with different values; against each "
                f"configuration's geometric mean, the least error any prediction from the published columns can have on them, "
                f"MdAPE {floors}.", ""]  # fmt: skip
    out += _below_roofline(report, groups)
    out += [f"The largest misses ({MISSES_PER_METRIC} per metric):", "", *_misses(rows, metrics, MISSES_PER_METRIC), ""]
    out += _unpredicted(report)
    configs = report_lines(report.get("models_from_configs"))
    return "\n".join(out + ([""] + configs if configs else []))
