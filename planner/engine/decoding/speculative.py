"""Speculative decoding with a draft model (Leviathan, Kalman, Matias, ICML 2023;
docs/planner_math.md#speculative-with-a-draft-model)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..attention import at_ranks
from ..forward import forward_cost
from ..memory import SequenceFootprint
from ..specs import ModelSpec
from ..units import DTYPE_BYTES_ARRAY, DTYPE_CODE
from .acceptance import check_draft_tokens, expected_tokens_per_step, resolve_acceptance
from .base import DecodeInputs, DecodeOutcome, ResidentModel, Resolvers
from .registry import register

# Leviathan et al. Table 3 reports alpha of roughly 0.6-0.9 for model drafts
# (n-gram drafts score far lower); we assume 0.7 when nothing is given, and say so.
DEFAULT_ACCEPTANCE_RATE = 0.7
DEFAULT_ACCEPTANCE_SOURCE = "typical of model drafts in Leviathan et al., Table 3"


@register
@dataclass(frozen=True, kw_only=True)
class Speculative:
    method = "speculative"
    is_reference = False

    draft: ModelSpec
    draft_tokens: int
    acceptance_rate: float | None = None
    mean_accepted_tokens: float | None = None  # tau, incl. the bonus token (EAGLE/Medusa)
    draft_weight_dtype: str | None = None  # None: same as the target's weights

    def __post_init__(self) -> None:
        check_draft_tokens(self.draft_tokens, self.mean_accepted_tokens)

    @property
    def label(self) -> str:
        return f"speculative(k={self.draft_tokens})"

    @classmethod
    def from_params(cls, params: Mapping[str, Any], resolvers: Resolvers) -> Speculative:
        draft = params.get("draft_model")
        if draft is None or resolvers.resolve_model is None:
            raise ValueError("speculative decoding needs the draft ModelSpec (decoding_params.draft_model)")
        return cls(
            draft=resolvers.resolve_model(draft), draft_tokens=int(params.get("draft_tokens", 4)),
            acceptance_rate=params.get("acceptance_rate"), mean_accepted_tokens=params.get("mean_accepted_tokens"),
            draft_weight_dtype=params.get("draft_weight_dtype"),
        )  # fmt: skip

    def acceptance(self) -> tuple[float, str | None]:
        return resolve_acceptance(
            acceptance_rate=self.acceptance_rate, mean_accepted_tokens=self.mean_accepted_tokens, draft_tokens=self.draft_tokens,
            default=DEFAULT_ACCEPTANCE_RATE, why_default=DEFAULT_ACCEPTANCE_SOURCE,
        )  # fmt: skip

    def _draft_arrays(self, inputs: DecodeInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(peak FLOP/s, its routed experts' peak, bytes per weight, no math path) of the draft's dtype per candidate."""
        hw, grid = inputs.hw, inputs.grid
        if self.draft_weight_dtype is None:
            return hw.peak_flops_per_s, hw.expert_peak_flops_per_s, hw.weight_bytes_per_param, np.zeros(len(grid), dtype=bool)
        code = DTYPE_CODE[self.draft_weight_dtype]
        compute = inputs.compute
        peak, expert_peak = compute.peak_flops_per_s[grid.chip_index, code], compute.expert_peak_flops_per_s[grid.chip_index, code]
        return peak, expert_peak, np.full(len(grid), DTYPE_BYTES_ARRAY[code]), compute.compute_code[grid.chip_index, code] < 0

    def decode(self, inputs: DecodeInputs) -> DecodeOutcome:
        """A cycle = k draft decode steps + one target forward verifying k+1 tokens.

        Verification is costed with the roofline at b*(k+1) tokens rather than as
        one step (Leviathan's thm 3.8 assumption), so it grows past the ridge.
        """
        hw, workload = inputs.hw, inputs.workload
        draft_peak, draft_expert_peak, draft_beta, draft_no_math = self._draft_arrays(inputs)
        k = self.draft_tokens
        alpha, _ = self.acceptance()
        tau = expected_tokens_per_step(alpha, k)
        context = workload.mean_decode_context_tokens
        b = hw.batch_per_replica
        att = at_ranks(self.draft.attention, hw.tensor_parallel)  # per TP rank, as the target's
        draft = forward_cost(
            self.draft, hw, sequences=b, new_tokens=1.0, attention_pairs=att.attended_positions(context),
            kv_read_tokens=att.kv_read_tokens(context), kv_write_tokens=1.0, weight_bytes_per_param=draft_beta,
            peak_flops_per_s=draft_peak, expert_peak_flops_per_s=draft_expert_peak,
        )  # fmt: skip
        # The draft is sharded like the target and keeps its own cache (Leviathan et al.).
        resident = (ResidentModel(model=self.draft, weight_bytes_per_param=draft_beta),)
        return speculation_outcome(inputs, draft_step=draft, draft_steps=k, draft_tokens=k, tau=tau, resident=resident,
                                   no_math_path=draft_no_math)  # fmt: skip

    def warnings(self, compute_warning) -> tuple[str, ...]:
        out = []
        _, assumed = self.acceptance()
        if assumed:
            out.append(assumed)
        if self.draft_weight_dtype:
            fallback = compute_warning(self.draft_weight_dtype)
            if fallback:
                out.append(f"draft model: {fallback}")
        return tuple(out)

    def result_fields(self) -> dict[str, Any]:
        alpha, _ = self.acceptance()
        return {"draft_model": self.draft.slug, "draft_tokens": self.draft_tokens, "acceptance_rate": alpha,
                "mean_accepted_tokens": expected_tokens_per_step(alpha, self.draft_tokens)}  # fmt: skip


