"""docs/accuracy.md's generated tables: `manage.py accuracy FILE --cv --markdown` renders an accuracy report
(planner/accuracy.py) as the doc prints it, and tests/planner/test_accuracy_doc.py holds the doc to it.

Every table gives the median absolute percentage error (MdAPE) of its values and, beside it, the median of
predicted / measured (above 1: predicted too high), so that a miss says its direction. Pure: a report in, text out."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# A metric's label and the unit its values print in (scale from the measured unit).
METRIC_LABELS = {
    "tpot_s": ("TPOT", "ms", 1e3),
    "ttft_s": ("TTFT", "ms", 1e3),
    "decode_tokens_per_s_per_user": ("decode tokens/s per user", "tok/s", 1.0),
    "output_tokens_per_s": ("output tokens/s", "tok/s", 1.0),
    "speedup_vs_ar": ("speed-up over autoregressive", "x", 1.0),
}
SILICON_CV = ("engine", "chip", "model family")
MISSES_PER_METRIC = 8
CONCURRENCY_BANDS = ((1, 4), (5, 32), (33, 256), (257, None))


def ratio_stats(rows: Iterable[Mapping]) -> dict[str, float]:
    """MdAPE, count and the median predicted / measured of some predicted values."""
    items = list(rows)
    if not items:
        return {"mdape": float("nan"), "count": 0, "ratio": float("nan")}
    logs = [math.log(float(r["predicted"]) / float(r["measured"])) for r in items]
    return {"mdape": statistics.median(float(r["ape"]) for r in items), "count": len(items), "ratio": math.exp(statistics.median(logs))}


def group_stats(rows: Iterable[Mapping], key: str | Callable[[Mapping], tuple[int, str] | None]) -> dict[str, dict[str, dict[str, float]]]:
    """{group: {metric: ratio_stats}} over the rows, grouped by a row key in the key's order, or by a function
    of the row giving (rank, label) in the order of rank (None leaves the row out)."""
    of = key if callable(key) else (lambda r: (0, str(r[key])) if r.get(key) is not None else None)
    groups: dict[tuple[int, str], dict[str, list[Mapping]]] = {}
    for r in rows:
        group = of(r)
        if group is not None:
            groups.setdefault(group, {}).setdefault(r["metric"], []).append(r)
    return {label: {m: ratio_stats(v) for m, v in sorted(by_metric.items())} for (_, label), by_metric in sorted(groups.items())}


def concurrency_band(row: Mapping) -> tuple[int, str] | None:
    """The row's closed-loop concurrency band, ranked from the lowest."""
    c = row.get("concurrency")
    if c is None:
        return None
    for rank, (low, high) in enumerate(CONCURRENCY_BANDS):
        if high is None or c <= high:
            return rank, (f"{low:,}-{high:,}" if high else f"{low:,} and more")
    return None


def _number(value: float) -> str:
    """Four significant digits, whole numbers from 1,000 up, thousands separated."""
    digits = 3 - math.floor(math.log10(abs(value))) if value else 0
    return f"{value:,.{min(max(digits, 0), 6)}f}"


def _pct(value: float) -> str:
    return "n/a" if value != value else f"{value:.1f}%"


def _cell(stats: Mapping | None) -> str:
    if not stats or not stats.get("count"):
        return ""
    return f"{_pct(stats['mdape'])} ({stats['ratio']:.2f}x, {stats['count']:,})"


def _metrics(report: Mapping) -> list[str]:
    return [m for m in METRIC_LABELS if m in report["summary"]["by_metric"]]


