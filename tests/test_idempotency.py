"""Idempotency-Key on the create POSTs (idempotency/): a retry gets the first answer and creates nothing."""
from __future__ import annotations

import io
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.test.client import encode_multipart
from django.utils import timezone

from accounts.models import ApiToken
from accounts.services import api_token_create
from hwcatalog.models import ModelArch
from idempotency.models import IdempotencyKey
from idempotency.schema import create_paths
from planner.models import Plan
from tests.conftest import client_with_token

SMALL_PLAN = {
    "model": "llama-3.2-1b",
    "workload": {"prompt_tokens": 200, "output_tokens": 100, "concurrency": 4},
    "hardware": {"kinds": ["gpu"], "max_chips": 8},
}
KEY = "3f1c6a52-4d0e-4a8e-9d55-0b6f1d7e2c11"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "hf_configs"


def _post(client, path, body, key=KEY, **kwargs):
    return client.post(path, body, format=kwargs.pop("format", "json"), HTTP_IDEMPOTENCY_KEY=key, **kwargs)


@pytest.fixture
def charlie_token_client(db):
    """Charlie has a write token of his own; he shares nothing with Alice."""
    charlie = get_user_model().objects.create_user("charlie")
    return client_with_token(api_token_create(charlie, "charlie's script", "write")[1])


def test_a_retried_plan_post_returns_the_first_plan_and_stores_one(catalog, token_client):
    first = _post(token_client, "/api/v1/plans/", SMALL_PLAN)
    assert first.status_code in (201, 202), first.content
    retry = _post(token_client, "/api/v1/plans/", SMALL_PLAN)
    assert retry.status_code == first.status_code
    assert retry.content == first.content
    assert retry["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert Plan.objects.count() == 1


def test_without_the_header_each_post_stores_a_plan(catalog, token_client):
    for _ in range(2):
        assert token_client.post("/api/v1/plans/", SMALL_PLAN, format="json").status_code in (201, 202)
    assert Plan.objects.count() == 2


def test_another_user_with_the_same_key_gets_a_plan_of_their_own(catalog, token_client, charlie_token_client):
    alices = _post(token_client, "/api/v1/plans/", SMALL_PLAN).json()
    charlies = _post(charlie_token_client, "/api/v1/plans/", SMALL_PLAN)
    assert charlies.status_code in (201, 202) and "Idempotent-Replayed" not in charlies
    assert charlies.json()["id"] != alices["id"]
    assert Plan.objects.count() == 2


def test_the_same_key_with_a_changed_body_is_refused(catalog, token_client):
    assert _post(token_client, "/api/v1/plans/", SMALL_PLAN).status_code in (201, 202)
    changed = _post(token_client, "/api/v1/plans/", {**SMALL_PLAN, "hardware": {"kinds": ["gpu"], "max_chips": 4}})
    assert changed.status_code == 422
    assert "different request" in changed.json()["detail"]
    assert Plan.objects.count() == 1


def test_the_same_key_on_another_path_is_another_key(catalog, token_client):
    assert _post(token_client, "/api/v1/plans/", SMALL_PLAN).status_code in (201, 202)
    token = _post(token_client, "/api/v1/tokens/", {"name": "ci", "scope": "read"})
    assert token.status_code == 201 and "Idempotent-Replayed" not in token


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("k" * 256, "at most 255"),
        ("abc\x01def", "visible ASCII"),
        ("abc\tdef", "visible ASCII"),
        ("two words", "visible ASCII"),
        ("clé", "visible ASCII"),
        ("", "empty"),
    ],
)
def test_a_malformed_key_is_a_400(catalog, token_client, key, message):
    response = _post(token_client, "/api/v1/plans/", SMALL_PLAN, key=key)
    assert response.status_code == 400
    assert message in response.json()["Idempotency-Key"][0]
    assert Plan.objects.count() == 0


def test_a_key_of_255_visible_characters_is_accepted(catalog, token_client):
    key = "".join(chr(33 + i % 94) for i in range(255))
    assert _post(token_client, "/api/v1/plans/", SMALL_PLAN, key=key).status_code in (201, 202)


def test_a_retry_while_the_first_request_runs_is_a_409(alice, token_client):
    assert _post(token_client, "/api/v1/tokens/", {"name": "ci", "scope": "read"}).status_code == 201
    IdempotencyKey.objects.update(status_code=None)  # as the row is while the first request's view runs
    retry = _post(token_client, "/api/v1/tokens/", {"name": "ci", "scope": "read"})
    assert retry.status_code == 409 and retry["Retry-After"] == "1"
    assert "still being processed" in retry.json()["detail"]
    assert ApiToken.objects.filter(name="ci").count() == 1


