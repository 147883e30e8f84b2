from __future__ import annotations

import pytest
from django.core.management import call_command

from planner.calibrations import calibration_rollback
from planner.catalog_specs import calibrations_for
from planner.models import Calibration, Plan, PlanImmutable
from tests.planner.test_api_plans import CHAT_70B


def _calibration(version: int, bandwidth: float) -> Calibration:
    return Calibration.objects.create(chip_slug="nvidia-h100-sxm", weight_dtype="bf16", version=version, compute_fraction=0.6,
                                      bandwidth_fraction=bandwidth, step_overhead_s=1e-4, link_bandwidth_fraction=0.8, run_count=3)


def test_a_stored_plan_cannot_be_rewritten_only_pinned(catalog, token_client):
    plan = Plan.objects.get(pk=token_client.post("/api/v1/plans/", CHAT_70B, format="json").json()["id"])
    plan.results = {"ranked": []}
    with pytest.raises(PlanImmutable):
        plan.save()
    plan.refresh_from_db()
    assert plan.results["ranked"]
    plan.pinned = True
    plan.save(update_fields=["pinned"])
    assert Plan.objects.get(pk=plan.pk).pinned


def test_a_changed_price_makes_new_plans_and_leaves_old_ones_as_they_were(catalog, token_client):
    from hwcatalog.models import Offering

    first = token_client.post("/api/v1/plans/", CHAT_70B, format="json").json()
    Offering.objects.update(usd_per_chip_hour=999.0)
    second = token_client.post("/api/v1/plans/", CHAT_70B, format="json").json()
    assert Plan.objects.get(pk=first["id"]).best_usd_per_million_output_tokens == first["best_usd_per_million_output_tokens"]
    assert second["best_usd_per_million_output_tokens"] != first["best_usd_per_million_output_tokens"]


def test_a_calibration_rolls_back_to_an_earlier_version(transactional_db, capsys):
    # transactional_db: no test transaction around it, so the rollback's row locks need its own (PostgreSQL refuses
    # select_for_update outside one)
    _calibration(1, 0.5)
    _calibration(2, 0.9)
    assert calibrations_for(["nvidia-h100-sxm"])[("nvidia-h100-sxm", "bf16")].bandwidth_fraction == 0.9
    calibration_rollback(chip_slug="nvidia-h100-sxm", weight_dtype="bf16", to_version=1)
    chosen = calibrations_for(["nvidia-h100-sxm"])[("nvidia-h100-sxm", "bf16")]
    assert chosen.bandwidth_fraction == 0.5 and chosen.source == "calibration v1 (3 runs)"
    assert Calibration.objects.count() == 2  # nothing deleted
    call_command("calibration", "--chip", "nvidia-h100-sxm", "--dtype", "bf16")
    out = capsys.readouterr().out
    assert "v2 inactive" in out and "v1 active" in out