def _headline(report: Mapping, groups: tuple[str, ...]) -> list[str]:
    metrics = _metrics(report)
    header = ["MdAPE", *(f"leave one {g} out" for g in groups), "in-sample, fitted", "spec defaults"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    cv, fitted, spec = report.get("cv", {}), report["summary"], report.get("spec_defaults", {})

    def row(label: str, pick) -> str:
        cells = [pick(cv.get(g, {})) for g in groups] + [pick(fitted), pick(spec)]
        return f"| {label} | " + " | ".join(_pct(c) if c is not None else "" for c in cells) + " |"

    for m in metrics:
        lines.append(row(METRIC_LABELS[m][0], lambda s, m=m: s.get("by_metric", {}).get(m, {}).get("mdape")))
    lines.append(row("all values", lambda s: s.get("mdape")))
    counts = f"{fitted['count']:,} values predicted of {fitted['total']:,}"
    return lines + ["", f"({counts}; each group held out in turn is predicted with profiles fitted to the rest.)"]


def _group_table(title: str, stats: Mapping[str, Mapping[str, Mapping]], metrics: list[str]) -> list[str]:
    header = [title, *(f"{METRIC_LABELS[m][0]}" for m in metrics)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for group, by_metric in stats.items():
        lines.append(f"| {group} | " + " | ".join(_cell(by_metric.get(m)) for m in metrics) + " |")
    return lines


def _misses(rows: list[Mapping], metrics: list[str], per_metric: int) -> list[str]:
    lines = ["| metric | id | engine | chip | measured | predicted | predicted / measured |", "|---|---|---|---|---|---|---|"]
    for m in metrics:
        label, unit, scale = METRIC_LABELS[m]
        worst = sorted((r for r in rows if r["metric"] == m), key=lambda r: (-round(float(r["ape"]), 1), r["id"]))[:per_metric]
        for r in worst:
            lines.append(f"| {label} | `{r['id']}` | {r['engine']} | {r['chip']} | {_number(float(r['measured']) * scale)} {unit} | "
                         f"{_number(float(r['predicted']) * scale)} {unit} | {float(r['predicted']) / float(r['measured']):.2f} |")  # fmt: skip
    return lines


def _coverage(report: Mapping, silicon: bool) -> list[str]:
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
    whose = ("the bands of the predictions at the spec defaults, as an estimate that names no serving engine gets them"
             if silicon and "fit" in report else "the bands of these predictions" if silicon else
             "the chip-family bands of the chips outside the silicon file, from predictions with each chip held out")
    return [f"Share of measured values inside their 80% interval, the bands rebuilt without the held-out group ({whose}):", "", *lines]


def _below_roofline(report: Mapping, groups: tuple[str, ...]) -> list[str]:
    below = (report.get("below_roofline") or {}).get("tpot_s")
    if not below:
        return []
    total = report["summary"]["by_metric"].get("tpot_s", {}).get("count", 0)
    by = ", ".join(f"{label} {n}" for label, n in below["by_mode_engine"].items()) or "none"
    held = [report.get("cv", {}).get(g, {}).get("tpot_within_roofline", {}).get("mdape") for g in groups]
    held_text = " / ".join(_pct(h) for h in held if h is not None)
    return [f"Below the roofline: {below['count']:,} of the {total:,} TPOT values lie below the planner's roofline of their published "
            f"layout and batch (every efficiency at 1, no fixed cost), which no autoregressive decode of what the columns say "
            f"reaches: speculative decoding, a batch smaller than the concurrency, or a layout not recorded ({by}). They stay in "
            f"every table; without them TPOT MdAPE is {_pct(below['within']['mdape'])} in-sample"
            + (f" and {held_text} held out ({' / '.join(groups)})." if held_text else "."), ""]  # fmt: skip


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
                 "| family | compute fraction | bandwidth fraction | step overhead | values | chips | speaks for |", "|---|---|---|---|---|---|---|"]
        for p in fit["family_profiles"]:
            speaks = "the family (each chip held out is predicted better than at the spec defaults)" if p["transfers"] else "these chips only"
            lines.append(f"| {p['family']} | {p['compute_fraction']:.3f} | {p['bandwidth_fraction']:.3f} | {p['step_overhead_s'] * 1e3:.2f} ms | "
                         f"{p['values']:,} | {', '.join(p['chips'])} | {speaks} |")  # fmt: skip
        return [*lines, ""]
    return []


def _unpredicted(report: Mapping) -> list[str]:
    missing = report.get("unpredicted") or []
    if not missing:
        return ["Every value is predicted."]
    reasons: dict[str, int] = {}
    for u in missing:
        reasons[u["reason"]] = reasons.get(u["reason"], 0) + 1
    return [f"{len(missing)} values not predicted:", "", *(f"- {n} x {reason}" for reason, n in sorted(reasons.items(), key=lambda x: (-x[1], x[0])))]


def markdown_report(report: Mapping[str, Any]) -> str:
    """The report (with --cv: fitted, cross-validated, spec defaults) as docs/accuracy.md's tables."""
    rows, metrics = report["rows"], _metrics(report)
    silicon = set(report.get("cv", {})) == set(SILICON_CV)
    groups = SILICON_CV if silicon else tuple(report.get("cv", {}))
    out = ["Cross-validated first (MdAPE):", "", *_headline(report, groups), ""]
    cells = "Cells: MdAPE (median predicted / measured, values)."
    for label in groups:
        by_group = report["cv"][label].get("by_group")
        if by_group:
            out += [f"Each {label} held out, predicted with profiles fitted without it. {cells}", "",
                    *_group_table(f"{label} held out", by_group, metrics), ""]  # fmt: skip
    out += _profiles(report)
    out += _coverage(report, silicon) + [""] if _coverage(report, silicon) else []
    slices = (("engine", "engine"), ("chip", "chip"))
    if silicon:
        slices += (("serving mode", "mode"), ("model family", "family"), ("weights", "weight_dtype"), ("concurrency", concurrency_band))
    else:
        slices = (("chip kind", "chip_kind"), *slices, ("chip family", "family"))
    for title, key in slices:
        out += [f"In-sample, fitted, by {title}. {cells}", "", *_group_table(title, group_stats(rows, key), metrics), ""]
    replicates = report.get("replicates") or {}
    if replicates.get("groups"):
        floors = ", ".join(f"{METRIC_LABELS[m][0]} {replicates[m]['mdape']:.1f}% ({replicates[m]['count']} values)" for m in metrics if replicates.get(m, {}).get("count"))
        out += [f"The floor: {replicates['groups']} configurations are published more than once with different values; against each "
                f"configuration's geometric mean, the least error any prediction from the published columns can have on them, "
                f"MdAPE {floors}.", ""]  # fmt: skip
    out += _below_roofline(report, groups)
    out += [f"The largest misses, in-sample ({MISSES_PER_METRIC} per metric):", "", *_misses(rows, metrics, MISSES_PER_METRIC), ""]
    out += _unpredicted(report)
    return "\n".join(out)


END_MARKER = "<!-- end generated -->"


def generated_marker(csv_path: str) -> str:
    """The line that opens a doc's generated block for one measurements file."""
    return f"<!-- generated: manage.py accuracy {csv_path} --cv --markdown -->"


def generated_block(doc: str, csv_path: str) -> str | None:
    """The text between the file's marker and the next end marker (None where the doc has no such block)."""
    start = doc.find(generated_marker(csv_path))
    if start < 0:
        return None
    body = start + len(generated_marker(csv_path))
    end = doc.find(END_MARKER, body)
    if end < 0:
        raise ValueError(f"{generated_marker(csv_path)} is not closed by {END_MARKER}")
    return doc[body:end].strip("\n")


def splice_generated(doc: str, csv_path: str, tables: str) -> str:
    """The doc with the file's generated block replaced by `tables` (ValueError where it has no such block)."""
    if generated_block(doc, csv_path) is None:
        raise ValueError(f"no line {generated_marker(csv_path)!r} to write the tables after")
    start = doc.find(generated_marker(csv_path)) + len(generated_marker(csv_path))
    end = doc.find(END_MARKER, start)
    return f"{doc[:start]}\n\n{tables}\n\n{doc[end:]}"
