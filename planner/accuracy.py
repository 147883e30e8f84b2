"""Predict every row of a measurements CSV with the catalog's specs and summarise the error.

A row that cannot be predicted (unknown slug, unsupported method) is listed with its reason
and counted apart; it is never dropped silently."""
from __future__ import annotations

import csv
import dataclasses
import math
from collections import Counter
from pathlib import Path
from typing import Any

from hwcatalog.models import Chip, ModelArch
from planner import catalog_specs
from planner.accuracy_tables import speaks_for_words
from planner.engine import absolute_percentage_error, group_stats, predict_measured, predict_metric, predict_row, read_measurements, summarize
import numpy as np

from planner.engine.efficiency import default_efficiency, resolve_efficiency
from planner.engine.family_fit import (
    FAMILY_PARAMETERS,
    FITTED_METRICS,
    FamilyParts,
    architecture_key,
    family_of,
    fit_families,
    fitted_family,
    fitted_family_under,
    load_family_profiles,
    median_ape,
    pooled_family,
    save_family_profiles,
    vendor_and_kind,
)
from planner.engine.fit import Parts, cv_folds, fit_profiles, load_profiles, profile_for, profiles_table, save_profiles
from planner.engine.uncertainty import (
    COLOCATED,
    FIGURE_OF_MEASURED,
    UNMEASURED,
    bands_from,
    chip_family_bands,
    coverage,
    interval,
    load_bands,
    save_bands,
    serving_of,
)
from planner.engine_profiles import ENGINE_PROFILES, engine_factors, measured_under, speaks_for, stored_profiles, variant_slug
from planner.engine.silicon import ENGINE_NAMES
from planner.engine.silicon import METRICS as SILICON_METRICS
from planner.engine.silicon import is_silicon_layout, published_decode_workers, read_silicon, replicate_spread, silicon_estimates, tpot_roofline_s
from planner.model_configs import SILICON_ONLY, configs_folder, report_lines, unknown_model_reason, with_config_models


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


def accuracy_report(
    *, csv_path: Path, use_calibration: bool = True, fit: bool = False, cv: bool = False, profiles_out: Path | None = None,
    configs_dir: Path | None = None,
) -> dict[str, Any]:
    """Predict every row of a measurements CSV: this project's format, or the silicon layout as
    published (detected by its header). A silicon file is predicted with the stored serving-engine
    profiles (planner/data/engine_profiles.json) unless use_calibration is False (spec defaults) or
    fit/cv fit new ones; profiles_out writes the profiles fitted to the whole file. A silicon row whose
    checkpoint the catalog does not know is read from its config.json in `configs_dir` (by default the
    `configs/` folder beside the CSV, where there is one; planner/model_configs.py)."""
    with csv_path.open(newline="") as handle:
        header = next(csv.reader(handle), [])
    models = _by_name(ModelArch.objects.all(), "hf_id", "hf_aliases")
    chips = _by_name(Chip.objects.all(), "aliases")
    calibration = catalog_specs.calibrations_for({c.slug for c in chips.values()}) if use_calibration else {}
    if is_silicon_layout(header):
        fit = fit or bool(profiles_out)
        stored = load_profiles(ENGINE_PROFILES)[0] if use_calibration and not (fit or cv) else None
        return _silicon_report(csv_path, models, chips, calibration, fit=fit, cv=cv, stored=stored, profiles_out=profiles_out,
                               configs_dir=configs_folder(csv_path, configs_dir))  # fmt: skip
    if configs_dir is not None:
        raise ValueError(f"{SILICON_ONLY}; this project's format names catalog models by slug")
    with csv_path.open(newline="") as handle:
        measured = read_measurements(handle)
    if fit or cv or profiles_out:
        return _csv_fit_report(csv_path, measured, models, chips, cv=cv, profiles_out=profiles_out)
    rows, unpredicted = _csv_predict(measured, models, chips, calibration)
    rows = _strip(rows)
    report = {"rows": rows, "unpredicted": unpredicted, "summary": {**summarize(rows), "unpredicted": len(unpredicted), "total": len(measured)}}
    if use_calibration and catalog_specs.stored_family_profiles():
        report["profiles_used"] = load_family_profiles(catalog_specs.FAMILY_PROFILES)[1]
    return report


