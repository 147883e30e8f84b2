"""Which stored plans (and fleet plans) used a catalog row: a plan's catalog_snapshot names every chip,
offering and model (and draft model) its search read. Registered with hwcatalog.references (PlannerConfig.ready),
so the catalog refuses to delete a row while a plan used it, without importing the planner."""
from __future__ import annotations

import uuid
from functools import reduce
from operator import or_

from django.db import models
from django.db.models import Q
from django.db.models.fields.json import KeyTextTransform

from hwcatalog.models import Chip, ModelArch, Offering
from planner.models import FleetPlan, Plan

NAMED_PLANS = 3  # ids quoted in the message; the count covers the rest


def plans_using_catalog_row(row: models.Model) -> list[str]:
    """In words, the stored plans that used `row` (for a chip: it or one of its offerings)."""
    if isinstance(row, ModelArch):
        ids = _plans_with(key="model", slugs={row.slug}) + _plans_with(key="draft_models", slugs={row.slug})
    elif isinstance(row, Chip):
        offerings = set(row.offerings.values_list("slug", flat=True))
        ids = _plans_with(key="chips", slugs={row.slug}) + _plans_with(key="offerings", slugs=offerings)
    elif isinstance(row, Offering):
        ids = _plans_with(key="offerings", slugs={row.slug})
    else:
        return []
    if not ids:
        return []
    ids = list(dict.fromkeys(ids))
    named = ", ".join(str(i) for i in ids[:NAMED_PLANS]) + (", ..." if len(ids) > NAMED_PLANS else "")
    plans = "1 stored plan" if len(ids) == 1 else f"{len(ids)} stored plans"
    return [f"{plans} used {row._meta.verbose_name} {row.slug} ({named})"]


def _plans_with(*, key: str, slugs: set[str]) -> list[uuid.UUID]:
    """Ids, newest first, of the plans whose catalog_snapshot[key] lists a row with one of `slugs`.

    Works on PostgreSQL and SQLite alike (SQLite has no JSON containment): the database narrows by
    the quoted slug in the key's JSON text, then each candidate's rows are compared exactly."""
    if not slugs:
        return []
    quoted = reduce(or_, (Q(used__contains=f'"{slug}"') for slug in slugs))
    found = []
    for stored in (Plan, FleetPlan):  # a fleet plan holds its catalog rows as a plan does
        candidates = stored.objects.annotate(used=KeyTextTransform(key, "catalog_snapshot")).filter(quoted)
        found += [
            plan_id for plan_id, rows in candidates.values_list("id", f"catalog_snapshot__{key}")
            if any(isinstance(r, dict) and r.get("slug") in slugs for r in rows or [])
        ]  # fmt: skip
    return found
