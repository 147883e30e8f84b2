"""Planner services: validated inputs -> engine specs -> engine -> stored Plan / estimate dict."""
from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import time
from collections.abc import Callable

import numpy as np
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from hwcatalog import selectors as catalog
from hwcatalog.cache import catalog_snapshot
from hwcatalog.freshness import stale_price_warning
from hwcatalog.models import Chip, ModelArch
from planner import catalog_specs
from planner.engine import (
    Decoding,
    Deployment,
    Estimate,
    SearchOptions,
    Workload,
    estimate,
)
from planner.engine import trial_predictions as engine_trial_predictions
from planner.engine.chips import policy_for
from planner.engine.cost import HOURS_PER_MONTH
from planner.engine.cost import ownership as cost_ownership
from planner.engine.decoding import BlockDiffusion, Resolvers, decoding_from_params
from planner.engine.decoding.speculative import DEFAULT_ACCEPTANCE_RATE, DEFAULT_ACCEPTANCE_SOURCE
from planner.engine.family_fit import fitted_family, fitted_family_under
from planner.engine.uncertainty import BAND_OF, UNMEASURED, interval, load_bands, served_cost_ratio, served_share, serving_for
from planner.engine.estimate import Evaluation, evaluate_deployment
from planner.engine.grid import DEFAULT_BATCHES, grid_size
from planner.engine.search import grid_spec
from planner.engine.simulation import SchedulerOptions
from planner.simulation_inputs import scheduler_from
from planner.engine.streamed import search_streamed
from planner.engine_profiles import (
    engine_factors,
    engine_variants,
    measured_under,
    profile_label,
    profiled,
    readable,
    serving_engines,
    speaks_for,
    split_variant,
    stored_profiles,
    variant_slug,
)
from planner.models import Plan, PlanTag
from planner.runs import create_done, queued_resend, run_claim, run_fail, run_send

logger = logging.getLogger(__name__)

# A plan evaluates at most this many candidate configurations, counted exactly before any is
# built (plan_search_prepare); more is refused up front with a 400 naming the fields to narrow.
# A worker searches 5 M in ~10 s with memory bounded by the chunk (planner/engine/streamed.py).
MAX_PLAN_CANDIDATES = 5_000_000
PLAN_TOP_N = 100
RENT_MODELS = ("on_demand", "reserved", "spot")


class PlanTooLarge(ValueError):
    """The search asked for cannot run as asked (too large, or nothing to search): a 400 on `field` (`hardware`, or
    `serving_engine` where the engine named rules out every chip or dtype the filters leave)."""

    def __init__(self, message: str, *, field: str = "hardware"):
        super().__init__(message)
        self.field = field


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
        closed_loop=bool(data.get("closed_loop")),
    )


def _efficiency(data: dict[str, Any] | None, engine_factors: dict[str, float] | None = None) -> dict[str, float] | None:
    """The factors a request overrides, on top of what its serving engine's fitted profile brings to the chip
    (engine_profiles.engine_factors); the engine keeps the chip's own for the rest."""
    merged = {**(engine_factors or {}), **(data or {})}
    return merged or None


def named_engine_setup(engine: str | None, chip: Chip, chip_spec, weight_dtype: str, calibration) -> tuple[Any, dict[str, float], str | None]:
    """A request naming `engine` on `chip`: the chip spec under the engine's scheduler defaults (memory rule, batch cap,
    prefill budget), the factors it takes from the engine's fitted profile and the label it says so with. Runs measured
    under the engine on this chip (a calibration keyed by the chip's variant slug) speak for it over the profile: the
    spec takes the variant's slug and nothing else; else the whole profile where it covers the chip, the engine's
    host-side costs over the chip's spec defaults, its request overhead over a chip-family profile
    (engine_profiles.engine_factors), or nothing."""
    if not engine:
        return chip_spec, {}, None
    measured = measured_under(chip.slug, engine, weight_dtype, calibration)
    chip_spec = dataclasses.replace(chip_spec, scheduler=catalog_specs.engine_schedulers().get(engine),
                                    slug=variant_slug(chip.slug, engine) if measured else chip_spec.slug)  # fmt: skip
    factors, label = ({}, None) if measured else engine_factors(engine, chip, calibration=calibration, weight_dtype=weight_dtype)
    return chip_spec, factors, label


def _efficiency_label(label: str | None, overridden: bool) -> str | None:
    return label + (" with overrides" if overridden else "") if label else None


def outside_silicon(chip) -> bool:
    """Whether the silicon file leaves the chip unmeasured (every chip but NVIDIA's GPUs): its intervals rest on
    the chip-family errors of the chips measured elsewhere first."""
    return fitted_family(chip.vendor, chip.kind)


