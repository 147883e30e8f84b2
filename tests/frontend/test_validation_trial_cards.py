"""The cards of finished speculative and block-diffusion trials: the planner's predictions beside what was measured."""

from __future__ import annotations

import datetime as dt

from django.template.loader import render_to_string

from frontend import validation_cards
from hwcatalog.models import Chip, ModelArch
from jobs.models import ValidationRun
from jobs.services import _errors
from planner.result_schema import validated_fields
from planner.services import block_diffusion_trial_prediction, speculative_trial_prediction
from tests.planner.test_trial_prediction_services import BLOCK_DIFFUSION_MEASURED, SPECULATIVE_MEASURED

STARTED = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _finished(plan, trial: str, measured: dict, predicted: dict) -> ValidationRun:
    return ValidationRun(
        plan=plan, rank=1, configuration=plan.results["ranked"][0], model_slug=plan.model_slug, trial=trial, queue="cpu",
        status="succeeded", progress_percent=100, device_name="cpu: AMD EPYC", matched_chip_slug="amd-epyc-9654",
        measured=measured, predicted=predicted, error_percent=_errors(predicted, measured, [f.name for f in validated_fields(trial)]),
        started_at=STARTED, finished_at=STARTED + dt.timedelta(minutes=1),
    )  # fmt: skip


def _card(plan, run) -> str:
    return render_to_string("frontend/_validation.html", {"v": validation_cards.validation_context(run), "plan": plan})


def _row(html: str, label: str) -> str:
    start = html.index(f"<td>{label}</td>")
    return html[start : html.index("</tr>", start)]


def test_a_speculative_card_sets_the_assumed_acceptance_and_the_formulas_speedup_beside_the_pairs(chat_plan):
    predicted = speculative_trial_prediction(configuration=chat_plan.results["ranked"][0], measured=SPECULATIVE_MEASURED)
    html = _card(chat_plan, _finished(chat_plan, "speculative", SPECULATIVE_MEASURED, predicted))
    acceptance = _row(html, "Acceptance per drafted token (predicted: assumed)")
    assert "70.0%" in acceptance and "90.0%" in acceptance and "22.2%" in acceptance  # |0.7 - 0.9| / 0.9
    tokens = _row(html, "Tokens per target forward (predicted: eq. 1, assumed acceptance)")
    assert "2.77" in tokens and "4.6" in tokens  # (1 - 0.7^5) / 0.3 = 2.77
    speedup = _row(html, "Speedup over plain decoding, × (predicted: thm 3.8, measured acceptance and c)")
    assert '"n">1.2</td>' in speedup and "2.02" in speedup and "40.4%" in speedup  # (1 - 0.9^5) / 0.1 / (4 x 0.6 + 1) = 1.204
    assert "0.6" in _row(html, "Draft / target cost ratio c (measured, an input)")
    assert "1.56 ms" in _row(html, "Time per token, plain target (measured, an input)")
    assert "Acceptance measured on the tiny trained pair, not on llama-3.1-70b" in html and "checks the formula, not the assumption" in html
    assert "Ran the tiny trained pair (tiny-pair-target, 2 layers; tiny-pair-draft, 1 layer(s)) on cpu: AMD EPYC, not llama-3.1-70b" in html
    assert "TTFT" not in html  # a decode trial's rows are not this card's


def test_a_block_diffusion_card_sets_the_planners_forwards_and_time_beside_the_trials(chat_plan, catalog):
    model, chip = ModelArch.objects.get(slug="fast-dllm-v2-7b"), Chip.objects.get(slug="amd-epyc-9654")
    predicted = block_diffusion_trial_prediction(model=model, chip=chip, configuration={}, measured=BLOCK_DIFFUSION_MEASURED, num_layers=2)
    html = _card(chat_plan, _finished(chat_plan, "block_diffusion", BLOCK_DIFFUSION_MEASURED, predicted))
    assert ">1</td>" in _row(html, "Blocks")
    assert "<td class=\"n\">8</td>" in _row(html, "Denoising forwards (all blocks)")
    forwards = _row(html, "Forwards after the prefill")
    # One block and no commit forward after it, as the trial counts them: the two agree.
    assert forwards.count("<td class=\"n\">8</td>") == 2 and "0.0%" in forwards
    per_forward = _row(html, "Tokens per forward (all sequences, tokens)")
    assert per_forward.count('"n">2</td>') == 2
    time = _row(html, "Generation time, prefill included")
    assert "12.3 s" in time and validation_cards.format_as(predicted["time_s"], "duration") in time
    assert "4.7%" in _row(html, "MFU (whole run)")
    assert "block_diffusion(B=32, S_eff=8)" in html and "one commit forward per block but the last computed" in html
