from __future__ import annotations

from rest_framework.authtoken.models import Token
from rest_framework.permissions import SAFE_METHODS, BasePermission


class ReadPublicWriteTokenOrStaff(BasePermission):
    """Anyone reads; a write needs an API token, or a session of a staff user."""

    message = "Writes need an API token (manage.py createtoken USER) or a staff session."

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        if isinstance(request.auth, Token) and request.user.is_active:
            return True
        return bool(request.user and request.user.is_authenticated and request.user.is_staff)
