"""A trial's success and the calibration refitted from it are committed together: a client that sees
the run succeeded also sees the calibration (the race behind issue 14's flaky worker test, where the
run was committed "succeeded" first and the refit a moment later)."""

from __future__ import annotations

import sys
import threading
import types

import pytest
from django.db import connection

import jobs
from hwcatalog.models import Chip
from jobs import services
from jobs.models import ValidationRun

pytestmark = pytest.mark.django_db(transaction=True)


def seen_from_another_connection(run_id) -> str:
    """The run's status as another client (its own thread, so its own database connection) reads it."""
    seen = {}

    def read():
        try:
            seen["status"] = ValidationRun.objects.get(pk=run_id).status
        finally:
            connection.close()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join(timeout=30)
    return seen["status"]


@pytest.fixture
def trial_that_succeeds(catalog, monkeypatch):
    """A decode run on the CPU whose trial (jobs.runner, torch) is replaced by a fixed outcome."""
    chip = Chip.objects.get(slug="nvidia-h100-sxm")
    outcome = types.SimpleNamespace(chip=chip, measured={"tpot_s": 0.01, "ttft_s": 0.1}, device_name="test device", environment={},
                                    layers_run=2)  # fmt: skip
    runner = types.SimpleNamespace(run_trial=lambda *, run, progress: outcome)
    monkeypatch.setitem(sys.modules, "jobs.runner", runner)
    monkeypatch.setattr(jobs, "runner", runner, raising=False)
    monkeypatch.setattr(services, "trial_prediction", lambda **kwargs: {"decode": {}, "tpot_s": 0.012, "ttft_s": 0.09})
    return ValidationRun.objects.create(
        configuration={}, model_slug="llama-3.2-1b", trial="decode", status=ValidationRun.Status.RUNNING,
        params={"dtype": "fp32", "batch": 1, "prompt_tokens": 32, "decode_steps": 16},
    )  # fmt: skip


def test_the_run_is_not_seen_succeeded_before_its_calibration_is_written(trial_that_succeeds, monkeypatch):
    run = trial_that_succeeds
    seen_during_refit = []
    def refit(*, chip, dtype):
        seen_during_refit.append(seen_from_another_connection(run.pk))

    monkeypatch.setattr(services, "_refit_calibration", refit)
    services.validation_trial_run(run_id=str(run.pk))
    assert seen_during_refit == [ValidationRun.Status.RUNNING]  # the success was not yet visible while the refit ran
    assert seen_from_another_connection(run.pk) == ValidationRun.Status.SUCCEEDED


def test_a_refit_that_fails_fails_the_run_and_no_success_was_ever_seen(trial_that_succeeds, monkeypatch):
    run = trial_that_succeeds

    def refit(*, chip, dtype):
        assert seen_from_another_connection(run.pk) == ValidationRun.Status.RUNNING
        raise RuntimeError("the fit did not converge")

    monkeypatch.setattr(services, "_refit_calibration", refit)
    services.validation_trial_run(run_id=str(run.pk))
    run.refresh_from_db()
    assert run.status == ValidationRun.Status.FAILED and "did not converge" in run.failure_reason
