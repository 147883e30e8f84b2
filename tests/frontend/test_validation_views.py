from __future__ import annotations

import datetime as dt

from django.template.loader import render_to_string

from frontend import validation_cards, views
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
    html = render_to_string("frontend/_validation.html", {"v": validation_cards.validation_context(run), "plan": chat_plan})
    assert "20 ms" in html and "25 ms" in html and "50.0%" in html and "40.0%" in html
    # Which side each prediction fell on: TPOT predicted 20 ms against 25 measured is low, MBU 50% against 40% high.
    assert "20.0% low" in html and "25.0% high" in html
    assert "<progress" not in html and "cpu: test" in html


def test_a_failed_run_shows_its_reason_plainly(chat_plan):
    run = _run(chat_plan, status="failed", failure_reason="Out of memory allocating the KV cache.")
    html = render_to_string("frontend/_validation.html", {"v": validation_cards.validation_context(run), "plan": chat_plan})
    assert "The trial failed:" in html and "Out of memory allocating the KV cache." in html


def test_an_active_run_has_a_progress_bar_that_polls_the_api(chat_plan):
    run = _run(chat_plan, status="running", progress_percent=42, progress_message="decoding 42/100")
    html = render_to_string("frontend/_validation.html", {"v": validation_cards.validation_context(run), "plan": chat_plan})
    assert 'value="42"' in html and f'data-api="/api/v1/validations/{run.id}/"' in html and "decoding 42/100" in html


def test_validate_needs_a_post(ui_client, chat_plan):
    assert ui_client.get(f"/plans/{chat_plan.id}/validate/").status_code == 405


def test_validate_links_to_a_form_with_the_trial_parameters_and_the_queues(ui_client, chat_plan):
    html = ui_client.get(f"/plans/{chat_plan.id}/").content.decode()
    assert 'href="?rank=2#validate"' in html and "validate-row" in html
    form = ui_client.get(f"/plans/{chat_plan.id}/?rank=2").content.decode()
    assert "Validate configuration #2" in form and 'name="rank" value="2"' in form
    for field in ("trial", "queue", "dtype", "batch", "prompt_tokens", "decode_steps", "max_layers", "repetitions"):
        assert f'name="{field}"' in form, field
    # No worker serves the row's GPU: the form says so and offers the CPU queue as a stand-in, named as one.
    assert "No worker serves" in form and "(queue gpu:" in form and "a stand-in for" in form
    assert 'option value="" selected disabled>Choose a worker queue' in form  # no stand-in is chosen for the user


def test_validate_queues_a_run_on_the_chosen_stand_in_with_its_parameters(ui_client, chat_plan):
    response = ui_client.post(f"/plans/{chat_plan.id}/validate/", {
        "rank": "2", "trial": "decode", "queue": "cpu", "dtype": "bf16", "prompt_tokens": "24", "decode_steps": "8", "batch": "",
    })  # fmt: skip
    assert response.status_code == 302 and "?rank=2#validation-" in response["Location"]
    from jobs.selectors import validation_run_list

    run = validation_run_list(plan=chat_plan).get()
    assert run.rank == 2 and run.trial == "decode" and run.queue == "cpu" and run.stand_in
    assert run.params["dtype"] == "bf16" and run.params["prompt_tokens"] == 24 and run.params["decode_steps"] == 8 and run.params["batch"] == 1
    assert run.created_by.username == "dana"
    page = ui_client.get(f"/plans/{chat_plan.id}/?rank=2").content.decode()
    assert f'id="validation-{run.id}"' in page and "<progress" in page and "stand-in for" in page
    fragment = ui_client.get(f"/plans/{chat_plan.id}/validations/{run.id}/")
    assert fragment.status_code == 200 and f'id="validation-{run.id}"' in fragment.content.decode()