@functools.lru_cache(maxsize=1)
def error_bands():
    from planner.accuracy import ERROR_BANDS

    return load_bands(ERROR_BANDS)


def band_basis(chip, engine: str | None) -> tuple[str, bool]:
    """Which errors a prediction on `chip` under the named `engine` takes its intervals from, and whether the chip-family
    errors come first (outside_silicon): the engine's where a fitted profile of it speaks for the chip, its serving-engine
    profile (an NVIDIA GPU) or its own chip-family profile (an NVIDIA GPU under llama.cpp, family_fit.engine_family,
    whose errors the bands do not hold apart: the fitted profiles' errors stand for them, uncertainty._lookup); else
    the spec defaults' over every engine ("*"); for a chip outside the silicon file that no calibration or chip-family
    profile speaks for, none of them (uncertainty.UNMEASURED: the widest band, and it says so)."""
    if outside_silicon(chip):
        # A chip no fitted profile speaks for (no calibration, no chip-family profile; one measured under the named
        # engine counts) takes the widest band.
        measured = speaks_for(catalog_specs.calibrations_for([chip.slug]), chip.slug, engine)
        return ("*" if measured else UNMEASURED), True
    under_family = fitted_family_under(chip.vendor, chip.kind, engine, stored_profiles()) in catalog_specs.stored_family_profiles()
    return (engine if profiled(engine, chip) or under_family else "*"), False


def prediction_intervals(values: dict[str, Any], *, chip: Chip, serving_engine: str | None = None, disaggregated: bool = False) -> dict[str, Any]:
    """80% intervals for an answer's headline figures, from held-out errors of comparable predictions
    (planner/engine/uncertainty.py; planner/data/error_bands.json): those of the named serving engine's fitted
    profile where it speaks for the chip, else the spec defaults' for the chip kind over every engine (a chip
    outside the silicon file, or an NVIDIA GPU under an engine fitted as a chip family of its own: its kind's
    chip-family errors); of predictions served the same way (colocated, or prefill disaggregated)."""
    out = {}
    engine, outside = band_basis(chip, serving_engine)
    for figure in BAND_OF:
        band = interval(values.get(figure), figure, chip_kind=chip.kind, engine=engine, bands=error_bands(),
                        serving=serving_for(disaggregated), outside_silicon=outside)  # fmt: skip
        if band is not None:
            out[figure] = {"low": band.low, "high": band.high, "basis": band.basis}
    cost = values.get("usd_per_million_output_tokens")
    share = float(served_share(values.get("served_output_tokens_per_s"), values.get("output_tokens_per_s_total")))  # None: unknown
    if "usd_per_million_output_tokens" in out and share < 1.0:
        usd = out["usd_per_million_output_tokens"]
        low, high = (float(served_cost_ratio(usd[end] / cost, share)) * cost for end in ("low", "high"))
        basis = usd["basis"] + "; charged to the request rate's tokens, it rises only where the capacity falls short of them"
        out["usd_per_million_output_tokens"] = {"low": low, "high": high, "basis": basis}
    return out


