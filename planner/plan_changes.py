"""The changes a stored plan allows: pinning it (the nightly schedule re-validates pinned plans,
which spends worker time), naming and tagging it, and deleting it. Each is its creator's or staff's
to make (accounts/ownership.py); everything else of a plan is its immutable record."""
from __future__ import annotations

from django.db import transaction

from accounts.ownership import ensure_may_manage
from planner.models import Plan, PlanTag


@transaction.atomic
def plan_pin_set(*, plan: Plan, pinned: bool, by) -> Plan:
    ensure_may_manage(user=by, owner_id=plan.created_by_id, action="pin or unpin", what="this plan")
    plan = Plan.objects.select_for_update().get(pk=plan.pk)
    if plan.pinned != pinned:
        plan.pinned = pinned
        plan.save(update_fields=["pinned"])
    return plan


@transaction.atomic
def plan_labels_set(*, plan: Plan, by, name: str | None = None, tags: list[str] | None = None) -> Plan:
    """Rename the plan and/or replace its tags (None: unchanged); the tags as given, already normalised
    (planner/serializers.py PlanLabelsSerializer)."""
    ensure_may_manage(user=by, owner_id=plan.created_by_id, action="rename or tag", what="this plan")
    plan = Plan.objects.select_for_update().get(pk=plan.pk)
    if name is not None and plan.name != name:
        plan.name = name
        plan.save(update_fields=["name"])
    if tags is not None and list(plan.tags.values_list("name", flat=True)) != tags:
        plan.tags.all().delete()
        PlanTag.objects.bulk_create(PlanTag(plan=plan, name=tag) for tag in tags)
    return plan


@transaction.atomic
def plan_delete(*, plan: Plan, by) -> None:
    """Delete the plan; its validation runs stay, without their plan (ValidationRun.plan is SET_NULL)."""
    ensure_may_manage(user=by, owner_id=plan.created_by_id, action="delete", what="this plan")
    # Locked first (PostgreSQL): a simulation linking to one of its rows (simulation_services._still_linked) commits
    # before the runs that point at it are unlinked, or finds it gone.
    Plan.objects.select_for_update().filter(pk=plan.pk).exists()
    plan.delete()