def _csv_predict(measured, models, chips, calibration, *, parts: bool = False, only: set[str] | None = None) -> tuple[list[dict], list[dict]]:
    """Every row of this project's CSV format (or those in `only`) predicted under `calibration`; with parts,
    each value also carries what family_fit.surrogate rescales."""
    rows, unpredicted = [], []
    engines = None  # the catalog's serving engines by name, read once a row names one
    profiled_engines = stored_profiles()  # the engines with a profile fitted on the silicon file
    for row in measured:
        if only is not None and row.id not in only:
            continue
        draft_slug = row.decoding_params.get("draft_model")
        missing = [s for s in (row.model, draft_slug) if s and s not in models] + ([row.chip] if row.chip not in chips else [])
        if missing:
            unpredicted.append({"id": row.id, "reason": f"unknown catalog slug(s): {', '.join(missing)}"})
            continue
        chip = chips[row.chip]
        chip_spec = catalog_specs.chip_spec(chip)
        engine = None
        if row.serving_engine:  # the engine it ran on: its scheduler defaults and, on a CPU, its math units (Scheduler)
            engines = engines if engines is not None else catalog_specs.serving_engines_by_name()
            engine = engines.get(catalog_specs.name_key(row.serving_engine))
            refusal = f"serving_engine {row.serving_engine!r} is not a catalog serving engine" if engine is None else (
                catalog_specs.engine_refusal(engine, chip, row.weight_dtype))
            if refusal:
                unpredicted.append({"id": row.id, "reason": refusal})
                continue
            # Measured under the engine on this chip (a calibration or chip-family profile keyed by the chip's variant slug:
            # NVIDIA GPUs under llama.cpp), that efficiency speaks for it, as for an API request naming the engine
            # (services.named_engine_setup); else what the engine's fitted profile brings to the chip (engine_factors).
            measured_here = measured_under(chip.slug, engine.name, row.weight_dtype, calibration)
            chip_spec = dataclasses.replace(chip_spec, scheduler=catalog_specs.scheduler_spec(engine),
                                            slug=variant_slug(chip.slug, engine.name) if measured_here else chip_spec.slug)  # fmt: skip
            host = {} if measured_here else engine_factors(engine.name, chip, calibration=calibration, weight_dtype=row.weight_dtype)[0]
        else:
            host = {}
        # The family whose profile is fitted to the row: the chip's; for an NVIDIA GPU (the serving-engine profiles speak
        # for it) under an engine with no fitted profile, the NVIDIA GPUs under that engine (family_fit.engine_family).
        fitted = fitted_family_under(chip.vendor, chip.kind, engine.name if engine else None, profiled_engines)
        family, fittable = (fitted, True) if fitted else (family_of(chip.vendor, chip.kind), False)
        try:
            model_spec = catalog_specs.model_spec(models[row.model])
            draft = catalog_specs.model_spec(models[draft_slug]) if draft_slug else None
            est = predict_row(row, model_spec, chip_spec, draft=draft, calibration=calibration, efficiency=host or None)
            predicted = predict_measured(row, est)
        except (ValueError, KeyError) as exc:
            unpredicted.append({"id": row.id, "reason": str(exc)})
            continue
        if not est.fits or predicted != predicted:  # NaN: the configuration does not run
            unpredicted.append({"id": row.id, "reason": "; ".join(est.reasons) or "the planner finds this configuration infeasible"})
            continue
        waited = 0.0
        if parts and row.metric == "ttft_s" and host.get("request_overhead_s"):
            # What the engine's request overhead adds to this TTFT, which the family fit holds as it is: all of it below the
            # prefill's capacity, little or nothing in a closed loop at it (its wait is what Little's law leaves), more behind
            # an admission cap. The row predicted again without it; its whole length where that cannot be predicted.
            no_wait = {**host, "request_overhead_s": 0.0}
            try:
                without = predict_measured(row, predict_row(row, model_spec, chip_spec, draft=draft, calibration=calibration,
                                                             efficiency=no_wait))  # fmt: skip
            except (ValueError, KeyError):
                without = float("nan")
            waited = max(predicted - without, 0.0) if math.isfinite(without) else host["request_overhead_s"]
        rows.append({
            "id": row.id, "model": row.model, "chip": row.chip, "chip_kind": chip.kind, "metric": row.metric,
            "measured": row.value, "predicted": predicted, "ape": absolute_percentage_error(predicted, row.value),
            "engine": row.engine, "tensor_parallel": est.tensor_parallel, "pipeline_parallel": est.pipeline_parallel,
            "batch": est.batch, "decode_bound": est.decode.bound, "efficiency_source": est.efficiency_source,
            "family": family_of(chip.vendor, chip.kind),
            "architecture": chip.architecture or chip.slug,  # a chip of no stated architecture is its own
            "_family": family, "_fittable": fittable and row.decoding == "ar" and row.metric in FITTED_METRICS,
        } | ({"_parts": _family_parts(est, predicted, chip_spec, host, waited)} if parts else {}))  # fmt: skip
    return rows, unpredicted


def _family_parts(est, predicted: float, chip_spec, host: dict[str, float], waited: float) -> dict[str, float]:
    used = resolve_efficiency(chip_spec, est.weight_dtype, override=host or None)
    bf16 = default_efficiency(chip_spec, "bf16")
    d, p = est.decode, est.prefill
    total = est.output_tokens_per_s_total
    return {
        "predicted": predicted, "compute_fraction0": used.compute_fraction, "bandwidth_fraction0": used.bandwidth_fraction,
        "step_overhead0": used.step_overhead_s, "request_overhead0": waited, "compute_fraction_bf16_0": bf16.compute_fraction,
        "bandwidth_fraction_bf16_0": bf16.bandwidth_fraction, "decode_compute_s": d.compute_s, "decode_memory_s": d.memory_s,
        "decode_fixed_s": d.comm_s + d.overhead_s - used.step_overhead_s, "prefill_compute_s": p.compute_s,
        "prefill_memory_s": p.memory_s, "prefill_fixed_s": p.comm_s + p.overhead_s - used.step_overhead_s,
        "decode_s": d.time_s, "prefill_s": p.time_s, "cycle_s": est.batch / total if total else d.time_s,
    }  # fmt: skip


def _strip(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]


# A chip held out may be predicted by a chip of its architecture (same_architecture); an architecture held out is
# the case of a new silicon generation: its chips' values predicted with nothing measured on that architecture.
CSV_CV_GROUPS = (("chip", "chip"), ("architecture", "architecture"), ("engine", "engine"))


