"""What the planner predicts for the speculative and block-diffusion validation trials (jobs/trials/), from the
decoding methods' own math: no formula is written twice here. Keys are the trials' measured keys, so each
prediction sits beside its measurement (planner/engine/fields.py, TRIAL_FIELDS)."""

from __future__ import annotations

from .decoding import BlockDiffusion, expected_tokens_per_step, speculative_speedup


def speculative_trial_prediction(
    *, assumed_acceptance_rate: float, measured_acceptance_rate: float | None, draft_tokens: int, draft_cost_ratio: float | None,
    plain_token_time_s: float | None,
) -> dict[str, float | None]:
    """Two checks kept apart (Leviathan, Kalman, Matias, ICML 2023):

    - the acceptance the planner assumes, and the tokens per target forward it gives (eq. 1,
      `expected_tokens_per_step`), against what the pair accepted;
    - the speedup formula (thm 3.8, `speculative_speedup`: tau / (k*c + 1)) fed the *measured* acceptance and
      draft/target cost ratio c, and the speculative time per token it implies, against the measured speedup.
      This checks the formula, whatever the acceptance assumption is worth."""
    speedup = None
    if measured_acceptance_rate is not None and draft_cost_ratio is not None:
        speedup = speculative_speedup(measured_acceptance_rate, draft_tokens, draft_cost_ratio)
    return {
        "acceptance_rate": assumed_acceptance_rate,
        "mean_accepted_tokens_per_target_step": expected_tokens_per_step(assumed_acceptance_rate, draft_tokens),
        "speedup": speedup,
        "speculative_token_time_s": plain_token_time_s / speedup if speedup and plain_token_time_s is not None else None,
    }


def block_diffusion_trial_prediction(
    *, decoding: BlockDiffusion, output_tokens: int, batch: int, prefill_time_s: float, decode_token_time_s: float,
) -> dict[str, float | int]:
    """The forwards `decoding.decode` charges (blocks, S_eff denoising forwards per block, a commit per block but
    the last), and the generation's wall time: the batch's prompt prefill plus token_time_s for each delivered token (the sequences of
    the batch decode together). tokens_per_forward and tokens_per_s count every sequence, as the trial does."""
    forwards = decoding.forwards(output_tokens)
    answer = decoding.answer_tokens(output_tokens)
    tokens = batch * answer
    time_s = prefill_time_s + decode_token_time_s * answer
    return {
        "blocks": forwards.blocks,
        "steps_per_block": decoding.effective_steps,
        "denoise_forwards": forwards.denoising_forwards,
        "commit_forwards": forwards.commit_forwards,
        "forwards": forwards.forwards,
        "tokens_per_forward": tokens / forwards.forwards,
        "time_s": time_s,
        "tokens_per_s": tokens / time_s if time_s > 0 else None,
    }