def test_a_request_that_never_finished_releases_its_key_after_the_lock_time(alice, token_client, settings):
    _post(token_client, "/api/v1/tokens/", {"name": "ci", "scope": "read"})
    row = IdempotencyKey.objects.get()
    ApiToken.objects.filter(name="ci").delete()
    row.status_code = None  # as if the worker died before storing the answer
    row.created_at = timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_LOCK_S + 1)
    row.save()
    retry = _post(token_client, "/api/v1/tokens/", {"name": "ci", "scope": "read"})
    assert retry.status_code == 201 and "Idempotent-Replayed" not in retry
    assert ApiToken.objects.filter(name="ci").count() == 1


def test_an_expired_key_starts_over(alice, token_client):
    assert _post(token_client, "/api/v1/tokens/", {"name": "ci", "scope": "read"}).status_code == 201
    IdempotencyKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    again = _post(token_client, "/api/v1/tokens/", {"name": "ci", "scope": "read"})
    assert again.status_code == 201 and "Idempotent-Replayed" not in again
    assert ApiToken.objects.filter(name="ci").count() == 2
    assert IdempotencyKey.objects.count() == 1


def test_an_error_is_not_kept_and_the_key_may_be_sent_again_with_a_corrected_body(alice, token_client):
    refused = _post(token_client, "/api/v1/tokens/", {"name": "ci", "scope": "everything"})
    assert refused.status_code == 400
    assert not IdempotencyKey.objects.exists()
    corrected = _post(token_client, "/api/v1/tokens/", {"name": "ci", "scope": "read"})
    assert corrected.status_code == 201


def test_a_retried_token_post_shows_the_same_key_which_the_table_keeps_sealed(alice, token_client):
    first = _post(token_client, "/api/v1/tokens/", {"name": "ci", "scope": "read"})
    retry = _post(token_client, "/api/v1/tokens/", {"name": "ci", "scope": "read"})
    assert retry.status_code == 201 and retry.json()["key"] == first.json()["key"]
    assert ApiToken.objects.filter(name="ci").count() == 1
    row = IdempotencyKey.objects.get()
    assert first.json()["key"].encode() not in bytes(row.response_body)
    assert KEY not in row.key_digest


def test_a_multipart_import_retried_with_a_new_boundary_is_replayed(catalog, catalog_token_client):
    def upload():
        file = io.BytesIO((FIXTURES / "mixtral-8x7b.json").read_bytes())
        file.name = "config.json"
        return {"slug": "mixtral-upload", "config_file": file}

    first = _post(catalog_token_client, "/api/v1/models/import/", upload(), format="multipart")
    assert first.status_code == 201, first.content
    # A client's retry builds the body anew: another multipart boundary, the same fields and file.
    boundary = "AnotherBoundary7MA4YWxk"
    retry = catalog_token_client.generic(
        "POST", "/api/v1/models/import/", encode_multipart(boundary, upload()),
        content_type=f"multipart/form-data; boundary={boundary}", HTTP_IDEMPOTENCY_KEY=KEY,
    )
    assert retry.status_code == 201 and retry["Idempotent-Replayed"] == "true"
    assert retry.content == first.content
    assert ModelArch.objects.filter(slug="mixtral-upload").count() == 1


def test_an_anonymous_post_with_a_key_is_refused_as_without_one(catalog, anonymous_client):
    assert _post(anonymous_client, "/api/v1/plans/", SMALL_PLAN).status_code == 401
    assert not IdempotencyKey.objects.exists()


def test_other_posts_ignore_the_header(catalog, anonymous_client):
    body = {"model": "llama-3.2-1b", "chip": "nvidia-h100-sxm", "prompt_tokens": 200, "output_tokens": 100}
    response = anonymous_client.post("/api/v1/estimates/", body, format="json", HTTP_IDEMPOTENCY_KEY="x" * 300)
    assert response.status_code == 200, response.content


@pytest.mark.django_db(transaction=True)
def test_concurrent_first_tries_of_one_key_store_one_plan(catalog):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises writers; the race needs PostgreSQL")
    alice = get_user_model().objects.create_user("alice-concurrent")
    _, token = api_token_create(alice, "retries", "write")
    barrier = threading.Barrier(4)
    statuses = []

    def attempt():
        try:
            client = client_with_token(token)
            barrier.wait()
            statuses.append(_post(client, "/api/v1/plans/", SMALL_PLAN).status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=attempt) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Plan.objects.filter(created_by=alice).count() == 1
    assert set(statuses) <= {201, 202, 409} and len([s for s in statuses if s in (201, 202)]) >= 1


def test_the_schema_documents_the_header_on_every_create_operation(anonymous_client):
    schema = anonymous_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    paths = create_paths()
    assert sorted(paths) == ["/api/v1/models/import/", "/api/v1/plans/", "/api/v1/plans/{plan_id}/validations/", "/api/v1/tokens/"]
    for path in paths:
        operation = schema["paths"][path]["post"]
        assert "Idempotency-Key" in [p["name"] for p in operation["parameters"] if p["in"] == "header"], path
        assert {"409", "422"} <= set(operation["responses"]), path
    assert not any(p.get("name") == "Idempotency-Key" for p in schema["paths"]["/api/v1/estimates/"]["post"].get("parameters", []))
