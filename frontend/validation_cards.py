"""The validation card and the validate form, as the plan page and its card fragment render them: each run's
predicted-vs-measured rows, what really ran (the model whole or a scaled copy, on which device, a stand-in or
not), how steady it was, and for the selected row the trials, the worker queues and the trial parameters.
Formatting only: the routing is jobs/routing.py's, the numbers the run's."""
from __future__ import annotations

from functools import partial
from typing import Any

from django.urls import reverse

from frontend.templatetags.hwformat import format_as, plain_percent
from hwcatalog.models import ModelArch
from jobs import routing as jobs_routing
from jobs import selectors as jobs_selectors
from jobs import services as jobs_services
from planner.engine.calibration import MAX_RUN_SPREAD
from planner.models import Plan
from planner.result_schema import validated_fields

# What each trial measures, as the result fields declare it (planner/engine/fields.py: the estimate's validated fields for
# a decode trial, TRIAL_FIELDS for the speculative and block-diffusion trials).
VALIDATION_METRICS = {
    trial: tuple((f.name, f.label, partial(format_as, kind=f.format)) for f in validated_fields(trial))
    for trial in ("decode", "speculative", "block_diffusion")
}


# --- jobs (validation runs) -----------------------------------------------------------------
def validation_runs(plan: Plan) -> list[Any]:
    return list(jobs_selectors.validation_run_list(plan=plan))


def _validation_api_url(run_id) -> str:
    return reverse("validation-detail", kwargs={"run_id": run_id})


class JobsState:
    """The workers' health and live queues, read once per page however many of its cards ask (each read
    is a query), and only when a card is active."""

    def __init__(self) -> None:
        self._problems: list[str] | None = None
        self._live: set[str] | None = None

    def problems(self) -> list[str]:
        if self._problems is None:
            self._problems = jobs_selectors.jobs_health()["problems"]
        return list(self._problems)

    def live_queues(self) -> set[str]:
        if self._live is None:
            self._live = jobs_routing.live_queues()
        return self._live


def validation_contexts(runs) -> list[dict[str, Any]]:
    """Every card of a page, the jobs' state read once for all of them."""
    jobs = JobsState()
    return [validation_context(run, jobs=jobs) for run in runs]


def validation_context(run, *, jobs: JobsState | None = None) -> dict[str, Any]:
    """A run plus its predicted-vs-measured rows, formatted for the partial."""
    jobs = jobs or JobsState()
    predicted, measured, errors = run.predicted or {}, run.measured or {}, run.error_percent or {}
    rows = [
        {"label": label, "predicted": fmt(predicted.get(key)), "measured": fmt(measured.get(key)),
         "error": signed_error(errors.get(key), predicted.get(key), measured.get(key))}
        for key, label, fmt in VALIDATION_METRICS.get(run.trial, VALIDATION_METRICS["decode"])
        if key in predicted or key in measured
    ]  # fmt: skip
    # What the numbers are of and where the predictions come from (the speculative trial's pair is not the plan's model).
    notes = [text[0].upper() + text[1:].rstrip(".") + "." for text in (measured.get("note"), predicted.get("basis"))
             if isinstance(text, str) and text]  # fmt: skip
    active = run.status in ("queued", "running")
    # A run that waits on a beat or a worker that is gone says so (jobs.selectors.jobs_health).
    jobs_problems = jobs.problems() if active else []
    if run.status == "queued" and run.queue not in jobs.live_queues():
        jobs_problems.append(f"No worker serves the {run.queue} queue now ({jobs_routing.QUEUE_DEVICES[run.queue]}): this run waits until one does.")
    return {"run": run, "metric_rows": rows, "api_url": _validation_api_url(run.id), "active": active, "jobs_problems": jobs_problems,
            "repetitions": _repetitions_note(measured), "what_ran": what_ran(run), "notes": notes}  # fmt: skip


def signed_error(error_percent: Any, predicted: Any, measured: Any) -> str:
    """The stored |predicted - measured| / measured with the side the prediction fell on: '20.0% low' (predicted below
    the measurement), '25.0% high', or the bare figure where the two are not numbers to compare."""
    text = plain_percent(error_percent)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (error_percent, predicted, measured))
    if not numbers or predicted == measured:
        return text
    return f"{text} {'high' if predicted > measured else 'low'}"


