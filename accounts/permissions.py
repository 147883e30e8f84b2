from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

from accounts.models import ApiToken

READ_ONLY_TOKEN = (
    "This API token is read-only: writes need a write-scoped token "
    '(manage.py createtoken USER --scope write, or POST /api/v1/tokens/ with "scope": "write").'
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
        return bool(request.user and request.user.is_authenticated and request.user.is_staff)
