"""Validation runs: create, execute (in a worker), cancel, recover, and feed the calibration.

The trial itself runs in jobs/runner.py, which imports torch; it is imported inside
validation_run_execute only, so the web process never loads torch."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, close_old_connections, transaction
from django.db.models import F, Q
from django.utils import timezone

from accounts.ownership import ensure_may_manage
from hwcatalog.models import Chip, ModelArch
from jobs import routing, selectors
from jobs.selectors import TRIAL_MODEL_KINDS
from jobs.models import ScheduleClaim, ScheduledTaskRun, ValidationRun, WorkerHeartbeat, WorkerQueues
from planner import calibrations
from planner.models import Plan
from planner.engine.calibration import NoisyRuns
from planner.fleet_services import fleets_queued_resend
from planner.simulation_services import simulations_queued_resend
from planner.result_schema import validated_fields
from planner.services import block_diffusion_trial_prediction, plans_queued_resend, speculative_trial_prediction, trial_prediction

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 2
HEARTBEAT_INTERVAL_S = 5.0
# A run "running" with no heartbeat for this long lost its worker (the whole worker, or its host):
# six missed beats. A trial process that dies under a live worker is seen at once (_supervise).
STALE_AFTER_S = 30.0
SUPERVISE_POLL_S = 0.5  # how often the worker checks its trial process and the run's status (cancel)
STOP_GRACE_S = 2.0  # SIGTERM, then SIGKILL after this
# Defaults keep a CPU trial to seconds; a GPU worker gets the benchmark sizes.
DEFAULT_PARAMS = {
    "cpu": {"batch": 1, "prompt_tokens": 32, "decode_steps": 16, "dtype": "fp32", "max_layers": 2},
    "gpu": {"batch": 1, "prompt_tokens": 128, "decode_steps": 128, "dtype": "bf16"},
    "rocm": {"batch": 1, "prompt_tokens": 128, "decode_steps": 128, "dtype": "bf16"},
}
PARAM_LIMITS = {"batch": (1, 256), "prompt_tokens": (1, 32_768), "decode_steps": (1, 4_096), "max_layers": (1, 1_000),
                "block_size": (1, 512), "steps": (1, 512), "draft_tokens": (1, 16), "repetitions": (1, 10)}  # fmt: skip
# Rough CPU cost guard: a trial larger than this many layer-token steps is refused up front.
MAX_CPU_LAYER_TOKENS = 200_000
METRICS = ("ttft_s", "tpot_s", "tokens_per_s_per_user", "output_tokens_per_s_total", "mbu", "mfu")


@transaction.atomic
def worker_heartbeat_record(*, hostname: str, queue: str) -> WorkerHeartbeat:
    heartbeat, _ = WorkerHeartbeat.objects.get_or_create(hostname=hostname, defaults={"queue": queue, "seen_at": timezone.now()})
    WorkerHeartbeat.objects.filter(pk=heartbeat.pk).update(seen_at=timezone.now(), queue=queue, beats=F("beats") + 1)
    heartbeat.refresh_from_db()
    return heartbeat


def worker_queues_record(*, hostname: str, queues: list[str]) -> None:
    """A live worker's queues (jobs/worker_steps.py), which validations are routed by (jobs/routing.py)."""
    WorkerQueues.objects.update_or_create(hostname=hostname[:255], defaults={"queues": ",".join(queues)[:200], "seen_at": timezone.now()})


def worker_queues_forget(*, hostname: str) -> None:
    """A worker that stops takes its queues with it: nothing more is routed to them."""
    WorkerQueues.objects.filter(hostname=hostname[:255]).delete()