def _fit_with_transfer(mask, rows, parts, families, chip_slugs, fittable, measured, models, chips) -> dict:
    """Family profiles fitted to the values in `mask`, and the pooled profile of each chip kind whose chips there hold two
    fitted families or more (family_fit.pooled_family: every fitted value on the kind's chips outside the silicon file),
    each told whether it transfers to chips it was not
    fitted on: with the chips of each of its compute architectures held out in turn, the profile fitted on the rest
    predicts the held-out values with a lower MdAPE than the spec defaults (family_fit.FamilyProfile.transfers). Chips of
    one architecture speak for each other anyway (same_architecture), so only a profile fitted on two architectures or
    more can show that it carries to another."""
    pools = np.array([pooled_family(r["chip_kind"]) if _on_unmeasured_silicon(r) else "" for r in rows])
    architecture_of = {c.slug: architecture_key(c.architecture) or c.slug for c in chips.values()}
    architectures = np.array([architecture_of.get(slug, slug) for slug in chip_slugs])
    profiles = {}
    for labels, usable, strata in ((families, fittable, None), (pools, fittable & (pools != ""), families)):
        fitted = fit_families(parts.take(mask), labels[mask], chip_slugs[mask], usable[mask], None if strata is None else strata[mask])
        if strata is not None:  # a pool of one family is that family's profile under another name: it would speak for no chip
            fitted = {pool: p for pool, p in fitted.items() if len(set(strata[mask & usable & (labels == pool)])) > 1}
        for family, profile in fitted.items():
            fitted[family] = dataclasses.replace(profile, transfers=_transfers(
                family, profile, mask, rows, parts, labels, chip_slugs, usable, strata, architectures, architecture_of, measured, models,
                chips))  # fmt: skip
        profiles |= fitted
    return profiles


def _transfers(family, profile, mask, rows, parts, labels, chip_slugs, usable, strata, architectures, architecture_of, measured, models,
               chips) -> bool:  # fmt: skip
    """Whether `profile` (the family `family` of `labels`) predicts each of its architectures, held out in turn and fitted
    on the rest, better than the spec defaults do (_fit_with_transfer)."""
    held_architectures = sorted({architecture_of.get(chip, chip) for chip in profile.chips})
    if len(held_architectures) < 2:
        return False
    held, spec, measured_values = [], [], []
    for architecture in held_architectures:
        inner = mask & (architectures != architecture)
        fold = fit_families(parts.take(inner), labels[inner], chip_slugs[inner], usable[inner], None if strata is None else strata[inner],
                            only=family).get(family)  # fmt: skip
        ids = {r["id"] for r, m in zip(rows, mask & (architectures == architecture)) if m}
        if fold is None or not ids:
            continue
        forced = {family: dataclasses.replace(fold, transfers=True)}
        # A pooled profile is tried on every held-out architecture, its vendor measured or not: the test asks whether what other
        # chips of the kind reached predicts a new architecture better than the spec defaults (a product keeps it to the
        # vendors it measured, catalog_specs.family_calibration).
        calibration = catalog_specs.family_calibration(chips.values(), forced, measured_vendors_only=False)
        predicted, _ = _csv_predict(measured, models, chips, calibration, only=ids)
        by_id = {(r["id"], r["metric"]): r["predicted"] for r in predicted}
        for r in rows:
            if r["id"] in ids and (r["id"], r["metric"]) in by_id:
                held.append(by_id[(r["id"], r["metric"])])
                spec.append(r["predicted"])
                measured_values.append(r["measured"])
    truth = np.array(measured_values, dtype=float)
    return bool(held) and median_ape(np.array(held), truth) < median_ape(np.array(spec), truth)


