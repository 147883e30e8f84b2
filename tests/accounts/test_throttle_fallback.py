"""Throttles that hold: with the shared cache (Redis) down each process still counts (sign-in
fails closed); API keys that do not authenticate are throttled per IP before any query; counting
is atomic, so concurrent requests cannot slip past a rate."""
from __future__ import annotations

import os
import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_login_failed
from django.db import connection
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext

from accounts import throttling
from accounts.throttling import THROTTLE_CACHE, AnonymousRateThrottle
from tests.conftest import client_with_token

UNREACHABLE_REDIS = {
    "BACKEND": "django.core.cache.backends.redis.RedisCache",
    "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1: every call is refused
    "KEY_PREFIX": "hwplanner-throttle",
    "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
}
UNKNOWN_KEY = "hwp_0123456789ab_" + "A" * 43


@pytest.fixture
def cache_down(settings):
    settings.CACHES = {**settings.CACHES, THROTTLE_CACHE: UNREACHABLE_REDIS}


@pytest.fixture
def password_checks():
    """Wrong passwords Django actually checked (user_login_failed fires after the check)."""
    failed: list[str] = []

    def record(sender, credentials, **kwargs):
        failed.append(credentials.get("username", ""))

    user_login_failed.connect(record)
    yield failed
    user_login_failed.disconnect(record)


def _sign_in(client: Client, password: str) -> int:
    return client.post("/accounts/login/", {"username": "erin", "password": password}).status_code


def test_sign_in_attempts_are_limited_in_this_process_while_the_cache_is_down(db, cache_down, throttle_rates, password_checks):
    get_user_model().objects.create_user("erin", password="correct horse battery staple")
    throttle_rates(**{"sign-in": "10/min"})
    client = Client()
    statuses = [_sign_in(client, f"guess-{n}") for n in range(15)]
    assert statuses == [200] * 10 + [429] * 5  # was 15 x 200: the limit failed open
    assert len(password_checks) == 10  # the five refused attempts never reached the password check


def test_the_admin_sign_in_is_limited_too_while_the_cache_is_down(db, cache_down, throttle_rates, password_checks):
    throttle_rates(**{"sign-in": "3/min"})
    client = Client()
    statuses = [client.post("/admin/login/", {"username": "x", "password": "y"}).status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429]


def test_a_cache_that_is_down_is_tried_once_per_fallback_period_not_per_request(db, cache_down, throttle_rates, monkeypatch, settings):
    settings.THROTTLE_FALLBACK_S = 30
    throttle_rates(anon="1000/min")
    tries = []
    real = throttling._shared_incr
    monkeypatch.setattr(throttling, "_shared_incr", lambda *a, **k: tries.append(1) or real(*a, **k))
    client = Client()
    started = time.monotonic()
    assert {client.get("/api/v1/chips/?page_size=1").status_code for _ in range(20)} == {200}
    assert len(tries) == 1
    assert time.monotonic() - started < 10  # no connect timeout paid per request


def test_the_shared_cache_is_used_again_once_the_fallback_period_is_over(db, throttle_rates, monkeypatch, settings):
    throttle_rates(anon="1000/min")
    throttling._shared.down_until = throttling.RateThrottle.timer() - 1  # a failure whose fallback period is over (on the throttles' clock)
    calls = []
    real = throttling._shared_incr
    monkeypatch.setattr(throttling, "_shared_incr", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert Client().get("/api/v1/chips/?page_size=1").status_code == 200
    assert calls == [1]


@pytest.mark.parametrize("key", [UNKNOWN_KEY, "not-a-key", "hwp_short"])
def test_api_keys_that_do_not_authenticate_are_throttled_per_ip_with_no_query(db, throttle_rates, key):
    throttle_rates(**{"bad-keys": "3/min"}, anon="1000/min")
    client = client_with_token(key)
    assert [client.get("/api/v1/chips/").status_code for _ in range(3)] == [401, 401, 401]
    with CaptureQueriesContext(connection) as queries:
        refused = client.get("/api/v1/chips/")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "for API keys that do not authenticate" in refused.json()["detail"]
    assert len(queries) == 0  # refused before the key is looked up
    assert client.get("/api/v1/chips/", REMOTE_ADDR="198.51.100.7").status_code == 401  # another address: its own budget


def test_a_valid_key_is_never_counted_as_a_bad_one(db, token_client, throttle_rates):
    throttle_rates(**{"bad-keys": "2/min"})
    assert {token_client.get("/api/v1/chips/?page_size=1").status_code for _ in range(5)} == {200}


def test_bad_keys_are_throttled_while_the_cache_is_down(db, cache_down, throttle_rates):
    throttle_rates(**{"bad-keys": "2/min"}, anon="1000/min")
    client = client_with_token(UNKNOWN_KEY)
    assert [client.get("/api/v1/chips/").status_code for _ in range(4)] == [401, 401, 429, 429]


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="atomic counting is on Redis; the file cache serves one process")
def test_concurrent_requests_never_pass_a_rate_on_redis(db, throttle_rates, monkeypatch):
    """160 requests at once against a rate of 120: exactly 120 pass (DRF's read-then-write history let 121 through)."""
    throttle_rates(anon="120/min")
    frozen = time.time() // 60 * 60 + 30  # mid-window, so no burst straddles two windows
    monkeypatch.setattr(AnonymousRateThrottle, "timer", staticmethod(lambda: frozen))
    request = RequestFactory().get("/api/v1/chips/", REMOTE_ADDR="203.0.113.50")
    request.user, request.auth = type("Anonymous", (), {"is_authenticated": False})(), None
    allowed: list[bool] = []
    start = threading.Barrier(16)

    def burst():
        start.wait()
        for _ in range(10):
            allowed.append(AnonymousRateThrottle().allow_request(request, None))

    threads = [threading.Thread(target=burst) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(allowed) == 160
    assert sum(allowed) == 120
