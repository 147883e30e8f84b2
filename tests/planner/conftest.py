"""Fixtures the planner's tests share."""

from __future__ import annotations

import pytest


@pytest.fixture
def amd_profile_of_the_mi300x_alone(monkeypatch):
    """The AMD chip-family profile as it stood when other_chips.csv measured the MI300X alone (one chip, one
    architecture: CDNA 3), stored in place of today's, which speaks for every AMD GPU."""
    from planner import catalog_specs
    from planner.engine.family_fit import FamilyProfile

    alone = FamilyProfile(compute_fraction=0.145, bandwidth_fraction=0.238, step_overhead_s=1.4e-3, values=43, chips=("amd-mi300x",))
    monkeypatch.setattr(catalog_specs, "stored_family_profiles", lambda: {"AMD gpu": alone})
    return alone