def _csv_fit_report(csv_path: Path, measured, models, chips, *, cv: bool, profiles_out: Path | None, keep_held_out: bool = False) -> dict[str, Any]:
    """Chip-family profiles (family_fit.py) fitted to a CSV file's rows at the spec defaults: the rows
    predicted with them (in-sample), and with cv each chip and each engine (the publication's stack) held out
    in turn, fitted on the rest and predicted."""
    rows, unpredicted = _csv_predict(measured, models, chips, {}, parts=True)
    total = len(measured)
    spec = {**summarize(_strip(rows)), "unpredicted": len(unpredicted), "total": total}
    if not rows:
        return {"rows": [], "unpredicted": unpredicted, "summary": spec}
    parts = FamilyParts(metric=np.array([r["metric"] for r in rows]), measured=np.array([r["measured"] for r in rows], dtype=float),
                        **{name: np.array([r["_parts"][name] for r in rows], dtype=float) for name in rows[0]["_parts"]})  # fmt: skip
    families, chip_slugs = np.array([r["_family"] for r in rows]), np.array([r["chip"] for r in rows])
    fittable = np.array([r["_fittable"] for r in rows])

    def calibration_of(profiles):
        return catalog_specs.family_calibration(chips.values(), profiles)

    everything = np.ones(len(rows), dtype=bool)
    profiles = _fit_with_transfer(everything, rows, parts, families, chip_slugs, fittable, measured, models, chips)
    if profiles_out:
        save_family_profiles(profiles, profiles_out, source=f"manage.py accuracy {csv_path.name} --profiles-out ({int(fittable.sum())} "
                             "autoregressive values on chips other than NVIDIA GPUs, and on NVIDIA GPUs under engines with no serving-engine profile; "
                             "planner/engine/family_fit.py, docs/accuracy.md)")  # fmt: skip
    fitted_rows, fitted_unpredicted = _csv_predict(measured, models, chips, calibration_of(profiles))
    fitted_rows = _strip(fitted_rows)
    report = {
        "rows": fitted_rows, "unpredicted": fitted_unpredicted,
        "summary": {**summarize(fitted_rows), "unpredicted": len(fitted_unpredicted), "total": total}, "spec_defaults": spec,
        "fit": {"family_profiles": [{"family": f, **{k: getattr(p, k) for k in FAMILY_PARAMETERS}, "values": p.values, "chips": list(p.chips),
                                     "transfers": p.transfers}
                                    for f, p in sorted(profiles.items())]},
    }  # fmt: skip
    if cv:
        report["cv"] = {}
        for label, key in CSV_CV_GROUPS:
            held_out = []
            for _group, mask in cv_folds([r[key] for r in rows]):
                fold = _fit_with_transfer(~mask, rows, parts, families, chip_slugs, fittable, measured, models, chips)
                calibration = calibration_of(fold)
                predicted, _ = _csv_predict(measured, models, chips, calibration, only={r["id"] for r, m in zip(rows, mask) if m})
                # whether a fitted profile of the fold speaks for the row's chip (as services.band_basis asks it)
                held_out += [{**r, "_profiled": speaks_for(calibration, r["chip"])} for r in _strip(predicted)]
            report["cv"][label] = {**summarize(held_out), "by_group": group_stats(held_out, key)}
            if key == "architecture":  # the bands a chip outside the silicon file takes assume nothing of its architecture measured
                report["intervals"] = _chip_family_interval_check(held_out)
                if keep_held_out:
                    report["_held_out"] = held_out
    return report


def _outside_silicon(rows: list[dict]) -> list[dict]:
    """The predicted rows on chips the silicon file does not measure (every chip but NVIDIA's GPUs) whose metric an
    interval is reported for."""
    return [r for r in rows if _on_unmeasured_silicon(r) and r["metric"] in FIGURE_OF_MEASURED]


def _on_unmeasured_silicon(row: dict) -> bool:
    """Whether a predicted row's chip is one the silicon file does not measure (services.outside_silicon), read off
    the row's family (family_fit.family_of: vendor and kind)."""
    return fitted_family(*vendor_and_kind(row["family"]))


def _chip_family_interval_check(held_out: list[dict]) -> dict[str, Any]:
    """How often the chip-family bands (uncertainty.chip_family_bands) cover a chip outside the silicon file when they
    are rebuilt without its architecture: each architecture's held-out predictions against the bands of every other's."""
    outside = _outside_silicon(held_out)
    checked = []
    for _architecture, mask in cv_folds([r["architecture"] for r in outside]):
        bands = chip_family_bands(r for r, m in zip(outside, mask) if not m)
        for r in (r for r, m in zip(outside, mask) if m):
            # As services.band_basis: a chip that no chip-family profile of the fold speaks for takes the widest band.
            engine = "*" if r.get("_profiled", True) else UNMEASURED
            band = interval(r["predicted"], FIGURE_OF_MEASURED[r["metric"]], chip_kind=r["chip_kind"], engine=engine, bands=bands,
                            serving=COLOCATED, outside_silicon=True)  # fmt: skip
            checked.append({**r, "interval": [band.low, band.high] if band else None})
    kinds = sorted({r["chip_kind"] for r in checked})
    return {"coverage_cv": {"architecture": coverage(checked)},
            "coverage_cv_by_chip_kind": {"architecture": {kind: coverage(r for r in checked if r["chip_kind"] == kind) for kind in kinds}}}  # fmt: skip


IN_STEP_WARNING = ("closed loop read in step (in-step share 1, not the profile's): {engine} runs its prefills alone, so a colocated "
                   "round's clients finish and send together")  # fmt: skip


