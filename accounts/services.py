"""Create, check and revoke API tokens.

A key is `hwp_<prefix>_<secret>`: the prefix (12 hex characters) is stored to find the row, the
secret (32 random bytes) only as its SHA-256. A fast hash is right here: the secret is random, not a
password, so there is nothing to guess from the hash (the reason passwords need a slow one).
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from accounts.models import KEY_PREFIX, ApiToken

_KEY = re.compile(rf"{KEY_PREFIX}_([0-9a-f]{{12}})_([A-Za-z0-9_-]{{43}})")
MALFORMED = f"Malformed API token: expected {KEY_PREFIX}_<prefix>_<secret> as printed by manage.py createtoken."
# last_used_at is for people ("is this token still in use?"), so a write per minute is enough.
LAST_USED_RESOLUTION = timedelta(minutes=1)
# Throttling counts per token: a cap keeps one user from multiplying their rate with many tokens.
MAX_ACTIVE_TOKENS_PER_USER = 20


class InvalidApiToken(Exception):
    """The key does not authenticate; the message says why, for the 401."""


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def api_token_create(
    user: AbstractBaseUser, name: str, scope: str, expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """A new token of `user` and its key. The key is returned here only: store it now."""
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationError({"expires_at": "The expiry must be in the future."})
    with transaction.atomic():
        active = ApiToken.objects.filter(user=user, revoked_at__isnull=True).exclude(expires_at__lte=timezone.now())
        if active.count() >= MAX_ACTIVE_TOKENS_PER_USER:
            raise ValidationError(
                f"{user} already has {MAX_ACTIVE_TOKENS_PER_USER} active API tokens, the most allowed; revoke one first."
            )
        prefix, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        token = ApiToken(user=user, name=name, scope=scope, prefix=prefix, key_hash=_hash(secret), expires_at=expires_at)
        token.full_clean()
        token.save()
    return token, f"{KEY_PREFIX}_{prefix}_{secret}"


def api_token_revoke(token: ApiToken, by: AbstractBaseUser | None = None) -> ApiToken:
    """Revoke `token` from now on; revoking it again changes nothing."""
    now = timezone.now()
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now, revoked_by=by)
    token.refresh_from_db(fields=["revoked_at", "revoked_by"])
    return token


def api_tokens_revoke(*, tokens: QuerySet[ApiToken], by: AbstractBaseUser | None = None) -> int:
    """Revoke every token of `tokens` not yet revoked; returns how many were."""
    return tokens.filter(revoked_at__isnull=True).update(revoked_at=timezone.now(), revoked_by=by)


def api_token_prefix(key: str) -> str:
    """The prefix of a whole key, or of `hwp_<prefix>`, or a bare prefix (what people paste)."""
    match = _KEY.fullmatch(key)
    if match:
        return match.group(1)
    return key.removeprefix(f"{KEY_PREFIX}_")


def api_token_authenticate(*, key: str) -> ApiToken:
    """The active token whose key this is (its user loaded), or InvalidApiToken saying why."""
    match = _KEY.fullmatch(key)
    if not match:
        raise InvalidApiToken(MALFORMED)
    prefix, secret = match.groups()
    token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
    # Unknown prefix and wrong secret read the same: the answer must not confirm a prefix exists.
    if token is None or not hmac.compare_digest(token.key_hash, _hash(secret)):
        raise InvalidApiToken("Invalid API token.")
    now = timezone.now()
    if token.revoked_at is not None:
        raise InvalidApiToken(f"This API token ({KEY_PREFIX}_{prefix}) was revoked on {token.revoked_at:%Y-%m-%d %H:%M} UTC.")
    if token.is_expired(now):
        raise InvalidApiToken(f"This API token ({KEY_PREFIX}_{prefix}) expired on {token.expires_at:%Y-%m-%d %H:%M} UTC.")
    if not token.user.is_active:
        raise InvalidApiToken("User inactive or deleted.")
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
