"""Rate limits: per API token (per user for a session), per IP address for anonymous requests, and
a tighter one for plan searches; 429 with Retry-After and a JSON message; counters shared across
processes; rates from the environment, refused at start-up when malformed."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured

from accounts.services import api_token_create
from accounts.throttling import THROTTLE_CACHE, throttle_counters_clear
from config.env import env_rate
from tests.conftest import client_with_token
from tests.worker import worker_env

ROOT = Path(__file__).resolve().parents[2]
SMALL_PLAN = {
    "model": "llama-3.2-1b",
    "workload": {"prompt_tokens": 200, "output_tokens": 100, "concurrency": 4},
    "hardware": {"kinds": ["gpu"], "max_chips": 8},
}


def _statuses(client, n: int, path: str = "/api/v1/chips/", **extra) -> list[int]:
    return [client.get(path, **extra).status_code for _ in range(n)]


def test_the_request_over_the_anonymous_rate_is_a_429_with_retry_after_and_a_message(db, anonymous_client, throttle_rates):
    throttle_rates(anon="3/min")
    assert _statuses(anonymous_client, 3) == [200, 200, 200]
    response = anonymous_client.get("/api/v1/chips/")
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert response["Content-Type"] == "application/json"
    detail = response.json()["detail"]
    assert "3/min per IP address" in detail and f"Try again in {response['Retry-After']} second" in detail


def test_another_address_has_its_own_anonymous_budget(db, anonymous_client, throttle_rates):
    throttle_rates(anon="1/min")
    assert _statuses(anonymous_client, 2) == [200, 429]
    assert _statuses(anonymous_client, 1, REMOTE_ADDR="198.51.100.7") == [200]


def test_a_forged_x_forwarded_for_does_not_escape_the_anonymous_rate(db, anonymous_client, throttle_rates):
    throttle_rates(anon="1/min")
    assert anonymous_client.get("/api/v1/chips/").status_code == 200
    assert anonymous_client.get("/api/v1/chips/", HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 429


def test_a_tokens_rate_does_not_count_anonymous_requests_from_the_same_address(db, anonymous_client, token_client, throttle_rates):
    throttle_rates(anon="2/min", token="4/min")
    assert _statuses(anonymous_client, 3) == [200, 200, 429]
    assert _statuses(token_client, 5) == [200, 200, 200, 200, 429]
    assert "per API token" in token_client.get("/api/v1/chips/").json()["detail"]


def test_two_tokens_of_one_user_have_a_budget_each(alice, token_client, throttle_rates):
    throttle_rates(token="2/min")
    assert _statuses(token_client, 3) == [200, 200, 429]
    laptop = client_with_token(api_token_create(alice, "laptop", "read")[1])
    assert _statuses(laptop, 3) == [200, 200, 429]


def test_a_session_counts_per_user(staff_client, session_client, throttle_rates):
    throttle_rates(token="2/min")
    assert _statuses(staff_client, 3) == [200, 200, 429]
    assert _statuses(session_client, 1) == [200]


def test_plan_searches_have_a_tighter_rate_than_the_rest(catalog, token_client, throttle_rates):
    throttle_rates(token="100/min", plans="2/min")
    assert [token_client.post("/api/v1/plans/", SMALL_PLAN, format="json").status_code for _ in range(2)] == [201, 201]
    refused = token_client.post("/api/v1/plans/", SMALL_PLAN, format="json")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "2/min for POST /api/v1/plans/" in refused.json()["detail"]
    assert token_client.get("/api/v1/plans/").status_code == 200  # reads of plans are not plan searches
    assert token_client.post("/api/v1/estimates/", {}, format="json").status_code == 400
    # fleet plans and simulations are searches too: they draw on the same budget
    assert token_client.post("/api/v1/fleets/", {}, format="json").status_code == 429
    assert token_client.post("/api/v1/simulations/", {}, format="json").status_code == 429


def test_a_rate_lowered_below_a_clients_history_still_says_when_to_retry(db, anonymous_client, throttle_rates):
    throttle_rates(anon="10/min")
    assert _statuses(anonymous_client, 5) == [200] * 5
    throttle_rates(anon="2/min")
    response = anonymous_client.get("/api/v1/chips/")
    assert response.status_code == 429 and int(response["Retry-After"]) > 0


def test_counters_are_shared_with_other_processes(db, anonymous_client, throttle_rates):
    """Two gunicorn workers share one budget: another process spends it, this one is refused. An hour's
    window: the counters are fixed windows on the clock, and a minute's could end between the two processes
    (a loaded machine takes seconds to start one)."""
    throttle_rates(anon="2/hour")
    script = (
        "import django; django.setup(); from django.test import Client; c = Client(); "
        "print([c.get('/api/v1/chips/').status_code for _ in range(2)])"
    )
    env = {**worker_env(), "API_THROTTLE_ANON": "2/hour"}
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[200, 200]"
    assert anonymous_client.get("/api/v1/chips/").status_code == 429


def test_the_rate_still_holds_in_this_process_when_the_throttle_cache_is_down(db, anonymous_client, throttle_rates, settings):
    """Was fail-open (every request went through); tests/accounts/test_throttle_fallback.py has the rest."""
    throttle_rates(anon="1/min")
    settings.CACHES = {
        **settings.CACHES,
        THROTTLE_CACHE: {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:1/0",
                         "KEY_PREFIX": "x", "OPTIONS": {"socket_connect_timeout": 0.5}},
    }  # fmt: skip
    assert _statuses(anonymous_client, 3) == [200, 429, 429]


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="the throttle cache is on Redis only when REDIS_URL is set")
def test_clearing_the_counters_on_redis_leaves_other_keys_alone():
    cache = caches[THROTTLE_CACHE]
    client = cache._cache.get_client(write=True)
    client.set("not-a-throttle-key", "celery's", ex=60)
    cache.set("throttle_anon_x", [1.0], 60)
    throttle_counters_clear()
    assert cache.get("throttle_anon_x") is None
    assert client.get("not-a-throttle-key") == b"celery's"
    client.delete("not-a-throttle-key")


@pytest.mark.parametrize("value", ["300/min", "20/s", "5000/hour", "1/day", "1000000/s"])
def test_a_rate_reads_as_n_per_period(monkeypatch, value):
    monkeypatch.setenv("API_THROTTLE_ANON", value)
    assert env_rate("API_THROTTLE_ANON", "300/min") == value


@pytest.mark.parametrize("value", ["lots", "300", "300/mango", "0/min", "-5/min", "1.5/s", "300 per minute"])
def test_a_bad_rate_is_refused_with_the_variable_named(monkeypatch, value):
    monkeypatch.setenv("API_THROTTLE_ANON", value)
    with pytest.raises(ImproperlyConfigured, match="API_THROTTLE_ANON must be a rate like 300/min"):
        env_rate("API_THROTTLE_ANON", "300/min")


def test_a_bad_rate_stops_start_up_with_its_name():
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env={**env, "API_THROTTLE_PLANS": "fast"},
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode != 0 and "API_THROTTLE_PLANS must be a rate" in result.stderr
