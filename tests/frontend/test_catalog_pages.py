from __future__ import annotations

import pytest
from django.test import Client

from hwcatalog.models import Chip


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
    assert "Memory bandwidth" in html and 'id="chip-roofs"' in html and '<h2 id="offerings">Prices</h2>' in html
    assert response.context["roofs"] and 'href="https://' in html
    assert ("Architecture", "Hopper") in response.context["specs"] and ">Hopper<" in html


def test_unknown_chip_and_model_are_404(client, catalog):
    assert client.get("/catalog/chips/nope/").status_code == 404
    assert client.get("/catalog/models/nope/").status_code == 404


def test_model_detail_shows_architecture_and_a_plan_link(client, catalog):
    response = client.get("/catalog/models/llama-3.1-70b/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "KV cache per token" in html and "/?model=llama-3.1-70b" in html
    assert "the checkpoint" not in html  # a bf16 checkpoint: its bf16 weights are the only size


def test_a_quantised_checkpoints_own_size_is_shown_beside_its_bf16_size(client, catalog):
    fields = dict(client.get("/catalog/models/gpt-oss-120b/").context["fields"])
    label = "Weights at MXFP4 (the checkpoint: 4.25 bits a weight; attention, router in 16 bits)"
    assert fields[label] == "65.2 GB"  # the model card's 60.8 GiB
    assert list(fields).index(label) == list(fields).index("Weights at BF16") + 1


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


def test_compare_more_than_eight_chips_is_refused_with_the_limit_stated(client, catalog):
    nine = ",".join(Chip.objects.order_by("slug").values_list("slug", flat=True)[:9])
    response = client.get(f"/catalog/compare/?chips={nine}")
    assert response.status_code == 400 and "Compare at most 8 chips at a time (got 9)" in response.content.decode()
    assert "Choose two to 8 chips" in client.get("/catalog/compare/").content.decode()


def test_compare_marks_the_best_value_of_each_row_among_four_chips(client, catalog):
    response = client.get("/catalog/compare/?chips=nvidia-h100-sxm,nvidia-h200-sxm,google-tpu-v5e,amd-mi300x")
    assert response.status_code == 200
    rows = {row["label"]: row for row in response.context["rows"]}
    assert rows["Memory"]["best"] == [3]  # MI300X's 192 GB
    assert rows["Memory bandwidth"]["best"] == [3]  # 5.3 TB/s against 4.8 and 3.35
    cheapest = rows["Cheapest rental, per chip-hour"]
    prices = [float(v.strip("$").replace(",", "")) if v != "–" else None for v in cheapest["values"]]
    assert cheapest["best"] == [prices.index(min(p for p in prices if p is not None))]
    assert rows["Vendor"]["best"] == []  # nothing to rank
    html = response.content.decode()
    assert html.count('class="best"') == sum(len(row["best"]) for row in response.context["rows"]) and 'id="best-legend"' in html


def test_compare_with_no_or_one_chip_shows_the_picker(client, catalog):
    assert 'id="compare-picker"' in client.get("/catalog/compare/").content.decode()
    response = client.get("/catalog/compare/?chips=nvidia-h100-sxm")
    assert response.status_code == 200 and "at least two" in response.content.decode()


def test_the_catalog_page_shows_each_chips_cheapest_rental(client, catalog):
    from hwcatalog.models import Offering

    response = client.get("/catalog/")
    chips = {c.slug: c for c in response.context["chips"]}
    h100 = Offering.objects.filter(chip__slug="nvidia-h100-sxm").exclude(pricing_model="purchase").exclude(usd_per_chip_hour=None)
    assert chips["nvidia-h100-sxm"].cheapest_rental == min(o.usd_per_chip_hour for o in h100)
    html = response.content.decode()
    assert "Rent from, per chip-hour" in html and 'href="/catalog/chips/nvidia-h100-sxm/#offerings"' in html


def test_parameter_counts_read_as_the_field_writes_them(client, catalog):
    from frontend.templatetags.hwformat import params

    assert (params(70.6e9), params(671e9), params(1.04e12), params(494e6)) == (
        "70.6 B parameters", "671 B parameters", "1.04 T parameters", "494 M parameters")
    html = client.get("/catalog/models/llama-3.1-70b/").content.decode()
    assert "B parameters" in html and " G<" not in html


def test_the_price_freshness_page_lists_every_price_oldest_first_with_its_flags(client, catalog):
    import datetime as dt

    from django.utils import timezone

    from hwcatalog.models import Offering

    old = Offering.objects.filter(chip__slug="nvidia-h100-sxm").first()
    Offering.objects.filter(pk=old.pk).update(as_of=timezone.localdate() - dt.timedelta(days=5000))
    response = client.get("/catalog/prices/")
    assert response.status_code == 200
    rows = response.context["report"].rows
    assert len(rows) == Offering.objects.count()
    assert [age.age_days for _, age in rows] == sorted((age.age_days for _, age in rows), reverse=True)
    offering, age = rows[0]
    assert (offering.slug, age.age_days, age.stale, age.needs_warning) == (old.slug, 5000, True, True)
    html = response.content.decode()
    assert "WARNED ON ESTIMATES" in html and "/catalog/chips/nvidia-h100-sxm/#offerings" in html
    assert f"{response.context['summary']['offerings']} prices from" in html
    assert "/catalog/chips/nvidia-gb10/" in html  # a GPU with no hourly price is named and linked


def test_the_catalog_page_links_to_the_price_freshness_page(client, catalog):
    assert "/catalog/prices/" in client.get("/catalog/").content.decode()


def test_the_price_freshness_page_of_an_empty_catalog_says_how_to_load_one(client, db):
    html = client.get("/catalog/prices/").content.decode()
    assert "manage.py loadcatalog" in html
