"""End to end on a real Celery worker process (Redis + PostgreSQL in CI)."""
from __future__ import annotations

import os
import signal
import time

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from accounts.services import api_token_create
from hwcatalog.services import catalog_load
from frontend.validation_cards import what_ran
from jobs import routing
from jobs.models import ValidationRun
from jobs.services import validation_runs_recover
from planner.engine.calibration import MAX_RUN_SPREAD
from planner.models import Calibration
from tests.worker import WORKER_LOG, running_worker, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def client_and_plan():
    catalog_load()
    user = get_user_model().objects.create_user("carol")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user, 'worker tests', 'write')[1]}")
    plan = client.post("/api/v1/plans/", {
        "model": "llama-3.2-1b", "workload": {"prompt_tokens": 200, "output_tokens": 100, "concurrency": 4},
        "hardware": {"kinds": ["gpu"], "max_chips": 8},
    }, format="json").json()  # fmt: skip
    return client, plan


def _status(client, run_id):
    return client.get(f"/api/v1/validations/{run_id}/").json()


def test_a_cpu_decode_trial_runs_on_a_worker_and_calibrates_the_next_estimate(client_and_plan):
    client, plan = client_and_plan
    with running_worker():
        run = client.post(f"/api/v1/plans/{plan['id']}/validations/", {"rank": 1, "trial": "decode", "queue": "cpu"}, format="json").json()
        seen_progress = set()

        def finished():
            body = _status(client, run["id"])
            seen_progress.add(body["progress_percent"])
            return body if body["status"] in ("succeeded", "failed", "cancelled") else None

        body = wait_for(finished, timeout_s=240, interval_s=0.5)
        live = routing.live_queues()  # the worker's own step wrote the queues it consumes
    assert body is not None, WORKER_LOG.read_text()[-3000:]
    assert body["status"] == "succeeded", body["failure_reason"] + body["log_tail"]
    assert "cpu" in live
    assert body["stand_in"] is True and "a stand-in for" in what_ran(ValidationRun.objects.get(pk=run["id"]))  # a GPU row, run on a CPU
    assert len(seen_progress) >= 2  # progress was written while it ran
    assert body["matched_chip_slug"] and body["device_name"]
    for metric in ("ttft_s", "tpot_s", "tokens_per_s_per_user", "mbu", "mfu"):
        assert body["measured"][metric] > 0 and body["predicted"][metric] > 0
        assert metric in body["error_percent"]
    assert body["measured"]["scaled"]["layers_run"] == 2
    assert body["environment"]["torch_version"].startswith("2.13")

    # Whether this run may calibrate is the measurement's to say, not the test's: a run whose timed repetitions
    # spread past MAX_RUN_SPREAD measured a busy machine and is refused (issue 14, item 2). The flaky failure
    # (Calibration.DoesNotExist, about 1 in 4 on a loaded 2-core machine) was that refusal, asserted as an error.
    ran = body["measured"]["dtype"]  # fp32 as asked, or bf16 where the worker's memory could not hold fp32
    calibration = Calibration.objects.filter(chip_slug=body["matched_chip_slug"], weight_dtype=ran).first()
    estimate = client.post("/api/v1/estimates/", {"model": "llama-3.2-1b", "chip": body["matched_chip_slug"], "weight_dtype": ran,
                                                  "prompt_tokens": 32, "output_tokens": 17, "batch": 1}, format="json").json()  # fmt: skip
    if body["measured"]["tpot_spread"] <= MAX_RUN_SPREAD:
        assert calibration is not None and calibration.version == 1 and calibration.run_count == 1
        assert estimate["efficiency_source"] == "calibration v1 (1 runs)"
    else:
        assert calibration is None, f"a run spread {body['measured']['tpot_spread']:.0%} calibrated the chip"
        # what speaks for the chip without a calibration: its spec defaults, or its chip-family profile (a Xeon's)
        assert not estimate["efficiency_source"].startswith("calibration"), estimate["efficiency_source"]


def test_a_worker_killed_mid_trial_leaves_its_run_requeued_not_running(client_and_plan):
    client, plan = client_and_plan
    params = {"decode_steps": 400, "prompt_tokens": 16, "max_layers": 2}
    with running_worker() as worker:
        run = client.post(f"/api/v1/plans/{plan['id']}/validations/", {"queue": "cpu", "params": params}, format="json").json()
        assert wait_for(lambda: _status(client, run["id"])["status"] == "running", timeout_s=120), WORKER_LOG.read_text()[-3000:]
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
    time.sleep(3)
    assert validation_runs_recover(stale_after_s=2)["requeued"] == 1
    body = _status(client, run["id"])
    assert body["status"] == "queued" and body["attempts"] == 1
    assert "stopped answering" in body["progress_message"]
    # A second loss ends the run, failed with the reason, never stuck in "running".
    ValidationRun.objects.filter(pk=run["id"]).update(status="running", attempts=2)
    time.sleep(3)
    assert validation_runs_recover(stale_after_s=2)["failed"] == 1
    body = _status(client, run["id"])
    assert body["status"] == "failed" and "stopped answering" in body["failure_reason"]