class _Silicon:
    """The silicon rows resolved against the catalog once, predicted under any serving-engine profiles."""

    def __init__(self, csv_path: Path, models: dict[str, Any], chips: dict[str, Any], calibration, *, configs_dir: Path | None = None) -> None:
        with csv_path.open(newline="") as handle:
            self.measured = read_silicon(handle)
        # The checkpoints the catalog does not know, read from their configs for this run (nothing stored).
        models, self.from_configs = with_config_models(models, (row.model_path for row in self.measured), configs_dir)
        self.models, self.chips, self.calibration = models, chips, calibration
        self.specs: dict[tuple[str, str, str], Any] = {}
        self.schedulers = catalog_specs.engine_schedulers()  # the row's engine's memory rule, batch cap, prefill budget
        self.decode_workers = published_decode_workers(self.measured)
        # An engine whose scheduler runs its prefills alone (SGLang; the catalog's prefill_runs_alone) is read as keeping
        # a colocated closed loop in step, every round a wave: a step that prefills pauses every decode, so with the
        # fixed lengths the layout's README states a round's clients finish together and send together (the serving
        # simulator keeps such a loop in step under prefill-first scheduling at any budget; under mixed scheduling only
        # while a round's prompts fit one step; with lengths that vary, under neither). It is an empirical reading keyed
        # by the catalog: SGLang's colocated TTFTs sit at the wave, TensorRT-LLM's and vLLM's well below it
        # (docs/accuracy.md, "TTFT under a closed loop"). Such a row's in-step share is 1, at the spec defaults as
        # under a fitted profile; the engine's fitted share speaks for its disaggregated rows, whose decodes never
        # wait for a prefill (planner/engine/fit.py).
        self.alone_engines = {engine for engine, scheduler in self.schedulers.items() if scheduler.prefill_runs_alone}

    def keeps_in_step(self, row, engine: str) -> bool:
        """Whether the row's loop is read in step: a colocated row of an engine that runs its prefills alone."""
        return engine in self.alone_engines and row.agg is not None

    def in_step_share(self, row, engine: str, profile) -> float | None:
        """The row's in-step share: 1 where its engine keeps a colocated loop in step, else its profile's (None: the
        workload's default, 1 / rounds)."""
        if self.keeps_in_step(row, engine):
            return 1.0
        return profile.in_step_share if profile else None

    def spec_key(self, row) -> tuple[str, str, str] | None:
        """The row's (model, chip, engine) key into self.specs, the specs built on first use; None when the catalog does not
        know its model or chip."""
        model, chip = self.models.get(row.model_path), self.chips.get(row.system)
        if model is None or chip is None:
            return None
        engine = ENGINE_NAMES.get(row.engine, row.engine)
        key = (model.slug, chip.slug, engine)
        if key not in self.specs:
            chip_spec = dataclasses.replace(catalog_specs.chip_spec(chip), scheduler=self.schedulers.get(engine))
            self.specs[key] = (catalog_specs.model_spec(model), chip_spec)
        return key

    def tpot_rooflines(self) -> dict[str, float]:
        """Each row's least TPOT on the planner's roofline (silicon.tpot_roofline_s); rows the catalog cannot resolve, or
        whose layout the planner cannot run, have none."""
        found = {}
        for row in self.measured:
            key = self.spec_key(row)
            roofline = tpot_roofline_s(row, *self.specs[key], calibration=self.calibration) if key else None
            if roofline is not None:
                found[row.id] = roofline
        return found

    def group_of(self, row, key: str) -> str | None:
        """The row's engine, chip or model family (CV_GROUPS' keys) as a predicted row names it; None when the
        catalog does not know its model or chip."""
        if key == "engine":
            return ENGINE_NAMES.get(row.engine, row.engine)
        found = self.chips.get(row.system) if key == "chip" else self.models.get(row.model_path)
        return None if found is None else (found.slug if key == "chip" else found.family)

    def decode_workers_without(self, key: str, group: str) -> dict[str, float]:
        """The decode-worker priors read off every row of the file outside the held-out group, predicted or not
        (cross-validation)."""
        return published_decode_workers(row for row in self.measured if self.group_of(row, key) != group)

    def predict(self, *, profiles=None, only: set[str] | None = None, shares: bool = False,
                decode_workers: dict[str, float] | None = None) -> tuple[list[dict], list[dict]]:
        """Every row (or those in `only`) predicted, under `profiles` where given; with shares, each
        value's parts also carry its prediction at in-step shares 0 and 1 (for the fit). A disaggregated
        row without its decode worker count is read with `decode_workers` (the file's priors by default)."""
        rows, unpredicted = [], []
        decode_workers = self.decode_workers if decode_workers is None else decode_workers
        for row in self.measured:
            if only is not None and row.id not in only:
                continue
            model, chip = self.models.get(row.model_path), self.chips.get(row.system)
            if model is None or chip is None:
                reasons = [unknown_model_reason(row.model_path, self.from_configs)] if model is None else []
                reason = "; ".join(reasons + ([] if chip else [f"chip {row.system!r} is not in the catalog (by slug or alias)"]))
                for metric in SILICON_METRICS:
                    unpredicted.append({"id": row.id, "metric": metric, "reason": reason})
                continue
            engine = ENGINE_NAMES.get(row.engine, row.engine)
            key = self.spec_key(row)
            profile = profile_for(profiles, engine) if profiles else None
            source = f"fitted serving-engine profile ({engine if engine in (profiles or {}) else 'pooled'})" if profile else None
            kwargs = {"calibration": self.calibration, "efficiency": profile.factors() if profile else None,
                      "decode_workers": decode_workers}
            try:
                share = self.in_step_share(row, engine, profile)
                estimates = silicon_estimates(row, *self.specs[key], **kwargs, in_step_share=share)
                if shares:  # the TTFT at shares 0 and 1, which the fit mixes; a loop its engine keeps in step has only the second
                    low = 1.0 if self.keeps_in_step(row, engine) else 0.0
                    staggered, in_step = (silicon_estimates(row, *self.specs[key], **kwargs, in_step_share=s)["ttft_s"] for s in (low, 1.0))
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
                    "id": row.id, "model": model.slug, "family": model.family, "chip": chip.slug, "chip_kind": chip.kind, "metric": metric,
                    "measured": row.measured(metric), "predicted": predicted, "ape": absolute_percentage_error(predicted, row.measured(metric)),
                    "engine": engine, "engine_version": row.engine_version, "mode": row.mode, "weight_dtype": est.weight_dtype,
                    "tensor_parallel": est.tensor_parallel, "pipeline_parallel": est.pipeline_parallel,
                    "attention_data_parallel": est.attention_data_parallel, "batch": est.batch, "concurrency": row.concurrency,
                    "decode_bound": est.decode.bound, "efficiency_source": source or est.efficiency_source,
                    # how the row was read (layout, worker counts, a loop read in step) and what the estimate assumed
                    "warnings": list(est.warnings)
                    + ([IN_STEP_WARNING.format(engine=engine)] if metric == "ttft_s" and self.keeps_in_step(row, engine) else []),
                    "_parts": _parts(est, predicted, *self.specs[key], self.calibration)
                    | ({"staggered": predict_metric(metric, staggered) if metric == "ttft_s" else predicted,
                        "in_step": predict_metric(metric, in_step) if metric == "ttft_s" else predicted} if shares else {}),
                })  # fmt: skip
        return rows, unpredicted


