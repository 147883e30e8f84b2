from __future__ import annotations

import django_filters

from hwcatalog.models import Chip, ModelArch, Offering


class ChipFilter(django_filters.FilterSet):
    vendor = django_filters.CharFilter(lookup_expr="iexact")
    min_memory_capacity_bytes = django_filters.NumberFilter(field_name="memory_capacity_bytes", lookup_expr="gte")

    class Meta:
        model = Chip
        fields = ["kind", "vendor"]


class ModelArchFilter(django_filters.FilterSet):
    family = django_filters.CharFilter(lookup_expr="iexact")

    class Meta:
        model = ModelArch
        fields = ["family", "generation_kind", "attention_kind"]


class OfferingFilter(django_filters.FilterSet):
    chip = django_filters.CharFilter(field_name="chip__slug")
    provider = django_filters.CharFilter(lookup_expr="iexact")
    kind = django_filters.ChoiceFilter(field_name="chip__kind", choices=Chip.Kind.choices)

    class Meta:
        model = Offering
        fields = ["chip", "provider", "pricing_model", "kind"]
