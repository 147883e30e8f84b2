from __future__ import annotations

import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field
from rest_framework import filters
from rest_framework.exceptions import ValidationError

from hwcatalog.models import Chip, ModelArch, Offering
from hwcatalog.validation import MAX_BYTES

MAX_BYTES_FILTER = int(MAX_BYTES)


@extend_schema_field({"type": "integer", "minimum": 0, "maximum": MAX_BYTES_FILTER})
class ByteCountFilter(django_filters.NumberFilter):
    """A whole number of bytes. NumberFilter takes "0.5" and any size; the schema says integer,
    and a bound keeps huge values from reaching the database as an overflow."""

    field_class = forms.IntegerField

    def __init__(self, *args, **kwargs):
        super().__init__(*args, min_value=0, max_value=MAX_BYTES_FILTER, **kwargs)


@extend_schema_field({"type": "string", "enum": ["true", "false"]})
class TrueFalseFilter(django_filters.TypedChoiceFilter):
    """Exactly "true" or "false" (BooleanFilter reads anything else as no filter at all)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, choices=[("true", "true"), ("false", "false")], coerce=lambda v: v == "true", **kwargs)


class ChipFilter(django_filters.FilterSet):
    vendor = django_filters.CharFilter(lookup_expr="iexact")
    # chips that run one software stack's kernels alike (a chip-family profile fitted on one speaks for the others)
    architecture = django_filters.CharFilter(lookup_expr="iexact", max_length=80)
    # true: the validation workers' measured devices instead of the public catalog (anything else: 400)
    measured = TrueFalseFilter()
    min_memory_capacity_bytes = ByteCountFilter(field_name="memory_capacity_bytes", lookup_expr="gte")

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


class SearchFilter(filters.SearchFilter):
    """DRF's search, with a refused term (a NUL character) reported under `search` like any other
    bad parameter, instead of as a bare list."""

    def get_search_terms(self, request):
        try:
            return super().get_search_terms(request)
        except ValidationError as exc:
            raise ValidationError({self.search_param: exc.detail}) from None
