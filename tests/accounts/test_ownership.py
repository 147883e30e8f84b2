"""Who may do what: one section per row of docs/security.md's table "Who may do what".

Alice (not staff) holds a write token (token_client) and a catalog token (catalog_token_client) and
owns a plan and a validation run; Charlie is another token holder; Bob has a web session only
(session_client); Sam is staff (staff_client); the anonymous client has no credentials."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from accounts.models import ApiToken
from accounts.services import api_token_create
from hwcatalog.models import Chip, ModelArch, Offering
from jobs.models import ValidationRun
from planner import catalog_specs
from planner.models import Plan
from tests.conftest import client_with_token

HF_CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"
NEW_CHIP = {
    "slug": "acme-x1", "vendor": "Acme", "name": "X1", "kind": "gpu", "memory_capacity_bytes": 64_000_000_000,
    "memory_bandwidth_bytes_per_s": 2.0e12, "peak_bf16_flops_per_s": 500e12, "as_of": "2026-01-01",
    "sources": ["https://example.com/acme-x1-datasheet.pdf"],
}  # fmt: skip
SMALL_PLAN = {
    "model": "llama-3.2-1b",
    "workload": {"prompt_tokens": 200, "output_tokens": 100, "concurrency": 4},
    "hardware": {"kinds": ["gpu"], "max_chips": 8},
}


def _stored_plan(*, owner, model: str = "llama-3.2-1b", chips: tuple[str, ...] = ("nvidia-h100-sxm",), draft: str | None = None) -> Plan:
    """A plan as plan_create stores it (its catalog_snapshot made by the same function), without a search."""
    chip_rows = list(Chip.objects.filter(slug__in=chips))
    snapshot = {
        "model": catalog_specs.snapshot(ModelArch.objects.filter(slug=model)),
        "draft_models": catalog_specs.snapshot(ModelArch.objects.filter(slug=draft)) if draft else [],
        "chips": catalog_specs.snapshot(chip_rows),
        "offerings": catalog_specs.snapshot(Offering.objects.filter(chip__in=chip_rows)),
    }
    return Plan.objects.create(
        model_slug=model, inputs={"model": model}, catalog_snapshot=snapshot, results={"ranked": []},
        candidate_count=0, feasible_count=0, created_by=owner,
    )  # fmt: skip


@pytest.fixture
def charlie_token_client(db):
    """Charlie has a write token too, and owns nothing here."""
    charlie = get_user_model().objects.create_user("charlie")
    return client_with_token(api_token_create(charlie, "charlie's script", "write")[1])


@pytest.fixture
def sam_write_token_client(db):
    """A write token of a staff user (not a catalog token)."""
    sam = get_user_model().objects.create_user("sam-script", is_staff=True)
    return client_with_token(api_token_create(sam, "sam's script", "write")[1])


@pytest.fixture
def alices_plan(catalog, alice):
    return _stored_plan(owner=alice)


@pytest.fixture
def alices_run(alices_plan, alice):
    return ValidationRun.objects.create(
        plan=alices_plan, rank=1, configuration={}, model_slug="llama-3.2-1b", trial="decode", created_by=alice
    )


def _status(run: ValidationRun) -> str:
    run.refresh_from_db()
    return run.status


# --- anyone reads -------------------------------------------------------------------------------


def test_anyone_reads_the_catalog_the_plans_and_the_validations(anonymous_client, alices_run):
    for path in ("/api/v1/chips/", "/api/v1/models/", "/api/v1/offerings/", "/api/v1/plans/", f"/api/v1/plans/{alices_run.plan_id}/",
                 "/api/v1/validations/", f"/api/v1/validations/{alices_run.id}/", "/api/v1/chips/nvidia-h100-sxm/history/"):
        assert anonymous_client.get(path).status_code == 200, path


# --- storing plans and queueing runs: a write token or a staff session ----------------------------


def test_storing_a_plan_or_queueing_a_run_needs_a_write_token_or_a_staff_session(
    alices_plan, anonymous_client, session_client, read_token_client, token_client, staff_client
):
    assert anonymous_client.post("/api/v1/plans/", SMALL_PLAN, format="json").status_code == 401
    assert session_client.post("/api/v1/plans/", SMALL_PLAN, format="json").status_code == 403
    assert read_token_client.post("/api/v1/plans/", SMALL_PLAN, format="json").status_code == 403
    assert anonymous_client.post(f"/api/v1/plans/{alices_plan.id}/validations/", {}, format="json").status_code == 401
    assert token_client.post("/api/v1/plans/", SMALL_PLAN, format="json").status_code in (201, 202)
    assert staff_client.post("/api/v1/plans/", SMALL_PLAN, format="json").status_code in (201, 202)


# --- cancelling a run: its creator or staff ---------------------------------------------------------


def test_someone_elses_run_cannot_be_cancelled_with_a_write_token(alices_run, charlie_token_client):
    response = charlie_token_client.post(f"/api/v1/validations/{alices_run.id}/cancel/")
    assert response.status_code == 403
    assert response.json()["detail"] == "Only the user who created this validation run, or staff, may cancel it."
    assert _status(alices_run) == "queued"


def test_the_runs_creator_cancels_it(alices_run, token_client):
    response = token_client.post(f"/api/v1/validations/{alices_run.id}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"


def test_staff_cancel_anyones_run(alices_run, staff_client):
    assert staff_client.post(f"/api/v1/validations/{alices_run.id}/cancel/").status_code == 200
    assert _status(alices_run) == "cancelled"


def test_a_scheduled_run_that_no_user_created_is_cancelled_by_staff_only(alices_run, token_client, staff_client):
    ValidationRun.objects.filter(pk=alices_run.pk).update(created_by=None)
    response = token_client.post(f"/api/v1/validations/{alices_run.id}/cancel/")
    assert response.status_code == 403 and "no user created it" in response.json()["detail"]
    assert staff_client.post(f"/api/v1/validations/{alices_run.id}/cancel/").status_code == 200


def test_an_anonymous_or_read_only_cancel_is_refused(alices_run, anonymous_client, read_token_client):
    assert anonymous_client.post(f"/api/v1/validations/{alices_run.id}/cancel/").status_code == 401
    assert read_token_client.post(f"/api/v1/validations/{alices_run.id}/cancel/").status_code == 403
    assert _status(alices_run) == "queued"


# --- pinning and deleting a plan: its creator or staff ---------------------------------------------


def test_someone_elses_plan_cannot_be_pinned_or_deleted(alices_plan, charlie_token_client):
    pin = charlie_token_client.patch(f"/api/v1/plans/{alices_plan.id}/", {"pinned": True}, format="json")
    assert pin.status_code == 403 and pin.json()["detail"] == "Only the user who created this plan, or staff, may pin or unpin it."
    assert charlie_token_client.delete(f"/api/v1/plans/{alices_plan.id}/").status_code == 403
    alices_plan.refresh_from_db()
    assert alices_plan.pinned is False


def test_the_plans_creator_pins_unpins_and_deletes_it(alices_plan, token_client):
    response = token_client.patch(f"/api/v1/plans/{alices_plan.id}/", {"pinned": True}, format="json")
    assert response.status_code == 200 and response.json()["pinned"] is True
    assert token_client.patch(f"/api/v1/plans/{alices_plan.id}/", {"pinned": False}, format="json").json()["pinned"] is False
    assert token_client.delete(f"/api/v1/plans/{alices_plan.id}/").status_code == 204
    assert not Plan.objects.filter(pk=alices_plan.pk).exists()


def test_staff_pin_and_delete_anyones_plan_and_its_runs_stay(alices_run, staff_client):
    plan_id = alices_run.plan_id
    assert staff_client.patch(f"/api/v1/plans/{plan_id}/", {"pinned": True}, format="json").status_code == 200
    assert staff_client.delete(f"/api/v1/plans/{plan_id}/").status_code == 204
    alices_run.refresh_from_db()
    assert alices_run.plan_id is None  # the run is kept, without its plan


def test_a_plan_that_no_user_created_is_pinned_by_staff_only(catalog, token_client, staff_client):
    plan = _stored_plan(owner=None)
    assert token_client.patch(f"/api/v1/plans/{plan.id}/", {"pinned": True}, format="json").status_code == 403
    assert staff_client.patch(f"/api/v1/plans/{plan.id}/", {"pinned": True}, format="json").status_code == 200


def test_a_pin_that_is_not_a_boolean_is_400_naming_pinned_and_an_empty_patch_changes_nothing(alices_plan, token_client):
    response = token_client.patch(f"/api/v1/plans/{alices_plan.id}/", {"pinned": "perhaps"}, format="json")
    assert response.status_code == 400 and "pinned" in response.json()
    response = token_client.patch(f"/api/v1/plans/{alices_plan.id}/", {}, format="json")
    assert response.status_code == 200 and response.json()["pinned"] is False
    assert token_client.patch(f"/api/v1/plans/{alices_plan.id}/", {"pined": True}, format="json").status_code == 400


def test_an_anonymous_pin_or_delete_gets_401(alices_plan, anonymous_client):
    assert anonymous_client.patch(f"/api/v1/plans/{alices_plan.id}/", {"pinned": True}, format="json").status_code == 401
    assert anonymous_client.delete(f"/api/v1/plans/{alices_plan.id}/").status_code == 401
    assert Plan.objects.filter(pk=alices_plan.pk).exists()


# --- catalog writes: a catalog token or a staff session ---------------------------------------------


def _catalog_writes(client) -> list[int]:
    """Status codes of a create, an update, a delete and an import, in that order."""
    return [
        client.post("/api/v1/chips/", NEW_CHIP, format="json").status_code,
        client.patch("/api/v1/offerings/aws-p5-48xlarge-on-demand-us-east-1/", {"usd_per_chip_hour": 0.01}, format="json").status_code,
        client.delete("/api/v1/models/gpt-j-6b/").status_code,
        client.post("/api/v1/models/import/", {"slug": "imported", "config": _config("llama-3.1-8b.json")}, format="json").status_code,
    ]


def _config(name: str) -> dict:
    return json.loads((HF_CONFIGS / name).read_text())


def _catalog_unchanged() -> bool:
    return (not Chip.objects.filter(slug="acme-x1").exists() and ModelArch.objects.filter(slug="gpt-j-6b").exists()
            and not ModelArch.objects.filter(slug="imported").exists()
            and Offering.objects.get(slug="aws-p5-48xlarge-on-demand-us-east-1").usd_per_chip_hour != 0.01)  # fmt: skip


def test_a_write_token_cannot_write_the_catalog(catalog, token_client):
    assert _catalog_writes(token_client) == [403, 403, 403, 403]
    detail = token_client.post("/api/v1/chips/", NEW_CHIP, format="json").json()["detail"]
    assert detail.startswith("Catalog writes (chips, models, offerings, imports) need a catalog-scoped API token")
    assert _catalog_unchanged()


def test_a_staff_users_write_token_cannot_write_the_catalog_either(catalog, sam_write_token_client):
    assert _catalog_writes(sam_write_token_client) == [403, 403, 403, 403]
    assert _catalog_unchanged()


def test_a_signed_in_user_who_is_not_staff_cannot_write_the_catalog(catalog, session_client):
    assert _catalog_writes(session_client) == [403, 403, 403, 403]
    assert _catalog_unchanged()


def test_an_anonymous_catalog_write_gets_401_and_a_read_token_403(catalog, anonymous_client, read_token_client):
    assert _catalog_writes(anonymous_client) == [401, 401, 401, 401]
    assert _catalog_writes(read_token_client) == [403, 403, 403, 403]
    assert _catalog_unchanged()


def test_a_catalog_token_writes_chips_models_offerings_and_imports(catalog, catalog_token_client):
    assert _catalog_writes(catalog_token_client) == [201, 200, 204, 201]


def test_a_staff_session_writes_the_catalog(catalog, staff_client):
    assert _catalog_writes(staff_client) == [201, 200, 204, 201]


def test_a_catalog_token_also_does_what_a_write_token_does(alices_run, catalog_token_client):
    assert catalog_token_client.post(f"/api/v1/validations/{alices_run.id}/cancel/").status_code == 200
    assert catalog_token_client.post("/api/v1/tokens/", {"name": "ci"}, format="json").status_code == 201


# --- deletes of rows a stored plan used: refused (409), staff included ---------------------------------


def test_a_chip_a_stored_plan_used_is_not_deleted_nor_are_its_offerings(alices_plan, staff_client):
    offerings = Offering.objects.filter(chip__slug="nvidia-h100-sxm").count()
    response = staff_client.delete("/api/v1/chips/nvidia-h100-sxm/")
    assert response.status_code == 409
    detail = response.json()["detail"]
    assert detail.startswith("Chip nvidia-h100-sxm cannot be deleted: 1 stored plan used chip nvidia-h100-sxm")
    assert str(alices_plan.id) in detail and "PUT or PATCH" in detail
    assert Offering.objects.filter(chip__slug="nvidia-h100-sxm").count() == offerings > 0


def test_a_chip_whose_offering_a_stored_plan_priced_is_not_deleted(catalog, alice, catalog_token_client):
    plan = _stored_plan(owner=alice, chips=())
    plan.catalog_snapshot["offerings"] = catalog_specs.snapshot(Offering.objects.filter(slug="aws-p5-48xlarge-on-demand-us-east-1"))
    Plan.objects.filter(pk=plan.pk).update(catalog_snapshot=plan.catalog_snapshot)
    assert catalog_token_client.delete("/api/v1/chips/nvidia-h100-sxm/").status_code == 409
    assert catalog_token_client.delete("/api/v1/offerings/aws-p5-48xlarge-on-demand-us-east-1/").status_code == 409
    assert Offering.objects.filter(slug="aws-p5-48xlarge-on-demand-us-east-1").exists()


def test_a_model_a_stored_plan_is_for_or_drafts_with_is_not_deleted(catalog, alice, catalog_token_client):
    _stored_plan(owner=alice, model="llama-3.1-70b", chips=(), draft="llama-3.2-1b")
    assert catalog_token_client.delete("/api/v1/models/llama-3.1-70b/").status_code == 409
    response = catalog_token_client.delete("/api/v1/models/llama-3.2-1b/")
    assert response.status_code == 409 and "used model architecture llama-3.2-1b" in response.json()["detail"]
    assert ModelArch.objects.filter(slug__in=["llama-3.1-70b", "llama-3.2-1b"]).count() == 2


def test_a_chip_no_plan_used_is_deleted_with_its_offerings(alices_plan, catalog_token_client):
    chip = Chip.objects.exclude(slug="nvidia-h100-sxm").filter(offerings__isnull=False).first()
    assert catalog_token_client.delete(f"/api/v1/chips/{chip.slug}/").status_code == 204
    assert not Offering.objects.filter(chip__slug=chip.slug).exists()


def test_a_similar_slug_in_a_plan_does_not_hold_a_chip(catalog, alice, catalog_token_client):
    # "nvidia-h100-sxm" contains "nvidia-h100", and a snapshot holds names and aliases too: only a row's slug counts.
    Chip.objects.create(**{**NEW_CHIP, "slug": "nvidia-h100", "as_of": "2026-01-01"})
    _stored_plan(owner=alice, chips=("nvidia-h100-sxm",))
    assert catalog_token_client.delete("/api/v1/chips/nvidia-h100/").status_code == 204


def test_a_real_plan_holds_the_chips_it_searched_until_it_is_deleted(catalog, token_client, catalog_token_client):
    response = token_client.post("/api/v1/plans/", SMALL_PLAN, format="json")
    assert response.status_code == 201, response.json()
    searched = response.json()["catalog_snapshot"]["chips"][0]["slug"]
    assert catalog_token_client.delete(f"/api/v1/chips/{searched}/").status_code == 409
    assert token_client.delete(f"/api/v1/plans/{response.json()['id']}/").status_code == 204
    assert catalog_token_client.delete(f"/api/v1/chips/{searched}/").status_code == 204


def test_the_admin_refuses_the_same_delete(alices_plan, admin_client):
    chip = Chip.objects.get(slug="nvidia-h100-sxm")
    page = admin_client.get(f"/admin/hwcatalog/chip/{chip.pk}/delete/")
    assert page.status_code == 200 and "1 stored plan used chip nvidia-h100-sxm" in page.content.decode()
    admin_client.post(f"/admin/hwcatalog/chip/{chip.pk}/delete/", {"post": "yes"})
    assert Chip.objects.filter(pk=chip.pk).exists()


# --- history: editors' usernames for staff only ------------------------------------------------------


def test_history_names_its_editors_to_staff_only(catalog, catalog_token_client, token_client, anonymous_client, staff_client):
    assert catalog_token_client.patch("/api/v1/chips/nvidia-h100-sxm/", {"tdp_watts": 650}, format="json").status_code == 200
    path = "/api/v1/chips/nvidia-h100-sxm/history/"
    for client in (anonymous_client, token_client, catalog_token_client):  # Alice, the editor herself, is not staff
        newest = client.get(path).json()[0]
        assert "changed_by" not in newest and newest["changes"]["tdp_watts"]["new"] == 650.0
    assert staff_client.get(path).json()[0]["changed_by"] == "alice"


# --- tokens: a catalog token is made by staff only ----------------------------------------------------


def test_a_user_who_is_not_staff_cannot_mint_a_catalog_token(catalog_token_client, token_client):
    for client in (token_client, catalog_token_client):  # a catalog token of a non-staff user mints none either
        response = client.post("/api/v1/tokens/", {"name": "escalate", "scope": "catalog"}, format="json")
        assert response.status_code == 403 and '"scope": "catalog" is refused' in response.json()["detail"]
    assert not ApiToken.objects.filter(name="escalate").exists()


def test_staff_mint_a_catalog_token_from_a_session_or_a_catalog_token_but_not_from_a_write_token(staff_client, sam_write_token_client):
    assert sam_write_token_client.post("/api/v1/tokens/", {"name": "up", "scope": "catalog"}, format="json").status_code == 403
    response = staff_client.post("/api/v1/tokens/", {"name": "catalog sync", "scope": "catalog"}, format="json")
    assert response.status_code == 201 and response.json()["scope"] == "catalog"
    catalog_key_of_staff = client_with_token(response.json()["key"])
    assert catalog_key_of_staff.post("/api/v1/chips/", NEW_CHIP, format="json").status_code == 201
    assert catalog_key_of_staff.post("/api/v1/tokens/", {"name": "rotated", "scope": "catalog"}, format="json").status_code == 201


def test_an_operator_makes_a_catalog_token_with_createtoken(db):
    out = io.StringIO()
    call_command("createtoken", "catalog-bot", "--scope", "catalog", stdout=out, stderr=io.StringIO())
    token = ApiToken.objects.get(user__username="catalog-bot")
    assert token.scope == "catalog" and not token.user.is_staff
    assert client_with_token(out.getvalue().strip()).post("/api/v1/chips/", NEW_CHIP, format="json").status_code == 201


# --- the admin site: staff only ---------------------------------------------------------------------


def test_the_admin_site_is_for_staff_only(db, anonymous_client, session_client, admin_client):
    for client in (anonymous_client, session_client):
        response = client.get("/admin/hwcatalog/chip/")
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    assert admin_client.get("/admin/hwcatalog/chip/").status_code == 200
