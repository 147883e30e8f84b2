"""A plan search above the inline size runs on a worker: the POST answers 202 with the plan's
address, the plan shows queued / running / done / failed and its progress, and the worker's
task fills in its results (nothing else of a stored plan changes)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from planner import services
from planner.models import Plan, PlanImmutable
from planner.serializers import PlanInputSerializer

TPU_PLAN = {
    "model": "llama-3.1-70b",
    "workload": {"prompt_tokens": 1000, "output_tokens": 300, "concurrency": 64, "tpot_slo_s": 0.05},
    "hardware": {"kinds": ["tpu", "gpu"], "max_chips": 16},
}


@pytest.fixture
def small_inline_size(settings):
    """Every search in these tests is 'big': the inline size is 10 candidates."""
    settings.PLAN_INLINE_MAX_CANDIDATES = 10


def _queued(token_client, django_capture_on_commit_callbacks, body=TPU_PLAN):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:  # nothing published
        response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 202, response.json()
    assert len(callbacks) == 1
    return response


def test_a_search_over_the_inline_size_is_queued_with_a_url_to_poll(catalog, token_client, small_inline_size, django_capture_on_commit_callbacks):
    response = _queued(token_client, django_capture_on_commit_callbacks)
    body = response.json()
    plan = Plan.objects.get(pk=body["id"])
    assert body["status"] == "queued" and body["progress"] == 0.0 and body["candidate_count"] == plan.candidate_count > 10
    assert body["url"].endswith(f"/api/v1/plans/{plan.id}/") and response["Location"] == body["url"]
    polled = token_client.get(body["url"]).json()
    assert polled["status"] == "queued" and polled["results"] == {} and polled["error"] == ""
    assert {c["slug"] for c in plan.catalog_snapshot["chips"]}  # its rows count as used while it waits


def test_the_task_fills_in_the_queued_plan_with_what_an_inline_search_finds(catalog, token_client, small_inline_size, django_capture_on_commit_callbacks):
    plan_id = _queued(token_client, django_capture_on_commit_callbacks).json()["id"]
    assert services.plan_execute(plan_id=plan_id) == "done"
    plan = Plan.objects.get(pk=plan_id)
    assert plan.status == "done" and plan.progress == 1.0 and plan.finished_at and plan.attempts == 1
    serializer = PlanInputSerializer(data=TPU_PLAN)
    serializer.is_valid(raise_exception=True)
    inline = services.plan_create(data=serializer.validated_data, raw_inputs=serializer.data, inline=True)
    assert plan.candidate_count == inline.candidate_count and plan.feasible_count == inline.feasible_count
    same = ("chip_slug", "chip_count", "tensor_parallel", "pipeline_parallel", "weight_dtype", "batch", "usd_per_million_output_tokens", "candidate_index")
    assert [[r[k] for k in same] for r in plan.results["ranked"]] == [[r[k] for k in same] for r in inline.results["ranked"]]
    assert plan.results["infeasible"] == inline.results["infeasible"]
    assert services.plan_execute(plan_id=plan_id) == "finished"  # a duplicate message does nothing


def test_a_done_plan_is_immutable_but_a_queued_one_takes_its_run_fields(catalog, token_client, small_inline_size, django_capture_on_commit_callbacks):
    plan = Plan.objects.get(pk=_queued(token_client, django_capture_on_commit_callbacks).json()["id"])
    plan.progress = 0.5
    plan.save(update_fields=["progress"])
    with pytest.raises(PlanImmutable):
        plan.model_slug = "something-else"
        plan.save(update_fields=["model_slug"])
    services.plan_execute(plan_id=str(plan.pk))
    plan.refresh_from_db()
    plan.results = {}
    with pytest.raises(PlanImmutable):
        plan.save(update_fields=["results"])
    plan.pinned = True
    plan.save(update_fields=["pinned"])


def test_a_search_that_fails_is_stored_failed_with_its_reason(catalog, token_client, small_inline_size, django_capture_on_commit_callbacks, monkeypatch):
    plan_id = _queued(token_client, django_capture_on_commit_callbacks).json()["id"]

    def broken(*args, **kwargs):
        raise MemoryError("no room")

    monkeypatch.setattr(services, "search_streamed", broken)
    assert services.plan_execute(plan_id=plan_id) == "failed"
    polled = token_client.get(f"/api/v1/plans/{plan_id}/").json()
    assert polled["status"] == "failed" and "MemoryError: no room" in polled["error"]


def test_a_running_plan_is_left_to_its_live_worker_and_taken_again_once_that_worker_is_lost(catalog, token_client, small_inline_size, django_capture_on_commit_callbacks):
    plan_id = _queued(token_client, django_capture_on_commit_callbacks).json()["id"]
    Plan.objects.filter(pk=plan_id).update(status="running", attempts=1, heartbeat_at=timezone.now())
    assert services.plan_claim(plan_id=plan_id) == "busy"
    Plan.objects.filter(pk=plan_id).update(heartbeat_at=timezone.now() - timedelta(seconds=services.PLAN_STALE_AFTER_S + 1))
    assert services.plan_execute(plan_id=plan_id) == "done"
    assert Plan.objects.get(pk=plan_id).attempts == 2


def test_a_plan_that_lost_its_worker_twice_fails_saying_so(catalog, token_client, small_inline_size, django_capture_on_commit_callbacks):
    plan_id = _queued(token_client, django_capture_on_commit_callbacks).json()["id"]
    stale = timezone.now() - timedelta(seconds=services.PLAN_STALE_AFTER_S + 1)
    Plan.objects.filter(pk=plan_id).update(status="running", attempts=2, heartbeat_at=stale)
    assert services.plan_execute(plan_id=plan_id) == "finished"
    plan = Plan.objects.get(pk=plan_id)
    assert plan.status == "failed" and "lost its worker 2 times" in plan.error


def test_a_broker_that_refuses_leaves_the_plan_queued_and_the_post_still_answers_202(catalog, token_client, small_inline_size, monkeypatch, django_capture_on_commit_callbacks):
    from planner.tasks import run_plan

    def refuse(*args, **kwargs):
        raise ConnectionError("broker down")

    monkeypatch.setattr(run_plan, "apply_async", refuse)
    with django_capture_on_commit_callbacks(execute=True):
        response = token_client.post("/api/v1/plans/", TPU_PLAN, format="json")
    assert response.status_code == 202
    plan = Plan.objects.get(pk=response.json()["id"])
    assert plan.status == "queued" and "waiting for the broker" in plan.error


def test_the_plan_page_of_a_queued_plan_says_it_is_waiting_and_polls_from_a_script_file(catalog, token_client, client, small_inline_size, django_capture_on_commit_callbacks):
    plan_id = _queued(token_client, django_capture_on_commit_callbacks).json()["id"]
    page = client.get(f"/plans/{plan_id}/").content.decode()
    assert "Waiting for a worker" in page and 'role="status"' in page and "<progress" in page
    assert "frontend/js/plan_status.js" in page and f'data-status-url="/api/v1/plans/{plan_id}/"' in page
    assert "<script>" not in page  # no inline script
    Plan.objects.filter(pk=plan_id).update(status="running", progress=0.4)
    assert "Running: 40.0%" in client.get(f"/plans/{plan_id}/").content.decode()
    Plan.objects.filter(pk=plan_id).update(status="failed", error="the search ran past its time limit (300 s); narrow it")
    failed = client.get(f"/plans/{plan_id}/").content.decode()
    assert "The search failed" in failed and "ran past its time limit" in failed and "plan_status.js" not in failed


def test_the_plan_form_sends_a_big_search_to_a_worker_and_shows_its_waiting_page(catalog, client, small_inline_size, django_capture_on_commit_callbacks):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_user("bob", password="bob-password-1234"))
    form = {"model": "llama-3.1-70b", "prompt_tokens": "1000", "output_tokens": "300", "concurrency": "64", "max_chips": "16"}
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post("/", form, follow=True)
    assert len(callbacks) == 1, response.content.decode()[-3000:]
    assert Plan.objects.get().status == "queued"
    assert "Waiting for a worker" in response.content.decode()
