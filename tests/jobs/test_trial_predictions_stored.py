"""A finished speculative or block-diffusion trial stores the planner's prediction beside what it measured, with the
errors, and leaves the chip's calibration (fitted from decode trials) alone."""

from __future__ import annotations

import sys
import types

import pytest

import jobs
from hwcatalog.models import Chip
from jobs import services
from jobs.models import ValidationRun
from tests.planner.test_trial_prediction_services import BLOCK_DIFFUSION_MEASURED, SPECULATIVE_MEASURED

pytestmark = pytest.mark.django_db(transaction=True)  # validation_trial_run closes its connection when it ends


@pytest.fixture
def finished_trial(catalog, monkeypatch):
    """finished_trial(trial, model_slug, measured): the run after its trial (jobs.runner, torch, replaced) returned `measured`."""
    refits = []
    monkeypatch.setattr(services, "_refit_calibration", lambda **kwargs: refits.append(kwargs))

    def finish(trial: str, model_slug: str, measured: dict) -> ValidationRun:
        outcome = types.SimpleNamespace(chip=Chip.objects.get(slug="amd-epyc-9654"), measured=measured, device_name="cpu: test",
                                        environment={}, layers_run=(measured.get("scaled") or {}).get("layers_run"))  # fmt: skip
        runner = types.SimpleNamespace(run_trial=lambda *, run, progress: outcome)
        monkeypatch.setitem(sys.modules, "jobs.runner", runner)
        monkeypatch.setattr(jobs, "runner", runner, raising=False)
        run = ValidationRun.objects.create(configuration={"decoding": "ar", "decoding_fields": {}}, model_slug=model_slug, trial=trial,
                                           status=ValidationRun.Status.RUNNING, params={"dtype": "fp32", "batch": 1, "prompt_tokens": 32,
                                                                                         "decode_steps": 16})  # fmt: skip
        services.validation_trial_run(run_id=str(run.pk))
        run.refresh_from_db()
        assert run.status == ValidationRun.Status.SUCCEEDED, run.failure_reason
        return run

    finish.refits = refits
    return finish


def test_a_speculative_run_stores_the_assumed_acceptance_and_the_formulas_speedup(finished_trial):
    run = finished_trial("speculative", "llama-3.2-1b", SPECULATIVE_MEASURED)
    assert run.predicted["acceptance_rate"] == 0.7 and run.predicted["speedup"] == pytest.approx(4.0951 / 3.4, abs=1e-4)
    assert run.error_percent["acceptance_rate"] == pytest.approx(100 * 0.2 / 0.9)
    assert set(run.error_percent) == {"acceptance_rate", "mean_accepted_tokens_per_target_step", "speedup", "speculative_token_time_s"}
    assert finished_trial.refits == []


def test_a_block_diffusion_run_stores_the_planners_forwards_and_time_for_the_scaled_copy(finished_trial):
    run = finished_trial("block_diffusion", "fast-dllm-v2-7b", BLOCK_DIFFUSION_MEASURED)
    assert run.predicted["forwards"] == 8 and run.predicted["time_s"] > 0  # one block, 8 steps, no commit after it
    assert run.error_percent["forwards"] == 0.0  # the planner counts the forwards the trial ran
    assert {"time_s", "tokens_per_forward", "tokens_per_s"} <= set(run.error_percent)
    assert finished_trial.refits == []


def test_a_real_speculative_trial_on_the_cpu_stores_a_prediction_beside_each_measurement(catalog, monkeypatch):
    """The whole path with torch: the tiny pair trained and timed here (about 10 s), then predicted."""
    monkeypatch.setattr(services, "_refit_calibration", lambda **kwargs: pytest.fail("a speculative run refitted the calibration"))
    params = {"dtype": "fp32", "batch": 1, "prompt_tokens": 16, "decode_steps": 16, "repetitions": 1}
    run = ValidationRun.objects.create(configuration={"decoding": "ar", "decoding_fields": {}}, model_slug="llama-3.2-1b",
                                       trial="speculative", status=ValidationRun.Status.RUNNING, params=params)  # fmt: skip
    services.validation_trial_run(run_id=str(run.pk))
    run.refresh_from_db()
    assert run.status == ValidationRun.Status.SUCCEEDED, run.failure_reason
    assert run.measured["lossless"] is True and run.measured["draft_cost_ratio"] > 0
    assert run.predicted["acceptance_rate"] == 0.7 and run.predicted["speedup"] > 0 and run.predicted["speculative_token_time_s"] > 0
    assert {"acceptance_rate", "mean_accepted_tokens_per_target_step", "speedup"} <= set(run.error_percent)
