"""Predict every row of a measurements CSV with the catalog's specs and summarise the error.

A row that cannot be predicted (unknown slug, unsupported method) is listed with its reason
and counted apart; it is never dropped silently."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from hwcatalog.models import Chip, ModelArch
from planner import catalog_specs
from planner.engine import absolute_percentage_error, predict_metric, predict_row, read_measurements, summarize
from planner.engine.silicon import ENGINE_NAMES
from planner.engine.silicon import METRICS as SILICON_METRICS
from planner.engine.silicon import is_silicon_layout, read_silicon, silicon_estimates


def _by_name(rows, *alias_fields: str) -> dict[str, Any]:
    """Catalog rows by slug and by every alias they carry (hf_id, hf_aliases, aliases)."""
    found: dict[str, Any] = {}
    for row in rows:
        names = [row.slug]
        for field in alias_fields:
            value = getattr(row, field)
            names += value if isinstance(value, list) else [value] if value else []
        for name in names:
            found.setdefault(name, row)
    return found


def accuracy_report(*, csv_path: Path, use_calibration: bool = True) -> dict[str, Any]:
    """Predict every row of a measurements CSV: this project's format, or the silicon layout as
    published (detected by its header)."""
    with csv_path.open(newline="") as handle:
        header = next(csv.reader(handle), [])
    models = _by_name(ModelArch.objects.all(), "hf_id", "hf_aliases")
    chips = _by_name(Chip.objects.all(), "aliases")
    calibration = catalog_specs.calibrations_for({c.slug for c in chips.values()}) if use_calibration else {}
    if is_silicon_layout(header):
        return _silicon_report(csv_path, models, chips, calibration)
    with csv_path.open(newline="") as handle:
        measured = read_measurements(handle)
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


def _silicon_report(csv_path: Path, models: dict[str, Any], chips: dict[str, Any], calibration) -> dict[str, Any]:
    """Each silicon row gives two measured values (TTFT, TPOT), each predicted and reported under the row's id."""
    with csv_path.open(newline="") as handle:
        measured = read_silicon(handle)
    specs: dict[tuple[str, str], Any] = {}
    rows, unpredicted = [], []
    for row in measured:
        model, chip = models.get(row.model_path), chips.get(row.system)
        missing = [name for name, found in ((row.model_path, model), (row.system, chip)) if found is None]
        if missing:
            for metric in SILICON_METRICS:
                unpredicted.append({"id": row.id, "metric": metric, "reason": f"not in the catalog (by slug, hf_id or alias): {', '.join(missing)}"})
            continue
        key = (model.slug, chip.slug)
        if key not in specs:
            specs[key] = (catalog_specs.model_spec(model), catalog_specs.chip_spec(chip))
        try:
            estimates = silicon_estimates(row, *specs[key], calibration=calibration)
        except ValueError as exc:
            for metric in SILICON_METRICS:
                unpredicted.append({"id": row.id, "metric": metric, "reason": str(exc)})
            continue
        for metric, est in estimates.items():
            predicted = predict_metric(metric, est)
            if not est.fits or predicted != predicted:
                unpredicted.append({"id": row.id, "metric": metric, "reason": "; ".join(est.reasons) or "the planner finds this configuration infeasible"})
                continue
            rows.append({
                "id": row.id, "model": model.slug, "chip": chip.slug, "chip_kind": chip.kind, "metric": metric,
                "measured": row.measured(metric), "predicted": predicted, "ape": absolute_percentage_error(predicted, row.measured(metric)),
                "engine": ENGINE_NAMES.get(row.engine, row.engine), "engine_version": row.engine_version, "mode": row.mode, "weight_dtype": est.weight_dtype, "tensor_parallel": est.tensor_parallel,
                "pipeline_parallel": est.pipeline_parallel, "batch": est.batch, "concurrency": row.concurrency,
                "decode_bound": est.decode.bound, "efficiency_source": est.efficiency_source,
            })  # fmt: skip
    total = 2 * len(measured)
    return {"rows": rows, "unpredicted": unpredicted, "summary": {**summarize(rows), "unpredicted": len(unpredicted), "total": total}}


def format_report(report: dict[str, Any]) -> str:
    lines = [f"{'id':44} {'metric':30} {'measured':>10} {'predicted':>10} {'APE %':>7}"]
    for r in sorted(report["rows"], key=lambda r: -r["ape"]):
        lines.append(f"{r['id']:44} {r['metric']:30} {r['measured']:>10.4g} {r['predicted']:>10.4g} {r['ape']:>7.1f}")
    for u in report["unpredicted"]:
        lines.append(f"{u['id']:44} {u.get('metric', ''):14} NOT PREDICTED: {u['reason']}")
    s = report["summary"]
    lines.append("")
    lines.append(f"overall: MdAPE {s['mdape']:.1f}%  MAPE {s['mape']:.1f}%  over {s['count']} rows ({s['unpredicted']} not predicted of {s['total']})")
    for group in ("by_chip_kind", "by_metric", "by_engine"):
        for name, stats in s[group].items():
            lines.append(f"  {group[3:]:9} {name:30} MdAPE {stats['mdape']:6.1f}%  MAPE {stats['mape']:6.1f}%  n={stats['count']}")
    return "\n".join(lines)
