from __future__ import annotations

import pytest

from hwcatalog.models import Chip, ModelArch

NEW_CHIP = {
    "slug": "acme-x1", "vendor": "Acme", "name": "X1", "kind": "gpu", "memory_capacity_bytes": 64_000_000_000,
    "memory_bandwidth_bytes_per_s": 2.0e12, "peak_bf16_flops_per_s": 500e12, "as_of": "2026-01-01",
    "sources": ["https://example.com/acme-x1-datasheet.pdf"],
}


def test_anyone_can_list_chips_with_every_kind(catalog, anonymous_client):
    response = anonymous_client.get("/api/v1/chips/", {"page_size": 500})
    assert response.status_code == 200
    kinds = {row["kind"] for row in response.json()["results"]}
    assert {"cpu", "gpu", "tpu", "lpu", "other"} <= kinds


def test_chips_filter_by_kind_and_vendor(catalog, anonymous_client):
    tpus = anonymous_client.get("/api/v1/chips/", {"kind": "tpu"}).json()["results"]
    assert tpus and all(row["kind"] == "tpu" for row in tpus)
    nvidia = anonymous_client.get("/api/v1/chips/", {"vendor": "nvidia"}).json()["results"]
    assert nvidia and all(row["vendor"] == "NVIDIA" for row in nvidia)


def test_chips_filter_by_architecture_lists_the_chips_that_run_one_stacks_kernels(catalog, anonymous_client):
    cdna3 = anonymous_client.get("/api/v1/chips/", {"architecture": "cdna 3"}).json()["results"]
    assert sorted(row["slug"] for row in cdna3) == ["amd-mi300x", "amd-mi325x"]
    assert all(row["architecture"] == "CDNA 3" for row in cdna3)
    response = anonymous_client.get("/api/v1/chips/", {"architecture": "x" * 81})
    assert response.status_code == 400 and "architecture" in response.json()


def test_chips_order_by_bandwidth_and_paginate(catalog, anonymous_client):
    page = anonymous_client.get("/api/v1/chips/", {"ordering": "-memory_bandwidth_bytes_per_s", "page_size": 3}).json()
    assert page["count"] == Chip.objects.count() and len(page["results"]) == 3 and page["next"]
    bandwidths = [row["memory_bandwidth_bytes_per_s"] for row in page["results"]]
    assert bandwidths == sorted(bandwidths, reverse=True)


def test_models_filter_by_family_and_generation_kind(catalog, anonymous_client):
    diffusion = anonymous_client.get("/api/v1/models/", {"generation_kind": "diffusion"}).json()["results"]
    assert {"llada-8b", "llada-moe-7b-a1b"} <= {row["slug"] for row in diffusion}
    detail = anonymous_client.get("/api/v1/models/llama-2-70b/").json()
    assert detail["kv_cache_bytes_per_token_bf16"] == 327_680


def test_offerings_filter_by_chip_and_pricing_model(catalog, anonymous_client):
    rows = anonymous_client.get("/api/v1/offerings/", {"chip": "nvidia-h100-sxm"}).json()["results"]
    assert rows and all(row["chip"] == "nvidia-h100-sxm" for row in rows)


def test_an_anonymous_write_gets_401_and_changes_nothing(db, anonymous_client):
    response = anonymous_client.post("/api/v1/chips/", NEW_CHIP, format="json")
    assert response.status_code == 401
    assert not Chip.objects.filter(slug="acme-x1").exists()


def test_a_non_staff_session_write_gets_403(session_client):
    response = session_client.post("/api/v1/chips/", NEW_CHIP, format="json")
    assert response.status_code == 403
    assert not Chip.objects.filter(slug="acme-x1").exists()


def test_a_catalog_token_holder_creates_updates_and_deletes_a_chip(catalog_token_client):
    assert catalog_token_client.post("/api/v1/chips/", NEW_CHIP, format="json").status_code == 201
    response = catalog_token_client.patch("/api/v1/chips/acme-x1/", {"tdp_watts": 600}, format="json")
    assert response.status_code == 200 and response.json()["tdp_watts"] == 600
    assert catalog_token_client.delete("/api/v1/chips/acme-x1/").status_code == 204
    assert not Chip.objects.filter(slug="acme-x1").exists()


