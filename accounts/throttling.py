"""Rate limits: per API token (per user for a session), per IP address for anonymous requests,
and a tighter one for the expensive plan search (POST /api/v1/plans/).

Counters live in the "throttle" cache, shared by every web process: Redis when REDIS_URL is set,
files under var/ otherwise (config/settings.py CACHES).
"""
from __future__ import annotations

import logging
import math
from functools import wraps

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.core.exceptions import ImproperlyConfigured
from redis.exceptions import RedisError
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from accounts.models import ApiToken

logger = logging.getLogger(__name__)

THROTTLE_CACHE = "throttle"


class RateThrottle(SimpleRateThrottle):
    """DRF's SimpleRateThrottle, reading its rate and its cache when a request comes rather than
    at import (DRF binds both then, so override_settings in a test would not reach them)."""

    description = ""  # "per API token", for the 429 message

    @property
    def cache(self):
        return caches[THROTTLE_CACHE]

    def get_rate(self) -> str | None:
        try:
            return api_settings.DEFAULT_THROTTLE_RATES[self.scope]
        except KeyError:
            raise ImproperlyConfigured(f"REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'] has no rate for the {self.scope!r} scope") from None

    def allow_request(self, request, view) -> bool:
        try:
            allowed = super().allow_request(request, view)
        except (OSError, RedisError):
            # Fail open: a cache outage should cost the rate limit for a while, not every request.
            logger.warning("throttle cache unavailable: %s request not rate-limited", self.scope, exc_info=True)
            return True
        if not allowed and not hasattr(request, "throttle_limit"):
            request.throttle_limit = f"{self.rate} {self.description}"  # read by the exception handler
        return allowed

    def wait(self) -> float | None:
        wait = super().wait()
        if wait is None and self.history:
            # DRF gives no wait when the history outgrew a rate lowered since: the oldest
            # request's time to leave the window is still a true answer, so Retry-After is never missing.
            wait = self.duration - (self.now - self.history[-1])
        return wait


def _client(request) -> str | None:
    """Whom a request counts against: its token, else its session's user, else None (anonymous)."""
    if isinstance(getattr(request, "auth", None), ApiToken):  # a plain Django request has no .auth
        return f"token-{request.auth.pk}"
    if request.user and request.user.is_authenticated:
        return f"user-{request.user.pk}"
    return None


class AnonymousRateThrottle(RateThrottle):
    scope = "anon"
    description = "per IP address for anonymous requests"

    def get_cache_key(self, request, view) -> str | None:
        if _client(request) is not None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class TokenRateThrottle(RateThrottle):
    """Per token, not per user: each token is one client (a tool, a machine) with its own budget."""

    scope = "token"
    description = "per API token (per user for a browser session)"

    def get_cache_key(self, request, view) -> str | None:
        client = _client(request)
        if client is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": client}


class PlanCreateRateThrottle(RateThrottle):
    """A plan search takes 30-300 ms of CPU, a read about 1 ms: it gets a budget of its own, on top
    of the general one. Chosen here by route name so the whole rate-limit policy reads in one file."""

    scope = "plans"
    description = "for POST /api/v1/plans/ per API token (per user for a session)"
    routes = frozenset({("POST", "plan-list")})

    def get_cache_key(self, request, view) -> str | None:
        match = request.resolver_match
        if match is None or (request.method, match.url_name) not in self.routes:
            return None
        client = _client(request) or f"ip-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": client}


def throttle_counters_clear() -> None:
    """Forget every request counted so far (tests start from zero). On Redis only our own keys go:
    its database may be shared with Celery, so never FLUSHDB."""
    cache = caches[THROTTLE_CACHE]
    if not isinstance(cache, RedisCache):
        cache.clear()  # a directory or process memory of its own
        return
    if not cache.key_prefix:
        raise ImproperlyConfigured("the throttle cache on Redis needs a KEY_PREFIX, so its keys can be told apart")
    client = cache._cache.get_client(write=True)
    keys = list(client.scan_iter(match=f"{cache.key_prefix}:*", count=1000))
    if keys:
        client.delete(*keys)


class SignInRateThrottle(RateThrottle):
    """Password attempts (the UI's and the admin's sign-in pages), per IP address."""

    scope = "sign-in"
    description = "per IP address for sign-in attempts"

    def get_cache_key(self, request, view) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class UiWriteRateThrottle(RateThrottle):
    """The web UI's plan and validate forms, per signed-in user (per IP before sign-in)."""

    scope = "ui-writes"
    description = "per user for the web forms"

    def get_cache_key(self, request, view) -> str | None:
        client = _client(request) or f"ip-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": client}


def rate_limited(throttle_class: type[RateThrottle]):
    """Apply a throttle to the POSTs of a plain Django view (the UI's forms, the sign-in pages):
    over the rate, a 429 page with Retry-After, and the view does not run."""
    from django.http import HttpResponse

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if request.method == "POST":
                throttle = throttle_class()
                if not throttle.allow_request(request, None):
                    retry_after_s = max(1, math.ceil(throttle.wait() or 1))
                    response = HttpResponse(
                        "<!doctype html><title>Too many requests</title><h1>429 Too many requests</h1>"
                        f"<p>The limit is {throttle.rate} {throttle.description}. Try again in {retry_after_s} seconds.</p>",
                        status=429,
                    )
                    response["Retry-After"] = str(retry_after_s)
                    return response
            return view(request, *args, **kwargs)

        return wrapped

    return decorator