def _clean_params(trial: str, queue: str, params: dict[str, Any] | None, model: ModelArch) -> dict[str, Any]:
    if params is not None and not isinstance(params, dict):
        raise ValidationError({"params": "Must be an object."})
    merged = {**DEFAULT_PARAMS[queue], **(params or {})}
    for key, value in merged.items():
        if key in PARAM_LIMITS:
            low, high = PARAM_LIMITS[key]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValidationError({"params": f"{key} must be an integer between {low} and {high}."})
    threshold = merged.get("threshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1):
        raise ValidationError({"params": "threshold must be a number in (0, 1]."})
    if "compile" in merged and not isinstance(merged["compile"], bool):
        raise ValidationError({"params": "compile must be true or false."})
    if merged["dtype"] not in ("fp32", "bf16", "fp16"):
        raise ValidationError({"params": "dtype must be fp32, bf16 or fp16 (the trials run plain PyTorch matmuls)."})
    unknown = set(merged) - set(PARAM_LIMITS) - {"dtype", "compile", "threshold"}
    if unknown:
        raise ValidationError({"params": f"Unknown parameter(s): {', '.join(sorted(unknown))}."})
    layers = merged.get("max_layers") or model.num_layers
    if queue == "cpu" and layers * merged["batch"] * (merged["prompt_tokens"] + merged["decode_steps"]) > MAX_CPU_LAYER_TOKENS:
        raise ValidationError({"params": "This CPU trial would take hours; lower max_layers, batch, prompt_tokens or decode_steps."})
    if trial == "block_diffusion":
        merged.setdefault("block_size", model.default_block_size or 32)
    return merged


def _trial_for(model: ModelArch, trial: str) -> None:
    if trial not in TRIAL_MODEL_KINDS:
        raise ValidationError({"trial": f"Unknown trial {trial!r}; use decode, speculative or block_diffusion."})
    if model.generation_kind not in TRIAL_MODEL_KINDS[trial]:
        raise ValidationError({"trial": f"{model.slug} is a {model.generation_kind} model; a {trial} trial does not apply."})


@transaction.atomic
def validation_run_create(*, plan: Plan, rank: int, trial: str, queue: str | None = None, params: dict | None = None,
                          user=None) -> ValidationRun:  # fmt: skip
    """Queue a trial of the plan's configuration at `rank` (1-based); the task is sent after commit.

    With no `queue` the run goes to the queue of the row's chip family when a worker serves it, and is refused
    otherwise (the message names the live queues); a named queue of another family runs as a stand-in."""
    ranked = plan.results.get("ranked", [])
    if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= len(ranked):
        raise ValidationError({"rank": f"Must be between 1 and {len(ranked)} (the plan's ranked configurations)."})
    if queue is not None and queue not in ValidationRun.Queue.values:
        raise ValidationError({"queue": f"Must be one of {', '.join(ValidationRun.Queue.values)}, or left out to route by the row's chip."})
    model = ModelArch.objects.filter(slug=plan.model_slug).first()
    if model is None:
        raise ValidationError({"plan": f"The plan's model {plan.model_slug!r} is no longer in the catalog."})
    _trial_for(model, trial)
    row = ranked[rank - 1]
    routed = routing.route(chip_slug=row.get("chip_slug") or "", requested=queue)
    if routed.queue is None:
        raise ValidationError({"queue": routed.reason})
    run = ValidationRun.objects.create(
        plan=plan, rank=rank, configuration=row, model_slug=model.slug, trial=trial, queue=routed.queue, stand_in=routed.stand_in,
        params=_clean_params(trial, routed.queue, params, model), created_by=user if getattr(user, "is_authenticated", False) else None,
    )  # fmt: skip
    run.published = None  # set after commit: True once the broker took the message, False if it refused
    transaction.on_commit(lambda: setattr(run, "published", _send(run)))
    return run


def _send(run: ValidationRun) -> bool:
    """Publish the run's task. A broker that is down leaves the run queued with sent_at empty
    (the request that created it still succeeds); validation_runs_recover sends it again."""
    from jobs.tasks import run_validation

    try:
        result = run_validation.apply_async(args=[str(run.pk)], queue=run.queue, retry_policy=settings.VALIDATION_PUBLISH_RETRY_POLICY)
    except Exception as exc:  # noqa: BLE001 - kombu, redis-py and socket errors all mean "not sent yet"
        logger.warning("validation run %s: the broker refused the task (%s); the recovery sweep will send it again", run.pk, exc)
        ValidationRun.objects.filter(pk=run.pk, status=ValidationRun.Status.QUEUED).update(
            progress_message=f"waiting for the broker ({type(exc).__name__}); it is sent again once the broker answers"[:300]
        )
        return False
    ValidationRun.objects.filter(pk=run.pk).update(celery_task_id=result.id or "", sent_at=timezone.now(), send_count=F("send_count") + 1)
    return True


@transaction.atomic
def validation_run_cancel(*, run: ValidationRun, by) -> ValidationRun:
    """Cancel a queued or running run; only its creator or staff may (PermissionDenied otherwise)."""
    ensure_may_manage(user=by, owner_id=run.created_by_id, action="cancel", what="this validation run")
    run = ValidationRun.objects.select_for_update().get(pk=run.pk)
    if run.finished:
        raise ValidationError({"status": f"The run already ended ({run.status})."})
    run.status = ValidationRun.Status.CANCELLED
    run.finished_at = timezone.now()
    run.progress_message = "cancelled"
    run.save(update_fields=["status", "finished_at", "progress_message"])
    return run


class Cancelled(Exception):
    pass


def _claim(run_id: str, *, hostname: str, task_id: str) -> ValidationRun | None:
    """Mark the run running; None if it ended already. A redelivered run (its worker died)
    counts an attempt; past MAX_ATTEMPTS it fails with the reason."""
    with transaction.atomic():
        run = ValidationRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.finished:
            return None
        fresh = timezone.now() - timedelta(seconds=STALE_AFTER_S)
        if run.status == ValidationRun.Status.RUNNING and run.heartbeat_at and run.heartbeat_at >= fresh:
            if not _holder_gone(run, hostname=hostname):
                return None  # a duplicate message (a re-send) while a live worker runs it: nothing to do
            # Re-delivered because the worker process holding it died (acks_late): take over now,
            # not after the heartbeat goes stale.
            logger.warning("validation run %s: its worker process %s on %s is gone; taking it over", run.pk, run.worker_pid, hostname)
        if run.attempts >= MAX_ATTEMPTS:
            _finish(run, status=ValidationRun.Status.FAILED, reason=f"the worker running it was lost {run.attempts} times")
            return None
        now = timezone.now()
        run.status, run.attempts, run.started_at, run.heartbeat_at = ValidationRun.Status.RUNNING, run.attempts + 1, now, now
        run.worker_hostname, run.worker_pid, run.celery_task_id = hostname, os.getpid(), task_id or run.celery_task_id
        run.save(update_fields=["status", "attempts", "started_at", "heartbeat_at", "worker_hostname", "worker_pid", "celery_task_id"])
        return run


def _holder_gone(run: ValidationRun, *, hostname: str) -> bool:
    """True when the process that claimed the run is known to be gone: it ran on this host (the
    same Celery node name) and no process has its pid, or the pid is ours (a process runs one task
    at a time, so an earlier claim of ours ended with that process's old life)."""
    if not hostname or run.worker_hostname != hostname or not run.worker_pid:
        return False
    if run.worker_pid == os.getpid():
        return True
    try:
        os.kill(run.worker_pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _finish(run: ValidationRun, *, status: str, reason: str = "", **fields) -> None:
    ValidationRun.objects.filter(pk=run.pk).exclude(status=ValidationRun.Status.CANCELLED).update(
        status=status, failure_reason=reason[:5000], finished_at=timezone.now(), **fields
    )


def _progress_writer(run: ValidationRun, log: list[str]):
    def progress(fraction: float, message: str) -> None:
        log.append(f"{timezone.now():%H:%M:%S} {fraction * 100:5.1f}% {message}")
        updated = ValidationRun.objects.filter(pk=run.pk, status=ValidationRun.Status.RUNNING).update(
            progress_percent=min(max(fraction * 100.0, 0.0), 100.0), progress_message=message[:300],
            heartbeat_at=timezone.now(), log_tail="\n".join(log[-50:]),
        )  # fmt: skip
        if not updated:
            raise Cancelled()

    return progress


def _errors(predicted: dict[str, Any], measured: dict[str, Any], metrics=METRICS) -> dict[str, float]:
    """|predicted - measured| / measured in percent, for each of `metrics` both hold as numbers."""
    out = {}
    for metric in metrics:
        p, m = predicted.get(metric), measured.get(metric)
        if isinstance(p, (int, float)) and isinstance(m, (int, float)) and m:
            out[metric] = abs(p - m) / abs(m) * 100.0
    return out


def validation_run_execute(*, run_id: str, hostname: str = "", task_id: str = "") -> None:
    """Claim the run and supervise its trial, which runs in a process of its own (jobs/trial_process.py):
    a trial process that dies is seen within SUPERVISE_POLL_S and the run fails with the reason; a
    cancel stops it (SIGTERM, SIGKILL after STOP_GRACE_S) within about a second; the heartbeat is
    written here, only while the trial process lives."""
    from celery.exceptions import SoftTimeLimitExceeded

    run = _claim(run_id, hostname=hostname, task_id=task_id)
    if run is None:
        return
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "jobs.trial_process", str(run.pk)], cwd=settings.BASE_DIR,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings")},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
        try:
            _supervise(run, process, stderr)
        except SoftTimeLimitExceeded:
            _stop(process)
            _finish(run, status=ValidationRun.Status.FAILED, reason="the trial ran past its time limit")
        except BaseException:
            _stop(process)  # a worker shutting down (or any error here) never leaves a trial running unsupervised
            raise
        finally:
            close_old_connections()


def _supervise(run: ValidationRun, process: subprocess.Popen, stderr) -> None:
    last_beat = time.monotonic()
    while True:
        returncode = process.poll()
        if returncode is not None:
            _trial_process_ended(run, returncode, stderr)
            return
        status = ValidationRun.objects.filter(pk=run.pk).values_list("status", flat=True).first()
        # Cancelled (or deleted): stop the trial now. A run the trial itself finished (succeeded or failed) is
        # left to end on its own: it still refits the chip's calibration after storing its result.
        if status is None or status == ValidationRun.Status.CANCELLED:
            cancelled_at = time.monotonic()
            _stop(process)
            stopped_s = time.monotonic() - cancelled_at
            logger.info("validation run %s: trial process %s stopped %.2f s after the cancel was seen", run.pk, process.pid, stopped_s)
            ValidationRun.objects.filter(pk=run.pk, status=ValidationRun.Status.CANCELLED).update(
                progress_message=f"cancelled; the trial process stopped {stopped_s:.1f} s after the worker saw it"
            )
            return
        if time.monotonic() - last_beat >= HEARTBEAT_INTERVAL_S:
            ValidationRun.objects.filter(pk=run.pk, status=ValidationRun.Status.RUNNING).update(heartbeat_at=timezone.now())
            last_beat = time.monotonic()
        time.sleep(SUPERVISE_POLL_S)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def _trial_process_ended(run: ValidationRun, returncode: int, stderr) -> None:
    """The trial process finishes the run itself; if it ended and the run is still running, it died."""
    if not ValidationRun.objects.filter(pk=run.pk, status=ValidationRun.Status.RUNNING).exists():
        return
    how = f"killed by signal {signal.Signals(-returncode).name}" if returncode < 0 else f"exit status {returncode}"
    stderr.seek(0)
    tail = stderr.read()[-3000:].decode(errors="replace")
    logger.warning("validation run %s: the trial process died (%s)", run.pk, how)
    _finish(run, status=ValidationRun.Status.FAILED, reason=f"the trial process died ({how}); out of memory is the usual cause",
            log_tail=tail)  # fmt: skip


def validation_trial_run(*, run_id: str) -> None:
    """Run the trial on this worker's device, store predicted vs measured, refit the calibration.
    Called in the trial process (jobs/trial_process.py) once the worker has claimed the run."""
    run = ValidationRun.objects.filter(pk=run_id, status=ValidationRun.Status.RUNNING).first()
    if run is None:
        return
    log: list[str] = []
    progress = _progress_writer(run, log)
    try:
        from jobs import runner  # imports torch: trial processes only

        outcome = runner.run_trial(run=run, progress=progress)
        chip = outcome.chip
        measured = outcome.measured
        predicted = {}
        # What ran: a trial fitted to the worker's memory may have run bf16 or a shorter sequence than asked.
        ran_dtype = measured.get("dtype") or run.params["dtype"]
        if chip is not None and run.trial == ValidationRun.Trial.DECODE:
            predicted = trial_prediction(
                model=ModelArch.objects.get(slug=run.model_slug), chip=chip, weight_dtype=ran_dtype, batch=run.params["batch"],
                prompt_tokens=measured.get("prompt_tokens") or run.params["prompt_tokens"],
                output_tokens=(measured.get("decode_steps") or run.params["decode_steps"]) + 1, num_layers=outcome.layers_run,
            )  # fmt: skip
        elif run.trial == ValidationRun.Trial.SPECULATIVE:  # the tiny trained pair's own math: no chip needed
            predicted = speculative_trial_prediction(configuration=run.configuration or {}, measured=measured)
        elif chip is not None and run.trial == ValidationRun.Trial.BLOCK_DIFFUSION:
            predicted = block_diffusion_trial_prediction(
                model=ModelArch.objects.get(slug=run.model_slug), chip=chip, configuration=run.configuration or {}, measured=measured,
                num_layers=outcome.layers_run,
            )  # fmt: skip
        # One transaction: whoever sees the run succeeded also sees the calibration refitted from it (the
        # next estimate uses it). Committed apart, a client polling the run could read "succeeded" and ask
        # for an estimate, or the calibration, before the refit was written (issue 14's flaky test).
        with transaction.atomic():
            _finish(
                run, status=ValidationRun.Status.SUCCEEDED, device_name=outcome.device_name or "",
                matched_chip_slug=chip.slug if chip else "", measured=measured, predicted=predicted,
                error_percent=_errors(predicted, measured, [f.name for f in validated_fields(run.trial)]), environment=outcome.environment,
                progress_percent=100.0, progress_message="done", log_tail="\n".join(log[-50:]),
            )  # fmt: skip
            if predicted and chip is not None and run.trial == ValidationRun.Trial.DECODE:  # decode runs are what it fits
                _refit_calibration(chip=chip, dtype=ran_dtype)
    except Cancelled:
        logger.info("validation run %s was cancelled", run_id)
    except Exception as exc:  # noqa: BLE001 - any failure ends the run with its reason, never "running"
        log.append(traceback.format_exc()[-3000:])
        _finish(run, status=ValidationRun.Status.FAILED, reason=f"{type(exc).__name__}: {exc}", log_tail="\n".join(log[-50:]))
        logger.exception("validation run %s failed", run_id)
    finally:
        close_old_connections()


def _refit_calibration(*, chip: Chip, dtype: str) -> None:
    runs = [
        r for r in selectors.succeeded_runs_for(chip_slug=chip.slug, dtype=dtype).order_by("-finished_at")[:50]
        if r.predicted.get("decode") and r.measured.get("tpot_s") and r.measured.get("ttft_s")
    ]  # fmt: skip
    if not runs:
        return
    observations = [calibrations.observation_from(r.predicted, r.measured, chip, dtype) for r in runs]
    try:
        calibrations.calibration_fit(chip=chip, weight_dtype=dtype, observations=observations, run_ids=[r.pk for r in runs])
    except NoisyRuns as exc:  # the calibration in use stands
        logger.warning("calibration of %s/%s not refitted: %s", chip.slug, dtype, exc)


def scheduled_task_ran(*, name: str, ran_on: str = "") -> None:
    """Note that a scheduled task ran now (jobs.selectors.jobs_health reads it)."""
    updated = ScheduledTaskRun.objects.filter(name=name).update(last_run_at=timezone.now(), runs=F("runs") + 1, ran_on=ran_on[:255])
    if not updated:
        try:
            with transaction.atomic():
                ScheduledTaskRun.objects.create(name=name, last_run_at=timezone.now(), runs=1, ran_on=ran_on[:255])
        except IntegrityError:  # another worker's first run got there first
            pass


def validation_runs_recover(*, stale_after_s: float = STALE_AFTER_S, resend_after_s: float | None = None) -> dict[str, int]:
    """Scheduled every VALIDATION_SWEEP_EVERY_S (20 s). Runs left "running" by a worker that died (no heartbeat for
    stale_after_s) are re-queued while attempts remain, else failed with the reason. Queued
    runs whose message never reached the broker, or whose message was sent resend_after_s ago
    and not taken (a broker restarted without persistence loses its queues), are sent again;
    a duplicate message is harmless, since _claim runs a run once."""
    scheduled_task_ran(name=ScheduledTaskRun.RECOVERY_SWEEP)
    resend_after_s = settings.VALIDATION_RESEND_AFTER_S if resend_after_s is None else resend_after_s
    resent = _queued_runs_resend(resend_after_s=resend_after_s)
    # Plan searches, fleet plans and simulations queued as jobs (planner/tasks.py) recover by the same sweep.
    plans_resent = plans_queued_resend(resend_after_s=resend_after_s, sweep_every_s=settings.VALIDATION_SWEEP_EVERY_S)
    fleets_resent = fleets_queued_resend(resend_after_s=resend_after_s, sweep_every_s=settings.VALIDATION_SWEEP_EVERY_S)
    simulations_resent = simulations_queued_resend(resend_after_s=resend_after_s, sweep_every_s=settings.VALIDATION_SWEEP_EVERY_S)
    cutoff = timezone.now() - timedelta(seconds=stale_after_s)
    requeued = failed = 0
    stale = ValidationRun.objects.filter(status=ValidationRun.Status.RUNNING, heartbeat_at__lt=cutoff)
    for run in stale:
        with transaction.atomic():
            run = ValidationRun.objects.select_for_update().get(pk=run.pk)
            if run.status != ValidationRun.Status.RUNNING or run.heartbeat_at >= cutoff:
                continue
            if run.attempts >= MAX_ATTEMPTS:
                _finish(run, status=ValidationRun.Status.FAILED, reason=f"the worker running it stopped answering ({run.attempts} attempts)")
                failed += 1
            else:
                run.status, run.progress_message = ValidationRun.Status.QUEUED, "re-queued: its worker stopped answering"
                run.save(update_fields=["status", "progress_message"])
                transaction.on_commit(lambda run=run: _send(run))
                requeued += 1
    return {"requeued": requeued, "failed": failed, "resent": resent, "plans_resent": plans_resent, "fleets_resent": fleets_resent,
            "simulations_resent": simulations_resent}


def _queued_runs_resend(*, resend_after_s: float) -> int:
    """Send again the queued runs whose message may be lost. The wait doubles with each send
    (resend_after_s, 2x, 4x, ...), so a queue that no worker serves (a gpu queue on a site
    without GPUs) gains a message per run only now and then, never one per sweep."""
    now = timezone.now()
    candidates = ValidationRun.objects.filter(status=ValidationRun.Status.QUEUED, created_at__lt=now - timedelta(seconds=2)).filter(
        Q(sent_at__isnull=True) | Q(sent_at__lt=now - timedelta(seconds=resend_after_s))
    )  # the 2 s grace leaves a run just created to its own on_commit send
    sent = 0
    for run in candidates.order_by("created_at")[:500]:
        wait_s = resend_after_s * 2 ** max(run.send_count - 1, 0)
        if run.sent_at is None or run.sent_at < now - timedelta(seconds=wait_s):
            sent += _send(run)
    return sent


def schedule_claim(*, name: str, period: str, claimed_by: str = "") -> bool:
    """True for the first caller of (name, period), False for every later one."""
    try:
        with transaction.atomic():
            ScheduleClaim.objects.create(name=name, period=period, claimed_by=claimed_by[:255])
    except IntegrityError:
        return False
    return True


def pinned_plans_revalidate(*, queue: str = "cpu", period: str | None = None, claimed_by: str = "") -> dict[str, int]:
    """Nightly: a decode trial of the top configuration of every pinned plan on `queue`'s device,
    once per period (the day, by default) however many beats fire. A plan whose previous run is
    still queued or running is skipped."""
    period = period or timezone.now().date().isoformat()
    if not schedule_claim(name=f"revalidate-pinned-plans:{queue}", period=period, claimed_by=claimed_by):
        return {"queued": 0, "skipped": 0, "already_claimed": 1}
    queued = skipped = 0
    for plan in Plan.objects.filter(pinned=True, feasible_count__gt=0):
        busy = ValidationRun.objects.filter(plan=plan, rank=1, queue=queue).exclude(status__in=ValidationRun.FINISHED)
        if busy.exists():
            skipped += 1
            continue
        validation_run_create(plan=plan, rank=1, trial="decode", queue=queue)
        queued += 1
    return {"queued": queued, "skipped": skipped, "already_claimed": 0}
