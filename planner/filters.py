"""Filters of the plan list (GET /api/v1/plans/ and the /plans/ page): by model, tag, name, creation date,
whether a validation succeeded, and whose plan it is. Who made a plan is shown to its creator and to
staff only (docs/security.md), so filtering by another user's name is staff's (403 for anyone else);
anyone signed in may ask for their own (`mine=true`; 401 without a credential)."""
from __future__ import annotations

import django_filters
from rest_framework.exceptions import NotAuthenticated, PermissionDenied

from hwcatalog.filters import TrueFalseFilter
from planner.models import Plan


class PlanFilter(django_filters.FilterSet):
    model = django_filters.CharFilter(field_name="model_slug", max_length=120, help_text="Only plans for this model slug.")
    tag = django_filters.CharFilter(method="_tag", max_length=40, help_text="Only plans with this tag (any case).")
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", max_length=120, help_text="Only plans whose name contains this.")
    created_after = django_filters.DateFilter(field_name="created_at", lookup_expr="date__gte", help_text="Created on or after this day (UTC), YYYY-MM-DD.")
    created_before = django_filters.DateFilter(field_name="created_at", lookup_expr="date__lte", help_text="Created on or before this day (UTC), YYYY-MM-DD.")
    validated = TrueFalseFilter(method="_validated", help_text=(
        "true: a validation of one of its configurations succeeded on the planned chip's kind (not a stand-in); false: none did."))
    mine = TrueFalseFilter(method="_mine", help_text="true: only your plans (signed in); false: only others'.")
    owner = django_filters.CharFilter(method="_owner", max_length=150, help_text="Only this user's plans (staff only; others use mine=true).")

    class Meta:
        model = Plan
        fields: list[str] = []

    def _tag(self, plans, name, value):
        return plans.filter(tags__name=value.strip().lower()).distinct() if value.strip() else plans

    def _validated(self, plans, name, value):
        return plans.filter(validated=value)  # annotated by selectors.plan_list

    def _mine(self, plans, name, value):
        user = getattr(self.request, "user", None)
        if not getattr(user, "is_authenticated", False):
            raise NotAuthenticated("mine: sign in (or send an API key) to list your own plans.")
        return plans.filter(created_by=user) if value else plans.exclude(created_by=user)

    def _owner(self, plans, name, value):
        user = getattr(self.request, "user", None)
        if not getattr(user, "is_staff", False):
            raise PermissionDenied("owner: only staff may list another user's plans; use mine=true for your own.")
        return plans.filter(created_by__username=value)