def test_validate_with_no_queue_and_no_worker_for_the_chip_asks_for_a_stand_in(ui_client, chat_plan):
    response = ui_client.post(f"/plans/{chat_plan.id}/validate/", {"rank": "1", "queue": ""}, follow=True)
    text = response.content.decode()
    assert "Could not start a validation of configuration #1" in text and "No worker serves" in text
    assert not ValidationRun.objects.exists()


def test_validate_with_a_parameter_that_is_not_a_number_names_it(ui_client, chat_plan):
    response = ui_client.post(f"/plans/{chat_plan.id}/validate/", {"rank": "1", "queue": "cpu", "batch": "many"}, follow=True)
    assert "batch must be a whole number" in response.content.decode()
    assert not ValidationRun.objects.exists()


def test_validate_with_a_bad_rank_shows_the_services_message(ui_client, chat_plan):
    response = ui_client.post(f"/plans/{chat_plan.id}/validate/", {"rank": "9999"}, follow=True)
    assert "Could not start a validation of configuration #9999" in response.content.decode()


def test_the_ranking_pages_its_rows_and_opens_on_the_page_of_the_selected_one(ui_client, chat_plan):
    import re

    ranked = len(chat_plan.results["ranked"])
    assert ranked > views.RANKING_PER_PAGE  # the fixture ranks 100
    pages = -(-ranked // views.RANKING_PER_PAGE)

    def ranks(html):
        return [int(r) for r in re.findall(r'<tr class="selectable[^"]*" data-rank="(\d+)"', html)]

    first = ui_client.get(f"/plans/{chat_plan.id}/?view=all").content.decode()
    assert ranks(first) == list(range(1, views.RANKING_PER_PAGE + 1))
    assert f"Page 1 of {pages}" in first and 'rel="next"' in first
    second = ui_client.get(f"/plans/{chat_plan.id}/?view=all&page=2").content.decode()
    assert ranks(second) == list(range(views.RANKING_PER_PAGE + 1, 2 * views.RANKING_PER_PAGE + 1))
    selected = ui_client.get(f"/plans/{chat_plan.id}/?view=all&rank={2 * views.RANKING_PER_PAGE + 3}").content.decode()
    assert 2 * views.RANKING_PER_PAGE + 3 in ranks(selected) and f"Page 3 of {pages}" in selected
    # The best-per-chip view pages chips, each chip's other rows kept with it (hidden until expanded).
    chips = list(dict.fromkeys(r["chip_slug"] for r in chat_plan.results["ranked"]))[: views.RANKING_PER_PAGE]
    on_first_page = [i for i, r in enumerate(chat_plan.results["ranked"], start=1) if r["chip_slug"] in chips]
    best = ui_client.get(f"/plans/{chat_plan.id}/").content.decode()
    assert ranks(best) == on_first_page


def test_a_page_of_waiting_cards_reads_the_workers_state_once(monkeypatch):
    """Each read of the workers' health or live queues is a query: a plan page with many queued runs asks once."""
    import uuid
    from types import SimpleNamespace

    from frontend import validation_cards as cards

    calls = {"health": 0, "queues": 0}

    def health():
        calls["health"] += 1
        return {"problems": ["The beat has not run for 10 minutes."]}

    def queues():
        calls["queues"] += 1
        return {"cpu"}

    monkeypatch.setattr(cards.jobs_selectors, "jobs_health", health)
    monkeypatch.setattr(cards.jobs_routing, "live_queues", queues)
    runs = [SimpleNamespace(id=uuid.uuid4(), trial="decode", status="queued", queue=queue, predicted={}, measured={}, error_percent={},
                            device_name="", params={}, configuration={}) for queue in ("cpu", "gpu", "gpu")]  # fmt: skip
    contexts = cards.validation_contexts(runs)
    assert calls == {"health": 1, "queues": 1}
    assert all("The beat has not run for 10 minutes." in c["jobs_problems"] for c in contexts)
    assert [any("No worker serves the gpu queue" in p for p in c["jobs_problems"]) for c in contexts] == [False, True, True]