def _parts(est, predicted: float, model_spec, chip_spec, calibration) -> dict[str, float]:
    """The pieces of one prediction that fit.surrogate rescales (at the factors the estimate used)."""
    used = resolve_efficiency(chip_spec, est.weight_dtype, calibration=calibration)
    d, p = est.decode, est.prefill
    return {
        "predicted": predicted, "compute_fraction0": used.compute_fraction, "bandwidth_fraction0": used.bandwidth_fraction,
        "step_overhead0": used.step_overhead_s, "expert_efficiency0": used.expert_efficiency,
        "decode_compute_s": d.compute_s, "decode_memory_s": d.memory_s,
        "decode_expert_compute_s": d.expert_compute_s, "prefill_expert_compute_s": p.expert_compute_s,
        "decode_fixed_s": d.comm_s + d.overhead_s - used.step_overhead_s, "prefill_compute_s": p.compute_s,
        "prefill_memory_s": p.memory_s, "prefill_fixed_s": p.comm_s + p.overhead_s - used.step_overhead_s,
        "decode_s": d.time_s, "prefill_s": p.time_s, "expert_layers": model_spec.routed_expert_layers,
    }  # fmt: skip


def _parts_of(rows: list[dict]) -> Parts:
    columns = {name: np.array([r["_parts"][name] for r in rows], dtype=float) for name in rows[0]["_parts"]} if rows else {}
    return Parts(metric=np.array([r["metric"] for r in rows]), measured=np.array([r["measured"] for r in rows], dtype=float), **columns)


def _report(rows: list[dict], unpredicted: list[dict], total: int) -> dict[str, Any]:
    clean = [{k: v for k, v in r.items() if k != "_parts"} for r in rows]
    return {"rows": clean, "unpredicted": unpredicted, "summary": {**summarize(clean), "unpredicted": len(unpredicted), "total": total}}


CV_GROUPS = (("engine", "engine"), ("chip", "chip"), ("model family", "family"))
ERROR_BANDS = Path(__file__).resolve().parent / "data" / "error_bands.json"


def _row_interval(r: dict, bands) -> list[float] | None:
    """A predicted row's 80% interval [low, high]: the band of its engine's fitted profile where it was predicted
    with one (else the spec defaults'), its chip kind and its serving mode."""
    engine = r["engine"] if r["efficiency_source"].startswith("fitted") else "*"
    band = interval(r["predicted"], r["metric"], chip_kind=r["chip_kind"], engine=engine, bands=bands, serving=serving_of(r))
    return [band.low, band.high] if band else None


def _interval_check(rows: list[dict]) -> dict[str, Any]:
    """80% intervals for the spec-default predictions the planner serves: each row gets the interval the
    stored bands (planner/data/error_bands.json) give it, and for each grouping the bands are rebuilt
    without the held-out group to measure how often they cover its values."""
    stored = load_bands(ERROR_BANDS)
    for r in rows:
        r["interval"] = _row_interval(r, stored) if stored else None
    out: dict[str, Any] = {"coverage_in_sample": coverage(rows) if stored else None, "coverage_cv": {}, "coverage_cv_by_serving": {}}
    for label, key in CV_GROUPS:
        held = []
        for group, mask in cv_folds([r[key] for r in rows]):
            bands = bands_from(r for r, m in zip(rows, mask) if not m)
            held += [{**r, "interval": _row_interval(r, bands)} for r, m in zip(rows, mask) if m]
        out["coverage_cv"][label] = coverage(held)
        modes = sorted({serving_of(r) for r in held})
        out["coverage_cv_by_serving"][label] = {mode: coverage(r for r in held if serving_of(r) == mode) for mode in modes}
    return out


def write_error_bands(*, csv_path: Path, out: Path, other_chips: Path | None = None) -> int:
    """Bands of two kinds from one silicon file: for a prediction that names no serving engine (the API's
    estimates and plans), from every spec-default prediction (none of it tuned the defaults); for one made
    with an engine's fitted profile, from the held-out predictions of cross-validation (each value held
    out with its engine, its chip and its model family in turn). With `other_chips` (this project's format),
    a third kind for the chips the silicon file does not measure (every chip but NVIDIA's GPUs): from its
    predictions with chip-family profiles, each compute architecture held out (uncertainty.chip_family_bands)."""
    models = _by_name(ModelArch.objects.all(), "hf_id", "hf_aliases")
    chips = _by_name(Chip.objects.all(), "aliases")
    report = _silicon_report(csv_path, models, chips, {}, cv=True, keep_held_out=True)
    spec = _silicon_report(csv_path, models, chips, {})
    bands = bands_from(spec["rows"], engines=False) + bands_from(report["_held_out"], pooled=False)
    source = (f"manage.py accuracy {csv_path.name} --bands-out (spec defaults, {len(spec['rows'])} values; "
              f"fitted profiles, {len(report['_held_out'])} held-out predictions)")  # fmt: skip
    if other_chips is not None:
        with other_chips.open(newline="") as handle:
            measured = read_measurements(handle)
        held_out = _csv_fit_report(other_chips, measured, models, chips, cv=True, profiles_out=None, keep_held_out=True)["_held_out"]
        outside = _outside_silicon(held_out)
        bands += chip_family_bands(outside)
        source += f"; --bands-other {other_chips.name} (chip-family profiles, {len(outside)} predictions, each architecture held out)"
    save_bands(bands, out, source=source)
    return len(bands)


