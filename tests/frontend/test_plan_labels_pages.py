"""A plan's name and tags in the web UI: given on the plan form, shown on its page and in the list, changed by
its creator; the plans list filters as the API does (issue 14, item 5)."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.test import Client

from jobs.models import ValidationRun
from planner.models import Plan, PlanTag

from .conftest import CHAT, CHAT_FORM, make_plan

SMALL = {"model": "llama-3.2-1b", "workload": {"prompt_tokens": 200, "output_tokens": 100, "concurrency": 4}, "hardware": {"max_chips": 8}}


def test_the_plan_form_stores_a_name_and_tags_shown_on_the_plans_page(ui_client, catalog):
    response = ui_client.post("/", {**CHAT_FORM, "name": "Chat on rented GPUs", "tags": "Chat, q3-procurement, chat"})
    plan = Plan.objects.get()
    assert response.status_code == 302 and plan.name == "Chat on rented GPUs"
    assert list(plan.tags.values_list("name", flat=True)) == ["chat", "q3-procurement"]
    html = ui_client.get(f"/plans/{plan.id}/").content.decode()
    assert '<span id="plan-name">Chat on rented GPUs</span>' in html
    assert 'href="/plans/?tag=q3-procurement">q3-procurement</a>' in html and 'id="labels-edit"' in html  # hers to change


def test_a_bad_tag_on_the_plan_form_is_shown_beside_its_field_and_nothing_is_stored(ui_client, catalog):
    response = ui_client.post("/", {**CHAT_FORM, "tags": "ok, not ok!"})
    assert response.status_code == 200 and "tags" in response.context["errors"]
    assert 'id="err-tags"' in response.content.decode() and not Plan.objects.exists()


def test_the_plans_list_shows_names_tags_and_validation_and_filters_them(anonymous_ui_client, catalog):
    chat, batch = make_plan({**CHAT, "name": "Chat", "tags": ["chat"]}), make_plan({**SMALL, "name": "Batch", "tags": ["batch"]})
    ValidationRun.objects.create(plan=batch, rank=1, configuration={}, model_slug="llama-3.2-1b", trial="decode",
                                 status=ValidationRun.Status.SUCCEEDED)  # fmt: skip
    page = anonymous_ui_client.get("/plans/")
    assert [p.id for p in page.context["page"].object_list] == [batch.id, chat.id]
    html = page.content.decode()
    assert ">Chat</a>" in html and 'href="?tag=batch">batch</a>' in html and "✓ yes" in html
    assert [p.id for p in anonymous_ui_client.get("/plans/?tag=chat&model=&q=").context["page"].object_list] == [chat.id]  # empty fields: no filter
    assert [p.id for p in anonymous_ui_client.get("/plans/?validated=true").context["page"].object_list] == [batch.id]
    assert [p.id for p in anonymous_ui_client.get("/plans/?model=llama-3.1-70b").context["page"].object_list] == [chat.id]
    none = anonymous_ui_client.get("/plans/?tag=nothing")
    assert 'id="no-plans"' in none.content.decode() and "No plan matches these filters" in none.content.decode()


def test_a_bad_filter_is_a_400_page_that_says_which(anonymous_ui_client, catalog):
    make_plan(SMALL)
    response = anonymous_ui_client.get("/plans/?created_after=yesterday")
    assert response.status_code == 400 and 'id="err-created_after"' in response.content.decode()
    response = anonymous_ui_client.get("/plans/?mine=true")
    assert response.status_code == 401 and 'id="filters-refused"' in response.content.decode() and "mine: sign in" in response.content.decode()


def test_whose_plans_filter_and_the_owner_column(ui_client, dana, catalog):
    hers = make_plan(SMALL)
    Plan.objects.filter(pk=hers.pk).update(created_by=dana)
    theirs = make_plan(SMALL)
    mine = ui_client.get("/plans/?mine=true")
    assert [p.id for p in mine.context["page"].object_list] == [hers.id] and "<td>you</td>" in mine.content.decode()
    assert [p.id for p in ui_client.get("/plans/?mine=false").context["page"].object_list] == [theirs.id]


def test_the_creator_renames_and_retags_a_plan_from_its_page_and_no_one_else_can(ui_client, dana, catalog):
    plan = make_plan({**SMALL, "name": "draft", "tags": ["a"]})
    Plan.objects.filter(pk=plan.pk).update(created_by=dana)
    response = ui_client.post(f"/plans/{plan.id}/labels/", {"name": "Final", "tags": "b, c"})
    assert response.status_code == 302 and response["Location"] == f"/plans/{plan.id}/"
    plan.refresh_from_db()
    assert plan.name == "Final" and list(plan.tags.values_list("name", flat=True)) == ["b", "c"]
    erin = get_user_model().objects.create_user("erin")
    other = Client()
    other.force_login(erin)
    assert 'id="labels-edit"' not in other.get(f"/plans/{plan.id}/").content.decode()
    refused = other.post(f"/plans/{plan.id}/labels/", {"name": "Mine now", "tags": ""}, follow=True)
    assert "Only the user who created this plan, or staff, may rename or tag it." in refused.content.decode()
    bad = ui_client.post(f"/plans/{plan.id}/labels/", {"name": "x", "tags": "fine, not fine!"}, follow=True)
    assert "Name and tags not saved: tags:" in bad.content.decode()
    plan.refresh_from_db()
    assert plan.name == "Final" and sorted(PlanTag.objects.filter(plan=plan).values_list("name", flat=True)) == ["b", "c"]
