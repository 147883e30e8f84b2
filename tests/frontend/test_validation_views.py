from __future__ import annotations

import datetime as dt

from django.template.loader import render_to_string

from frontend import views
from jobs.models import ValidationRun


def _run(plan, **fields):
    defaults = dict(plan=plan, rank=1, configuration=plan.results["ranked"][0], model_slug=plan.model_slug, trial="decode", queue="cpu")
    return ValidationRun(**{**defaults, **fields})


def test_a_finished_run_shows_predicted_and_measured_side_by_side(chat_plan):
    run = _run(
        chat_plan, status="succeeded", progress_percent=100, device_name="cpu: test", matched_chip_slug="amd-epyc-9654",
        predicted={"tpot_s": 0.02, "mbu": 0.5}, measured={"tpot_s": 0.025, "mbu": 0.4}, error_percent={"tpot_s": 20.0, "mbu": 25.0},
        started_at=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), finished_at=dt.datetime(2026, 1, 1, 0, 1, tzinfo=dt.timezone.utc),
    )  # fmt: skip
    html = render_to_string("frontend/_validation.html", {"v": views.validation_context(run), "plan": chat_plan})
    assert "20 ms" in html and "25 ms" in html and "20.0%" in html and "50.0%" in html and "40.0%" in html
    assert "<progress" not in html and "cpu: test" in html


def test_a_failed_run_shows_its_reason_plainly(chat_plan):
    run = _run(chat_plan, status="failed", failure_reason="Out of memory allocating the KV cache.")
    html = render_to_string("frontend/_validation.html", {"v": views.validation_context(run), "plan": chat_plan})
    assert "The trial failed:" in html and "Out of memory allocating the KV cache." in html


def test_an_active_run_has_a_progress_bar_that_polls_the_api(chat_plan):
    run = _run(chat_plan, status="running", progress_percent=42, progress_message="decoding 42/100")
    html = render_to_string("frontend/_validation.html", {"v": views.validation_context(run), "plan": chat_plan})
    assert 'value="42"' in html and f'data-api="/api/v1/validations/{run.id}/"' in html and "decoding 42/100" in html


def test_validate_needs_a_post(ui_client, chat_plan):
    assert ui_client.get(f"/plans/{chat_plan.id}/validate/").status_code == 405


def test_validate_button_queues_a_run_and_the_page_shows_its_progress(ui_client, chat_plan):
    html = ui_client.get(f"/plans/{chat_plan.id}/").content.decode()
    assert "Validate</button>" in html
    response = ui_client.post(f"/plans/{chat_plan.id}/validate/", {"rank": "2"})
    assert response.status_code == 302 and "?rank=2#validation-" in response["Location"]
    from jobs.selectors import validation_run_list

    run = validation_run_list(plan=chat_plan).get()
    assert run.rank == 2 and run.trial == "decode" and run.queue == "cpu"
    assert run.created_by.username == "dana"
    page = ui_client.get(f"/plans/{chat_plan.id}/?rank=2").content.decode()
    assert f'id="validation-{run.id}"' in page and "<progress" in page
    fragment = ui_client.get(f"/plans/{chat_plan.id}/validations/{run.id}/")
    assert fragment.status_code == 200 and f'id="validation-{run.id}"' in fragment.content.decode()


def test_validate_with_a_bad_rank_shows_the_services_message(ui_client, chat_plan):
    response = ui_client.post(f"/plans/{chat_plan.id}/validate/", {"rank": "9999"}, follow=True)
    assert "Could not start a validation of configuration #9999" in response.content.decode()
