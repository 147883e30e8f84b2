"""The serving-engine profiles the planner ships, for the API: the efficiency factors fitted per engine
to NVIDIA's silicon measurements (planner/engine/fit.py; written by `manage.py accuracy FILE
--profiles-out planner/data/engine_profiles.json`, docs/accuracy.md#the-fit)."""

from __future__ import annotations

import functools
from pathlib import Path

from planner.engine.fit import POOLED, EngineProfile, load_profiles

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
    return chip.kind == "gpu" and chip.vendor.lower() == "nvidia"
