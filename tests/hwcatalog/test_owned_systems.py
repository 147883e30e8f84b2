"""Owned systems are priced whole (issue 12, item 3): a purchase pays for its accelerators, its host and its
networking, each part with its own dated source, and its unit is the smallest thing one can buy."""
from __future__ import annotations

import re

import pytest

from hwcatalog.models import Offering
from planner.catalog_specs import offering_spec
from planner.engine.cost import owned_terms_usd_per_chip_hour

pytestmark = pytest.mark.django_db

# The fewest chips each owned system is sold in (a rack, a server, a desk machine).
EXPECTED_UNITS = {
    "nvidia-gb200-nvl72-rack-purchase": 72,
    "nvidia-dgx-h100-viperatech-purchase": 8,
    "nvidia-hgx-h100-thinkmate-purchase": 8,
    "nvidia-hgx-h200-8x-baseboard-purchase": 8,
    "nvidia-dgx-b200-deltacomputer-purchase": 8,
    "amd-mi300x-8x-ubb-purchase": 8,
    "intel-gaudi3-8x-kit-list-price-purchase": 8,
    "intel-gaudi2-8x-kit-list-price-purchase": 8,
    "nvidia-dgx-spark-founders-edition-purchase": 1,
    "apple-mac-studio-m3-ultra-base-purchase": 1,
    "apple-mac-studio-m4-max-base-purchase": 1,
    "apple-mac-studio-m2-ultra-base-purchase": 1,
    "apple-macbook-pro-16-m3-max-128gb-purchase": 1,
}
DATED = re.compile(r"\b20\d\d\b")


def purchases() -> list[Offering]:
    return list(Offering.objects.filter(pricing_model=Offering.PricingModel.PURCHASE).select_related("chip"))


def kinds(offering: Offering) -> set[str]:
    return {part["kind"] for part in offering.system_parts}


def capex_usd(offering: Offering) -> float:
    accelerators = offering.chips_per_unit * (offering.purchase_usd_per_chip or 0.0)
    return accelerators + sum(part["usd"] for part in offering.system_parts)


def test_the_owned_systems_are_loaded_with_their_units(catalog):
    by_slug = {o.slug: o for o in purchases()}
    assert set(EXPECTED_UNITS) <= set(by_slug)
    for slug, unit in EXPECTED_UNITS.items():
        assert by_slug[slug].chips_per_unit == unit, slug
    assert by_slug["nvidia-gb200-nvl72-rack-purchase"].chips_per_unit == 72  # a rack is bought whole


def test_every_purchase_prices_its_host_and_its_network_or_is_a_standalone_machine(catalog):
    for offering in purchases():
        parts = kinds(offering)
        assert parts & {"host", "system"}, f"{offering.slug}: no host"
        standalone = "system" in parts and offering.chips_per_unit == 1
        assert "network" in parts or standalone, f"{offering.slug}: no network"
        assert offering.purchase_usd_per_chip or "system" in parts, f"{offering.slug}: accelerators unpriced"


def test_every_part_has_a_dated_source_of_its_own(catalog):
    for offering in purchases():
        assert "http" in offering.source and offering.as_of, offering.slug
        for part in offering.system_parts:
            assert part["usd"] > 0, (offering.slug, part["kind"])
            assert "http" in part["source"], (offering.slug, part["kind"])
            assert DATED.search(part["source"]), f"{offering.slug} {part['kind']}: source has no date"
            assert part["description"].strip(), (offering.slug, part["kind"])


def test_a_whole_8_gpu_server_costs_more_per_chip_than_its_accelerators(catalog):
    servers = [o for o in purchases() if o.chips_per_unit == 8]
    assert len(servers) >= 6
    for offering in servers:
        per_chip = capex_usd(offering) / offering.chips_per_unit
        if offering.purchase_usd_per_chip:
            beside = sum(p["usd"] for p in offering.system_parts if p["kind"] in {"host", "network", "rack"})
            assert per_chip == pytest.approx(offering.purchase_usd_per_chip + beside / 8)
            assert per_chip > offering.purchase_usd_per_chip * 1.04, offering.slug  # host and network are in it
        else:
            system = sum(p["usd"] for p in offering.system_parts if p["kind"] == "system")
            assert per_chip > system / 8, offering.slug  # the fabric share comes on top of the server
    gaudi3 = Offering.objects.get(slug="intel-gaudi3-8x-kit-list-price-purchase")
    assert gaudi3.purchase_usd_per_chip == 15625.0  # Intel's $125,000 kit of eight
    assert capex_usd(gaudi3) / 8 > 15625.0 + 5000.0


def test_the_cost_model_charges_every_part_and_the_building(catalog):
    for slug in ("intel-gaudi3-8x-kit-list-price-purchase", "nvidia-hgx-h200-8x-baseboard-purchase", "amd-mi300x-8x-ubb-purchase"):
        offering = Offering.objects.get(slug=slug)
        terms = owned_terms_usd_per_chip_hour(offering_spec(offering), offering.chip.tdp_watts)
        assert {"accelerators", "host", "network", "datacentre", "host_power", "accelerator_power"} <= set(terms), slug
    spark = Offering.objects.get(slug="nvidia-dgx-spark-founders-edition-purchase")
    terms = owned_terms_usd_per_chip_hour(offering_spec(spark), spark.chip.tdp_watts)
    assert "system" in terms and "datacentre" not in terms  # a desk machine pays no colocation


def test_assumed_values_are_labelled_as_assumptions(catalog):
    for offering in purchases():
        notes = offering.notes.lower()
        assert "amortisation_years" in notes and "assumption" in notes, offering.slug
        if offering.utilisation is not None:
            assert "utilisation" in notes, offering.slug
        if offering.datacentre_usd_per_kw_month:
            assert "cbre" in notes or "jll" in notes or "datacenterhawk" in notes, offering.slug
        if offering.host_watts_per_unit:
            assert "host_watts_per_unit" in notes, offering.slug