def validate_form_context(plan: Plan, row: dict[str, Any]) -> dict[str, Any]:
    """The validate form for the selected row: the trials its model runs, the queues (the chip's own kind first,
    each said live or not, the others marked stand-in), the one chosen by default (the chip's own when a worker
    serves it; none otherwise, so a stand-in is always the user's choice) with the routing's reason, and each
    queue's default trial parameters."""
    model = ModelArch.objects.filter(slug=plan.model_slug).first()
    choices, routed = jobs_routing.queue_choices(chip_slug=row.get("chip_slug") or "")
    return {
        "trials": jobs_selectors.trials_for(model) if model else ["decode"], "queues": choices, "chosen_queue": routed.queue or "",
        "note": f"Runs on {routed.reason}." if routed.queue else routed.reason, "defaults": jobs_services.DEFAULT_PARAMS,
        "limits": {name: {"min": low, "max": high} for name, (low, high) in jobs_services.PARAM_LIMITS.items()},
        "dtypes": ("fp32", "bf16", "fp16"), "chip": row.get("chip_name") or row.get("chip_slug") or "this chip",
    }  # fmt: skip


def what_ran(run) -> str:
    """What a finished trial really ran, in one sentence: the model whole or a scaled copy of it, in which dtype, on
    which device, and whether that device stands in for the chip the plan's row is for (issue 14: a card that said only
    "Ran on AMD EPYC" hid a 2-layer copy of a 70B model run for a Gaudi 3 row)."""
    if not run.device_name:
        return ""
    measured, params, row = run.measured or {}, run.params or {}, run.configuration or {}
    if run.trial == "speculative" and isinstance(measured.get("target"), dict):  # the tiny pair, not the plan's model
        target, draft = measured["target"], measured.get("draft") or {}
        return (f"Ran the tiny trained pair ({target.get('slug')}, {target.get('layers')} layers; {draft.get('slug')}, "
                f"{draft.get('layers')} layer(s)) on {run.device_name}, not {run.model_slug}.")  # fmt: skip
    scaled = measured.get("scaled") or {}
    dtype = measured.get("dtype") or params.get("dtype") or "its"
    if scaled.get("layers_run") and scaled.get("layers_full"):
        copy = f"a {scaled['layers_run']}-layer {dtype} scaled copy (of {scaled['layers_full']} layers) of {run.model_slug}"
    else:
        copy = f"the whole {run.model_slug} in {dtype}"
    threads = measured.get("cpu_threads") if measured.get("device_type") == "cpu" else None
    text = f"Ran {copy} on {run.device_name}" + (f" ({threads} thread{'s' if threads != 1 else ''})" if threads else "")
    same_copy = "for the same scaled copy" if scaled.get("layers_run") else ""
    planned = row.get("chip_slug")
    if run.stand_in or (planned and planned != run.matched_chip_slug):
        text += f", a stand-in for the planned {row.get('chip_name') or planned}: the predictions beside it are this device's"
        text += f", {same_copy}" if same_copy else ""
    elif same_copy:
        text += f": the predictions beside it are {same_copy} on this device"
    fitted = measured.get("fitted_to_memory") or []
    return text + "." + (f" Fitted to the worker's memory: {'; '.join(fitted)}." if fitted else "")


def _repetitions_note(measured: dict[str, Any]) -> str:
    """How steady the measurement was: the repetitions timed and their spread (a calibration leaves out a run over 25%)."""
    reps = measured.get("repetitions")
    if not reps or reps < 2:
        return ""
    note = f"Medians of {reps} timed repetitions after the warm-up; TPOT spread {plain_percent(100 * (measured.get('tpot_spread') or 0.0))}"
    if measured.get("ttft_spread") is not None:
        note += f", TTFT spread {plain_percent(100 * measured['ttft_spread'])}"
    if (measured.get("tpot_spread") or 0.0) > MAX_RUN_SPREAD:
        note += f" (over {MAX_RUN_SPREAD:.0%}: too noisy, the calibration leaves this run out)"
    return note + "."
