"""Planner services: validated inputs -> engine specs -> engine -> stored Plan / estimate dict."""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
from typing import Any

from django.db import transaction

from hwcatalog import selectors as catalog
from hwcatalog.cache import catalog_snapshot
from hwcatalog.models import Chip, ModelArch
from planner import catalog_specs
from planner.engine import (
    Decoding,
    Deployment,
    Estimate,
    SearchOptions,
    Workload,
    estimate,
    search,
    tensor_parallel_options,
)
from planner.engine.decoding import Resolvers, decoding_from_params
from planner.engine.uncertainty import BAND_OF, interval, load_bands
from planner.engine.estimate import Evaluation, evaluate_deployment
from planner.engine.grid import DEFAULT_BATCHES, DEFAULT_TENSOR_PARALLEL
from planner.engine_profiles import (
    engine_variants,
    profile_covers,
    profile_label,
    serving_engines,
    split_variant,
    stored_profiles,
    variant_slug,
)
from planner.models import Plan

# A plan evaluates at most this many candidate configurations; more is refused up front
# with a message saying what to narrow (the search itself is ~1M configurations/s).
MAX_PLAN_CANDIDATES = 5_000_000
PLAN_TOP_N = 100
RENT_MODELS = ("on_demand", "reserved", "spot")


class PlanTooLarge(ValueError):
    """The search asked for cannot run as asked (too large, or nothing to search): a 400 on `hardware`."""


def json_safe(value: Any) -> Any:
    """Dataclasses, tuples and NumPy scalars -> JSON; NaN and infinities -> None.

    Exact types are tested first: a plan serialises ~150 estimates of ~150 fields."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if value is None or kind in (str, bool, int):
        return value
    if hasattr(kind, "__dataclass_fields__"):
        return {name: json_safe(getattr(value, name)) for name in kind.__dataclass_fields__}
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item"):  # NumPy scalar
        return json_safe(value.item())
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    return value


def decoding_spec(options: dict[str, Any], *, model: ModelArch, output_tokens: int) -> Decoding:
    """The engine's decoding method for validated API options (the registry in planner/engine/decoding/)."""
    params = {k: v for k, v in options.items() if k != "method"}
    resolvers = Resolvers(
        model=catalog_specs.model_spec(model), output_tokens=output_tokens, resolve_model=catalog_specs.model_spec,
    )  # fmt: skip
    return decoding_from_params(options.get("method", "ar"), params, resolvers)


def _workload(data: dict[str, Any]) -> Workload:
    return Workload(
        prompt_tokens=data["prompt_tokens"],
        output_tokens=data["output_tokens"],
        concurrency=data.get("concurrency"),
        request_rate_per_s=data.get("request_rate_per_s"),
        ttft_slo_s=data.get("ttft_slo_s"),
        tpot_slo_s=data.get("tpot_slo_s"),
    )


def _efficiency(data: dict[str, Any] | None, serving_engine: str | None = None) -> dict[str, float] | None:
    """The factors a request overrides, on top of its serving engine's fitted profile where it names one;
    the engine keeps the chip's own for the rest."""
    profile = {} if not serving_engine else stored_profiles()[serving_engine].factors()
    merged = {**profile, **(data or {})}
    return merged or None


def _efficiency_label(serving_engine: str | None, overridden: bool) -> str | None:
    if not serving_engine:
        return None
    return profile_label(serving_engine) + (" with overrides" if overridden else "")


@functools.lru_cache(maxsize=1)
def _error_bands():
    from planner.accuracy import ERROR_BANDS

    return load_bands(ERROR_BANDS)


def prediction_intervals(values: dict[str, Any], *, chip_kind: str, serving_engine: str | None = None) -> dict[str, Any]:
    """80% intervals for an answer's headline figures, from held-out errors of comparable predictions
    (planner/engine/uncertainty.py; planner/data/error_bands.json): those of the serving engine's fitted
    profile where the answer names one, else the spec defaults' for the chip kind over every engine."""
    out = {}
    for figure in BAND_OF:
        band = interval(values.get(figure), figure, chip_kind=chip_kind, engine=serving_engine or "*", bands=_error_bands())
        if band is not None:
            out[figure] = {"low": band.low, "high": band.high, "basis": band.basis}
    return out


def _pessimistic_cost(result, chips: list[Chip], engines: list[str | None]) -> np.ndarray:
    """$/1M output tokens at the high end of each candidate's 80% interval (the band of its chip kind and
    serving engine; chips and engines per chip index of the search)."""
    factor = np.array([
        (band.high if (band := interval(1.0, "usd_per_million_output_tokens", chip_kind=c.kind, engine=e or "*", bands=_error_bands())) else 1.0)
        for c, e in zip(chips, engines)
    ])  # fmt: skip
    return np.nan_to_num(result.usd_per_million_output_tokens * factor[result.results.grid.chip_index], nan=np.inf)