def _silicon_report(
    csv_path: Path, models, chips, calibration, *, fit: bool = False, cv: bool = False, stored=None, profiles_out: Path | None = None,
    keep_held_out: bool = False, configs_dir: Path | None = None,
) -> dict[str, Any]:
    """Each silicon row gives two measured values (TTFT, TPOT), each predicted and reported under the row's
    id: with the `stored` serving-engine profiles where given, else at the spec defaults. With fit, profiles
    are fitted to the file and every row predicted with them; with cv, each engine, chip and model family is
    held out in turn, fitted on the rest and predicted."""
    silicon = _Silicon(csv_path, models, chips, calibration, configs_dir=configs_dir)
    total = 2 * len(silicon.measured)
    rows, unpredicted = silicon.predict(profiles=stored or None, shares=fit or cv)
    report = _report(rows, unpredicted, total)
    if silicon.from_configs is not None:
        report["models_from_configs"] = silicon.from_configs.report()
    report["replicates"] = replicate_spread(silicon.measured)
    rooflines = silicon.tpot_rooflines()
    _mark_below_roofline(report, rooflines)
    if stored:
        report["profiles_used"] = load_profiles(ENGINE_PROFILES)[1]
    if rows:
        report["intervals"] = _interval_check(report["rows"])
    if not (fit or cv) or not rows:
        return report
    parts, engines = _parts_of(rows), np.array([r["engine"] for r in rows])
    profiles = fit_profiles(parts, engines)
    if profiles_out:
        save_profiles(profiles, profiles_out, source=f"manage.py accuracy {csv_path.name} --fit --profiles-out ({len(rows)} values; "
                      "planner/engine/fit.py, docs/accuracy.md#the-fit)")  # fmt: skip
    fitted_rows, fitted_unpredicted = silicon.predict(profiles=profiles)
    fitted = _report(fitted_rows, fitted_unpredicted, total)
    _mark_below_roofline(fitted, rooflines)
    report = {**fitted, "spec_defaults": report["summary"], "intervals": report["intervals"], "replicates": report["replicates"],
              "fit": {"profiles": profiles_table(profiles)}}  # fmt: skip
    if cv:
        report["cv"], held_out_all = {}, []
        for label, key in CV_GROUPS:
            held_out_rows = []
            for group, mask in cv_folds([r[key] for r in rows]):
                train = ~mask
                held = {r["id"] for r, m in zip(rows, mask) if m}
                # The decode-worker priors the fold's training rows publish; where they differ from the whole file's,
                # the training rows' parts are recomputed with them, so nothing of the held-out rows reaches the fit.
                fold_workers = silicon.decode_workers_without(key, group)
                if fold_workers == silicon.decode_workers:
                    train_parts, train_engines = parts.take(train), engines[train]
                else:
                    trained, _ = silicon.predict(only={r["id"] for r, m in zip(rows, train) if m}, shares=True, decode_workers=fold_workers)
                    train_parts, train_engines = _parts_of(trained), np.array([r["engine"] for r in trained])
                fold_profiles = fit_profiles(train_parts, train_engines)
                if key == "engine":  # the held-out engine has no profile of its own: the pooled one speaks for it
                    fold_profiles.pop(group, None)
                predicted, _ = silicon.predict(profiles=fold_profiles, only=held, decode_workers=fold_workers)
                held_out_rows += [{k: v for k, v in r.items() if k != "_parts"} for r in predicted]
            report["cv"][label] = {**summarize(held_out_rows), "by_group": group_stats(held_out_rows, key),
                                   "tpot_within_roofline": _within_roofline(held_out_rows, rooflines)}  # fmt: skip
            held_out_all += held_out_rows
        if keep_held_out:
            report["_held_out"] = held_out_all
    return report


def _within_roofline(rows: list[dict], rooflines: dict[str, float]) -> dict[str, float]:
    """The TPOT values at or above their roofline (the others no autoregressive decode of the published layout reaches)."""
    return summarize(r for r in rows if r["metric"] == "tpot_s" and r["measured"] >= rooflines.get(r["id"], 0.0))


