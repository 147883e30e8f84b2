from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from accounts.services import api_token_create
from accounts.throttling import RateThrottle, throttle_counters_clear
from hwcatalog.cache import cache_clear
from tests.catalog_snapshot import CatalogSnapshot


@pytest.fixture(autouse=True)
def throttle_counters_cleared():
    """Every test starts with no request counted against a rate limit (the counters live in a
    cache shared across processes, so they would carry over from test to test)."""
    throttle_counters_clear()


@pytest.fixture(autouse=True)
def catalog_answers_forgotten():
    """Every test starts with no cached catalog answer in this process (each test's database
    starts over, so an answer cached by an earlier test could name rows this one lacks)."""
    cache_clear()


@pytest.fixture
def throttle_rates(settings, monkeypatch):
    """throttle_rates(anon="3/min", ...) sets rates for this test (the throttles read them per request).

    The throttles' clock stands still for the test, one second into the current minute: the counters are
    fixed windows on the clock, and three requests against "2/min" that straddle a minute's end would all
    pass (CI failed so once). One second in, a minute's key lives 60 s in Redis and Retry-After says 59."""
    frozen = time.time() // 60 * 60 + 1
    monkeypatch.setattr(RateThrottle, "timer", staticmethod(lambda: frozen))

    def set_rates(**scopes: str) -> None:
        current = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {**current, **scopes}}

    return set_rates


@pytest.fixture
def anonymous_client() -> APIClient:
    return APIClient()


@pytest.fixture
def alice(db):
    """Alice has an API token (a procurement tool's account); she is not staff."""
    return get_user_model().objects.create_user("alice", password="not-used-1234")


def client_with_token(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def token_client(alice) -> APIClient:
    """Alice's procurement tool: a write-scoped token."""
    _, key = api_token_create(alice, "procurement tool", "write")
    return client_with_token(key)


@pytest.fixture
def catalog_token_client(alice) -> APIClient:
    """Alice's catalog maintenance script: a catalog-scoped token an operator made for her
    (manage.py createtoken alice --scope catalog); she is still not staff."""
    _, key = api_token_create(alice, "catalog script", "catalog")
    return client_with_token(key)


@pytest.fixture
def read_token_client(alice) -> APIClient:
    """Alice's dashboard: a read-only token."""
    _, key = api_token_create(alice, "dashboard", "read")
    return client_with_token(key)


@pytest.fixture
def staff_client(db) -> APIClient:
    """Sam is staff and uses the browser session."""
    sam = get_user_model().objects.create_user("sam", password="sam-password-1234", is_staff=True)
    client = APIClient(enforce_csrf_checks=False)
    client.force_login(sam)
    return client


@pytest.fixture
def session_client(db) -> APIClient:
    """Bob has a login but is not staff and has no token."""
    bob = get_user_model().objects.create_user("bob", password="bob-password-1234")
    client = APIClient()
    client.force_login(bob)
    return client


@pytest.fixture(scope="session")
def catalog_snapshot(django_db_setup, django_db_blocker) -> CatalogSnapshot:
    """What `catalog_load` writes into an empty database, loaded once per test process and rolled back."""
    with django_db_blocker.unblock():
        return CatalogSnapshot.taken()


@pytest.fixture
def catalog(db, catalog_snapshot):
    """The catalog as `manage.py loadcatalog` leaves it: the snapshot's rows written back in a few bulk
    inserts (a full load validates and saves each of 331 rows with its history: 2-3 s a test).
    tests/test_catalog_snapshot.py holds the two equal."""
    return catalog_snapshot.restore()
