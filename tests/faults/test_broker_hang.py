"""A broker that accepts connections but never answers (a stopped redis-server): a validation
POST still answers in seconds, 202 with the run stored and queued for the recovery sweep; never
a 500 after the run was stored (a client that retried one made a duplicate run)."""
from __future__ import annotations

import signal
import time

import pytest

from jobs.models import ValidationRun
from tests.faults.conftest import SMALL_PLAN, private_redis
from tests.worker import running_web

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_hung_broker_gives_202_in_seconds_and_the_run_waits_for_the_sweep(api):
    with private_redis() as redis_server:
        with running_web(extra_env={"REDIS_URL": redis_server.url}) as web:
            plan = api.post(f"{web}/api/v1/plans/", json=SMALL_PLAN, timeout=60).json()
            validate = f"{web}/api/v1/plans/{plan['id']}/validations/"
            assert api.post(validate, json={"rank": 1, "trial": "decode", "queue": "cpu"}, timeout=30).status_code == 201
            redis_server.process.send_signal(signal.SIGSTOP)
            try:
                started = time.monotonic()
                hung = api.post(validate, json={"rank": 1, "trial": "decode", "queue": "cpu"}, timeout=60)
                answer_s = time.monotonic() - started
            finally:
                redis_server.process.send_signal(signal.SIGCONT)
    print(f"validation POST with the broker hung: {hung.status_code} in {answer_s:.1f} s")
    assert hung.status_code == 202, hung.text
    assert answer_s < 10  # gunicorn's timeout is 30 s: well inside it (measured 7.2 s: the throttle cache 1 s, two publish tries 2 s each)
    run = ValidationRun.objects.get(pk=hung.json()["id"])
    assert run.status == "queued" and run.sent_at is None and "waiting for the broker" in run.progress_message
