"""The serving-engine profiles the planner ships, for the API: the efficiency factors fitted per engine
to NVIDIA's silicon measurements (planner/engine/fit.py; written by `manage.py accuracy FILE
--profiles-out planner/data/engine_profiles.json`, docs/accuracy.md#the-fit)."""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from pathlib import Path

from planner.engine.efficiency import resolve_efficiency
from planner.engine.family_fit import FAMILY_SOURCE, serving_engine_family
from planner.engine.fit import POOLED, EngineProfile, load_profiles
from planner.engine.units import DTYPES

ENGINE_PROFILES = Path(__file__).resolve().parent / "data" / "engine_profiles.json"


@functools.lru_cache(maxsize=1)
def stored_profiles() -> dict[str, EngineProfile]:
    """Each named engine's profile (the pooled one is for rows of engines without their own)."""
    profiles, _ = load_profiles(ENGINE_PROFILES)
    return {engine: profile for engine, profile in profiles.items() if engine != POOLED}


def serving_engines() -> tuple[str, ...]:
    return tuple(sorted(stored_profiles()))


def profile_covers(chip) -> bool:
    """Whether a fitted profile speaks for this catalog chip: the measurements behind it are NVIDIA GPUs'."""
    return serving_engine_family(chip.vendor, chip.kind)


def profiled(engine: str | None, chip) -> bool:
    """Whether a serving engine's fitted profile speaks for the chip: the engine has one (fitted on NVIDIA's
    silicon measurements) and the chip is an NVIDIA GPU. Elsewhere an engine brings its scheduler defaults and
    the chip keeps its own efficiency (its calibration, chip-family profile or spec defaults)."""
    return bool(engine) and engine in stored_profiles() and profile_covers(chip)


# What an engine's host software costs whatever chip it drives: its scheduler's work per step and a request's handling
# before its prefill (receiving, tokenising, scheduling). The rest of a fitted profile (compute and bandwidth fractions,
# the MoE kernels' share, the time per routed expert and MoE layer) is the chip's kernels'.
HOST_FACTORS = ("step_overhead_s", "request_overhead_s")


def engine_factors(engine: str | None, chip, *, calibration, weight_dtype: str) -> tuple[dict[str, float], str | None]:
    """The factors a named serving engine's fitted profile brings to a chip, and the label saying so: all of them where
    it speaks for the chip (`profiled`); on another chip with no fitted efficiency of its own (no calibration or
    chip-family profile for `weight_dtype` in `calibration`, so its spec defaults), the engine's host-side costs
    (HOST_FACTORS); under a chip-family profile, which fits the chip's kernels and step overhead but no time before the
    prefill, the engine's request overhead; under a calibration, none (measured under some engine, its host costs with
    it). A chip-family entry is told by its source (family_fit.FAMILY_SOURCE; a calibration's reads "calibration v...")."""
    profile = stored_profiles().get(engine) if engine else None
    if profile is None:
        return {}, None
    factors = profile.factors()
    if profiled(engine, chip):
        return factors, profile_label(engine)
    own = next((calibration[(chip.slug, d)] for d in (weight_dtype, "*") if (chip.slug, d) in calibration), None)
    if own is not None and str(own.source).startswith(FAMILY_SOURCE):
        # A chip-family profile fits the chip's kernels and its step overhead, not what a request spends before its prefill.
        return {"request_overhead_s": factors["request_overhead_s"]}, f"{own.source}, with {engine}'s request overhead"
    if own is not None:
        return {}, None
    host = {name: factors[name] for name in HOST_FACTORS}
    return host, f"spec defaults with {engine}'s step and request overheads (its fitted serving-engine profile)"


VARIANT = "@"  # "nvidia-h100-sxm@vLLM": one chip under one engine's profile, inside a search


def variant_slug(chip_slug: str, engine: str) -> str:
    return f"{chip_slug}{VARIANT}{engine}"


def speaks_for(calibration, chip_slug: str, engine: str | None = None) -> bool:
    """Whether `calibration` (keyed by (chip slug, weight dtype): stored calibrations, or the fitted chip-family profiles'
    catalog_specs.family_calibration) holds an efficiency of the chip in any dtype: keyed by its slug, or, with the named
    `engine`, by its variant slug under it."""
    mine = {chip_slug, variant_slug(chip_slug, engine)} if engine else {chip_slug}
    return any(slug in mine for slug, _dtype in calibration)


def measured_under(chip_slug: str, engine: str, weight_dtype: str, calibration) -> bool:
    """Whether `calibration` holds an efficiency measured under the engine on this chip (keyed by the chip's variant
    slug: a calibration of runs under the engine, or the chip-family profile of the chip's family under it,
    catalog_specs.family_calibration), which then speaks for the chip under that engine."""
    return any((variant_slug(chip_slug, engine), d) in calibration for d in (weight_dtype, "*"))


_NAMED_VARIANT = re.compile(rf"([\w.-]+){VARIANT}([\w.-]+)")


def readable(text: str) -> str:
    """A reason or warning naming a searched variant ("one amd-mi210@SGLang has ...") as a reader says it ("one
    amd-mi210 under SGLang has ...")."""
    return _NAMED_VARIANT.sub(r"\1 under \2", text)


def split_variant(slug: str) -> tuple[str, str | None]:
    """(the catalog chip's slug, the serving engine or None)."""
    chip, _, engine = slug.partition(VARIANT)
    return chip, engine or None


def profile_label(engine: str) -> str:
    return f"fitted serving-engine profile ({engine})"


def engine_variants(chip_specs, chips, calibration, engines_by_chip, schedulers=None):
    """The chips a search tries with their serving engines: each chip once per engine that runs on it
    (`engines_by_chip`, by chip slug: the engines the plan searches, or the one it names, that the catalog lets drive
    the chip; catalog_specs.engines_running_on), under that engine's scheduler defaults (`schedulers`, by engine:
    catalog_specs.engine_schedulers) and what the engine brings to the chip (engine_factors: its whole fitted profile on
    an NVIDIA GPU, its host-side costs over spec defaults, its request overhead over a chip-family profile). A chip no
    such engine runs on is tried as it is (its calibration, chip-family profile or spec defaults). A calibration measured
    under the engine on that chip (keyed by the variant's slug: catalog_specs.calibrations_for) speaks for it over the
    profile. Returns (chip specs, calibration with the variants' entries)."""
    schedulers = schedulers or {}
    specs, extended = [], dict(calibration)
    for spec, chip in zip(chip_specs, chips):
        engines = engines_by_chip.get(chip.slug, ())
        if not engines:
            specs.append(spec)
            continue
        for engine in engines:
            slug = variant_slug(spec.slug, engine)
            specs.append(replace(spec, slug=slug, scheduler=schedulers.get(engine)))
            for dtype in DTYPES:
                if (slug, dtype) in calibration or (slug, "*") in calibration:
                    continue  # measured under this engine on this chip: resolve_efficiency finds it by the variant's slug
                base = resolve_efficiency(spec, dtype, calibration=calibration)
                factors, label = engine_factors(engine, chip, calibration=calibration, weight_dtype=dtype)
                extended[(slug, dtype)] = replace(base, **factors, source=label) if factors else base
    return specs, extended
