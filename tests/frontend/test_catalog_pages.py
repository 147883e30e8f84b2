from __future__ import annotations

import pytest
from django.test import Client


@pytest.fixture
def client() -> Client:
    return Client()


def test_catalog_lists_chips_and_models_with_links(client, catalog):
    response = client.get("/catalog/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "/catalog/chips/nvidia-h100-sxm/" in html and "/catalog/models/llama-3.1-70b/" in html


def test_empty_catalog_says_run_loadcatalog(client, db):
    html = client.get("/catalog/").content.decode()
    assert "manage.py loadcatalog" in html


def test_chip_detail_shows_specs_prices_sources_and_roofline(client, catalog):
    response = client.get("/catalog/chips/nvidia-h100-sxm/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Memory bandwidth" in html and 'id="chip-roofs"' in html and "<h2>Prices</h2>" in html
    assert response.context["roofs"] and 'href="https://' in html


def test_unknown_chip_and_model_are_404(client, catalog):
    assert client.get("/catalog/chips/nope/").status_code == 404
    assert client.get("/catalog/models/nope/").status_code == 404


def test_model_detail_shows_architecture_and_a_plan_link(client, catalog):
    response = client.get("/catalog/models/llama-3.1-70b/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "KV cache per token" in html and "/?model=llama-3.1-70b" in html


def test_compare_two_chips_side_by_side_with_rooflines(client, catalog):
    response = client.get("/catalog/compare/?chips=nvidia-h100-sxm,google-tpu-v5e")
    assert response.status_code == 200
    assert [c.slug for c in response.context["chips"]] == ["nvidia-h100-sxm", "google-tpu-v5e"]
    assert len(response.context["roofs"]) == 2
    assert all(len(row["values"]) == 2 for row in response.context["rows"])


def test_compare_also_takes_the_picker_forms_repeated_parameter(client, catalog):
    response = client.get("/catalog/compare/?chip=nvidia-h100-sxm&chip=amd-epyc-9654&chip=intel-gaudi3")
    assert response.status_code == 200 and len(response.context["chips"]) == 3


def test_compare_with_an_unknown_slug_is_a_clear_404(client, catalog):
    response = client.get("/catalog/compare/?chips=nvidia-h100-sxm,warp-drive-9000")
    assert response.status_code == 404
    assert "Unknown chip slug: warp-drive-9000" in response.content.decode()


def test_compare_more_than_three_chips_is_refused(client, catalog):
    response = client.get("/catalog/compare/?chips=nvidia-h100-sxm,amd-epyc-9654,intel-gaudi3,google-tpu-v5e")
    assert response.status_code == 400 and "at most 3" in response.content.decode()


def test_compare_with_no_or_one_chip_shows_the_picker(client, catalog):
    assert 'id="compare-picker"' in client.get("/catalog/compare/").content.decode()
    response = client.get("/catalog/compare/?chips=nvidia-h100-sxm")
    assert response.status_code == 200 and "at least two" in response.content.decode()
