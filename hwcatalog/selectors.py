from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Min, Q, QuerySet

from hwcatalog.freshness import PriceAge, price_age
from hwcatalog.models import Chip, ModelArch, Offering


def chip_list() -> QuerySet[Chip]:
    """The public catalog's chips: every one but the validation workers' measured devices."""
    return Chip.objects.filter(measured=False)


def with_prices(chips: QuerySet[Chip]) -> QuerySet[Chip]:
    """Each chip annotated with its offering count and `cheapest_rental`, the lowest $ per chip-hour of the
    offerings that are not purchases (None without one)."""
    rented = ~Q(offerings__pricing_model=Offering.PricingModel.PURCHASE)
    return chips.annotate(offering_count=Count("offerings"), cheapest_rental=Min("offerings__usd_per_chip_hour", filter=rented))


def measured_device_list() -> QuerySet[Chip]:
    """The validation workers' own devices, read off probes (they live with their runs)."""
    return Chip.objects.filter(measured=True)


def chip_get(*, slug: str) -> Chip:
    return Chip.objects.get(slug=slug)


def offering_list() -> QuerySet[Offering]:
    return Offering.objects.select_related("chip")


def offerings_for_chips(*, chip_slugs: list[str]) -> QuerySet[Offering]:
    return Offering.objects.filter(chip__slug__in=chip_slugs).select_related("chip")


@dataclass(frozen=True, kw_only=True)
class PriceFreshness:
    """Every price's age and source kind, the oldest first, with the GPUs and TPUs no rental prices
    (`manage.py catalogreport` and the catalog's freshness page)."""

    today: dt.date
    rows: list[tuple[Offering, PriceAge]]
    unpriced: list[str]  # GPU and TPU slugs with no hourly (non-purchase) price

    @property
    def summary(self) -> dict[str, Any]:
        ages = [age for _, age in self.rows]
        return {
            "offerings": len(ages), "providers": len({a.provider for a in ages}), "stale": sum(a.stale for a in ages),
            "needs_warning": sum(a.needs_warning for a in ages), "by_source_kind": dict(Counter(a.source_kind for a in ages)),
            "gpus_and_tpus_without_an_hourly_price": self.unpriced, "today": self.today.isoformat(),
        }  # fmt: skip


def price_freshness(*, today: dt.date) -> PriceFreshness:
    """The public catalog's prices aged at `today` (two queries, whatever the catalog's size)."""
    offerings = Offering.objects.filter(chip__measured=False).select_related("chip")
    rows = [(o, price_age(slug=o.slug, provider=o.provider, as_of=o.as_of, source=o.source, today=today)) for o in offerings]
    rows.sort(key=lambda row: (-row[1].age_days, row[0].slug))
    rented = Offering.objects.exclude(pricing_model=Offering.PricingModel.PURCHASE).values("chip_id")
    unpriced = chip_list().filter(kind__in=("gpu", "tpu")).exclude(pk__in=rented).order_by("slug")
    return PriceFreshness(today=today, rows=rows, unpriced=list(unpriced.values_list("slug", flat=True)))


def model_list() -> QuerySet[ModelArch]:
    return ModelArch.objects.all()


def model_get(*, slug: str) -> ModelArch:
    return ModelArch.objects.get(slug=slug)


_CHANGE_NAMES = {"+": "created", "~": "changed", "-": "deleted"}


def catalog_history(*, row, with_editors: bool) -> list[dict[str, Any]]:
    """A catalog row's edits, newest first, each with its old and new values; with who made each
    (`changed_by`) only when `with_editors` (for staff: usernames are not public)."""
    records = list(row.history.all().select_related("history_user").order_by("-history_date", "-history_id"))
    entries = []
    for record, previous in zip(records, records[1:] + [None]):
        changes = {}
        if previous is not None:
            delta = record.diff_against(previous)
            changes = {c.field: {"old": _plain(c.old), "new": _plain(c.new)} for c in delta.changes}
        entry = {
            "history_id": record.history_id, "changed_at": record.history_date,
            "change": _CHANGE_NAMES[record.history_type], "reason": record.history_change_reason, "changes": changes,
        }  # fmt: skip
        if with_editors:
            entry["changed_by"] = record.history_user.get_username() if record.history_user else None
        entries.append(entry)
    return entries


def _plain(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value
