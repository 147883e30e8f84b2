from __future__ import annotations

from django.db.models import QuerySet

from hwcatalog.models import Chip, ModelArch, Offering


def chip_list() -> QuerySet[Chip]:
    return Chip.objects.all()


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
