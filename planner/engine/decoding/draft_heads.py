"""Speculative decoding with draft heads on the target itself, no draft model
(docs/planner_math.md#speculative-with-draft-heads):

- MTP, DeepSeek-V3 technical report (arXiv:2412.19437) sec. 2.2: each module is a
  projection of 2d -> d and one transformer block, sharing the embedding and the output
  head; the k modules run one after another, each with its own one-layer cache.
- EAGLE (Li et al., ICML 2024): one decoder layer over the target's features plus an fc of
  2d -> d, run autoregressively k times, sharing the LM head; one layer of cache.
- Medusa (Cai et al., ICML 2024): k heads, each a residual block of d x d and its own
  vocab x d output layer, all computed in one pass on the last hidden state; no cache.

A cycle is the heads' forwards plus one target forward verifying k+1 tokens (as with a
draft model); tokens per cycle tau from Leviathan et al. eq. 1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


from hwcatalog import architecture

from ..attention import at_ranks
from ..forward import forward_cost
from ..specs import ModelSpec
from .acceptance import check_draft_tokens, expected_tokens_per_step, resolve_acceptance
from .base import DecodeInputs, DecodeOutcome, ResidentModel, Resolvers
from .registry import register
from .speculative import DEFAULT_ACCEPTANCE_RATE, speculation_outcome

HEAD_KINDS = ("mtp", "eagle", "medusa")
# DeepSeek-V3 report sec. 5.4.3: the second token's acceptance "ranges between 85% and 90%".
DEFAULT_MTP_ACCEPTANCE_RATE = 0.85


@register
@dataclass(frozen=True, kw_only=True)
class DraftHeads:
    method = "draft_heads"
    is_reference = False

    head_kind: str = "mtp"
    draft_tokens: int = 1
    acceptance_rate: float | None = None
    mean_accepted_tokens: float | None = None
    head_params: float | None = None  # weights of one head (not the shared LM head); None: from the target's shape

    def __post_init__(self) -> None:
        if self.head_kind not in HEAD_KINDS:
            raise ValueError(f"head_kind must be one of {', '.join(HEAD_KINDS)}, not {self.head_kind!r}")
        check_draft_tokens(self.draft_tokens, self.mean_accepted_tokens)
        if self.head_params is not None and self.head_params <= 0:
            raise ValueError("head_params must be > 0")

    @property
    def label(self) -> str:
        return f"{self.head_kind}(k={self.draft_tokens})"

    @classmethod
    def from_params(cls, params: Mapping[str, Any], resolvers: Resolvers) -> DraftHeads:
        return cls(
            head_kind=params.get("head_kind", "mtp"), draft_tokens=int(params.get("draft_tokens", 1)),
            acceptance_rate=params.get("acceptance_rate"), mean_accepted_tokens=params.get("mean_accepted_tokens"),
            head_params=params.get("head_params"),
        )  # fmt: skip

    def acceptance(self) -> tuple[float, str | None]:
        if self.head_kind == "mtp":
            default, why = DEFAULT_MTP_ACCEPTANCE_RATE, "DeepSeek-V3 report sec. 5.4.3: 85-90% for the second token"
        else:
            default, why = DEFAULT_ACCEPTANCE_RATE, "no published rate per head for this kind; the draft-model default"
        return resolve_acceptance(
            acceptance_rate=self.acceptance_rate, mean_accepted_tokens=self.mean_accepted_tokens, draft_tokens=self.draft_tokens,
            default=default, why_default=why,
        )  # fmt: skip

    def head_model(self, model: ModelSpec) -> tuple[ModelSpec, float]:
        """(the spec one head step runs, its weights not shared with the target)."""
        d, vocab = model.hidden_size, model.vocab_size
        if self.head_kind == "medusa":
            own = self.head_params or float(d * d + vocab * d)  # residual block + its own output layer
            step_params = self.draft_tokens * own  # every head in one pass
            # A residual block per head, no attention: one "layer" of traffic and all-reduces.
            spec = ModelSpec(
                slug=f"{model.slug}-medusa-heads", total_params=step_params, active_params=step_params, embedding_params=0.0,
                lm_head_params=0.0, shape=dataclasses.replace(model.shape, num_layers=1, num_experts=None, moe_layer_count=None),
                max_context_tokens=model.max_context_tokens, checkpoint_format=model.checkpoint_format,
            )  # fmt: skip
            return spec, step_params
        one_layer = dataclasses.replace(model.shape, num_layers=1, moe_layer_count=1 if model.is_moe else None)
        stored = architecture.stored_embedding_params(one_layer)  # shared with the target
        projection = 2.0 * d * d  # concat(hidden, embedding) -> d
        own = self.head_params or float(architecture.parameter_count(one_layer) - stored) + projection
        active = self.head_params or float(architecture.active_parameter_count(one_layer) - stored) + projection
        spec = ModelSpec(
            slug=f"{model.slug}-{self.head_kind}-head", shape=one_layer, total_params=own + model.lm_head_params,
            active_params=active + model.lm_head_params, embedding_params=0.0, lm_head_params=model.lm_head_params,
            max_context_tokens=model.max_context_tokens, checkpoint_format=model.checkpoint_format,
        )  # fmt: skip
        return spec, own

    def decode(self, inputs: DecodeInputs) -> DecodeOutcome:
        model, hw, workload = inputs.model, inputs.hw, inputs.workload
        k = self.draft_tokens
        alpha, _ = self.acceptance()
        tau = expected_tokens_per_step(alpha, k)
        head, own = self.head_model(model)
        b = hw.batch_per_replica
        context = workload.mean_decode_context_tokens
        if self.head_kind == "medusa":
            step = forward_cost(head, hw, sequences=b, new_tokens=1.0, attention_pairs=0.0, kv_read_tokens=0.0, kv_write_tokens=0.0)
            steps = 1.0
        else:
            att = at_ranks(head.attention, hw.tensor_parallel)
            step = forward_cost(
                head, hw, sequences=b, new_tokens=1.0, attention_pairs=att.attended_positions(context),
                kv_read_tokens=att.kv_read_tokens(context), kv_write_tokens=1.0,
            )  # fmt: skip
            steps = float(k)
        resident = tuple(
            ResidentModel(model=head, weight_bytes_per_param=hw.weight_bytes_per_param, resident_params=own,
                          keeps_cache=self.head_kind != "medusa")
            for _ in range(k if self.head_kind == "mtp" else 1)  # MTP: k modules; EAGLE: one head run k times
        )  # fmt: skip
        return speculation_outcome(inputs, draft_step=step, draft_steps=steps, draft_tokens=k, tau=tau, resident=resident)

    def warnings(self, compute_warning) -> tuple[str, ...]:
        _, assumed = self.acceptance()
        return (assumed,) if assumed else ()

    def result_fields(self) -> dict[str, Any]:
        alpha, _ = self.acceptance()
        return {"head_kind": self.head_kind, "draft_tokens": self.draft_tokens, "acceptance_rate": alpha,
                "mean_accepted_tokens": expected_tokens_per_step(alpha, self.draft_tokens)}  # fmt: skip

