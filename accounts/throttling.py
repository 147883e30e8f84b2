"""Rate limits: per API token (per user for a session), per IP address for anonymous requests,
a tighter one for the expensive plan search (POST /api/v1/plans/), one for sign-in attempts and
one for API keys that do not authenticate.

Counters live in the "throttle" cache, shared by every web process: Redis when REDIS_URL is set,
files under var/ otherwise (config/settings.py CACHES). Counting is a fixed window per rate
period, one atomic step on Redis (SET NX EX then INCR in one MULTI), so concurrent requests can
never both read the same count. When the shared cache does not answer, each process counts in
its own memory for THROTTLE_FALLBACK_S before trying it again: a limit still holds (per process,
so at most the number of web processes times the rate), sign-in included; nothing fails open.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from functools import wraps

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.core.exceptions import ImproperlyConfigured
from redis.exceptions import RedisError
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from accounts.models import ApiToken

logger = logging.getLogger(__name__)

THROTTLE_CACHE = "throttle"
CACHE_ERRORS = (OSError, RedisError)


class LocalCounters:
    """Fixed-window counters in this process's memory: the fallback while the shared cache is down."""

    MAX_KEYS = 20_000  # past this, windows already over are dropped (a flood of addresses cannot grow it forever)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, tuple[float, int]] = {}  # key -> (window end, count)

    def incr(self, key: str, *, window_end: float, now: float) -> int:
        with self._lock:
            if len(self._counts) > self.MAX_KEYS:
                self._counts = {k: v for k, v in self._counts.items() if v[0] > now}
            end, count = self._counts.get(key, (window_end, 0))
            if end <= now:
                end, count = window_end, 0
            self._counts[key] = (end, count + 1)
            return count + 1

    def get(self, key: str, *, now: float) -> int:
        with self._lock:
            end, count = self._counts.get(key, (0.0, 0))
            return count if end > now else 0

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()


class SharedCacheState:
    """Whether to try the shared cache: after a failure, not for a while, so that a Redis that is
    down costs one connect timeout per THROTTLE_FALLBACK_S, not one per request and throttle."""

    def __init__(self) -> None:
        self.down_until = 0.0

    def usable(self, now: float) -> bool:
        return now >= self.down_until

    def failed(self, now: float) -> None:
        self.down_until = now + settings.THROTTLE_FALLBACK_S


_local = LocalCounters()
_shared = SharedCacheState()


def _shared_incr(cache, key: str, timeout_s: int) -> int:
    if isinstance(cache, RedisCache):
        key = cache.make_and_validate_key(key)
        client = cache._cache.get_client(key, write=True)
        pipe = client.pipeline(transaction=True)
        pipe.set(key, 0, ex=timeout_s, nx=True)
        pipe.incr(key)
        return int(pipe.execute()[1])
    # File or memory cache (embedded mode, one process): add then incr; the window rolls over
    # between the two only if the key expired in between, and then we count from one.
    cache.add(key, 0, timeout_s)
    try:
        return cache.incr(key)
    except ValueError:
        cache.add(key, 1, timeout_s)
        return 1


def _shared_get(cache, key: str) -> int:
    value = cache.get(key)
    return value if isinstance(value, int) else 0


class RateThrottle(SimpleRateThrottle):
    """A fixed-window rate limit, read per request (DRF binds rate and cache at import, so
    override_settings in a test would not reach them). allow_request counts this request;
    `peek` and `count` let a caller check first and count only some outcomes (bad API keys)."""

    description = ""  # "per API token", for the 429 message

    @property
    def cache(self):
        return caches[THROTTLE_CACHE]

    def get_rate(self) -> str | None:
        try:
            return api_settings.DEFAULT_THROTTLE_RATES[self.scope]
        except KeyError:
            raise ImproperlyConfigured(f"REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'] has no rate for the {self.scope!r} scope") from None

    def _window(self, now: float) -> tuple[str, float]:
        """This window's number (part of the key, so a new window starts from zero) and its end."""
        index = int(now // self.duration)
        return str(index), (index + 1) * self.duration

    def _incr(self, key: str) -> int:
        now = self.now = self.timer()
        index, end = self._window(now)
        self.window_end = end
        if _shared.usable(now):
            try:
                return _shared_incr(self.cache, f"{key}:{index}", int(math.ceil(end - now)) + 1)
            except CACHE_ERRORS:
                _shared.failed(now)
                logger.warning("throttle cache unavailable: counting %s requests in this process for %s s",
                               self.scope, settings.THROTTLE_FALLBACK_S, exc_info=True)  # fmt: skip
        return _local.incr(f"{key}:{index}", window_end=end, now=now)

    def _get(self, key: str) -> int:
        now = self.now = self.timer()
        index, end = self._window(now)
        self.window_end = end
        if _shared.usable(now):
            try:
                return _shared_get(self.cache, f"{key}:{index}")
            except CACHE_ERRORS:
                _shared.failed(now)
                logger.warning("throttle cache unavailable: counting %s requests in this process", self.scope, exc_info=True)
        return _local.get(f"{key}:{index}", now=now)

    def _refuse(self, request) -> bool:
        if not hasattr(request, "throttle_limit"):
            request.throttle_limit = f"{self.rate} {self.description}"  # read by the exception handler
        return False

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        if self._incr(self.key) > self.num_requests:
            return self._refuse(request)
        return True

    def peek(self, request, view=None) -> bool:
        """True while this client is under the rate, without counting a request."""
        self.key = self.get_cache_key(request, view)
        if self.key is None or self.rate is None:
            return True
        if self._get(self.key) >= self.num_requests:
            return self._refuse(request)
        return True

    def count(self, request, view=None) -> None:
        key = self.get_cache_key(request, view)
        if key is not None and self.rate is not None:
            self._incr(key)

    def wait(self) -> float | None:
        """Seconds until this window ends (Retry-After), never missing."""
        return max(self.window_end - self.now, 1.0)


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
    """A plan search takes 30-300 ms of CPU, a fleet plan (a search per class and a program) and a serving
    simulation more, a read about 1 ms: they share a budget of their own, on top of the general one. Chosen
    here by route name so the whole rate-limit policy reads in one file."""

    scope = "plans"
    description = "for POST /api/v1/plans/, /fleets/ and /simulations/ per API token (per user for a session)"
    routes = frozenset({("POST", "plan-list"), ("POST", "fleet-list"), ("POST", "simulation-list")})

    def get_cache_key(self, request, view) -> str | None:
        match = request.resolver_match
        if match is None or (request.method, match.url_name) not in self.routes:
            return None
        client = _client(request) or f"ip-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": client}


def throttle_counters_clear() -> None:
    """Forget every request counted so far (tests start from zero). On Redis only our own keys go:
    its database may be shared with Celery, so never FLUSHDB."""
    _local.clear()
    _shared.down_until = 0.0
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


class BadKeyRateThrottle(RateThrottle):
    """API keys that do not authenticate (malformed, unknown, revoked, expired), per IP address.
    Applied by accounts.authentication before the key is looked up: past the rate, a 429 with no
    query, so guessing keys or a misconfigured client flooding old keys costs the database nothing."""

    scope = "bad-keys"
    description = "per IP address for API keys that do not authenticate"

    def get_cache_key(self, request, view) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
