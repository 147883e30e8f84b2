"""Who may write from the web UI: anyone browses; running a plan and validating need a signed-in
user; importing a model into the catalog needs staff, as the API's models/import does."""
from __future__ import annotations

import re
from pathlib import Path

from django.test import Client

from hwcatalog.models import ModelArch
from jobs.models import ValidationRun
from planner.models import Plan
from tests.frontend.conftest import CHAT_FORM, DANA_PASSWORD

HF_CONFIGS = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"


def test_anonymous_visitors_browse_every_page(anonymous_ui_client, chat_plan):
    pages = [
        "/", "/catalog/", "/plans/", f"/plans/{chat_plan.id}/", f"/plans/compare/?a={chat_plan.id}&b={chat_plan.id}",
        "/catalog/chips/nvidia-h100-sxm/", "/catalog/models/llama-3.1-70b/", "/catalog/compare/?chips=nvidia-h100-sxm,amd-epyc-9654",
        "/catalog/prices/", "/accounts/login/",
    ]  # fmt: skip
    assert {page: anonymous_ui_client.get(page).status_code for page in pages} == dict.fromkeys(pages, 200)


def test_the_form_tells_anonymous_visitors_to_sign_in_before_they_fill_it(anonymous_ui_client, catalog):
    html = anonymous_ui_client.get("/?model=qwen2.5-7b").content.decode()
    assert 'id="plan-submit"' not in html
    assert 'id="sign-in-to-plan"' in html and "Sign in to run a plan" in html
    assert 'href="/accounts/login/?next=/%3Fmodel%3Dqwen2.5-7b"' in html  # back to the same form after signing in
    assert 'id="sign-in"' in html and "Sign out" not in html  # the header's link


def test_an_anonymous_post_stores_nothing_and_imports_nothing(catalog):
    client = Client(enforce_csrf_checks=True)  # the CSRF token every visitor gets is not enough
    token = client.get("/").context["csrf_token"]
    models_before = ModelArch.objects.count()
    with (HF_CONFIGS / "mistral-7b-v0.1.json").open("rb") as f:
        response = client.post("/", {**CHAT_FORM, "model": "", "config_file": f, "import_name": "Anonymous Mistral",
                                     "csrfmiddlewaretoken": str(token)})  # fmt: skip
    assert response.status_code == 403
    html = response.content.decode()
    assert 'id="sign-in-required"' in html and "Sign in to run a plan." in html and "Nothing was stored." in html
    assert 'href="/accounts/login/?next=/"' in html
    assert 'value="1000"' in html  # the form comes back as it was filled
    assert Plan.objects.count() == 0
    assert ModelArch.objects.count() == models_before and not ModelArch.objects.filter(slug="anonymous-mistral").exists()


def test_an_anonymous_validation_queues_nothing_and_goes_to_sign_in(chat_plan):
    client = Client(enforce_csrf_checks=True)
    token = client.get("/").context["csrf_token"]  # the form page hands every visitor one
    response = client.post(f"/plans/{chat_plan.id}/validate/", {"rank": "1", "csrfmiddlewaretoken": str(token)})
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next=/plans/{chat_plan.id}/"  # back to the plan, not to a POST-only URL
    assert not ValidationRun.objects.exists()
    login_page = client.get(response["Location"]).content.decode()
    assert "Sign in to validate a configuration on a worker." in login_page


def test_the_plan_page_offers_anonymous_visitors_sign_in_instead_of_validate(anonymous_ui_client, chat_plan):
    html = anonymous_ui_client.get(f"/plans/{chat_plan.id}/").content.decode()
    assert "validate-submit" not in html and "validate-row" not in html
    assert f'href="/accounts/login/?next=/plans/{chat_plan.id}/"' in html and "Sign in to validate configuration 1" in html


def test_a_signed_in_user_plans(ui_client, dana, catalog):
    html = ui_client.get("/").content.decode()
    assert 'id="plan-submit"' in html and "Sign out (dana)" in html
    response = ui_client.post("/", CHAT_FORM)
    plan = Plan.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/plans/{plan.id}/"
    assert plan.created_by == dana


def test_a_signed_in_user_who_is_not_staff_cannot_import_a_model(ui_client, catalog):
    models_before = ModelArch.objects.count()
    form = ui_client.get("/").content.decode()
    assert 'id="import-needs-staff"' in form and 'id="id_config_file"' not in form
    with (HF_CONFIGS / "mistral-7b-v0.1.json").open("rb") as f:
        response = ui_client.post("/", {**CHAT_FORM, "model": "", "config_file": f, "import_name": "Team Mistral"})
    assert response.status_code == 200
    assert "needs a staff account" in response.context["errors"]["config_file"][0]
    assert 'id="err-config_file"' in response.content.decode()
    assert ModelArch.objects.count() == models_before and Plan.objects.count() == 0


def test_the_sign_in_page_signs_in_and_returns_to_next(dana, catalog):
    client = Client(enforce_csrf_checks=True)
    page = client.get("/accounts/login/?next=/plans/")
    assert page.status_code == 200
    html = page.content.decode()
    assert '<label for="id_username">' in html and 'type="password"' in html and 'name="next" value="/plans/"' in html
    assert 'id="sign-in"' not in html  # no "Sign in" link to itself in the header
    response = client.post("/accounts/login/", {"username": "dana", "password": DANA_PASSWORD, "next": "/plans/",
                                                "csrfmiddlewaretoken": str(page.context["csrf_token"])})  # fmt: skip
    assert response.status_code == 302 and response["Location"] == "/plans/"
    assert "Sign out (dana)" in client.get("/plans/").content.decode()


def test_a_wrong_password_or_an_inactive_user_is_refused_with_a_message(dana, db):
    response = Client().post("/accounts/login/", {"username": "dana", "password": "wrong"})
    assert response.status_code == 200 and 'id="login-errors"' in response.content.decode()
    dana.is_active = False
    dana.save()
    response = Client().post("/accounts/login/", {"username": "dana", "password": DANA_PASSWORD})
    assert response.status_code == 200 and "_auth_user_id" not in response.wsgi_request.session


def test_sign_in_refuses_a_next_on_another_site(dana, db):
    response = Client().post("/accounts/login/", {"username": "dana", "password": DANA_PASSWORD, "next": "https://evil.example/"})
    assert response.status_code == 302 and response["Location"] == "/"


def test_signing_out_is_a_post_and_ends_the_session(ui_client, catalog):
    html = ui_client.get("/catalog/").content.decode()
    assert re.search(r'<form method="post" action="/accounts/logout/" id="sign-out">', html)
    assert ui_client.get("/accounts/logout/").status_code == 405  # a link or an <img> cannot sign anyone out
    response = ui_client.post("/accounts/logout/")
    assert response.status_code == 302 and response["Location"] == "/"
    assert ui_client.post("/", CHAT_FORM).status_code == 403 and Plan.objects.count() == 0
