"""The fleet pages: /fleets/ (the stored fleet plans and the form that plans one) and /fleets/<id>/
(the allocation, its charts and tables). The form goes through the API's serializer and service."""
from __future__ import annotations

import uuid

import pytest
from django.http import QueryDict

from frontend import charts, forms
from frontend.templatetags.hwformat import usd
from planner.models import FleetPlan
from tests.frontend.test_csp import inline_code

# Two classes on GPUs of up to 8 chips (each chip under every fitted engine that runs on it: about 104,000
# configurations in all), a fleet the request plans inline in about a second with the inline limit raised (inline_fleets below).
FLEET_FORM = {
    "model": "llama-3.1-8b", "name": "two classes", "kinds": ["gpu"], "max_chips": "8", "ownership": "any", "apply_to": "owned",
    "months": "1", "monthly_growth": "0",
    "class-0-name": "chat", "class-0-prompt_tokens": "1000", "class-0-output_tokens": "300", "class-0-requests_per_s": "5",
    "class-0-ttft_slo_s": "0.5", "class-0-tpot_slo_s": "0.05",
    "class-1-name": "batch", "class-1-prompt_tokens": "4000", "class-1-output_tokens": "500", "class-1-requests_per_s": "2",
    "class-1-interruptible": "on",
}  # fmt: skip
# Chips whose power the catalog gives, so a power cap counts every replica.
POWERED_CHIPS = ["nvidia-h100-sxm", "nvidia-l40s"]


@pytest.fixture(autouse=True)
def inline_fleets(settings):
    settings.FLEET_INLINE_MAX_CANDIDATES = 200_000


def table_of(html: str, table_id: str) -> str:
    start = html.index(f'id="{table_id}"')
    return html[start:html.index("</table>", start)]


def post(**values) -> QueryDict:
    q = QueryDict(mutable=True)
    for key, value in values.items():
        q.setlist(key, value if isinstance(value, list) else [value])
    return q


@pytest.fixture
def planned(ui_client, catalog):
    """Dana plans the two-class fleet through the form; returns (response, fleet)."""
    response = ui_client.post("/fleets/", FLEET_FORM)
    return response, FleetPlan.objects.get()


