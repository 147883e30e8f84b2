"""Runs and plans belong to whoever created them: only that user, or staff, may cancel, pin or
delete one. A row made by no one (a scheduled run, a plan from manage.py plan) is staff's alone.

Services call ensure_may_manage, so the API and the web UI hold the same rule. The 403 does not name
the owner: who created a run or a plan is shown to no one but staff."""
from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied


def may_manage(*, user: AbstractBaseUser | AnonymousUser | None, owner_id: int | None) -> bool:
    if user is None or not user.is_authenticated:
        return False
    return bool(user.is_staff) or (owner_id is not None and owner_id == user.pk)


def ensure_may_manage(*, user: AbstractBaseUser | AnonymousUser | None, owner_id: int | None, action: str, what: str) -> None:
    """PermissionDenied saying who may `action` `what` (e.g. "cancel", "this validation run")."""
    if not may_manage(user=user, owner_id=owner_id):
        if owner_id is None:
            raise PermissionDenied(f"Only staff may {action} {what}: no user created it.")
        raise PermissionDenied(f"Only the user who created {what}, or staff, may {action} it.")
