"""`manage.py catalogreport`: every price's age and source kind; an estimate that prices with an old one says so."""

from __future__ import annotations

import datetime as dt
import json

from django.core.management import call_command

from hwcatalog.freshness import COPY, PRIMARY, THIRD_PARTY, price_age, source_kind, stale_price_warning


def test_a_source_is_primary_a_copy_or_third_party():
    assert source_kind("AWS", "https://aws.amazon.com/ec2/pricing/on-demand/ (Linux, us-east-1)") == PRIMARY
    assert source_kind("CoreWeave", "https://www.coreweave.com/pricing (as transcribed on 2026-09-20 in github.com/x)") == COPY
    assert source_kind("AWS", "https://modal.com/blog/nvidia-l40s-price-article (AWS G6e spot)") == THIRD_PARTY
    assert source_kind("AWS", "no URL at all") == THIRD_PARTY


def test_prices_age_into_stale_and_then_warned_on():
    today = dt.date(2026, 12, 1)
    fresh = price_age(slug="a", provider="AWS", as_of=dt.date(2026, 11, 1), source="https://aws.amazon.com/", today=today)
    stale = price_age(slug="b", provider="AWS", as_of=dt.date(2026, 1, 1), source="https://aws.amazon.com/", today=today)
    old = price_age(slug="c", provider="AWS", as_of=dt.date(2024, 12, 1), source="https://aws.amazon.com/", today=today)
    assert (fresh.stale, stale.stale, stale.needs_warning, old.needs_warning) == (False, True, False, True)
    assert stale_price_warning(offering_slug="c", as_of=dt.date(2024, 12, 1), today=today).startswith("the price of c is dated 2024-12-01")
    assert stale_price_warning(offering_slug="b", as_of=dt.date(2026, 1, 1), today=today) is None


def test_the_report_lists_every_price_and_the_unpriced_accelerators(catalog, capsys):
    from hwcatalog.models import Offering

    call_command("catalogreport", "--json", "--today", "2026-12-01")
    report = json.loads(capsys.readouterr().out)
    assert len(report["offerings"]) == Offering.objects.count() == report["summary"]["offerings"]
    assert report["summary"]["providers"] >= 10
    assert sum(report["summary"]["by_source_kind"].values()) == len(report["offerings"])
    assert "nvidia-gb10" in report["summary"]["gpus_and_tpus_without_an_hourly_price"]
    ages = [r["age_days"] for r in report["offerings"]]
    assert ages == sorted(ages, reverse=True)  # the oldest first
    call_command("catalogreport", "--today", "2026-12-01")
    assert "older than 548 days" in capsys.readouterr().out


def test_an_estimate_priced_with_a_price_older_than_18_months_says_so(catalog, anonymous_client):
    from hwcatalog.models import Offering

    offering = Offering.objects.filter(chip__slug="nvidia-a100-sxm-80gb").first()
    Offering.objects.filter(pk=offering.pk).update(as_of=dt.date(2020, 1, 1))
    body = {"model": "llama-3.1-8b", "chip": "nvidia-a100-sxm-80gb", "prompt_tokens": 512, "output_tokens": 128, "batch": 1}
    warnings = anonymous_client.post("/api/v1/estimates/", body, format="json").json()["warnings"]
    assert any(w.startswith(f"the price of {offering.slug} is dated 2020-01-01") for w in warnings)