def _tensor_parallel_preference(e: Estimate) -> tuple[bool, bool, float]:
    return (e.feasible, e.fits, e.output_tokens_per_s_total if e.fits else 0.0)


def estimate_compute(*, data: dict[str, Any]) -> dict[str, Any]:
    """One configuration -> the estimate as a JSON-safe dict, with $/1M tokens per offering."""
    model: ModelArch = data["model"]
    chip: Chip = data["chip"]
    model_spec = catalog_specs.model_spec(model)
    chip_spec = catalog_specs.chip_spec(chip)
    engine = data.get("serving_engine")
    calibration = catalog_specs.calibrations_for([chip.slug])
    # Runs measured under the engine on this chip (a calibration keyed by the chip's variant slug) speak
    # for it over the engine's fitted profile.
    engine_calibrated = bool(engine) and any((variant_slug(chip.slug, engine), d) in calibration for d in (data["weight_dtype"], "*"))
    if engine:  # its scheduler's memory rule, batch cap and prefill budget
        chip_spec = dataclasses.replace(chip_spec, scheduler=catalog_specs.engine_schedulers().get(engine),
                                        slug=variant_slug(chip.slug, engine) if engine_calibrated else chip_spec.slug)  # fmt: skip
    profiled_engine = None if engine_calibrated else engine
    workload = _workload(data)
    decoding = decoding_spec(data["decoding"], model=model, output_tokens=workload.output_tokens)
    offerings = [data["offering"]] if data.get("offering") else catalog_snapshot().offerings_by_chip.get(chip.slug, [])
    batch = data.get("batch") or workload.concurrency or 1

    def run(tp: int) -> Evaluation:
        deployment = Deployment(
            chip=chip_spec, chip_count=data["chip_count"], tensor_parallel=tp, pipeline_parallel=data["pipeline_parallel"],
            attention_data_parallel=data["attention_data_parallel"], weight_dtype=data["weight_dtype"], kv_dtype=data.get("kv_dtype"), decoding=decoding,
        )  # fmt: skip
        return evaluate_deployment(
            model_spec, deployment, workload, batch=batch, efficiency=_efficiency(data.get("efficiency"), profiled_engine),
            calibration=calibration, disaggregated=data["disaggregated"],
        )  # fmt: skip

    tp_options = (
        [data["tensor_parallel"]] if data["tensor_parallel"] != "auto"
        else tensor_parallel_options(model_spec, chip_spec, data["chip_count"], data["pipeline_parallel"] * data["attention_data_parallel"])
    )  # fmt: skip
    # "auto": every TP that divides the heads and fits a node; the chip count is fixed, so the
    # best is the feasible one with the most output tokens/s (ties: the smaller TP).
    evaluations = [run(tp) for tp in tp_options]
    estimates = [e.estimate() for e in evaluations]
    best = max(range(len(estimates)), key=lambda k: _tensor_parallel_preference(estimates[k]))
    result, chosen = estimates[best], evaluations[best]
    # The evaluation does not depend on the offering: price the chosen one under each, not run it again.
    costs = [
        {**json_safe(chosen.cost(catalog_specs.offering_spec(offering))), "provider": offering.provider,
         "pricing_model": offering.pricing_model, "as_of": offering.as_of.isoformat(), "source": offering.source}
        for offering in offerings
    ]  # fmt: skip
    costs.sort(key=lambda c: c["usd_per_million_output_tokens"] if c["usd_per_million_output_tokens"] is not None else math.inf)
    out = json_safe(result)
    out["chip_slug"] = chip.slug  # not the variant's
    out["tensor_parallel_chosen"] = "auto" if data["tensor_parallel"] == "auto" else "given"
    out["costs"] = costs
    out["cost"] = costs[0] if costs else None
    out["chip_kind"] = chip.kind
    out["serving_engine"] = engine
    out["efficiency_source"] = _efficiency_label(profiled_engine, bool(data.get("efficiency"))) or out["efficiency_source"]
    priced = {**out, "usd_per_million_output_tokens": out["cost"]["usd_per_million_output_tokens"] if out["cost"] else None}
    out["intervals"] = json_safe(prediction_intervals(priced, chip_kind=chip.kind, serving_engine=engine))
    return out


def _chips_for(hardware: dict[str, Any]) -> list[Chip]:
    chips = catalog.chip_list()
    if hardware.get("chips"):
        chips = chips.filter(slug__in=[c.slug for c in hardware["chips"]])
    if hardware.get("kinds"):
        chips = chips.filter(kind__in=hardware["kinds"])
    if hardware.get("vendors"):
        vendors = [v.lower() for v in hardware["vendors"]]
        chips = [c for c in chips if c.vendor.lower() in vendors]
    return list(chips)


