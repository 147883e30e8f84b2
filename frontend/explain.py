"""Plain-language summary of a plan's outcome, assembled from the plan's stored results."""
from __future__ import annotations

from typing import Any, Mapping

from frontend.charts import configuration_label, memory_breakdown
from frontend.templatetags.hwformat import duration, num, percent, usd


def _bound_sentence(phase_name: str, phase: Mapping[str, Any]) -> str | None:
    if not phase or phase.get("bound") is None:
        return None
    intensity, ridge = phase.get("intensity_flop_per_byte"), phase.get("ridge_flop_per_byte")
    sentence = f"{phase_name} is {phase['bound']}-bound"
    if intensity is not None and ridge is not None:
        sentence += f" at intensity {num(intensity)} FLOP/byte vs the chip's ridge of {num(ridge)}"
    return sentence


def winner_explanation(results: Mapping[str, Any]) -> list[str]:
    """Why the top configuration wins, in a few short sentences (empty if none is feasible)."""
    ranked = results.get("ranked") or []
    if not ranked:
        return []
    top = ranked[0]
    lines = [f"{configuration_label(top)} is the cheapest feasible configuration at "
             f"{usd(top.get('usd_per_million_output_tokens'))} per 1M output tokens"
             + (f" ({top['pricing_model'].replace('_', ' ')} via {top['offering']})." if top.get("offering") and top.get("pricing_model") else ".")]  # fmt: skip
    lines.append(f"It answers with TTFT {duration(top.get('ttft_s'))} and TPOT {duration(top.get('tpot_s'))} "
                 f"({num(top.get('tokens_per_s_per_user'))} tokens/s per user, {num(top.get('output_tokens_per_s_total'))} in total).")  # fmt: skip
    served, total = top.get("served_output_tokens_per_s"), top.get("output_tokens_per_s_total")
    if served is not None and total and served < total:  # a request rate that leaves it idle part of the time
        lines.append(f"The request rate asks {num(served)} of those tokens/s: its cost per token is the configuration's hour "
                     "over them, the capacity left idle included.")  # fmt: skip
    phases = [s for s in (_bound_sentence("Decode", top.get("decode") or {}), _bound_sentence("prefill", top.get("prefill") or {})) if s]
    if phases:
        lines.append("; ".join(phases) + ".")
    memory = memory_breakdown(top.get("memory") or {})
    if memory["headroom_fraction"] is not None:
        lines.append(f"Weights, KV cache and activations fit with {percent(memory['headroom_fraction'])} of usable memory free per chip.")
    if len(ranked) > 1:
        runner = ranked[1]
        lines.append(f"Next: {configuration_label(runner)} at {usd(runner.get('usd_per_million_output_tokens'))}.")
    return lines


def infeasible_examples(results: Mapping[str, Any], *, limit: int = 5) -> list[dict[str, Any]]:
    """The infeasible groups' examples, cheapest first: what was tried and why it fails."""
    examples = []
    for group in results.get("infeasible") or []:
        config = group.get("example_configuration") or {}
        examples.append({
            "reason": group.get("reason"),
            "count": group.get("count"),
            "example": group.get("example"),
            "label": configuration_label(config) if config else "",
            "usd_per_million_output_tokens": config.get("usd_per_million_output_tokens"),
            "reasons": config.get("reasons") or [],
        })  # fmt: skip
    priced = sorted((e for e in examples if e["usd_per_million_output_tokens"] is not None), key=lambda e: e["usd_per_million_output_tokens"])
    unpriced = [e for e in examples if e["usd_per_million_output_tokens"] is None]
    return (priced + unpriced)[:limit]
