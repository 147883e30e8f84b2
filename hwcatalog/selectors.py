from __future__ import annotations

from typing import Any

from django.db.models import Count, Min, Q, QuerySet

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
