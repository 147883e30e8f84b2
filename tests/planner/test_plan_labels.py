"""Plans have a name and tags, and the list filters by model, tag, name, creation day, validation and owner
(issue 14, item 5). Who made a plan is shown to that user and to staff only."""
from __future__ import annotations

import datetime

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts.services import api_token_create
from jobs.models import ValidationRun
from planner.models import Plan, PlanTag
from tests.conftest import client_with_token

SMALL = {
    "model": "llama-3.2-1b",
    "workload": {"prompt_tokens": 200, "output_tokens": 100, "concurrency": 4},
    "hardware": {"kinds": ["gpu"], "max_chips": 8},
}


def _plan(client, **labels) -> dict:
    response = client.post("/api/v1/plans/", {**SMALL, **labels}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def _ids(client, query: str = "") -> list[str]:
    response = client.get(f"/api/v1/plans/{query}")
    assert response.status_code == 200, response.json()
    return [p["id"] for p in response.json()["results"]]


@pytest.fixture
def charlie_client(db):
    charlie = get_user_model().objects.create_user("charlie")
    return client_with_token(api_token_create(charlie, "charlie's script", "write")[1])


def test_a_plan_is_stored_with_its_name_and_tags_lower_case_once_each_and_not_in_its_inputs(catalog, token_client):
    plan = _plan(token_client, name="  Q3 chat fleet  ", tags=["Chat", "q3-procurement", "chat"])
    assert plan["name"] == "Q3 chat fleet" and plan["tags"] == ["chat", "q3-procurement"]
    assert plan["owner"] == "alice" and plan["validated"] is False
    assert "name" not in plan["inputs"] and "tags" not in plan["inputs"]  # the search's request, as before
    stored = Plan.objects.get(pk=plan["id"])
    assert stored.name == "Q3 chat fleet" and sorted(stored.tags.values_list("name", flat=True)) == ["chat", "q3-procurement"]


@pytest.mark.parametrize("labels, field", [
    ({"tags": ["no;semicolons"]}, "tags"),
    ({"tags": ["-leading-dash"]}, "tags"),
    ({"tags": ["x" * 41]}, "tags"),
    ({"tags": [f"t{i}" for i in range(11)]}, "tags"),
    ({"tags": "chat"}, "tags"),
    ({"name": "n" * 121}, "name"),
])  # fmt: skip
def test_a_bad_name_or_tag_is_a_400_naming_the_field_and_stores_nothing(catalog, token_client, labels, field):
    response = token_client.post("/api/v1/plans/", {**SMALL, **labels}, format="json")
    assert response.status_code == 400 and field in response.json()
    assert not Plan.objects.exists() and not PlanTag.objects.exists()


def test_the_list_filters_by_model_tag_name_day_and_validation(catalog, token_client, anonymous_client):
    chat = _plan(token_client, name="Chat fleet", tags=["chat"])["id"]
    batch = _plan(token_client, name="Nightly batch", tags=["batch", "q3"])["id"]
    other_model = token_client.post("/api/v1/plans/", {**SMALL, "model": "llama-3.1-8b", "tags": ["chat"]}, format="json").json()["id"]
    assert set(_ids(anonymous_client, "?tag=CHAT")) == {chat, other_model}  # tags match in any case
    assert _ids(anonymous_client, "?tag=chat&model=llama-3.2-1b") == [chat]
    assert _ids(anonymous_client, "?q=batch") == [batch]
    ValidationRun.objects.create(plan_id=batch, rank=1, configuration={}, model_slug="llama-3.2-1b", trial="decode",
                                 status=ValidationRun.Status.SUCCEEDED)  # fmt: skip
    ValidationRun.objects.create(plan_id=chat, rank=1, configuration={}, model_slug="llama-3.2-1b", trial="decode",
                                 status=ValidationRun.Status.FAILED)  # fmt: skip
    # A stand-in (a CPU worker measuring itself for an H100 plan) checks the physics, not the plan: not validated.
    ValidationRun.objects.create(plan_id=other_model, rank=1, configuration={}, model_slug="llama-3.1-8b", trial="decode",
                                 status=ValidationRun.Status.SUCCEEDED, stand_in=True)  # fmt: skip
    assert anonymous_client.get(f"/api/v1/plans/{other_model}/").json()["validated"] is False
    assert _ids(anonymous_client, "?validated=true") == [batch]
    assert set(_ids(anonymous_client, "?validated=false")) == {chat, other_model}
    assert anonymous_client.get(f"/api/v1/plans/{batch}/").json()["validated"] is True
    Plan.objects.filter(pk=chat).update(created_at=timezone.now() - datetime.timedelta(days=10))
    last_week = (timezone.now() - datetime.timedelta(days=7)).date().isoformat()
    assert chat not in _ids(anonymous_client, f"?created_after={last_week}")
    assert _ids(anonymous_client, f"?created_before={last_week}") == [chat]


@pytest.mark.parametrize("query, field", [("?validated=yes", "validated"), ("?created_after=last-week", "created_after"),
                                          ("?tag=" + "x" * 41, "tag")])  # fmt: skip
def test_a_bad_filter_is_a_400_naming_it(catalog, anonymous_client, query, field):
    response = anonymous_client.get(f"/api/v1/plans/{query}")
    assert response.status_code == 400 and field in response.json()


def test_owners_are_shown_to_themselves_and_to_staff_and_only_staff_filter_by_another_user(catalog, token_client, charlie_client,
                                                                                           staff_client, anonymous_client):  # fmt: skip
    alices = _plan(token_client)["id"]
    charlies = _plan(charlie_client)["id"]
    assert _ids(token_client, "?mine=true") == [alices] and _ids(token_client, "?mine=false") == [charlies]
    owners = {p["id"]: p["owner"] for p in token_client.get("/api/v1/plans/").json()["results"]}
    assert owners == {alices: "alice", charlies: None}  # not another user's name
    assert {p["owner"] for p in anonymous_client.get("/api/v1/plans/").json()["results"]} == {None}
    assert {p["owner"] for p in staff_client.get("/api/v1/plans/").json()["results"]} == {"alice", "charlie"}
    assert _ids(staff_client, "?owner=charlie") == [charlies]
    refused = token_client.get("/api/v1/plans/?owner=charlie")
    assert refused.status_code == 403 and refused.json()["detail"].startswith("owner: only staff") and "mine=true" in refused.json()["detail"]
    anonymous = anonymous_client.get("/api/v1/plans/?mine=true")
    assert anonymous.status_code == 401 and anonymous.json()["detail"].startswith("mine: sign in")


def test_the_creator_renames_and_retags_a_plan_and_nothing_else_of_it_changes(catalog, token_client):
    plan = _plan(token_client, name="draft", tags=["a", "b"])
    stored = Plan.objects.get(pk=plan["id"])
    response = token_client.patch(f"/api/v1/plans/{plan['id']}/", {"name": "Final", "tags": ["b", "C"]}, format="json")
    assert response.status_code == 200 and response.json()["name"] == "Final" and response.json()["tags"] == ["b", "c"]
    assert token_client.patch(f"/api/v1/plans/{plan['id']}/", {"pinned": True}, format="json").json()["tags"] == ["b", "c"]  # absent: unchanged
    after = Plan.objects.get(pk=plan["id"])
    assert (after.results, after.inputs, after.catalog_snapshot) == (stored.results, stored.inputs, stored.catalog_snapshot)
    assert token_client.patch(f"/api/v1/plans/{plan['id']}/", {"tags": []}, format="json").json()["tags"] == []


def test_someone_elses_plan_cannot_be_renamed_or_retagged_and_a_refused_change_changes_nothing(catalog, token_client, charlie_client):
    plan = _plan(token_client, name="mine", tags=["a"])
    refused = charlie_client.patch(f"/api/v1/plans/{plan['id']}/", {"name": "theirs", "tags": ["x"]}, format="json")
    assert refused.status_code == 403 and "rename or tag" in refused.json()["detail"] and "pin" not in refused.json()["detail"]
    assert "pin or unpin" in charlie_client.patch(f"/api/v1/plans/{plan['id']}/", {"pinned": True}, format="json").json()["detail"]
    assert charlie_client.patch(f"/api/v1/plans/{plan['id']}/", {}, format="json").status_code == 403  # an empty change is checked too
    bad = token_client.patch(f"/api/v1/plans/{plan['id']}/", {"pinned": True, "tags": ["ok", "not ok!"]}, format="json")
    assert bad.status_code == 400 and "tags" in bad.json()
    stored = Plan.objects.get(pk=plan["id"])
    assert (stored.name, list(stored.tags.values_list("name", flat=True)), stored.pinned) == ("mine", ["a"], False)


def test_manage_py_plan_names_and_tags_the_plan_it_stores(catalog, capsys):
    from django.core.management import call_command

    call_command("plan", model="llama-3.2-1b", prompt_tokens=200, output_tokens=100, concurrency=4, max_chips=4, top=1,
                 name="CLI plan", tag=["Chat", "batch"])  # fmt: skip
    plan = Plan.objects.get()
    assert plan.name == "CLI plan" and list(plan.tags.values_list("name", flat=True)) == ["chat", "batch"]
    assert f"plan {plan.id} (CLI plan):" in capsys.readouterr().out
