"""Autoregressive decoding: one forward per token per sequence
(docs/planner_math.md#autoregressive)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..attention import at_ranks
from ..forward import forward_cost
from ..memory import SequenceFootprint
from .base import DecodeInputs, DecodeOutcome, Resolvers, achieved
from .registry import register


@register
@dataclass(frozen=True, kw_only=True)
class Autoregressive:
    method = "ar"
    is_reference = True

    @property
    def label(self) -> str:
        return "ar"

    @classmethod
    def from_params(cls, params: Mapping[str, Any], resolvers: Resolvers) -> Autoregressive:
        return cls()

    def decode(self, inputs: DecodeInputs) -> DecodeOutcome:
        model, hw, workload = inputs.model, inputs.hw, inputs.workload
        attention = at_ranks(model.attention, hw.tensor_parallel)
        context = workload.mean_decode_context_tokens
        step = forward_cost(
            model, hw, sequences=hw.batch_per_replica, new_tokens=1.0, attention_pairs=attention.attended_positions(context),
            kv_read_tokens=attention.kv_read_tokens(context), kv_write_tokens=1.0,
        )  # fmt: skip
        flops, nbytes = achieved(step)
        return DecodeOutcome(
            step=step,
            token_time_s=step.time_s,
            first_token_extra_s=np.zeros(len(hw)),
            achieved_flops_per_s_per_chip=flops,
            achieved_bytes_per_s_per_chip=nbytes,
            needs_prefill=True,
            tokens_per_step=1.0,
            delivered_tokens=float(workload.output_tokens),
            footprint=SequenceFootprint(cached_tokens=workload.prompt_tokens + workload.output_tokens, workspace_tokens=0.0, logit_rows=1.0),
        )

    def warnings(self, compute_warning) -> tuple[str, ...]:
        return ()

    def result_fields(self) -> dict[str, Any]:
        return {}
