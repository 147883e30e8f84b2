"""Calibration services: fit, store (versioned) and roll back efficiency factors per chip, serving engine and dtype."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import Max

from hwcatalog.models import Chip
from planner import catalog_specs
from planner.services import error_bands, outside_silicon
from planner.engine.calibration import PRIOR_LOG_SIGMA, Observation, fit_efficiency, log_sigma_of_80_interval
from planner.engine.efficiency import FACTORS, default_efficiency
from planner.engine.uncertainty import interval
from planner.models import Calibration


def observation_from(predicted: dict[str, Any], measured: dict[str, Any], chip: Chip, weight_dtype: str) -> Observation:
    """A measured trial with the work the engine predicted for it (bytes and FLOPs per chip)."""
    spec = catalog_specs.chip_spec(chip)
    compute_dtype = predicted.get("compute_dtype") or weight_dtype
    peak = spec.peak_flops_per_s.get(compute_dtype) or max(spec.peak_flops_per_s.values())
    return Observation(
        decode_bytes=predicted["decode"]["bytes_per_chip"],
        decode_flops=predicted["decode"]["flops_per_chip"],
        tpot_s=measured["tpot_s"],
        prefill_bytes=predicted["prefill"]["bytes_per_chip"],
        prefill_flops=predicted["prefill"]["flops_per_chip"],
        ttft_s=measured["ttft_s"],
        peak_flops_per_s=peak,
        bandwidth_bytes_per_s=spec.memory_bandwidth_bytes_per_s,
        tpot_spread=float(measured.get("tpot_spread") or 0.0),  # runs from before repetitions were timed: unknown, 0
        ttft_spread=float(measured.get("ttft_spread") or 0.0),
    )


@transaction.atomic
def calibration_fit(
    *, chip: Chip, weight_dtype: str, observations: Sequence[Observation], run_ids: Sequence[str], serving_engine: str = ""
) -> Calibration:
    """A robust fit over the runs (planner/engine/calibration.py: noisy runs and outliers left out, the prior
    weighed in); stored as the next version for (chip, engine, dtype), naming the runs it used. The runs are
    the planner's own trials unless `serving_engine` names the engine they were measured under (by slug, name or
    alias; stored as its catalog name, the name requests resolve to). NoisyRuns (nothing stored) when every run was
    too noisy to learn from."""
    serving_engine = catalog_engine_name(serving_engine)
    latest = Calibration.objects.select_for_update().filter(
        chip_slug=chip.slug, serving_engine=serving_engine, weight_dtype=weight_dtype
    ).aggregate(v=Max("version"))["v"]
    version = (latest or 0) + 1
    prior = default_efficiency(catalog_specs.chip_spec(chip), weight_dtype)
    fit = fit_efficiency(observations, prior, source=f"calibration v{version} ({len(observations)} runs)", prior_log_sigma=prior_log_sigma(chip))
    # Every factor is stored, fitted or kept from the prior: a calibration never drops one.
    factors = {name: getattr(fit.efficiency, name) for name in FACTORS}
    return Calibration.objects.create(
        chip_slug=chip.slug, serving_engine=serving_engine, weight_dtype=weight_dtype, version=version, **factors, run_count=fit.runs,
        fitted_from=[str(r) for i, r in enumerate(run_ids) if i not in {j for j, _ in fit.left_out}], residual_rms=fit.residual_rms_s,
    )  # fmt: skip


def prior_log_sigma(chip: Chip) -> float:
    """How far the spec defaults are trusted: the log-sd of their cross-validated TPOT band for the chip's kind
    over every engine (a chip outside the silicon file: its kind's chip-family band; planner/data/error_bands.json,
    refitted by `manage.py accuracy --bands-out`), or the engine's default where the file has none."""
    band = interval(1.0, "tpot_s", chip_kind=chip.kind, engine="*", bands=error_bands(), outside_silicon=outside_silicon(chip))
    return log_sigma_of_80_interval(band.low, band.high) if band is not None and band.high > band.low else PRIOR_LOG_SIGMA


def catalog_engine_name(name: str) -> str:
    """A calibration's serving engine as stored: the catalog engine's name ("vllm" -> "vLLM"); "" for the planner's own
    trials. ValueError for a name the catalog does not know."""
    if not name:
        return ""
    engine = catalog_specs.serving_engine_named(name)
    if engine is None:
        raise ValueError(f"no serving engine named {name!r} in the catalog")
    return engine.name


@transaction.atomic
def calibration_rollback(*, chip_slug: str, weight_dtype: str, to_version: int, serving_engine: str = "") -> Calibration:
    """Make `to_version` of (chip, engine, dtype) the one in use: newer versions are deactivated, not deleted."""
    versions = Calibration.objects.select_for_update().filter(chip_slug=chip_slug, serving_engine=serving_engine, weight_dtype=weight_dtype)
    target = versions.get(version=to_version)
    versions.filter(version__gt=to_version).update(active=False)
    if not target.active:
        target.active = True
        target.save(update_fields=["active"])
    return target
