"""Who may write what. Three rules, each one class here:

- WriteTokenOrStaff: a write needs a write-scoped (or catalog-scoped) API token, or a staff session.
- CatalogTokenOrStaff: a write to the shared catalog needs a catalog-scoped token, or a staff session.
  A token's scope bounds what it does whoever holds it: a staff user's write token does not write the catalog.
- may_manage (accounts/ownership.py): a run or a plan is cancelled, pinned or deleted by its owner or staff.
"""
from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

from accounts.models import ApiToken

READ_ONLY_TOKEN = (
    "This API token is read-only: writes need a write-scoped token "
    '(manage.py createtoken USER --scope write, or POST /api/v1/tokens/ with "scope": "write").'
)
CATALOG_WRITE_NEEDED = (
    "Catalog writes (chips, models, offerings, imports) need a catalog-scoped API token "
    "(manage.py createtoken USER --scope catalog, or POST /api/v1/tokens/ from a staff session) or a staff session; "
    "this request has neither."
)
CATALOG_TOKEN_NEEDS_STAFF = (
    'Only staff may create a catalog-scoped token over the API, from a staff session or a catalog-scoped token: '
    '"scope": "catalog" is refused here. An operator can run manage.py createtoken USER --scope catalog.'
)


class WriteTokenOrStaff(BasePermission):
    """Safe methods pass; a write needs a write-scoped API token, or a session of a staff user."""

    message = "Writes need a write-scoped API token (manage.py createtoken USER) or a staff session."

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        if isinstance(request.auth, ApiToken):
            if not request.auth.can_write:
                self.message = READ_ONLY_TOKEN  # this instance serves this request only
                return False
            return True
        return _staff_session(request)


class CatalogTokenOrStaff(BasePermission):
    """Safe methods pass; a write needs a catalog-scoped API token, or a session of a staff user."""

    message = CATALOG_WRITE_NEEDED

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        if isinstance(request.auth, ApiToken):
            if not request.auth.can_write:
                self.message = READ_ONLY_TOKEN
            return request.auth.can_write_catalog
        return _staff_session(request)


def may_write_catalog(request) -> bool:
    """What CatalogTokenOrStaff lets write: a catalog-scoped token or a staff session."""
    if isinstance(request.auth, ApiToken):
        return request.auth.can_write_catalog
    return _staff_session(request)


def may_create_token(request, *, scope: str) -> bool:
    """No credential mints a stronger one: a catalog-scoped token is made by a staff user whose
    request could write the catalog itself (a staff session, or a catalog token of theirs)."""
    if scope != ApiToken.Scope.CATALOG:
        return True
    return bool(request.user.is_staff) and may_write_catalog(request)


def _staff_session(request) -> bool:
    return bool(request.user and request.user.is_authenticated and request.user.is_staff)
