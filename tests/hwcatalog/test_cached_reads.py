"""Catalog reads are served from a per-process cache keyed by the catalog's version: the same
bytes while nothing changes, a fresh answer right after any write (API, admin, loadcatalog),
and never a cached answer to a request that a rate limit or a bad query refuses."""
from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from hwcatalog.cache import MAX_ENTRIES, _entries, catalog_version_token
from hwcatalog.models import Chip, Offering


def _queries(client, path: str) -> tuple[int, bytes]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200
    return len(captured), response.content


def test_a_repeated_read_is_the_same_answer_from_one_query(catalog, anonymous_client):
    first_queries, first = _queries(anonymous_client, "/api/v1/chips/?kind=gpu&ordering=-tdp_watts")
    again_queries, again = _queries(anonymous_client, "/api/v1/chips/?kind=gpu&ordering=-tdp_watts")
    assert again == first
    assert first_queries >= 2 and again_queries == 1  # only the catalog version is read


def test_a_write_through_the_api_is_seen_by_the_next_read(catalog, catalog_token_client, anonymous_client):
    before = anonymous_client.get("/api/v1/chips/nvidia-h100-sxm/").json()
    assert catalog_token_client.patch("/api/v1/chips/nvidia-h100-sxm/", {"tdp_watts": 650}, format="json").status_code == 200
    after = anonymous_client.get("/api/v1/chips/nvidia-h100-sxm/").json()
    assert (before["tdp_watts"], after["tdp_watts"]) == (700, 650)


def test_a_write_outside_the_api_changes_the_version_too(catalog, anonymous_client):
    listed = anonymous_client.get("/api/v1/offerings/?page_size=500").json()["count"]
    token = catalog_version_token()
    Offering.objects.filter(pk=Offering.objects.first().pk).first().delete()  # as the admin or a shell would
    assert catalog_version_token() != token
    assert anonymous_client.get("/api/v1/offerings/?page_size=500").json()["count"] == listed - 1


def test_a_deleted_chip_is_a_404_at_once(catalog, anonymous_client):
    assert anonymous_client.get("/api/v1/chips/google-tpu-v5e/").status_code == 200
    Chip.objects.get(slug="google-tpu-v5e").delete()
    assert anonymous_client.get("/api/v1/chips/google-tpu-v5e/").status_code == 404


def test_refused_and_failed_requests_are_not_cached(catalog, anonymous_client):
    assert anonymous_client.get("/api/v1/chips/?page_size=0").status_code == 400
    assert anonymous_client.get("/api/v1/chips/no-such-chip/").status_code == 404
    assert not _entries


def test_the_cache_is_bounded(catalog, anonymous_client, throttle_rates):
    throttle_rates(anon="100000/min")
    for page_size in range(1, MAX_ENTRIES + 30):
        anonymous_client.get(f"/api/v1/models/?page_size={min(page_size, 500)}&n={page_size}")
    assert len(_entries) == MAX_ENTRIES