def _pricing_models(hardware: dict[str, Any]) -> tuple[str, ...] | None:
    chosen = set(hardware.get("pricing_models") or ())
    if hardware.get("ownership") == "rent":
        chosen = (chosen or set(RENT_MODELS)) & set(RENT_MODELS)
    elif hardware.get("ownership") == "own":
        chosen = (chosen or {"purchase"}) & {"purchase"}
    return tuple(sorted(chosen)) if chosen or hardware.get("ownership") in ("rent", "own") else None


def plan_search_options(data: dict[str, Any], *, decodings: tuple[Decoding, ...]) -> SearchOptions:
    hardware = data["hardware"]
    return SearchOptions(
        weight_dtypes=tuple(hardware.get("weight_dtypes") or SearchOptions().weight_dtypes),
        decodings=decodings,
        max_chip_count=hardware["max_chips"],
        pricing_models=_pricing_models(hardware),
        efficiency=_efficiency(data.get("efficiency")),  # serving engines come in as chip variants (plan_create)
        disaggregated=data["disaggregated"],
    )


def plan_candidate_bound(*, chip_count: int, options: SearchOptions, workload: Workload) -> int:
    """An upper bound of the grid's size, known before building it."""
    counts = int(math.log2(max(options.max_chip_count, 1))) + 1
    batches = 1 if workload.concurrency else len(DEFAULT_BATCHES)
    return chip_count * counts * len(DEFAULT_TENSOR_PARALLEL) * len(options.weight_dtypes) * batches * len(options.decodings)


def _row(result, i: int, chips_by_slug: dict[str, Chip], *, overridden: bool = False) -> dict[str, Any]:
    est = result.estimate(int(i))
    row = json_safe(est)
    # A chip under a serving engine's profile is searched as a variant ("nvidia-h100-sxm@vLLM").
    row["chip_slug"], serving_engine = split_variant(est.chip_slug)
    row["serving_engine"] = serving_engine
    # Under an engine's fitted profile the row says so (with overrides, if any); a calibration measured
    # under the engine on that chip keeps its own label.
    profiled = serving_engine is not None and not str(est.efficiency_source).startswith("calibration")
    efficiency_label = _efficiency_label(serving_engine, overridden) if profiled else None
    offering = result.offering_of(int(i))
    row["usd_per_million_output_tokens"] = json_safe(float(result.usd_per_million_output_tokens[i]))
    row["usd_per_million_input_tokens"] = json_safe(float(result.usd_per_million_input_tokens[i]))
    row["usd_per_chip_hour"] = json_safe(float(result.usd_per_chip_hour[i]))
    row["offering"] = offering.slug if offering else None
    row["pricing_model"] = offering.pricing_model if offering else None
    row["chip_kind"] = chips_by_slug[row["chip_slug"]].kind
    row["efficiency_source"] = efficiency_label or row["efficiency_source"]
    row["intervals"] = json_safe(prediction_intervals(row, chip_kind=row["chip_kind"], serving_engine=serving_engine))
    row["chip_name"] = chips_by_slug[row["chip_slug"]].name + (f" · {serving_engine}" if serving_engine else "")
    row["candidate_index"] = int(i)
    return row