def _mark_below_roofline(report: dict[str, Any], rooflines: dict[str, float]) -> None:
    """Each TPOT row carries the least TPOT the planner's physics allows its measurements (`tpot_roofline_s`,
    silicon.tpot_roofline_s) and whether the measured value lies below it (`below_roofline`): a value no autoregressive
    decode of the published layout reaches (speculative decoding, a layout not recorded); it stays in every figure. The
    report counts them, by serving mode and engine, and gives the MdAPE of the other TPOT values beside the whole."""
    below = []
    for r in report["rows"]:
        roofline = rooflines.get(r["id"]) if r["metric"] == "tpot_s" else None
        r["tpot_roofline_s"] = roofline
        r["below_roofline"] = None if roofline is None else bool(r["measured"] < roofline)
        if r["below_roofline"]:
            below.append(r)
    counts = Counter(f"{r['mode']} {r['engine']}" for r in below)
    report["below_roofline"] = {"tpot_s": {"count": len(below), "by_mode_engine": dict(sorted(counts.items())),
                                           "within": _within_roofline(report["rows"], rooflines)}}  # fmt: skip


def format_report(report: dict[str, Any]) -> str:
    lines = [f"{'id':44} {'metric':30} {'measured':>10} {'predicted':>10} {'APE %':>7}"]
    for r in sorted(report["rows"], key=lambda r: -r["ape"]):
        lines.append(f"{r['id']:44} {r['metric']:30} {r['measured']:>10.4g} {r['predicted']:>10.4g} {r['ape']:>7.1f}")
    for u in report["unpredicted"]:
        lines.append(f"{u['id']:44} {u.get('metric', ''):14} NOT PREDICTED: {u['reason']}")
    s = report["summary"]
    lines.append("")
    if "fit" in report:
        d = report["spec_defaults"]
        lines.append(f"spec defaults, nothing fitted: MdAPE {d['mdape']:.1f}%  MAPE {d['mape']:.1f}%  over {d['count']} values")
        if "family_profiles" in report["fit"]:
            lines.append("chip-family profiles fitted to this file (planner/engine/family_fit.py; bf16 fractions):")
        for p in report["fit"].get("family_profiles", []):
            lines.append(f"  {p['family']:14} compute {p['compute_fraction']:.3f}  bandwidth {p['bandwidth_fraction']:.3f}  step "
                         f"{p['step_overhead_s'] * 1e3:.3f} ms  ({p['values']} values on {', '.join(p['chips'])}; "
                         f"speaks for {speaks_for_words(p)})")  # fmt: skip
        if "profiles" in report["fit"]:
            lines.append("serving-engine profiles fitted to this file (planner/engine/fit.py):")
        for p in report["fit"].get("profiles", []):
            lines.append(f"  {p['engine']:14} compute {p['compute_fraction']:.3f}  bandwidth {p['bandwidth_fraction']:.3f}  step "
                         f"{p['step_overhead_s'] * 1e3:.3f} ms  request {p['request_overhead_s'] * 1e3:.1f} ms  experts {p['expert_efficiency']:.2f}  "
                         f"in step {p['in_step_share']:.2f}  per expert-layer {p['request_overhead_per_expert_layer_s'] * 1e6:.2f} us  ({p['values']} values)")  # fmt: skip
    if report.get("profiles_used"):
        lines.append(f"predicted with the stored profiles ({report['profiles_used']})")
    lines += report_lines(report.get("models_from_configs"))
    replicates = report.get("replicates")
    if replicates and replicates["groups"]:
        floors = "  ".join(f"{m} {replicates[m]['mdape']:.1f}% (n={replicates[m]['count']})" for m in SILICON_METRICS if replicates[m]["count"])
        lines.append(f"the same published configuration measured more than once ({replicates['groups']} configurations): each value "
                     f"against its configuration's geometric mean, the least error any prediction can have on them: MdAPE {floors}")  # fmt: skip
    below = (report.get("below_roofline") or {}).get("tpot_s")
    if below:
        lines.append(f"below the least TPOT the planner's physics allows the measurements (silicon.tpot_roofline_s): {below['count']} TPOT values "
                     f"({', '.join(f'{k} {n}' for k, n in below['by_mode_engine'].items())}); TPOT MdAPE without them "
                     f"{below['within']['mdape']:.1f}% (n={below['within']['count']})")  # fmt: skip
    intervals = report.get("intervals")
    if intervals:
        def by_serving(k):
            modes = intervals.get("coverage_cv_by_serving", {}).get(k, {}) or intervals.get("coverage_cv_by_chip_kind", {}).get(k, {})
            return f" ({', '.join(f'{m} {c * 100:.0f}%' for m, c in modes.items())})" if len(modes) > 1 else ""

        cv = "  ".join(f"leave one {k} out {v * 100:.0f}%{by_serving(k)}" for k, v in intervals["coverage_cv"].items())
        lines.append(f"80% intervals cover the measured value: {cv}")
    for label, stats in report.get("cv", {}).items():
        by_metric = "  ".join(f"{m} {v['mdape']:.1f}% (n={v['count']})" for m, v in stats["by_metric"].items())
        lines.append(f"cross-validated, leave one {label} out: MdAPE {stats['mdape']:.1f}%  {by_metric}")
    lines.append(("in-sample, fitted: " if "fit" in report else "") + f"overall: MdAPE {s['mdape']:.1f}%  MAPE {s['mape']:.1f}%  over {s['count']} rows ({s['unpredicted']} not predicted of {s['total']})")
    for group in ("by_chip_kind", "by_metric", "by_engine"):
        for name, stats in s[group].items():
            lines.append(f"  {group[3:]:9} {name:30} MdAPE {stats['mdape']:6.1f}%  MAPE {stats['mape']:6.1f}%  n={stats['count']}")
    return "\n".join(lines)
