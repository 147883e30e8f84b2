"""Two plans side by side: their inputs as a reader names them, with units (a stored plan's `inputs` are the
validated request: nested fields such as `workload.ttft_slo_s` or `decodings[0].focus_fraction`), and their
ranked rows as points of one cost-latency chart."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from frontend.templatetags.hwformat import duration, num, percent, usd

# Names a reader knows the inputs by; a field not named here is spelt out from its own name.
LABELS = {
    "model": "Model",
    "workload.prompt_tokens": "Prompt tokens",
    "workload.output_tokens": "Output tokens",
    "workload.concurrency": "Concurrent requests",
    "workload.request_rate_per_s": "Request rate",
    "workload.closed_loop": "Closed loop",
    "workload.ttft_slo_s": "TTFT target",
    "workload.tpot_slo_s": "TPOT target",
    "hardware.kinds": "Chip kinds",
    "hardware.vendors": "Vendors",
    "hardware.chips": "Chips",
    "hardware.max_chips": "At most chips",
    "hardware.pricing_models": "Pricing models",
    "hardware.ownership": "Rent or own",
    "hardware.weight_dtypes": "Weight dtypes",
    "budget_usd_per_million_output_tokens": "Budget per 1M output tokens",
    "disaggregated": "Separate prefill and decode pools",
    "serving_engine": "Serving engine",
    "pinned": "Re-validated nightly",
    "rank_by": "Ranked by",
}
GROUPS = {"workload": "Workload", "hardware": "Hardware", "decodings": "Decoding", "efficiency": "Efficiency",
          "simulation": "Simulation", "slo_percentiles": "Percentile SLOs"}  # fmt: skip


def _unit(name: str) -> Callable[[Any], str] | None:
    """How a field's value reads, from its name's unit suffix."""
    if name.startswith("usd") or "_usd" in name:
        return usd
    if name.endswith("_per_s"):
        return lambda v: f"{num(v)}/s"
    if name.endswith("_s"):
        return duration
    if name.endswith(("_fraction", "_rate", "_share")):
        return percent
    return None


def label_for(key: str) -> str:
    """`decodings[0].focus_fraction` -> 'Decoding 1 · focus fraction'; known fields by their LABELS name."""
    bare = re.sub(r"\[\d+\]", "", key)
    if bare in LABELS:
        return LABELS[bare]
    parts = re.findall(r"([A-Za-z_]+)(?:\[(\d+)\])?", key)
    words = []
    for i, (name, index) in enumerate(parts):
        if i == 0 and name in GROUPS:
            words.append(GROUPS[name] + (f" {int(index) + 1}" if index else ""))
        else:
            text = re.sub(r"_(s|per_s)$", "", name).replace("_", " ")
            words.append(text + (f" {int(index) + 1}" if index else ""))
    return " · ".join(words)


def formatted(key: str, value: Any) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) if value else "any"
    name = re.sub(r"\[\d+\]", "", key).rsplit(".", 1)[-1]
    unit = _unit(name)
    if unit and isinstance(value, (int, float)):
        return unit(value)
    return num(value) if isinstance(value, (int, float)) else str(value)


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested inputs -> {"workload.prompt_tokens": 1000, "decodings[0].method": "ar", ...}; lists of plain values stay lists."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        out = {}
        for i, item in enumerate(value):
            out.update(_flat(item, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def input_rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per input either plan has: its key, label and each plan's value as read, and whether they differ."""
    flat_a, flat_b = _flat(a or {}), _flat(b or {})
    rows = []
    for key in dict.fromkeys([*flat_a, *flat_b]):
        va, vb = flat_a.get(key), flat_b.get(key)
        rows.append({"key": key, "label": label_for(key), "a": formatted(key, va), "b": formatted(key, vb), "differs": va != vb})
    return rows


def chart_points(results: dict[str, Any]) -> list[dict[str, float]]:
    """A plan's ranked rows as cost-latency points: TPOT and TTFT in seconds, $ per 1M output tokens, the rank."""
    return [
        {"rank": rank, "tpot_s": row["tpot_s"], "ttft_s": row["ttft_s"], "usd": row["usd_per_million_output_tokens"]}
        for rank, row in enumerate((results or {}).get("ranked") or [], start=1)
        if row.get("usd_per_million_output_tokens") is not None and row.get("tpot_s") and row.get("ttft_s")
    ]
