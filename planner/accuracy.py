"""Predict every row of a measurements CSV with the catalog's specs and summarise the error.

A row that cannot be predicted (unknown slug, unsupported method) is listed with its reason
and counted apart; it is never dropped silently."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hwcatalog.models import Chip, ModelArch
from planner import catalog_specs
from planner.engine import absolute_percentage_error, predict_metric, predict_row, read_measurements, summarize


def accuracy_report(*, csv_path: Path, use_calibration: bool = True) -> dict[str, Any]:
    with csv_path.open(newline="") as handle:
        measured = read_measurements(handle)
    models = {m.slug: m for m in ModelArch.objects.all()}
    chips = {c.slug: c for c in Chip.objects.all()}
    calibration = catalog_specs.calibrations_for(chips) if use_calibration else {}
    rows, unpredicted = [], []
    for row in measured:
        draft_slug = row.decoding_params.get("draft_model")
        missing = [s for s in (row.model, draft_slug) if s and s not in models] + ([row.chip] if row.chip not in chips else [])
        if missing:
            unpredicted.append({"id": row.id, "reason": f"unknown catalog slug(s): {', '.join(missing)}"})
            continue
        chip = chips[row.chip]
        try:
            est = predict_row(
                row, catalog_specs.model_spec(models[row.model]), catalog_specs.chip_spec(chip),
                draft=catalog_specs.model_spec(models[draft_slug]) if draft_slug else None, calibration=calibration,
            )  # fmt: skip
            predicted = predict_metric(row.metric, est)
        except (ValueError, KeyError) as exc:
            unpredicted.append({"id": row.id, "reason": str(exc)})
            continue
        if not est.fits or predicted != predicted:  # NaN: the configuration does not run
            unpredicted.append({"id": row.id, "reason": "; ".join(est.reasons) or "the planner finds this configuration infeasible"})
            continue
        rows.append({
            "id": row.id, "model": row.model, "chip": row.chip, "chip_kind": chip.kind, "metric": row.metric,
            "measured": row.value, "predicted": predicted, "ape": absolute_percentage_error(predicted, row.value),
            "engine": row.engine, "tensor_parallel": est.tensor_parallel, "pipeline_parallel": est.pipeline_parallel,
            "batch": est.batch, "decode_bound": est.decode.bound, "efficiency_source": est.efficiency_source,
        })  # fmt: skip
    return {"rows": rows, "unpredicted": unpredicted, "summary": {**summarize(rows), "unpredicted": len(unpredicted), "total": len(measured)}}


def format_report(report: dict[str, Any]) -> str:
    lines = [f"{'id':44} {'metric':30} {'measured':>10} {'predicted':>10} {'APE %':>7}"]
    for r in sorted(report["rows"], key=lambda r: -r["ape"]):
        lines.append(f"{r['id']:44} {r['metric']:30} {r['measured']:>10.4g} {r['predicted']:>10.4g} {r['ape']:>7.1f}")
    for u in report["unpredicted"]:
        lines.append(f"{u['id']:44} NOT PREDICTED: {u['reason']}")
    s = report["summary"]
    lines.append("")
    lines.append(f"overall: MdAPE {s['mdape']:.1f}%  MAPE {s['mape']:.1f}%  over {s['count']} rows ({s['unpredicted']} not predicted of {s['total']})")
    for group in ("by_chip_kind", "by_metric"):
        for name, stats in s[group].items():
            lines.append(f"  {group[3:]:9} {name:30} MdAPE {stats['mdape']:6.1f}%  MAPE {stats['mape']:6.1f}%  n={stats['count']}")
    return "\n".join(lines)
