"""Plain-language summary of a plan's outcome, assembled from the plan's stored results."""
from __future__ import annotations

from typing import Any, Mapping

from frontend.charts import configuration_label, memory_breakdown, stage_row_meets
from frontend.templatetags.hwformat import duration, num, percent, usd


def _bound_sentence(phase_name: str, phase: Mapping[str, Any]) -> str | None:
    if not phase or phase.get("bound") is None:
        return None
    intensity, ridge = phase.get("intensity_flop_per_byte"), phase.get("ridge_flop_per_byte")
    sentence = f"{phase_name} is {phase['bound']}-bound"
    if intensity is not None and ridge is not None:
        sentence += f" at intensity {num(intensity)} FLOP/byte vs the chip's ridge of {num(ridge)}"
    return sentence


def percentile_slos_text(slo_percentiles: Mapping[str, Any] | None) -> str:
    """A plan's percentile SLOs as people write them: "p95 TTFT ≤ 500 ms, p90 TPOT ≤ 50 ms"."""
    return ", ".join(f"p{spec['p']:g} {metric.upper()} ≤ {duration(spec['s'])}" for metric, spec in (slo_percentiles or {}).items())


def simulation_cell(row: Mapping[str, Any]) -> dict[str, str]:
    """How the simulation stage placed one ranked row, for the ranking's "Simulation" column: {kind, text}, kind one of
    meets, misses, ruled-out (missed by the analytical estimate), not-simulable, not-simulated."""
    sim, ruled_out = row.get("simulation"), row.get("analytical_miss")
    if ruled_out:
        return {"kind": "ruled-out", "text": f"misses p{ruled_out['p']:g} {ruled_out['metric'].upper()} ≤ {duration(ruled_out['s'])}: "
                                              f"at least {duration(ruled_out['least_s'])} ({ruled_out['basis']}); not simulated"}  # fmt: skip
    if not sim:
        return {"kind": "not-simulated", "text": "not simulated (past the stage's top rows): placed by its analytical cost"}
    if "error" in sim:
        return {"kind": "not-simulable", "text": f"not simulated: {sim['error']}; placed by its analytical cost"}
    checks = "; ".join(f"p{c['p']:g} {metric.upper()} {duration(c['value_s'])} {'≤' if c['met'] else '>'} {duration(c['s'])}"
                       for metric, c in (sim.get("slo_percentiles") or {}).items() if c.get("value_s") is not None)  # fmt: skip
    cost = row.get("simulated_usd_per_million_output_tokens")
    sweep = sim.get("sweep")
    if sweep:  # ranked by the cost at its knee: the highest swept rate meeting every percentile SLO
        knee = sweep.get("knee_rate_per_s")
        text = (f"{usd(cost)}/1M simulated at its knee, {num(knee)} requests/s" if knee is not None else
                "no swept rate meets every percentile SLO") + (f"; at the plan's load {checks}" if checks else "")  # fmt: skip
        return {"kind": "meets" if stage_row_meets(sim) else "misses", "text": text}
    text = f"{usd(cost)}/1M simulated" + (f"; {checks}" if checks else "") + ("; overloaded" if sim.get("overloaded") else "")
    return {"kind": "meets" if stage_row_meets(sim) else "misses", "text": text}


def stage_summary(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """The simulation stage of a plan with percentile SLOs, for its page: the SLOs, what was simulated and what met
    them, and a warning when nothing simulated met them (the first rows are then unchecked or ruled out)."""
    stage = results.get("simulation")
    if not stage or stage.get("status") != "done" or not results.get("ranked"):  # nothing feasible: nothing to simulate
        return None
    lines = [f"The first {num(stage.get('candidates'))} rows not ruled out by a prefill longer than the TTFT bound were simulated with "
             f"{num(stage.get('requests_per_candidate'))} requests each at the plan's load ({stage.get('mode')}, "
             f"{duration(stage.get('simulation_seconds'))} of simulation): {num(stage.get('meeting_slos'))} meet every percentile SLO, "
             f"{num(stage.get('missing_slos'))} miss one, {num(stage.get('not_simulated'))} could not be simulated."
             if stage.get("candidates") else "No row was simulated: every ranked row is ruled out by a prefill longer than the TTFT bound."]  # fmt: skip
    if not (stage.get("slo_percentiles") or {}).get("ttft"):
        lines[0] = lines[0].replace("rows not ruled out by a prefill longer than the TTFT bound", "rows")
    if stage.get("missing_by_analysis"):
        lines.append(f"{num(stage['missing_by_analysis'])} rows miss the TTFT bound whatever the load: one prefill of the prompt takes longer, "
                     "even at the optimistic end of their 80% range; they are ranked last, not simulated.")  # fmt: skip
    lines.append(f"Ranking: {stage.get('basis')}; then, by analytical cost, the rows not simulated; last the rows that miss.")
    best = stage.get("best_simulated_usd_per_million_output_tokens")
    warning = None if stage.get("meeting_slos") else (
        "No simulated configuration meets the percentile SLOs. The rows ranked first were not checked by a simulation (past the "
        "stage's top rows, or not simulable): simulate them from their row, raise simulation.top_n, or relax the SLOs.")  # fmt: skip
    return {"slos": percentile_slos_text(stage.get("slo_percentiles")), "lines": lines, "warning": warning, "best_simulated": best}


def winner_explanation(results: Mapping[str, Any]) -> list[str]:
    """Why the top configuration wins, in a few short sentences (empty if none is feasible)."""
    ranked = results.get("ranked") or []
    if not ranked:
        return []
    top = ranked[0]
    offering = f" ({top['pricing_model'].replace('_', ' ')} via {top['offering']})" if top.get("offering") and top.get("pricing_model") else ""
    cell = simulation_cell(top) if top.get("ranking_stage") else None
    analytical_cost = usd(top.get("usd_per_million_output_tokens"))
    if cell and cell["kind"] == "meets":
        where = "at its knee" if (top.get("simulation") or {}).get("sweep") else "at the plan's load"
        lines = [f"{configuration_label(top)} ranks first by its simulation: {usd(top.get('simulated_usd_per_million_output_tokens'))} per 1M "
                 f"output tokens {where}{offering}, meeting every percentile SLO ({cell['text']}); {analytical_cost} by the "
                 "analytical estimate."]  # fmt: skip
    elif cell and cell["kind"] in ("misses", "ruled-out"):
        lines = [f"No configuration meets the percentile SLOs; {configuration_label(top)} misses them least ({cell['text']}), at "
                 f"{analytical_cost} per 1M output tokens by the analytical estimate{offering}."]  # fmt: skip
    elif cell:
        lines = [f"{configuration_label(top)} is the cheapest configuration the simulation stage did not rule out, at {analytical_cost} per 1M "
                 f"output tokens by the analytical estimate{offering}; it is unchecked against the percentile SLOs ({cell['text']})."]  # fmt: skip
    else:
        lines = [f"{configuration_label(top)} is the cheapest feasible configuration at "
                 f"{usd(top.get('usd_per_million_output_tokens'))} per 1M output tokens{offering}."]  # fmt: skip
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
        simulated = runner.get("simulated_usd_per_million_output_tokens")
        lines.append(f"Next: {configuration_label(runner)} at {usd(simulated)} simulated ({usd(runner.get('usd_per_million_output_tokens'))} "
                     "by the analytical estimate)." if simulated is not None else
                     f"Next: {configuration_label(runner)} at {usd(runner.get('usd_per_million_output_tokens'))}.")  # fmt: skip
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
