"""A field an endpoint does not take is a 400 naming it (inputs.serializers.RejectUnknownFields),
not silently dropped, and the request changes nothing."""
from __future__ import annotations

import pytest

from accounts.models import ApiToken
from hwcatalog.models import Chip, Offering
from jobs.models import ValidationRun
from planner.models import Plan
from planner.serializers import PlanInputSerializer
from planner.services import plan_create

ESTIMATE = {"model": "llama-3.1-8b", "chip": "nvidia-h100-sxm", "prompt_tokens": 1000, "output_tokens": 200}
PLAN = {"model": "llama-3.2-1b", "workload": {"prompt_tokens": 200, "output_tokens": 100, "concurrency": 4},
        "hardware": {"kinds": ["gpu"], "max_chips": 8}}  # fmt: skip


@pytest.fixture
def plan(catalog):
    inputs = PlanInputSerializer(data=PLAN)
    inputs.is_valid(raise_exception=True)
    return plan_create(data=inputs.validated_data, raw_inputs=inputs.data)


def test_a_misspelt_token_expiry_is_a_400_that_suggests_the_right_name(token_client):
    before = ApiToken.objects.count()
    response = token_client.post("/api/v1/tokens/", {"name": "ci", "expires_days": 30}, format="json")
    assert response.status_code == 400
    assert response.json() == {"expires_days": ["Unknown field; did you mean expires_in_days?"]}
    assert ApiToken.objects.count() == before


def test_a_field_nothing_resembles_lists_the_fields_there_are(token_client):
    response = token_client.post("/api/v1/tokens/", {"name": "ci", "colour": "red"}, format="json")
    assert response.status_code == 400
    assert response.json()["colour"] == ["Unknown field; the fields here are name, scope, expires_in_days."]


def test_unknown_fields_are_reported_with_the_other_errors(token_client):
    response = token_client.post("/api/v1/tokens/", {"expires_days": 30}, format="json")
    assert set(response.json()) == {"name", "expires_days"}


def test_an_unknown_estimate_field_is_a_400(anonymous_client, catalog):
    response = anonymous_client.post("/api/v1/estimates/", {**ESTIMATE, "tensor_paralel": 2}, format="json")
    assert response.status_code == 400
    assert response.json() == {"tensor_paralel": ["Unknown field; did you mean tensor_parallel?"]}


def test_an_unknown_field_in_a_nested_input_is_named_under_its_parent(anonymous_client, catalog):
    response = anonymous_client.post("/api/v1/estimates/", {**ESTIMATE, "decoding": {"method": "ar", "draft_tokenz": 3}}, format="json")
    assert response.status_code == 400
    assert response.json() == {"decoding": {"draft_tokenz": ["Unknown field; did you mean draft_tokens?"]}}


def test_an_unknown_field_in_a_plan_is_a_400_and_stores_no_plan(token_client, catalog):
    body = {**PLAN, "workload": {**PLAN["workload"], "concurency": 8}, "hardware": {**PLAN["hardware"], "budget": 3}}
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert "concurency" in errors["workload"] and "budget" in errors["hardware"]
    assert not Plan.objects.exists()


def test_an_unknown_field_in_a_list_of_decodings_is_named_at_its_index(token_client, catalog):
    response = token_client.post("/api/v1/plans/", {**PLAN, "decodings": [{"method": "ar"}, {"method": "ar", "x": 1}]}, format="json")
    assert response.status_code == 400
    assert list(response.json()["decodings"]) == ["1"]  # DRF keys a list's errors by index
    assert response.json()["decodings"]["1"]["x"][0].startswith("Unknown field; the fields here are method, draft_model,")


def test_an_unknown_chip_field_is_a_400_and_creates_nothing(staff_client, catalog):
    chip = staff_client.get("/api/v1/chips/nvidia-h100-sxm/").json()
    response = staff_client.post("/api/v1/chips/", {**chip, "slug": "acme-x1", "memory_gb": 80}, format="json")
    assert response.status_code == 400
    assert response.json() == {"memory_gb": ["Unknown field; the schema at /api/schema/ lists the fields."]}
    assert not Chip.objects.filter(slug="acme-x1").exists()


def test_a_chip_read_back_with_its_read_only_fields_can_be_written_again(staff_client, catalog):
    chip = staff_client.get("/api/v1/chips/nvidia-h100-sxm/").json()
    assert "created_at" in chip and "ridge_point_bf16_flops_per_byte" in chip
    response = staff_client.put("/api/v1/chips/nvidia-h100-sxm/", {**chip, "tdp_watts": 701}, format="json")
    assert response.status_code == 200 and Chip.objects.get(slug="nvidia-h100-sxm").tdp_watts == 701


def test_an_unknown_field_in_a_partial_update_changes_nothing(staff_client, catalog):
    before = Offering.objects.first()
    response = staff_client.patch(f"/api/v1/offerings/{before.slug}/", {"usd_per_chip_hour": 1.23, "usd_per_hour": 1.23}, format="json")
    assert response.status_code == 400 and "usd_per_hour" in response.json()
    assert Offering.objects.get(pk=before.pk).usd_per_chip_hour == before.usd_per_chip_hour


def test_an_unknown_import_field_is_a_400(staff_client):
    response = staff_client.post("/api/v1/models/import/", {"slug": "m", "config": {"model_type": "llama"}, "hf": "a/b"}, format="json")
    assert response.status_code == 400 and "hf" in response.json()


def test_a_forms_csrf_token_is_not_an_unknown_field(staff_client):
    response = staff_client.post("/api/v1/tokens/", {"name": "form", "csrfmiddlewaretoken": "x"}, format="multipart")
    assert response.status_code == 201


def test_an_unknown_field_in_a_form_body_is_still_named(staff_client):
    response = staff_client.post("/api/v1/tokens/", {"name": "form", "expires": "3"}, format="multipart")
    assert response.status_code == 400 and "expires" in response.json()


def test_an_unknown_validation_field_is_a_400_and_queues_nothing(token_client, plan):
    response = token_client.post(f"/api/v1/plans/{plan.id}/validations/", {"rank": 1, "queu": "gpu"}, format="json")
    assert response.status_code == 400
    assert response.json() == {"queu": ["Unknown field; did you mean queue?"]}
    assert not ValidationRun.objects.exists()
