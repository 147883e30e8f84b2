"""The rented-price catalog (issue 12 item 4): enough dated, sourced offerings, and each one's unit size
(chips_per_unit) agrees with what its instance name says about the number of accelerators in it."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
import yaml

from hwcatalog.models import Offering

RENTED = ("on_demand", "reserved", "spot")
OFFERINGS_DIR = Path(__file__).resolve().parents[2] / "hwcatalog" / "data" / "offerings"

# Accelerators per instance for the cloud instance types the catalog prices, from each provider's instance-type
# documentation (AWS accelerated-computing instances, Azure NC/ND series, Compute Engine accelerator machine types).
# Written independently of the offering files so that a wrong chips_per_unit or a wrong per-chip division shows up.
KNOWN_INSTANCE_ACCELERATORS = {
    "p5.48xlarge": 8, "p5e.48xlarge": 8, "p5en.48xlarge": 8, "p4d.24xlarge": 8, "p4de.24xlarge": 8, "p3dn.24xlarge": 8,
    "g4dn.xlarge": 1, "g5.xlarge": 1, "g5.12xlarge": 4, "g6e.xlarge": 1, "m7a.48xlarge": 2,  # two EPYC sockets
    "trn1.32xlarge": 16, "inf2.48xlarge": 12,
    "Standard_NC24ads_A100_v4": 1, "Standard_NC48ads_A100_v4": 2, "Standard_NC96ads_A100_v4": 4,
    "Standard_NC40ads_H100_v5": 1, "Standard_NC80adis_H100_v5": 2, "Standard_ND96isr_H100_v5": 8,
    "Standard_ND96asr_A100_v4": 8,
    "a3-highgpu-1g": 1, "a3-highgpu-8g": 8, "a3-megagpu-8g": 8, "a3-ultragpu-8g": 8, "a2-ultragpu-8g": 8,
}
# Counts an instance name states outright: '8x NVIDIA H100', '(8 GPUs)', '1-GPU preset', 'mi300x-192gb.8x', 'nvidia-t4 x1'.
COUNT_PATTERNS = (
    re.compile(r"^(\d+)\s*x\s", re.IGNORECASE),
    re.compile(r"\((\d+)\s+GPUs?\b", re.IGNORECASE),
    re.compile(r"\b(\d+)\s+GPUs?\b", re.IGNORECASE),
    re.compile(r"\b(\d+)-GPU\b", re.IGNORECASE),
    re.compile(r"\.(\d+)x\b"),
    re.compile(r"\bx(\d+)\)"),
)
MIRRORS = ("sibshop.uat.jiralog.com", "elcssyosw.uat.app2one.com")


def _rented_rows() -> list[dict]:
    rows = []
    for path in sorted(OFFERINGS_DIR.glob("*.yaml")):
        for row in yaml.safe_load(path.read_text()) or []:
            if row["pricing_model"] in RENTED:
                rows.append({**row, "_file": path.name})
    return rows


def stated_count(instance_name: str | None) -> int | None:
    """The accelerator count an instance name states, or None when it says nothing about it."""
    if not instance_name:
        return None
    base = instance_name.split(" ")[0]
    if base in KNOWN_INSTANCE_ACCELERATORS:
        return KNOWN_INSTANCE_ACCELERATORS[base]
    for pattern in COUNT_PATTERNS:
        found = pattern.search(instance_name)
        if found:
            return int(found.group(1))
    return None


def test_the_count_reader_reads_the_forms_the_catalog_uses():
    assert stated_count("8x NVIDIA B200 SXM6") == 8
    assert stated_count("NVIDIA HGX H100 (8 GPUs), spot") == 8
    assert stated_count("AMD MI300X 192GB (mi300x-192gb.8x)") == 8
    assert stated_count("AWS-hosted endpoint (nvidia-t4 x1)") == 1
    assert stated_count("Community Cloud H200 (1 GPU)") == 1 and stated_count("HGX H100 (1-GPU preset)") == 1
    assert stated_count("p5en.48xlarge") == 8 and stated_count("Standard_NC96ads_A100_v4") == 4
    assert stated_count("NVIDIA H200 SXM (On-Demand)") is None and stated_count(None) is None


def test_the_catalog_has_at_least_150_rented_offerings_from_at_least_10_providers(catalog):
    rented = Offering.objects.filter(pricing_model__in=RENTED)
    assert rented.count() >= 150
    assert rented.values("provider").distinct().count() >= 10
    # Not one provider padding the count: at least 10 providers with 3 or more prices each.
    per_provider = {}
    for provider in rented.values_list("provider", flat=True):
        per_provider[provider] = per_provider.get(provider, 0) + 1
    assert sum(1 for n in per_provider.values() if n >= 3) >= 10, per_provider
    # The hyperscalers carry on-demand prices, and the catalog has commitments and spot prices too.
    for provider in ("AWS", "Google Cloud", "Azure", "Oracle Cloud (OCI)"):
        assert rented.filter(provider=provider, pricing_model="on_demand").exists(), provider
    assert rented.filter(pricing_model="reserved").count() >= 10
    assert rented.filter(pricing_model="spot").count() >= 15


def test_every_rented_offering_is_dated_sourced_and_plausibly_priced(catalog):
    today = dt.date.today()
    for offering in Offering.objects.filter(pricing_model__in=RENTED):
        assert dt.date(2020, 1, 1) <= offering.as_of <= today, offering.slug
        assert re.search(r"https?://|github\.com/", offering.source), offering.slug
        assert not any(mirror in offering.source for mirror in MIRRORS), offering.slug
        assert "mirror" not in offering.source.lower(), offering.slug
        # A per-chip rate, not an instance rate: no accelerator rents for more than $50 a chip-hour.
        assert 0.01 <= offering.usd_per_chip_hour <= 50, offering.slug
        assert offering.chips_per_unit >= 1, offering.slug


def test_every_rented_offering_states_its_unit_size():
    rows = _rented_rows()
    missing = [f"{r['_file']}:{r['slug']}" for r in rows if not isinstance(r.get("chips_per_unit"), int)]
    assert not missing, missing


def test_chips_per_unit_matches_the_count_the_instance_name_states():
    rows = _rented_rows()
    checked, wrong = 0, []
    for row in rows:
        count = stated_count(row.get("instance_name"))
        if count is None:
            continue
        checked += 1
        if row["chips_per_unit"] != count:
            wrong.append(f"{row['slug']}: {row['instance_name']!r} says {count}, chips_per_unit is {row['chips_per_unit']}")
    assert not wrong, wrong
    assert checked >= 70, f"only {checked} instance names state a count"


@pytest.mark.parametrize("slug", ["lambda-8x-b200-on-demand", "coreweave-hgx-h100-on-demand", "aws-p5en-48xlarge-on-demand-us-east-1"])
def test_a_multi_gpu_instance_is_priced_per_chip(slug):
    row = next(r for r in _rented_rows() if r["slug"] == slug)
    assert row["chips_per_unit"] == 8
    # The source quotes the instance's own price or the per-GPU price; the row holds the per-GPU one.
    instance_price = {"coreweave-hgx-h100-on-demand": 49.24, "aws-p5en-48xlarge-on-demand-us-east-1": 63.296}.get(slug)
    if instance_price:
        assert row["usd_per_chip_hour"] == pytest.approx(instance_price / 8, rel=1e-4)