@transaction.atomic
def plan_create(*, data: dict[str, Any], raw_inputs: dict[str, Any], user=None) -> Plan:
    """Search, rank and store a Plan with its inputs and the catalog values it used."""
    model: ModelArch = data["model"]
    workload = _workload(data["workload"])
    chips = _chips_for(data["hardware"])
    engine = data.get("serving_engine")
    if engine:  # a serving engine's profile was fitted on NVIDIA GPUs: the plan searches the chips it covers
        chips = [c for c in chips if profile_covers(c)]
    if not chips:
        raise PlanTooLarge("No chip in the catalog matches these hardware filters (chips, kinds, vendors"
                           + (f"; {engine}'s profile covers NVIDIA GPUs only" if engine else "") + "); widen them.")
    decodings = tuple(decoding_spec(d, model=model, output_tokens=workload.output_tokens) for d in data["decodings"])
    options = plan_search_options(data, decodings=decodings)
    # Each chip a fitted profile covers is tried under every serving engine, or the one the request names.
    engines = (engine,) if engine else serving_engines()
    variants = sum(len(engines) if profile_covers(c) else 1 for c in chips)
    bound = plan_candidate_bound(chip_count=variants, options=options, workload=workload)
    if bound > MAX_PLAN_CANDIDATES:
        raise PlanTooLarge(
            f"This search would evaluate up to {bound:,} configurations (limit {MAX_PLAN_CANDIDATES:,}); "
            "narrow it: fewer chips or kinds, a lower max_chips, fewer weight_dtypes or decodings, or give a concurrency."
        )
    chip_slugs = [c.slug for c in chips]
    offerings = list(catalog.offerings_for_chips(chip_slugs=chip_slugs))
    calibration = catalog_specs.calibrations_for(chip_slugs)
    specs, searched_calibration = engine_variants([catalog_specs.chip_spec(c) for c in chips], chips, calibration, engines,
                                                  catalog_specs.engine_schedulers())  # fmt: skip
    options = dataclasses.replace(options, calibration=searched_calibration)
    offering_specs: dict[str, list] = {}
    for offering in offerings:
        offering_specs.setdefault(offering.chip.slug, []).append(catalog_specs.offering_spec(offering))
    offering_specs.update({s.slug: offering_specs.get(split_variant(s.slug)[0], []) for s in specs})
    result = search(catalog_specs.model_spec(model), specs, offering_specs, workload, options)

    chips_by_slug = {c.slug: c for c in chips}
    searched_chips = [chips_by_slug[split_variant(s.slug)[0]] for s in specs]
    searched_engines = [split_variant(s.slug)[1] for s in specs]
    overridden = bool(data.get("efficiency"))
    rows: dict[int, dict[str, Any]] = {}

    def row(i) -> dict[str, Any]:
        if int(i) not in rows:
            rows[int(i)] = _row(result, int(i), chips_by_slug, overridden=overridden)
        return rows[int(i)]

    budget = data.get("budget_usd_per_million_output_tokens")
    ranked = result.ranked
    if data.get("rank_by") == "pessimistic":
        ranked = ranked[np.argsort(_pessimistic_cost(result, searched_chips, searched_engines)[ranked], kind="stable")]
    over_budget_count = 0
    if budget is not None:
        within = result.usd_per_million_output_tokens[ranked] <= budget
        over_budget_count = int((~within).sum())
        ranked = ranked[within]
    top = [row(i) for i in ranked[:PLAN_TOP_N]]
    results = {
        "ranked": top,
        "pareto_cost_tpot": [row(i) for i in result.pareto_cost_tpot[:50]],
        "pareto_cost_ttft": [row(i) for i in result.pareto_cost_ttft[:50]],
        "infeasible": [
            {"reason": g.name, "count": int(g.count), "example": g.example, "example_configuration": row(g.example_index)}
            for g in result.infeasible
        ],
        "over_budget_count": over_budget_count,
        "search_seconds": json_safe(result.seconds),
        "candidates_per_s": json_safe(result.candidates_per_s),
        "efficiency_sources": sorted({row["efficiency_source"] for row in top}),
    }  # every row is JSON-safe already (_row): no second pass over a few hundred of them
    snapshot = {
        "model": catalog_specs.snapshot([model]),
        "draft_models": catalog_specs.snapshot([d["draft_model"] for d in data["decodings"] if d.get("draft_model")]),
        "chips": catalog_specs.snapshot(chips),
        "offerings": catalog_specs.snapshot(offerings),
    }
    return Plan.objects.create(
        model_slug=model.slug,
        inputs=raw_inputs,
        catalog_snapshot=snapshot,
        calibration_used={f"{k[0]}/{k[1]}": v.source for k, v in calibration.items()},
        results=results,
        candidate_count=result.candidates,
        feasible_count=len(ranked),
        best_usd_per_million_output_tokens=top[0]["usd_per_million_output_tokens"] if top else None,
        pinned=data.get("pinned", False),
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )


def trial_prediction(
    *, model: ModelArch, chip: Chip, weight_dtype: str, batch: int, prompt_tokens: int, output_tokens: int,
    num_layers: int | None = None,
) -> dict[str, Any]:
    """What the planner predicts for a validation trial on the chip it actually ran on (one chip,
    the trial's dtype, the scaled copy's layers), with the newest calibration."""
    deployment = Deployment(chip=catalog_specs.chip_spec(chip), weight_dtype=weight_dtype, kv_dtype=weight_dtype)
    workload = Workload(prompt_tokens=prompt_tokens, output_tokens=output_tokens)
    # A trial times its prefill and its decode steps apart (one static batch), which is the
    # disaggregated serving model: TPOT and throughput carry no interleaved prefill.
    result = estimate(
        catalog_specs.model_spec(model, num_layers=num_layers), deployment, workload, batch=batch,
        calibration=catalog_specs.calibrations_for([chip.slug]), disaggregated=True,
    )  # fmt: skip
    return json_safe(result)
