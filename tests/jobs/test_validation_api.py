from __future__ import annotations

import pytest

from jobs.models import ValidationRun


def test_a_token_holder_queues_a_validation_of_a_ranked_configuration(small_plan, token_client):
    response = token_client.post(f"/api/v1/plans/{small_plan.id}/validations/", {"rank": 1, "trial": "decode", "queue": "cpu"}, format="json")
    assert response.status_code == 201, response.json()
    run = response.json()
    assert run["status"] == "queued" and run["rank"] == 1 and run["queue"] == "cpu"
    assert run["params"]["dtype"] == "fp32" and run["params"]["max_layers"] == 2
    assert run["configuration"]["chip_slug"] == small_plan.results["ranked"][0]["chip_slug"]
    listed = token_client.get(f"/api/v1/plans/{small_plan.id}/validations/").json()
    assert [r["id"] for r in listed["results"]] == [run["id"]]
    assert token_client.get("/api/v1/validations/", {"status": "queued"}).json()["results"][0]["id"] == run["id"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"rank": 0}, "rank"),
        ({"rank": 100_000}, "rank"),
        ({"trial": "training"}, "trial"),
        ({"queue": "tpu"}, "queue"),
        ({"params": {"batch": 0}}, "params"),
        ({"params": {"decode_steps": "many"}}, "params"),
        ({"params": {"max_layers": 1000, "prompt_tokens": 30000, "decode_steps": 4000, "batch": 256}}, "params"),
        ({"params": {"dtype": "int4"}}, "params"),
        ({"params": {"surprise": 1}}, "params"),
        ({"trial": "block_diffusion", "params": "nope"}, "params"),
    ],
)
def test_a_bad_validation_request_gets_400_naming_the_field_and_stores_nothing(small_plan, token_client, body, field):
    response = token_client.post(f"/api/v1/plans/{small_plan.id}/validations/", {"queue": "cpu", **body}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert not ValidationRun.objects.exists()


def test_an_anonymous_validation_request_gets_401(small_plan, anonymous_client):
    assert anonymous_client.post(f"/api/v1/plans/{small_plan.id}/validations/", {}, format="json").status_code == 401
    assert not ValidationRun.objects.exists()


def test_an_unknown_plan_or_run_is_404(db, token_client):
    missing = "00000000-0000-0000-0000-000000000000"
    assert token_client.post(f"/api/v1/plans/{missing}/validations/", {}, format="json").status_code == 404
    assert token_client.get(f"/api/v1/validations/{missing}/").status_code == 404
    assert token_client.get("/api/v1/validations/", {"plan": "not-a-uuid"}).json()["results"] == []


def test_a_queued_run_can_be_cancelled_once(small_plan, token_client):
    run_id = token_client.post(f"/api/v1/plans/{small_plan.id}/validations/", {"queue": "cpu"}, format="json").json()["id"]
    response = token_client.post(f"/api/v1/validations/{run_id}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    again = token_client.post(f"/api/v1/validations/{run_id}/cancel/")
    assert again.status_code == 400 and "status" in again.json()


def test_a_diffusion_model_cannot_get_a_speculative_trial(catalog, token_client):
    from planner.serializers import PlanInputSerializer
    from planner.services import plan_create

    serializer = PlanInputSerializer(data={"model": "llada-8b", "workload": {"prompt_tokens": 100, "output_tokens": 64, "concurrency": 1},
                                           "hardware": {"chips": ["nvidia-h100-sxm"], "max_chips": 1}})  # fmt: skip
    serializer.is_valid(raise_exception=True)
    plan = plan_create(data=serializer.validated_data, raw_inputs=serializer.data)
    response = token_client.post(f"/api/v1/plans/{plan.id}/validations/", {"trial": "speculative"}, format="json")
    assert response.status_code == 400 and "trial" in response.json()