def test_the_fleets_page_says_there_are_none_yet_and_offers_the_form(ui_client, catalog):
    response = ui_client.get("/fleets/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="no-fleets"' in html and 'id="fleet-form"' in html and 'name="csrfmiddlewaretoken"' in html
    assert 'value="llama-3.1-8b" selected' in html
    assert 'name="class-0-requests_per_s" value="5"' in html and 'name="class-4-name" value=""' in html
    for field in ("wall_kw_max", "racks_max", "rack_kw_max", "systems_per_rack", "months", "monthly_growth", "hourly_shape", "max_chips"):
        assert f'name="{field}"' in html, field
    assert 'name="apply_to" value="all"' in html and 'name="kinds" value="gpu"' in html


def test_the_site_navigation_links_to_the_fleets(ui_client, catalog):
    html = ui_client.get("/").content.decode()
    assert '<a href="/fleets/">Fleets</a>' in html
    assert '<a href="/fleets/" aria-current="page">Fleets</a>' in ui_client.get("/fleets/").content.decode()


def test_a_small_fleet_is_planned_and_its_page_shows_the_allocation_and_the_chart(planned, ui_client, dana):
    response, fleet = planned
    assert response.status_code == 302 and response["Location"] == f"/fleets/{fleet.id}/"
    assert fleet.status == "done" and fleet.created_by == dana and fleet.name == "two classes"
    assert fleet.inputs["classes"][1]["interruptible"] is True and fleet.inputs["hardware"]["kinds"] == ["gpu"]
    page = ui_client.get(response["Location"])
    assert page.status_code == 200
    html = page.content.decode()
    allocation = fleet.results["allocation"]
    assert table_of(html, "allocation-table").count("<tr>") == 1 + len(allocation)  # the header and one row per configuration
    assert all(row["offering"] in html and row["configuration"] in html for row in allocation)
    assert '<svg class="chart" id="fleet-usd-chart"' in html and '<svg class="chart" id="fleet-replicas-chart"' in html
    assert html.count('<rect class="bar series-') >= 2 * len({(r["class"], r["chip_slug"]) for r in allocation})
    assert "$/month" in html and "req/s" in html and "kW" in html
    assert 'id="fleet-headline"' in html and "$ per 1M output tokens" in html
    best = fleet.results["best_single_chip"]
    assert best["chip_slug"] in html and 'id="mix-saving"' in html
    assert f'href="/api/v1/fleets/{fleet.id}/export.csv"' in html and f'href="/api/v1/fleets/{fleet.id}/"' in html
    assert 'id="singles-table"' in html and 'id="rent-or-buy-table"' in html and 'id="months-table"' not in html


def test_a_fleet_whose_time_budget_left_analyses_out_says_which(planned, ui_client):
    _, fleet = planned
    skipped = {**fleet.results, "best_single_chip": None, "skipped_analyses": ["what each limit costs", "the single-chip fleets"]}
    FleetPlan.objects.filter(pk=fleet.pk).update(results=skipped)  # as a plan short of time stores it (a stored plan is immutable)
    html = ui_client.get(f"/fleets/{fleet.id}/").content.decode()
    assert 'id="fleet-skipped"' in html and "what each limit costs; the single-chip fleets" in html
    assert "single-chip fleets not all compared" in html and "no single chip can serve every class" not in html


def test_the_list_shows_each_fleet_with_its_model_status_and_first_month_cost(planned, ui_client):
    _response, fleet = planned
    html = ui_client.get("/fleets/").content.decode()
    row = html[html.index('id="fleets-table"'):]
    assert f'href="/fleets/{fleet.id}/">two classes</a>' in row and "llama-3.1-8b" in row and "Done" in row
    assert usd(fleet.usd_per_month) in row


def test_a_bad_value_shows_its_field_error_and_stores_nothing(ui_client, catalog):
    response = ui_client.post("/fleets/", {**FLEET_FORM, "class-1-prompt_tokens": "abc", "months": "0", "hourly_shape": "1, x"})
    assert response.status_code == 200
    errors = response.context["errors"]
    assert errors["class-1-prompt_tokens"] == ["A valid integer is required."]
    assert "greater than or equal to 1" in errors["months"][0] and "hourly_shape" in errors
    html = response.content.decode()
    assert 'id="err-class-1-prompt_tokens"' in html and 'aria-invalid="true" aria-describedby="err-class-1-prompt_tokens"' in html
    assert 'value="abc"' in html  # what was typed is kept
    assert FleetPlan.objects.count() == 0


def test_an_error_reaches_the_row_it_was_typed_in_when_a_row_above_is_empty(ui_client, catalog):
    moved = {key.replace("class-1-", "class-3-"): value for key, value in FLEET_FORM.items()}
    response = ui_client.post("/fleets/", {**moved, "class-3-output_tokens": "0"})
    assert "greater than or equal to 1" in response.context["errors"]["class-3-output_tokens"][0]
    assert FleetPlan.objects.count() == 0


def test_a_fleet_with_no_class_says_so_on_the_classes(ui_client, catalog):
    empty = {key: value for key, value in FLEET_FORM.items() if not key.startswith("class-")}
    response = ui_client.post("/fleets/", empty)
    assert response.status_code == 200 and "classes" in response.context["errors"]
    assert 'id="err-classes"' in response.content.decode() and FleetPlan.objects.count() == 0


def test_an_impossible_power_cap_names_the_binding_limit_and_stores_nothing(ui_client, catalog):
    data = {**FLEET_FORM, "kinds": [], "chips": POWERED_CHIPS, "wall_kw_max": "0.1", "apply_to": "all"}
    response = ui_client.post("/fleets/", data)
    assert response.status_code == 200
    message = response.context["errors"]["wall_kw_max"][0]
    assert "the binding limit is power (wall_kw_max 0.1 kW)" in message
    html = response.content.decode()
    assert 'id="err-wall_kw_max"' in html and "binding limit is power" in html
    assert FleetPlan.objects.count() == 0


def test_a_three_month_fleet_shows_the_month_by_month_plan(ui_client, catalog):
    response = ui_client.post("/fleets/", {**FLEET_FORM, "months": "3", "monthly_growth": "0.5"})
    fleet = FleetPlan.objects.get()
    assert response.status_code == 302 and fleet.inputs["horizon"] == {"months": 3, "monthly_growth": 0.5}
    html = ui_client.get(f"/fleets/{fleet.id}/").content.decode()
    table = table_of(html, "months-table")
    assert table.count("<tr>") == 1 + 3 and ">2.25<" in table  # the header and three months; month 3 at 1.5^2
    assert '<svg class="chart" id="fleet-month-chart"' in html and "<polyline" in html
    assert html.count('<rect class="bar series-0"', html.index('id="fleet-month-chart"')) >= 3


def test_a_queued_fleet_shows_a_page_that_checks_by_itself(ui_client, catalog):
    fleet = FleetPlan.objects.create(model_slug="llama-3.1-8b", inputs={"model": "llama-3.1-8b"}, status=FleetPlan.Status.QUEUED,
                                     progress=0.0, candidate_count=2_000_000)  # fmt: skip
    html = ui_client.get(f"/fleets/{fleet.id}/").content.decode()
    assert "Waiting for a worker" in html and f'data-status-url="/api/v1/fleets/{fleet.id}/"' in html
    assert "/static/frontend/js/plan_status.js" in html and "2,000,000" in html


def test_a_failed_fleet_shows_its_error(ui_client, catalog):
    fleet = FleetPlan.objects.create(model_slug="llama-3.1-8b", inputs={"model": "llama-3.1-8b"}, status=FleetPlan.Status.FAILED,
                                     error="No fleet serves every class's rate within the limits: the binding limit is racks (racks_max 1).")  # fmt: skip
    html = ui_client.get(f"/fleets/{fleet.id}/").content.decode()
    assert 'id="fleet-error"' in html and "the binding limit is racks (racks_max 1)" in html
    assert "plan_status.js" not in html


def test_an_unknown_fleet_is_404(ui_client, db):
    assert ui_client.get(f"/fleets/{uuid.uuid4()}/").status_code == 404
    assert ui_client.get("/fleets/not-a-uuid/").status_code == 404


def test_a_visitor_who_is_not_signed_in_sees_the_fleets_but_cannot_plan_one(anonymous_ui_client, catalog):
    assert anonymous_ui_client.get("/fleets/").status_code == 200
    response = anonymous_ui_client.post("/fleets/", FLEET_FORM)
    assert response.status_code == 403 and 'id="sign-in-required"' in response.content.decode()
    assert FleetPlan.objects.count() == 0


def test_the_fleet_pages_run_no_inline_code(planned, ui_client):
    _response, fleet = planned
    for path in ("/fleets/", f"/fleets/{fleet.id}/"):
        response = ui_client.get(path)
        assert "script-src 'self'" in response["Content-Security-Policy"] and inline_code(response.content.decode()) == [], path


def test_the_payload_leaves_empty_rows_out_and_remembers_which_row_each_class_came_from():
    payload, rows = forms.fleet_payload(post(
        model="m", **{"class-0-name": "a", "class-0-requests_per_s": "1", "class-2-name": "b", "class-2-prompt_tokens": "10",
                      "class-2-interruptible": "on"},
        wall_kw_max="50", months="2", hourly_shape="0.5, 1,2", kinds=["gpu"], max_chips="8",
    ))  # fmt: skip
    assert payload["classes"] == [{"name": "a", "requests_per_s": "1", "interruptible": False},
                                  {"name": "b", "prompt_tokens": "10", "interruptible": True}]  # fmt: skip
    assert rows == [0, 2]
    assert payload["limits"] == {"wall_kw_max": "50", "apply_to": "owned"} and payload["hardware"] == {"kinds": ["gpu"], "max_chips": "8"}
    assert payload["horizon"] == {"months": "2", "hourly_shape": ["0.5", "1", "2"]}
    errors = forms.fleet_form_errors({"classes": [{}, {"prompt_tokens": ["Too small."]}], "limits": {"non_field_errors": ["Both."]}}, rows)
    assert errors == {"class-2-prompt_tokens": ["Too small."], "limits": ["Both."]}
    assert forms.fleet_form_errors({"hardware": {"chips": {0: ["No chip."]}}, "limits": {"chips": ["Bad slug."]}}, rows) == {
        "chips": ["No chip."], "limits": ["Bad slug."]}  # a chip's supply limit is not the hardware's chip list
    assert forms.fleet_refused_field("wall_kw_max") == "wall_kw_max" and forms.fleet_refused_field("chips") == "limits"


def test_chart_axes_run_from_zero_in_round_steps():
    assert charts.nice_axis(730) == [0, 200, 400, 600, 800]
    assert charts.nice_axis(9) == [0, 2.5, 5, 7.5, 10] and charts.nice_axis(0) == [0, 1]
