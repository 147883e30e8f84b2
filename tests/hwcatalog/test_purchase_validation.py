"""A purchase offering is a whole system: the API refuses one that prices the accelerators alone, names the
field, and stores nothing."""

from __future__ import annotations

import pytest

from hwcatalog.models import Offering

HOST = {"kind": "host", "description": "dual-socket server", "usd": 40_000, "source": "https://example.com/quote"}
NETWORK = {"kind": "network", "description": "8 x 400G NICs and a switch share", "usd": 20_000, "source": "https://example.com/nics"}


def _purchase(**overrides) -> dict:
    return {
        "slug": "hgx-test", "chip": "nvidia-h100-sxm", "provider": "vendor list price", "pricing_model": "purchase",
        "purchase_usd_per_chip": 25_000, "amortisation_years": 4, "power_usd_per_kwh": 0.1, "pue": 1.3, "chips_per_unit": 8,
        "system_parts": [HOST, NETWORK], "host_watts_per_unit": 3000, "datacentre_usd_per_kw_month": 150, "utilisation": 0.8,
        "as_of": "2026-01-01", "source": "https://example.com/list",
        **overrides,
    }  # fmt: skip


def test_a_whole_system_purchase_is_stored_with_its_parts(catalog, catalog_token_client):
    response = catalog_token_client.post("/api/v1/offerings/", _purchase(), format="json")
    assert response.status_code == 201, response.json()
    stored = Offering.objects.get(slug="hgx-test")
    assert [p["kind"] for p in stored.system_parts] == ["host", "network"] and stored.chips_per_unit == 8


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"system_parts": []}, "system_parts", "host server"),
        ({"system_parts": [HOST]}, "system_parts", "networking"),
        ({"system_parts": [{**HOST, "source": ""}, NETWORK]}, "system_parts", "source"),
        ({"system_parts": [{**HOST, "kind": "gpu"}, NETWORK]}, "system_parts", "kind"),
        ({"system_parts": [{**HOST, "price": 1}, NETWORK]}, "system_parts", "keys"),
        ({"system_parts": [{**HOST, "usd": -5}, NETWORK]}, "system_parts", "usd"),
        ({"power_usd_per_kwh": None}, "power_usd_per_kwh", "power"),
        ({"utilisation": 1.5}, "utilisation", "at most"),
        ({"chips_per_unit": 0}, "chips_per_unit", ""),
        ({"purchase_usd_per_chip": None}, "purchase_usd_per_chip", "system part"),
    ],
)
def test_a_purchase_missing_a_part_of_its_system_is_refused_naming_the_field(catalog, catalog_token_client, overrides, field, words):
    before = Offering.objects.count()
    response = catalog_token_client.post("/api/v1/offerings/", _purchase(**overrides), format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json() and words in str(response.json()[field])
    assert Offering.objects.count() == before


def test_a_standalone_machine_is_one_complete_system_part_and_needs_no_network(catalog, catalog_token_client):
    mac = {"kind": "system", "description": "Mac Studio, the whole machine", "usd": 3999, "source": "https://www.apple.com/mac-studio/"}
    body = _purchase(slug="mac-test", chip="apple-m2-ultra", purchase_usd_per_chip=None, chips_per_unit=1, system_parts=[mac],
                     host_watts_per_unit=None, datacentre_usd_per_kw_month=None, utilisation=None)  # fmt: skip
    response = catalog_token_client.post("/api/v1/offerings/", body, format="json")
    assert response.status_code == 201, response.json()


def test_a_rental_has_no_system_parts(catalog, catalog_token_client):
    body = {"slug": "rent-test", "chip": "nvidia-h100-sxm", "provider": "X", "pricing_model": "on_demand", "usd_per_chip_hour": 2.5,
            "chips_per_unit": 8, "system_parts": [HOST], "as_of": "2026-01-01", "source": "https://example.com/rent"}  # fmt: skip
    response = catalog_token_client.post("/api/v1/offerings/", body, format="json")
    assert response.status_code == 400 and "system_parts" in response.json()
