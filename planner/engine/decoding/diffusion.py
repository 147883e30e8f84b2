"""Masked diffusion (LLaDA, Nie et al. 2025; MDLM, Sahoo et al. 2024): S bidirectional
forwards over prompt + window, no KV cache (docs/planner_math.md#masked-diffusion)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..attention import at_ranks
from ..forward import forward_cost
from ..memory import SequenceFootprint
from .base import DecodeInputs, DecodeOutcome, Resolvers
from .registry import register

ADAPTIVE_WINDOW_START_TOKENS = 64


def diffusion_windows(output_tokens: int, window_tokens: int, adaptive: bool) -> list[tuple[int, float]]:
    """(generated span a forward covers, share of the S steps) per stage; each stage gets steps in
    proportion to the tokens it adds.

    - A window covering the answer: one stage over it.
    - A window shorter than the answer (LLaDA's semi-autoregressive blocks): the answer is made
      window by window, each forward spanning what is done so far plus the current window, so
      a longer answer costs more.
    - Adaptive: a window of 64, 128, ... tokens, doubling until it covers G.
    """
    if not adaptive and window_tokens >= output_tokens:
        return [(window_tokens, 1.0)]
    stages, covered = [], 0
    window = ADAPTIVE_WINDOW_START_TOKENS if adaptive else window_tokens
    while covered < output_tokens:
        span = min(window if adaptive else covered + window, output_tokens)
        new = span - covered
        stages.append((window if adaptive else span, new / output_tokens))
        covered += new
        if adaptive:
            window *= 2
    return stages


@register
@dataclass(frozen=True, kw_only=True)
class Diffusion:
    method = "diffusion"
    is_reference = False

    steps: int
    window_tokens: int | None = None  # None: the workload's output tokens
    adaptive_window: bool = False  # start at 64 tokens, double as needed

    @property
    def label(self) -> str:
        return f"diffusion(S={self.steps}{', adaptive' if self.adaptive_window else ''})"

    @classmethod
    def from_params(cls, params: Mapping[str, Any], resolvers: Resolvers) -> Diffusion:
        # Default: LLaDA's schedule of one token per step over the whole answer.
        steps = params.get("steps") or resolvers.output_tokens
        if steps is None:
            raise ValueError("diffusion needs steps (decoding_params.steps)")
        return cls(steps=int(steps), window_tokens=params.get("window_tokens"), adaptive_window=bool(params.get("adaptive_window", False)))

    def decode(self, inputs: DecodeInputs) -> DecodeOutcome:
        """Every step is a bidirectional forward over prompt + window with no KV cache;
        a fixed schedule commits G/S tokens per step."""
        model, hw, workload = inputs.model, inputs.hw, inputs.workload
        att = at_ranks(model.attention, hw.tensor_parallel)  # per TP rank (a DSA indexer runs whole on each)
        out = max(workload.output_tokens, 1)
        window = self.window_tokens or out
        total, flops, nbytes, step = 0.0, 0.0, 0.0, None
        stages = diffusion_windows(out, window, self.adaptive_window)
        for width, share in stages:
            span = float(workload.prompt_tokens + width)
            step = forward_cost(
                model, hw, sequences=hw.batch_per_replica, new_tokens=span, attention_pairs=att.bidirectional_pairs(span),
                kv_read_tokens=0.0, kv_write_tokens=0.0, attention_flops_per_pair=att.prefill_flops_per_pair,
            )  # fmt: skip
            forwards = self.steps * share
            total = total + forwards * step.time_s
            flops = flops + forwards * step.flops_per_chip
            nbytes = nbytes + forwards * step.bytes_per_chip
        widest = stages[-1][0]
        return DecodeOutcome(
            step=step,
            token_time_s=total / out,
            first_token_extra_s=total,  # tokens are released when the window is done
            achieved_flops_per_s_per_chip=flops / total,
            achieved_bytes_per_s_per_chip=nbytes / total,
            needs_prefill=False,
            tokens_per_step=out / self.steps,
            delivered_tokens=float(out),
            footprint=SequenceFootprint(cached_tokens=0.0, workspace_tokens=workload.prompt_tokens + widest, logit_rows=widest),
        )

    def warnings(self, compute_warning) -> tuple[str, ...]:
        return ()

    def result_fields(self) -> dict[str, Any]:
        return {"steps": self.steps, "window_tokens": self.window_tokens, "adaptive_window": self.adaptive_window}