def test_a_staff_session_can_write(staff_client):
    assert staff_client.post("/api/v1/chips/", NEW_CHIP, format="json").status_code == 201


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"memory_bandwidth_bytes_per_s": 0}, "memory_bandwidth_bytes_per_s"),
        ({"memory_capacity_bytes": -5}, "memory_capacity_bytes"),
        ({"memory_bandwidth_bytes_per_s": "fast"}, "memory_bandwidth_bytes_per_s"),
        ({"sources": []}, "sources"),
        ({"kind": "quantum"}, "kind"),
        ({"memory_capacity_bytes": 10**30}, "memory_capacity_bytes"),
        ({"slug": "Not A Slug!"}, "slug"),
        # positive but vanishing: the ridge point would be 5e314 FLOP/byte, no JSON number, and the chip list a 500 for everyone
        ({"memory_bandwidth_bytes_per_s": 1e-300}, "memory_bandwidth_bytes_per_s"),
        ({"peak_bf16_flops_per_s": 1e-300}, "peak_bf16_flops_per_s"),
        ({"memory_capacity_bytes": 1}, "memory_capacity_bytes"),
    ],
)
def test_a_bad_chip_gets_400_naming_the_field(catalog_token_client, change, field):
    response = catalog_token_client.post("/api/v1/chips/", {**NEW_CHIP, **change}, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not Chip.objects.filter(slug=NEW_CHIP["slug"]).exists()


@pytest.mark.parametrize("change, field", [
    ({"aliases": ["h100_sxm"]}, "aliases"),  # the H100 SXM's name: a name finds one chip
    ({"aliases": ["NVIDIA-B200"]}, "aliases"),  # another chip's slug, case aside
    ({"slug": "gb200"}, "slug"),  # the GB200's alias
])  # fmt: skip
def test_a_chip_named_as_another_is_named_is_a_400(catalog, catalog_token_client, change, field):
    response = catalog_token_client.post("/api/v1/chips/", {**NEW_CHIP, **change}, format="json")
    assert response.status_code == 400 and field in response.json()
    assert not Chip.objects.filter(vendor="Acme").exists()


def test_the_chip_list_stays_readable_and_a_chip_keeps_its_own_aliases_on_update(catalog, catalog_token_client, anonymous_client):
    assert catalog_token_client.patch("/api/v1/chips/nvidia-h100-sxm/", {"aliases": ["h100_sxm", "h100"]}, format="json").status_code == 200
    assert anonymous_client.get("/api/v1/chips/", {"page_size": 500}).status_code == 200
    clash = catalog_token_client.patch("/api/v1/chips/nvidia-h200-sxm/", {"aliases": ["H100"]}, format="json")
    assert clash.status_code == 400 and "H100" in clash.json()["aliases"][0]


@pytest.mark.parametrize("query, parameter", [
    ({"page": "0"}, "page"), ({"page": "-1"}, "page"), ({"page": "1e3"}, "page"), ({"page": "two"}, "page"),
])  # fmt: skip
def test_a_bad_page_is_a_400_naming_it(catalog, anonymous_client, query, parameter):
    response = anonymous_client.get("/api/v1/chips/", query)
    assert response.status_code == 400 and parameter in response.json()


def test_a_page_past_the_last_is_not_found_and_last_is_the_last(catalog, anonymous_client):
    assert anonymous_client.get("/api/v1/chips/", {"page": "9999"}).status_code == 404
    assert anonymous_client.get("/api/v1/chips/", {"page": "87178291199"}).status_code == 404  # any whole number: past the last
    last = anonymous_client.get("/api/v1/chips/", {"page": "last", "page_size": 500})
    assert last.status_code == 200 and last.json()["count"] == Chip.objects.count()


def test_a_partial_update_that_breaks_a_rule_is_refused(catalog, catalog_token_client):
    response = catalog_token_client.patch("/api/v1/models/llama-3.1-8b/", {"num_kv_heads": 7}, format="json")
    assert response.status_code == 400 and "num_kv_heads" in response.json()
    response = catalog_token_client.patch("/api/v1/models/mixtral-8x7b/", {"experts_per_token": 9}, format="json")
    assert response.status_code == 400 and "experts_per_token" in response.json()
    assert ModelArch.objects.get(slug="llama-3.1-8b").num_kv_heads == 8


def test_malformed_json_gets_400(catalog_token_client):
    response = catalog_token_client.generic("POST", "/api/v1/chips/", "{not json", content_type="application/json")
    assert response.status_code == 400


def test_an_unknown_slug_is_404(db, anonymous_client):
    assert anonymous_client.get("/api/v1/chips/no-such-chip/").status_code == 404


def test_an_offering_for_an_unknown_chip_gets_400(catalog_token_client):
    response = catalog_token_client.post(
        "/api/v1/offerings/",
        {"slug": "x", "chip": "no-such-chip", "provider": "X", "pricing_model": "on_demand", "usd_per_chip_hour": 1,
         "as_of": "2026-01-01", "source": "x"},
        format="json",
    )
    assert response.status_code == 400 and "chip" in response.json()


def test_a_rented_offering_needs_an_hourly_price(catalog, catalog_token_client):
    response = catalog_token_client.post(
        "/api/v1/offerings/",
        {"slug": "x", "chip": "nvidia-h100-sxm", "provider": "X", "pricing_model": "spot", "as_of": "2026-01-01", "source": "x"},
        format="json",
    )
    assert response.status_code == 400 and "usd_per_chip_hour" in response.json()


def test_the_schema_and_docs_are_served(db, anonymous_client):
    schema = anonymous_client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/v1/chips/" in schema.content
    docs = anonymous_client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()
