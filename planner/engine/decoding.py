"""Decoding methods as sequences of forwards: autoregressive, speculative,
masked diffusion and block diffusion. Each returns a DecodeOutcome of arrays."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .forward import PhaseCost, forward_cost, sum_of_max_linear
from .hardware import CandidateHardware
from .memory import SequenceFootprint
from .specs import Autoregressive, BlockDiffusion, Decoding, Diffusion, ModelSpec, Speculative, Workload

ADAPTIVE_WINDOW_START_TOKENS = 64
FOCUS_DENSE_LAYERS = 2  # FOCUS keeps every position in the first layers


@dataclass(frozen=True)
class DecodeOutcome:
    step: PhaseCost  # the representative forward, reported as the decode phase
    token_time_s: np.ndarray  # steady state, per output token per sequence, no prefill
    first_token_extra_s: np.ndarray  # after the prefill, until the first token is out
    achieved_flops_per_s_per_chip: np.ndarray
    achieved_bytes_per_s_per_chip: np.ndarray
    needs_prefill: bool  # False for masked diffusion: the prompt rides in every step
    tokens_per_step: float  # tokens committed per (target) forward
    delivered_tokens: float
    footprint: SequenceFootprint


# Leviathan, Kalman, Matias (ICML 2023) --------------------------------------


def expected_tokens_per_step(acceptance_rate: float, draft_tokens: int) -> float:
    """Eq. 1: E[tokens per target step] = (1 - a^(k+1)) / (1 - a)."""
    a, k = acceptance_rate, draft_tokens
    if a >= 1.0:
        return float(k + 1)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def speculative_speedup(acceptance_rate: float, draft_tokens: int, cost_ratio: float) -> float:
    """Theorem 3.8: (1 - a^(k+1)) / ((1 - a)(k*c + 1)), verification = one step."""
    return expected_tokens_per_step(acceptance_rate, draft_tokens) / (draft_tokens * cost_ratio + 1.0)


def acceptance_rate_from_mean_accepted(mean_accepted_tokens: float, draft_tokens: int) -> float:
    """Invert eq. 1 by bisection: tau(a) rises monotonically from 1 (a=0) to k+1 (a=1)."""
    if not 1.0 <= mean_accepted_tokens <= draft_tokens + 1:
        raise ValueError("mean accepted tokens must lie in [1, draft_tokens + 1]")
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if expected_tokens_per_step(mid, draft_tokens) < mean_accepted_tokens:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


# Leviathan et al. Table 3 reports alpha of roughly 0.6-0.9 for model drafts
# (n-gram drafts score far lower); we assume 0.7 when nothing is given, and say so.
DEFAULT_ACCEPTANCE_RATE = 0.7


def speculative_acceptance(decoding: Speculative) -> tuple[float, str | None]:
    if decoding.acceptance_rate is not None:
        return decoding.acceptance_rate, None
    if decoding.mean_accepted_tokens is not None:
        return acceptance_rate_from_mean_accepted(decoding.mean_accepted_tokens, decoding.draft_tokens), None
    return DEFAULT_ACCEPTANCE_RATE, (
        f"acceptance rate not given; assumed {DEFAULT_ACCEPTANCE_RATE} (typical of model drafts in Leviathan et al., Table 3)"
    )


# Block diffusion (BD3-LM; Fast-dLLM) ----------------------------------------


def blocks_computed(output_tokens: int, block_size: int, answer_tokens: int | None = None) -> int:
    """Blocks run: ceil(G/B), or ceil((answer + 1)/B) when EOS lands earlier."""
    full = math.ceil(output_tokens / block_size)
    if answer_tokens is None or answer_tokens >= output_tokens:
        return full
    return math.ceil((answer_tokens + 1) / block_size)


def blocks_saved_by_early_stop(output_tokens: int, block_size: int, answer_tokens: int) -> int:
    """ceil(G/B) - ceil((answer + 1)/B) whole blocks never computed (PLANNER_MATH.md)."""
    return math.ceil(output_tokens / block_size) - blocks_computed(output_tokens, block_size, answer_tokens)


def focus_flop_scale(num_layers: int, focus_fraction: float) -> float:
    """FOCUS computes every position in the first 2 layers, then only a fraction f."""
    dense = min(FOCUS_DENSE_LAYERS, num_layers)
    return (dense + (num_layers - dense) * focus_fraction) / num_layers


# Evaluation per method -------------------------------------------------------


def evaluate_decoding(
    decoding: Decoding,
    model: ModelSpec,
    hw: CandidateHardware,
    workload: Workload,
    *,
    draft_peak_flops_per_s: np.ndarray | None = None,
    draft_weight_bytes_per_param: np.ndarray | None = None,
) -> DecodeOutcome:
    if isinstance(decoding, Autoregressive):
        return autoregressive(model, hw, workload)
    if isinstance(decoding, Speculative):
        return speculative(decoding, model, hw, workload, draft_peak_flops_per_s, draft_weight_bytes_per_param)
    if isinstance(decoding, Diffusion):
        return diffusion(decoding, model, hw, workload)
    if isinstance(decoding, BlockDiffusion):
        return block_diffusion(decoding, model, hw, workload)
    raise TypeError(f"unknown decoding {decoding!r}")


def _achieved(cost: PhaseCost) -> tuple[np.ndarray, np.ndarray]:
    return cost.flops_per_chip / cost.time_s, cost.bytes_per_chip / cost.time_s


def autoregressive(model: ModelSpec, hw: CandidateHardware, workload: Workload) -> DecodeOutcome:
    context = workload.mean_decode_context_tokens
    step = forward_cost(
        model, hw, sequences=hw.batch_per_replica, new_tokens=1.0, attention_pairs=context, kv_read_tokens=context, kv_write_tokens=1.0
    )
    flops, nbytes = _achieved(step)
    return DecodeOutcome(
        step=step,
        token_time_s=step.time_s,
        first_token_extra_s=np.zeros(len(hw)),
        achieved_flops_per_s_per_chip=flops,
        achieved_bytes_per_s_per_chip=nbytes,
        needs_prefill=True,
        tokens_per_step=1.0,
        delivered_tokens=float(workload.output_tokens),
        footprint=SequenceFootprint(workload.prompt_tokens + workload.output_tokens, 0.0, 1.0),
    )


def speculative(
    decoding: Speculative,
    model: ModelSpec,
    hw: CandidateHardware,
    workload: Workload,
    draft_peak: np.ndarray | None,
    draft_beta: np.ndarray | None,
) -> DecodeOutcome:
    """A cycle = k draft decode steps + one target forward verifying k+1 tokens.

    Verification is costed with the roofline at b*(k+1) tokens rather than as
    one step (Leviathan's thm 3.8 assumption), so it grows past the ridge.
    """
    k = decoding.draft_tokens
    alpha, _ = speculative_acceptance(decoding)
    tau = expected_tokens_per_step(alpha, k)
    context = workload.mean_decode_context_tokens
    b = hw.batch_per_replica
    draft = forward_cost(
        decoding.draft, hw, sequences=b, new_tokens=1.0, attention_pairs=context, kv_read_tokens=context, kv_write_tokens=1.0,
        weight_bytes_per_param=draft_beta, peak_flops_per_s=draft_peak,
    )  # fmt: skip
    verify = forward_cost(
        model, hw, sequences=b, new_tokens=k + 1.0, attention_pairs=(k + 1.0) * context, kv_read_tokens=context, kv_write_tokens=k + 1.0
    )
    cycle = k * draft.time_s + verify.time_s
    return DecodeOutcome(
        step=verify,
        token_time_s=cycle / tau,
        first_token_extra_s=np.zeros(len(hw)),
        achieved_flops_per_s_per_chip=(k * draft.flops_per_chip + verify.flops_per_chip) / cycle,
        achieved_bytes_per_s_per_chip=(k * draft.bytes_per_chip + verify.bytes_per_chip) / cycle,
        needs_prefill=True,
        tokens_per_step=tau,
        delivered_tokens=float(workload.output_tokens),
        footprint=SequenceFootprint(workload.prompt_tokens + workload.output_tokens + k, 0.0, k + 1.0),
    )


def diffusion_windows(output_tokens: int, window_tokens: int, adaptive: bool) -> list[tuple[int, float]]:
    """(window, share of the S steps) per stage. Adaptive: 64, 128, ... until the
    window covers G; each stage gets steps in proportion to the tokens it adds."""
    if not adaptive:
        return [(window_tokens, 1.0)]
    stages, window, covered = [], ADAPTIVE_WINDOW_START_TOKENS, 0
    while covered < output_tokens:
        new = min(window, output_tokens) - covered
        stages.append((window, new / output_tokens))
        covered += new
        window *= 2
    return stages


def diffusion(decoding: Diffusion, model: ModelSpec, hw: CandidateHardware, workload: Workload) -> DecodeOutcome:
    """LLaDA/MDLM: every step is a bidirectional forward over prompt + window,
    no KV cache; a fixed schedule commits G/S tokens per step."""
    out = max(workload.output_tokens, 1)
    window = decoding.window_tokens or out
    total, flops, nbytes, step = 0.0, 0.0, 0.0, None
    for width, share in diffusion_windows(out, window, decoding.adaptive_window):
        span = float(workload.prompt_tokens + width)
        step = forward_cost(
            model, hw, sequences=hw.batch_per_replica, new_tokens=span, attention_pairs=span * span, kv_read_tokens=0.0,
            kv_write_tokens=0.0, attention_flops_per_pair=model.prefill_attention_flops_per_pair,
        )  # fmt: skip
        forwards = decoding.steps * share
        total = total + forwards * step.time_s
        flops = flops + forwards * step.flops_per_chip
        nbytes = nbytes + forwards * step.bytes_per_chip
    widest = diffusion_windows(out, window, decoding.adaptive_window)[-1][0]
    return DecodeOutcome(
        step=step,
        token_time_s=total / out,
        first_token_extra_s=total,  # tokens are released when the window is done
        achieved_flops_per_s_per_chip=flops / total,
        achieved_bytes_per_s_per_chip=nbytes / total,
        needs_prefill=False,
        tokens_per_step=out / decoding.steps,
        delivered_tokens=float(out),
        footprint=SequenceFootprint(0.0, workload.prompt_tokens + widest, widest),
    )


def block_diffusion(decoding: BlockDiffusion, model: ModelSpec, hw: CandidateHardware, workload: Workload) -> DecodeOutcome:
    """Per block j (context C_j = P + j*B): S_eff denoising steps of
    b*(2*N*B + 4*L*H*d_h*B*(C_j + B)) FLOPs reading weights + b*(C_j + B) cached
    tokens, then one commit forward writing the block's KV. Early stop at EOS."""
    block, out = decoding.block_size, max(workload.output_tokens, 1)
    answer = min(decoding.expected_answer_tokens or out, out)
    count = blocks_computed(out, block, decoding.expected_answer_tokens)
    scale = focus_flop_scale(model.num_layers, decoding.focus_fraction)
    b, s_eff = hw.batch_per_replica, decoding.effective_steps

    def costs(j: int) -> tuple[PhaseCost, PhaseCost]:
        ctx = float(workload.prompt_tokens + j * block)
        pairs = block * (ctx + block)
        step = forward_cost(model, hw, sequences=b, new_tokens=float(block), attention_pairs=pairs, kv_read_tokens=ctx + block,
                            kv_write_tokens=0.0, flop_scale=scale)  # fmt: skip
        commit = forward_cost(model, hw, sequences=b, new_tokens=float(block), attention_pairs=pairs, kv_read_tokens=ctx,
                              kv_write_tokens=float(block))  # fmt: skip
        return step, commit

    (step0, commit0), (step_n, commit_n) = costs(0), costs(count - 1)

    def summed_time(first: PhaseCost, last: PhaseCost) -> np.ndarray:
        fixed = first.time_s - np.maximum(first.compute_s, first.memory_s)  # comm + p2p + overhead
        return sum_of_max_linear(first.compute_s, last.compute_s, first.memory_s, last.memory_s, count) + count * fixed

    total = s_eff * summed_time(step0, step_n) + summed_time(commit0, commit_n)
    flops = count / 2.0 * (s_eff * (step0.flops_per_chip + step_n.flops_per_chip) + commit0.flops_per_chip + commit_n.flops_per_chip)
    nbytes = count / 2.0 * (s_eff * (step0.bytes_per_chip + step_n.bytes_per_chip) + commit0.bytes_per_chip + commit_n.bytes_per_chip)
    return DecodeOutcome(
        step=step0,
        token_time_s=total / answer,
        first_token_extra_s=s_eff * step0.time_s,
        achieved_flops_per_s_per_chip=flops / total,
        achieved_bytes_per_s_per_chip=nbytes / total,
        needs_prefill=True,
        tokens_per_step=block / s_eff,
        delivered_tokens=float(answer),
        footprint=SequenceFootprint(workload.prompt_tokens + count * block, float(block), float(block)),
    )
