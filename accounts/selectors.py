from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from accounts.models import ApiToken


def api_token_list(*, user: AbstractBaseUser | None = None) -> QuerySet[ApiToken]:
    """Newest first; one user's, or everyone's (with their users loaded)."""
    tokens = ApiToken.objects.select_related("user", "revoked_by")
    return tokens if user is None else tokens.filter(user=user)


def api_token_get(*, prefix: str, user: AbstractBaseUser | None = None) -> ApiToken:
    """The token with this prefix (of this user, when given); ApiToken.DoesNotExist otherwise."""
    return api_token_list(user=user).get(prefix=prefix)