def speculation_outcome(
    inputs: DecodeInputs, *, draft_step, draft_steps, draft_tokens: int, tau: float, resident: tuple[ResidentModel, ...],
    no_math_path: np.ndarray | None = None,
) -> DecodeOutcome:
    """A cycle of `draft_steps` proposal forwards (`draft_step` each) and one verification of
    draft_tokens + 1 positions, emitting tau tokens: what draft models and draft heads share."""
    workload = inputs.workload
    verify = verification_cost(inputs, draft_tokens)
    cycle = draft_steps * draft_step.time_s + verify.time_s
    cached = workload.prompt_tokens + workload.output_tokens + draft_tokens
    return DecodeOutcome(
        step=verify,
        token_time_s=cycle / tau,
        first_token_extra_s=np.zeros(len(inputs.hw)),
        achieved_flops_per_s_per_chip=(draft_steps * draft_step.flops_per_chip + verify.flops_per_chip) / cycle,
        achieved_bytes_per_s_per_chip=(draft_steps * draft_step.bytes_per_chip + verify.bytes_per_chip) / cycle,
        needs_prefill=True,
        tokens_per_step=tau,
        delivered_tokens=float(workload.output_tokens),
        footprint=SequenceFootprint(cached_tokens=cached, workspace_tokens=0.0, logit_rows=draft_tokens + 1.0),
        resident=resident,
        no_math_path=no_math_path,
    )


def verification_cost(inputs: DecodeInputs, draft_tokens: int):
    """One target forward over the k proposed tokens plus the bonus position, each attending
    to the context, writing k+1 cache entries."""
    model, hw, workload = inputs.model, inputs.hw, inputs.workload
    att = at_ranks(model.attention, hw.tensor_parallel)
    context = workload.mean_decode_context_tokens
    k = draft_tokens
    return forward_cost(
        model, hw, sequences=hw.batch_per_replica, new_tokens=k + 1.0, attention_pairs=(k + 1.0) * att.attended_positions(context),
        kv_read_tokens=att.kv_read_tokens(context), kv_write_tokens=k + 1.0,
    )  # fmt: skip