def _pessimistic_cost(result, chips: list[Chip], engines: list[str | None], memo: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """$/1M output tokens at the high end of each candidate's 80% interval (the band of its chip kind, serving
    engine and serving mode; chips and the engines they are searched under per chip index of the search). `memo`
    keeps each searched chip's factor per serving mode across a streamed search's chunks (band_basis reads the
    chip's calibrations)."""
    serving = serving_for(result.results.context.disaggregated)
    factor = memo.get(serving) if memo is not None else None
    if factor is None:
        bases = [band_basis(c, e) for c, e in zip(chips, engines)]
        factor = np.array([
            (band.high if (band := interval(1.0, "usd_per_million_output_tokens", chip_kind=c.kind, engine=engine, bands=error_bands(),
                                            serving=serving, outside_silicon=outside)) else 1.0)
            for c, (engine, outside) in zip(chips, bases)
        ])  # fmt: skip
        if memo is not None:
            memo[serving] = factor
    r = result.results
    high = served_cost_ratio(factor[r.grid.chip_index], served_share(r.served_output_tokens_per_s, r.output_tokens_per_s_total))
    return np.nan_to_num(result.usd_per_million_output_tokens * high, nan=np.inf)


def _tensor_parallel_preference(e: Estimate, reason_code: int) -> tuple[bool, bool, float, int]:
    """Feasible first, then running at all, then the most output tokens/s; among layouts that cannot run, the one whose
    refusal comes latest in the checks (reasons.py's order): with no layout fitting, the one that holds the weights and
    is refused for its KV cache says why, where the narrowest's "weights do not fit" would not (DeepSeek-V3 at batch
    1,024 on eight H200s: TP 8 holds 936 sequences, TP 1 not the weights)."""
    return (e.feasible, e.fits, e.output_tokens_per_s_total if e.fits else 0.0, reason_code if not e.fits else 0)


def estimate_compute(*, data: dict[str, Any]) -> dict[str, Any]:
    """One configuration -> the estimate as a JSON-safe dict, with $/1M tokens per offering."""
    model: ModelArch = data["model"]
    chip: Chip = data["chip"]
    model_spec = catalog_specs.model_spec(model)
    chip_spec = catalog_specs.chip_spec(chip)
    engine = data.get("serving_engine")
    calibration = catalog_specs.calibrations_for([chip.slug])
    chip_spec, factors, engine_label = named_engine_setup(engine, chip, chip_spec, data["weight_dtype"], calibration)
    server = scheduler_from(data.get("scheduler"))
    chip_spec = server.configured(chip_spec)  # what the server's command line sets
    workload = _workload(data)
    decoding = decoding_spec(data["decoding"], model=model, output_tokens=workload.output_tokens)
    offerings = [data["offering"]] if data.get("offering") else catalog_snapshot().offerings_by_chip.get(chip.slug, [])
    batch = data.get("batch") or workload.concurrency or 1

    if data.get("weight_format"):  # stored in the named format: its bits, and its sharding on an LPU
        model_spec = dataclasses.replace(model_spec, checkpoint_format=data["weight_format"])

    def run(tp: int, pp: int) -> Evaluation:
        deployment = Deployment(
            chip=chip_spec, chip_count=data["chip_count"], tensor_parallel=tp, pipeline_parallel=pp,
            attention_data_parallel=data["attention_data_parallel"], weight_dtype=data["weight_dtype"], kv_dtype=data.get("kv_dtype"), decoding=decoding,
        )  # fmt: skip
        return evaluate_deployment(
            model_spec, deployment, workload, batch=batch, efficiency=_efficiency(data.get("efficiency"), factors),
            calibration=calibration, disaggregated=data["disaggregated"],
        )  # fmt: skip

    pp = data.get("pipeline_parallel")  # None: unset (1, or the chip kind's own sharding)
    layouts = (
        [(data["tensor_parallel"], pp or 1)] if data["tensor_parallel"] != "auto"
        else policy_for(chip_spec).layouts_of_count(chip_spec, model_spec, data["chip_count"], weight_dtype=data["weight_dtype"],
                                                    pipeline_parallel=pp, attention_data_parallel=data["attention_data_parallel"])
    )  # fmt: skip
    # "auto": every TP that divides the heads and fits a node (an LPU: every TP x PP sharding that holds
    # the weights); the chip count is fixed, so the best is the feasible one with the most output tokens/s
    # (ties: the first, the smaller TP).
    evaluations = [run(tp, pp) for tp, pp in layouts]
    estimates = [e.estimate() for e in evaluations]
    best = max(range(len(estimates)), key=lambda k: _tensor_parallel_preference(estimates[k], int(evaluations[k].results.reason[evaluations[k].index])))
    result, chosen = estimates[best], evaluations[best]
    # The evaluation does not depend on the offering: price the chosen one under each, not run it again.
    costs = [
        {**json_safe(chosen.cost(catalog_specs.offering_spec(offering))), "provider": offering.provider,
         "pricing_model": offering.pricing_model, "as_of": offering.as_of.isoformat(), "source": offering.source}
        for offering in offerings
    ]  # fmt: skip
    costs.sort(key=lambda c: c["usd_per_million_output_tokens"] if c["usd_per_million_output_tokens"] is not None else math.inf)
    out = json_safe(result)
    # A price older than 18 months is never used without saying so (hwcatalog/freshness.py).
    today = timezone.localdate()
    stale = [w for o in offerings if (w := stale_price_warning(offering_slug=o.slug, as_of=o.as_of, today=today))]
    out["warnings"] = [*out.get("warnings", []), *stale, *_memory_set_by(server, out)]
    out["chip_slug"] = chip.slug  # not the variant's
    out["tensor_parallel_chosen"] = "auto" if data["tensor_parallel"] == "auto" else "given"
    out["costs"] = costs
    out["cost"] = costs[0] if costs else None
    out["chip_kind"] = chip.kind
    out["serving_engine"] = engine
    layout = model_spec.weight_layout(data["weight_dtype"])
    out["weight_format"], out["weight_bits_per_weight"] = layout.weight_format, layout.bits_per_weight
    out["efficiency_source"] = _efficiency_label(engine_label, bool(data.get("efficiency"))) or out["efficiency_source"]
    priced = {**out, "usd_per_million_output_tokens": out["cost"]["usd_per_million_output_tokens"] if out["cost"] else None}
    out["intervals"] = json_safe(prediction_intervals(priced, chip=chip, serving_engine=engine, disaggregated=data["disaggregated"]))
    return out


def _memory_set_by(server: SchedulerOptions, out: dict[str, Any]) -> list[str]:
    """A memory fraction the request set is what its memory figures (and any reason that something does not fit) rest on:
    say so, with the usable bytes it leaves."""
    if server.memory_fraction is None:
        return []
    usable = (out.get("memory") or {}).get("usable_bytes_per_chip")
    left = f": {usable / 1e9:.1f} GB usable per chip" if usable else ""
    return [f"the memory is as scheduler.memory_fraction {server.memory_fraction:g} sets it{left}"]


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


def _whole_configuration_cost(result, i: int, offering) -> dict[str, Any]:
    """What the configuration costs as a whole: the chips paid for (whole units of the offering), per hour
    and per month."""
    if offering is None:
        return {"chips_per_unit": None, "billed_chips": None, "usd_per_hour": None, "usd_per_month": None}
    billed = float(result.billed_chips[i])
    usd_per_hour = billed * float(result.usd_per_chip_hour[i])
    return {
        "chips_per_unit": offering.chips_per_unit, "billed_chips": int(billed), "usd_per_hour": json_safe(usd_per_hour),
        "usd_per_month": json_safe(usd_per_hour * HOURS_PER_MONTH),
    }  # fmt: skip


def _row(
    result, i: int, chips_by_slug: dict[str, Chip], *, overridden: bool = False, providers: dict[str, str] | None = None
) -> dict[str, Any]:
    providers = providers or {}
    est = result.estimate(int(i))
    row = json_safe(est)
    # A chip under a serving engine's profile is searched as a variant ("nvidia-h100-sxm@vLLM").
    row["chip_slug"], serving_engine = split_variant(est.chip_slug)
    row["serving_engine"] = serving_engine
    # Under an engine's fitted profile the row says so (with overrides, if any); a calibration measured
    # under the engine on that chip keeps its own label.
    chip = chips_by_slug[row["chip_slug"]]
    under_profile = profiled(serving_engine, chip) and not str(est.efficiency_source).startswith("calibration")
    efficiency_label = _efficiency_label(profile_label(serving_engine), overridden) if under_profile else None
    offering = result.offering_of(int(i))
    row["usd_per_million_output_tokens"] = json_safe(float(result.usd_per_million_output_tokens[i]))
    row["usd_per_million_input_tokens"] = json_safe(float(result.usd_per_million_input_tokens[i]))
    row["usd_per_chip_hour"] = json_safe(float(result.usd_per_chip_hour[i]))
    row["offering"] = offering.slug if offering else None
    row["provider"] = providers.get(offering.slug) if offering else None
    row["pricing_model"] = offering.pricing_model if offering else None
    row["ownership"] = cost_ownership(offering) if offering else None
    row.update(_whole_configuration_cost(result, int(i), offering))
    row["chip_kind"] = chips_by_slug[row["chip_slug"]].kind
    layout = result.results.context.model.weight_layout(est.weight_dtype)
    row["weight_format"], row["weight_bits_per_weight"] = layout.weight_format, layout.bits_per_weight
    row["efficiency_source"] = efficiency_label or row["efficiency_source"]
    row["intervals"] = json_safe(prediction_intervals(row, chip=chip, serving_engine=serving_engine,
                                                      disaggregated=result.results.context.disaggregated))  # fmt: skip
    row["chip_name"] = chips_by_slug[row["chip_slug"]].name + (f" · {serving_engine}" if serving_engine else "")
    for key in ("reasons", "warnings"):  # they name the searched variant's slug
        row[key] = [readable(text) for text in row.get(key) or []]
    row["candidate_index"] = int(i)
    return row


@dataclasses.dataclass(frozen=True, kw_only=True)
class PreparedSearch:
    """A plan's search, ready to run: the engine's inputs and the exact number of candidates."""

    model: ModelArch
    workload: Workload
    chips: list[Chip]
    engines: tuple[str | None, ...]
    specs: tuple
    options: SearchOptions
    offerings: list
    offering_specs: dict[str, list]
    calibration: dict
    candidates: int


def _too_large_message(count: int, *, data: dict[str, Any], variants: int) -> str:
    hardware = data["hardware"]
    batches = "one batch size (workload.concurrency)" if data["workload"].get("concurrency") else f"{len(DEFAULT_BATCHES)} batch sizes"
    return (
        f"This search would evaluate {count:,} configurations (limit {MAX_PLAN_CANDIDATES:,}); narrow it: "
        f"hardware.chips, hardware.kinds or hardware.vendors ({variants} chips and engine variants now), "
        f"hardware.max_chips ({hardware['max_chips']} now), hardware.weight_dtypes "
        f"({len(hardware.get('weight_dtypes') or SearchOptions().weight_dtypes)} now), decodings ({len(data['decodings'])} now), "
        f"serving_engine (name one), or give workload.concurrency ({batches} now)."
    )


def _engine_scope(engine) -> str:
    vendors = f"{', '.join(engine.chip_vendors)} " if engine.chip_vendors else ""
    return f"{vendors}{', '.join(engine.chip_kinds)} chips only"


def plan_search_prepare(*, data: dict[str, Any]) -> PreparedSearch:
    """Resolve a validated plan request into the engine's inputs and count its candidates exactly
    (planner.engine.grid.grid_size, the same per-chip layouts the grid is built from), without
    building any. PlanTooLarge when nothing matches or it is over MAX_PLAN_CANDIDATES."""
    model: ModelArch = data["model"]
    workload = _workload(data["workload"])
    chips = _chips_for(data["hardware"])
    engine = data.get("serving_engine")
    serving = catalog_specs.serving_engine_named(engine) if engine else None
    matched = chips
    if serving is not None:  # the plan searches the chips the engine runs on
        chips = [c for c in chips if catalog_specs.engine_refusal(serving, c) is None]
    if not chips:
        if matched:
            raise PlanTooLarge(f"{engine} runs on {_engine_scope(serving)}; no chip the hardware filters leave is one.", field="serving_engine")
        raise PlanTooLarge("No chip in the catalog matches these hardware filters (chips, kinds, vendors); widen them.")
    decodings = tuple(decoding_spec(d, model=model, output_tokens=workload.output_tokens) for d in data["decodings"])
    options = plan_search_options(data, decodings=decodings)
    if serving is not None:  # at the weight dtypes it serves
        dtypes = tuple(d for d in options.weight_dtypes if d in serving.weight_dtypes)
        if not dtypes:
            raise PlanTooLarge(f"{engine} serves {', '.join(serving.weight_dtypes)} weights; hardware.weight_dtypes names none of them.",
                               field="serving_engine")
        options = dataclasses.replace(options, weight_dtypes=dtypes)
    # Each chip is tried under every serving engine with a fitted profile that runs on it, or the one the request names.
    engines = (engine,) if engine else serving_engines()
    chip_slugs = [c.slug for c in chips]
    calibration = catalog_specs.calibrations_for(chip_slugs)
    specs, searched_calibration = engine_variants([catalog_specs.chip_spec(c) for c in chips], chips, calibration,
                                                  catalog_specs.engines_running_on(chips, engines), catalog_specs.engine_schedulers())  # fmt: skip
    server = scheduler_from(data.get("scheduler"))  # the named engine's command line, over its defaults
    specs = [server.configured(s) for s in specs]
    model_spec = catalog_specs.model_spec(model)
    count = grid_size(grid_spec(model_spec, specs, workload, options))
    if count > MAX_PLAN_CANDIDATES:
        raise PlanTooLarge(_too_large_message(count, data=data, variants=len(specs)))
    offerings = list(catalog.offerings_for_chips(chip_slugs=chip_slugs))
    offering_specs: dict[str, list] = {}
    for offering in offerings:
        offering_specs.setdefault(offering.chip.slug, []).append(catalog_specs.offering_spec(offering))
    offering_specs.update({s.slug: offering_specs.get(split_variant(s.slug)[0], []) for s in specs})
    return PreparedSearch(
        model=model, workload=workload, chips=chips, engines=tuple(engines), specs=tuple(specs),
        options=dataclasses.replace(options, calibration=searched_calibration), offerings=offerings, offering_specs=offering_specs,
        calibration=calibration, candidates=count,
    )  # fmt: skip


def _snapshot(prepared: PreparedSearch, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": catalog_specs.snapshot([prepared.model]),
        "draft_models": catalog_specs.snapshot([d["draft_model"] for d in data["decodings"] if d.get("draft_model")]),
        "chips": catalog_specs.snapshot(prepared.chips),
        "offerings": catalog_specs.snapshot(prepared.offerings),
    }


def plan_search_run(
    prepared: PreparedSearch, *, data: dict[str, Any], on_progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """Run the search in chunks of fixed size (planner.engine.streamed: memory bounded by the
    chunk) and return the Plan fields it fills: results, counts, catalog snapshot, calibrations."""
    chips_by_slug = {c.slug: c for c in prepared.chips}
    searched_chips = [chips_by_slug[split_variant(s.slug)[0]] for s in prepared.specs]
    # The band of an engine's fitted profile where it speaks for the chip, else the chip kind's over every engine (band_basis).
    searched_engines = [split_variant(s.slug)[1] for s in prepared.specs]
    pessimistic = data.get("rank_by") == "pessimistic"
    factors: dict[str, np.ndarray] = {}  # each searched chip's pessimistic cost factor, worked out once (_pessimistic_cost)
    budget = data.get("budget_usd_per_million_output_tokens")
    streamed = search_streamed(
        catalog_specs.model_spec(prepared.model), prepared.specs, prepared.offering_specs, prepared.workload, prepared.options,
        keep=PLAN_TOP_N, rank_key=(lambda r: _pessimistic_cost(r, searched_chips, searched_engines, factors)) if pessimistic else None,
        budget_usd_per_million_output_tokens=budget, on_progress=on_progress,
    )  # fmt: skip
    result = streamed.result  # over the kept candidates; streamed.kept maps them into the whole grid
    overridden = bool(data.get("efficiency"))
    providers = {o.slug: o.provider for o in prepared.offerings}
    rows: dict[int, dict[str, Any]] = {}

    def row(i) -> dict[str, Any]:
        if int(i) not in rows:
            rows[int(i)] = {
                **_row(result, int(i), chips_by_slug, overridden=overridden, providers=providers), "candidate_index": int(streamed.kept[int(i)])
            }  # fmt: skip
        return rows[int(i)]

    ranked = result.ranked
    if pessimistic:
        ranked = ranked[np.argsort(_pessimistic_cost(result, searched_chips, searched_engines, factors)[ranked], kind="stable")]
    if budget is not None:
        ranked = ranked[result.usd_per_million_output_tokens[ranked] <= budget]
    top = [row(i) for i in ranked[:PLAN_TOP_N]]
    results = {
        "ranked": top,
        "pareto_cost_tpot": [row(i) for i in result.pareto_cost_tpot[:50]],
        "pareto_cost_ttft": [row(i) for i in result.pareto_cost_ttft[:50]],
        "infeasible": [
            {"reason": g.name, "count": int(g.count), "example": readable(g.example), "example_configuration": row(g.example_index)}
            for g in streamed.infeasible
        ],
        "over_budget_count": streamed.over_budget if budget is not None else 0,
        "search_seconds": json_safe(streamed.seconds),
        "candidates_per_s": json_safe(streamed.candidates_per_s),
        "efficiency_sources": sorted({row["efficiency_source"] for row in top}),
    }  # every row is JSON-safe already (_row): no second pass over a few hundred of them
    if data.get("simulation"):  # issue 15: the top candidates simulated and re-ranked at percentile SLOs
        from planner.simulation_services import plan_simulation_stage

        results = plan_simulation_stage(prepared, data=data, results=results)
        top = results["ranked"]
    return {
        "results": results,
        "candidate_count": streamed.candidates,
        "feasible_count": streamed.within_budget,
        "best_usd_per_million_output_tokens": top[0]["usd_per_million_output_tokens"] if top else None,
        "catalog_snapshot": _snapshot(prepared, data),
        "calibration_used": {f"{k[0]}/{k[1]}": v.source for k, v in prepared.calibration.items()},
    }


@transaction.atomic
def plan_create(*, data: dict[str, Any], raw_inputs: dict[str, Any], user=None, inline: bool | None = None) -> Plan:
    """Count the search's candidates, then search, rank and store a Plan with its inputs and the
    catalog values it used; a search over settings.PLAN_INLINE_MAX_CANDIDATES (or inline=False) is
    stored queued and sent, after commit, to a worker (planner/tasks.py), which fills it in.
    inline=True searches here whatever the size (the CLI)."""
    prepared = plan_search_prepare(data=data)
    if inline is None:
        inline = prepared.candidates <= settings.PLAN_INLINE_MAX_CANDIDATES
    record = {
        "model_slug": prepared.model.slug, "inputs": {k: v for k, v in raw_inputs.items() if k not in LABEL_FIELDS},
        "pinned": data.get("pinned", False), "name": data.get("name", ""),
        "created_by": user if getattr(user, "is_authenticated", False) else None,
    }  # fmt: skip
    plan = _plan_store(prepared, record=record, data=data, inline=inline)
    PlanTag.objects.bulk_create(PlanTag(plan=plan, name=tag) for tag in data.get("tags", []))  # in the same transaction
    return plan


# A plan's labels (planner/serializers.py PlanLabelsSerializer): stored on the plan, not in its inputs (the search's request).
LABEL_FIELDS = frozenset({"name", "tags"})


def _plan_store(prepared, *, record: dict[str, Any], data: dict[str, Any], inline: bool) -> Plan:
    if inline:
        outcome = plan_search_run(prepared, data=data)
        if data.get("simulation"):  # issue 15: a big simulation stage runs on workers, one task per candidate
            from planner.simulation_services import plan_simulation_pending, plan_simulations_start

            if plan_simulation_pending(outcome):
                return plan_simulations_start(record=record, outcome=outcome)
        return create_done(Plan, **record, **outcome, status=Plan.Status.DONE, progress=1.0)
    plan = Plan.objects.create(
        **record, results={}, candidate_count=prepared.candidates, feasible_count=0, status=Plan.Status.QUEUED, progress=0.0,
        # The rows it will use, so they count as referenced while it waits; the worker stores them again.
        catalog_snapshot=_snapshot(prepared, data), calibration_used={},
    )  # fmt: skip
    transaction.on_commit(lambda: _plan_send(plan))
    return plan


def _plan_send(plan: Plan) -> bool:
    """Publish the plan's task; a broker that refuses leaves the plan queued (the request still succeeds)."""
    from planner.tasks import run_plan

    return run_send(run_plan, Plan, plan.pk, what="plan")


def plans_queued_resend(*, resend_after_s: float, sweep_every_s: float, now=None) -> int:
    """Send again the plans still queued whose message may be lost (planner.runs.queued_resend)."""
    return queued_resend(Plan, _plan_send, resend_after_s=resend_after_s, sweep_every_s=sweep_every_s, now=now)


PLAN_MAX_ATTEMPTS = 2
# A running plan whose worker wrote no progress for this long lost its worker: a redelivered
# message takes it again (progress is written at least every PLAN_PROGRESS_EVERY_S while it runs).
PLAN_STALE_AFTER_S = 30.0
PLAN_PROGRESS_EVERY_S = 0.5


def plan_claim(*, plan_id: str) -> str:
    """Take a queued plan (or a running one whose worker was lost) for this worker: "claimed";
    "busy" while another worker's search is alive; "finished" when there is nothing to do."""
    return run_claim(Plan, plan_id, stale_after_s=PLAN_STALE_AFTER_S, max_attempts=PLAN_MAX_ATTEMPTS, what="search")


def _plan_fail(plan_id: str, reason: str) -> None:
    run_fail(Plan, plan_id, reason)


def plan_execute(*, plan_id: str) -> str:
    """Run a queued plan's search in this (worker) process and store its results: "done", "failed",
    or what plan_claim said when it was not ours to run. Inputs are validated again, against the
    catalog as it is now."""
    from celery.exceptions import SoftTimeLimitExceeded

    from planner.serializers import PlanInputSerializer

    claim = plan_claim(plan_id=plan_id)
    if claim != "claimed":
        return claim
    plan = Plan.objects.get(pk=plan_id)
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= PLAN_PROGRESS_EVERY_S:
            last[0] = now
            Plan.objects.filter(pk=plan_id, status=Plan.Status.RUNNING).update(progress=done / max(total, 1), heartbeat_at=timezone.now())

    try:
        serializer = PlanInputSerializer(data=plan.inputs)
        if not serializer.is_valid():
            _plan_fail(plan_id, f"the request is no longer valid against the catalog: {json.dumps(serializer.errors, default=str)}")
            return "failed"
        data = serializer.validated_data
        outcome = plan_search_run(plan_search_prepare(data=data), data=data, on_progress=progress)
    except SoftTimeLimitExceeded:
        _plan_fail(plan_id, f"the search ran past its time limit ({settings.PLAN_TASK_SOFT_TIME_LIMIT} s); narrow it")
        return "failed"
    except PlanTooLarge as exc:
        _plan_fail(plan_id, str(exc))
        return "failed"
    except Exception as exc:  # noqa: BLE001 - a failed search is stored with its reason, never left running
        logger.exception("plan %s: the search failed", plan_id)
        _plan_fail(plan_id, f"the search failed: {type(exc).__name__}: {exc}")
        return "failed"
    if data.get("simulation"):  # issue 15: the simulation stage's candidates go to workers; the last one marks the plan done
        from planner.simulation_services import plan_simulation_pending, plan_simulations_start

        if plan_simulation_pending(outcome):
            plan_simulations_start(plan_id=plan_id, outcome=outcome)
            return "simulating"
    stored = Plan.objects.filter(pk=plan_id, status=Plan.Status.RUNNING).update(
        **outcome, status=Plan.Status.DONE, progress=1.0, finished_at=timezone.now(), heartbeat_at=timezone.now(), error="",
    )  # fmt: skip
    return "done" if stored else "finished"


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


def _assumed_acceptance(configuration: dict[str, Any]) -> tuple[float, str]:
    """The acceptance the planner assumes for the plan's row: the row's own (a speculative or draft-head row), else the
    speculative method's default."""
    fields = configuration.get("decoding_fields") or {}
    if isinstance(fields.get("acceptance_rate"), (int, float)):
        return float(fields["acceptance_rate"]), f"the plan's row ({configuration.get('decoding')})"
    return DEFAULT_ACCEPTANCE_RATE, f"the speculative method's default ({DEFAULT_ACCEPTANCE_SOURCE})"


def speculative_trial_prediction(*, configuration: dict[str, Any], measured: dict[str, Any]) -> dict[str, Any]:
    """What the planner predicts for a speculative trial (jobs/trials/speculative.py): the acceptance it assumes for
    the plan's row against the tiny trained pair's, and its speedup formula fed the pair's measured acceptance and
    draft/target cost ratio against the measured speedup (planner/engine/trial_predictions.py)."""
    assumed, source = _assumed_acceptance(configuration)
    k = int(measured.get("draft_tokens_k") or 4)
    predicted = engine_trial_predictions.speculative_trial_prediction(
        assumed_acceptance_rate=assumed, measured_acceptance_rate=measured.get("acceptance_rate"), draft_tokens=k,
        draft_cost_ratio=measured.get("draft_cost_ratio"), plain_token_time_s=measured.get("plain_token_time_s"),
    )  # fmt: skip
    basis = (f"Predicted acceptance: {assumed:g} per drafted token, assumed by {source}; tokens per target forward from it "
             f"(Leviathan eq. 1, k = {k}). Predicted speedup: the planner's formula (thm 3.8) fed the measured acceptance and "
             "draft/target cost ratio, so it checks the formula, not the assumption.")  # fmt: skip
    return json_safe({**predicted, "draft_tokens_k": k, "acceptance_rate_source": source, "basis": basis})


def block_diffusion_trial_prediction(
    *, model: ModelArch, chip: Chip, configuration: dict[str, Any], measured: dict[str, Any], num_layers: int | None = None,
) -> dict[str, Any]:
    """What the planner predicts for a block-diffusion trial (jobs/trials/block_diffusion.py) on the chip it ran on, in
    the dtype, batch, lengths, block size and schedule that ran, for the scaled copy's layers. A fixed schedule of S
    steps per block is the planner's steps_per_block; a confidence threshold has no step count, so the tokens per
    forward the plan's row assumes (or the method's default, one per step) stand in for it, and say so."""
    block = int(measured["block_size"])
    params: dict[str, Any] = {"block_size": block}
    if measured.get("steps_per_block"):
        params["steps_per_block"] = int(measured["steps_per_block"])
        schedule = f"{params['steps_per_block']} denoising steps per block, as the trial ran"
    else:
        fields = configuration.get("decoding_fields") or {}
        if fields.get("block_size") and fields.get("effective_steps"):
            params["tokens_per_forward"] = fields["block_size"] / fields["effective_steps"]
            schedule = f"threshold decoding: {params['tokens_per_forward']:g} tokens per forward, assumed by the plan's row"
        else:
            schedule = "threshold decoding: one token per step, the block-diffusion method's default"
    decoding = BlockDiffusion.from_params(params, Resolvers())
    dtype = measured.get("dtype") or "bf16"
    batch, gen_length = int(measured.get("batch") or 1), int(measured["gen_length"])
    deployment = Deployment(chip=catalog_specs.chip_spec(chip), weight_dtype=dtype, kv_dtype=dtype, decoding=decoding)
    workload = Workload(prompt_tokens=int(measured["prompt_tokens"]), output_tokens=gen_length)
    evaluation = evaluate_deployment(
        catalog_specs.model_spec(model, num_layers=num_layers), deployment, workload, batch=batch,
        calibration=catalog_specs.calibrations_for([chip.slug]), disaggregated=True,
    )  # fmt: skip
    results, i = evaluation.results, evaluation.index
    predicted = engine_trial_predictions.block_diffusion_trial_prediction(
        decoding=decoding, output_tokens=gen_length, batch=batch,
        prefill_time_s=float(results.prefill_batched_s_per_prompt[i]) * batch, decode_token_time_s=float(results.decode_token_time_s[i]),
    )  # fmt: skip
    basis = (f"Predicted by the planner's block-diffusion decoding ({decoding.label}: {schedule}) for {chip.slug} in {dtype}; "
             "it charges one commit forward per block but the last computed, as the trial runs.")  # fmt: skip
    return json_safe({**predicted, "decoding": decoding.label, "basis": basis})
