"""The default Llama-3.1-70B plan prices whole systems, rented and owned alike (issue 12): an owned
configuration carries its host and networking, and every configuration pays for whole units."""

from __future__ import annotations

import csv
import io

import pytest

from hwcatalog.models import Offering

DEFAULT_70B = {
    "model": "llama-3.1-70b",  # the web form's default model and chat preset (frontend/forms.py)
    "workload": {"prompt_tokens": 1000, "output_tokens": 300, "concurrency": 64, "ttft_slo_s": 0.5, "tpot_slo_s": 0.05},
}


def _plan(token_client, ownership: str) -> dict:
    response = token_client.post("/api/v1/plans/", {**DEFAULT_70B, "hardware": {"max_chips": 64, "ownership": ownership}}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


@pytest.mark.parametrize("ownership", ["any", "rent", "own"])
def test_every_top_row_of_the_default_plan_pays_for_whole_units_and_says_whether_it_is_rented_or_owned(catalog, token_client, ownership):
    ranked = _plan(token_client, ownership)["results"]["ranked"][:20]
    assert ranked
    for row in ranked:
        assert row["ownership"] == ("own" if row["pricing_model"] == "purchase" else "rent")
        assert ownership == "any" or row["ownership"] == ownership
        assert row["billed_chips"] >= row["total_chips"] and row["billed_chips"] % row["chips_per_unit"] == 0
        assert row["usd_per_hour"] == pytest.approx(row["billed_chips"] * row["usd_per_chip_hour"])
        assert row["usd_per_month"] == pytest.approx(row["usd_per_hour"] * 730.5)
        assert row["provider"] == Offering.objects.get(slug=row["offering"]).provider


def test_an_owned_configuration_of_the_default_plan_costs_its_host_and_network_as_well_as_its_accelerators(catalog, token_client):
    ranked = _plan(token_client, "own")["results"]["ranked"]
    assert ranked
    for row in ranked[:20]:
        split = row["cost"]["cost_split"]
        offering = Offering.objects.get(slug=row["offering"])
        kinds = {part["kind"] for part in offering.system_parts}
        assert kinds & {"host", "system"} and split.keys() & {"host", "system"}
        if offering.chips_per_unit > 1:  # a server or a rack: its networking is paid for too
            assert split["network"] > 0
        # Accelerators alone would cost less per chip-hour than the system the row is priced as.
        if offering.purchase_usd_per_chip:
            assert row["usd_per_chip_hour"] > split["accelerators"] + split.get("accelerator_power", 0.0)
        assert row["usd_per_chip_hour"] == pytest.approx(sum(split.values()), rel=1e-6)


def test_the_csv_export_carries_the_whole_configuration_cost(catalog, token_client):
    plan = _plan(token_client, "any")
    response = token_client.get(f"/api/v1/plans/{plan['id']}/export.csv")
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert rows
    for column in ("usd_per_chip_hour", "usd_per_hour", "usd_per_month", "billed_chips", "chips_per_unit", "ownership", "provider"):
        assert column in rows[0] and rows[0][column] != ""
