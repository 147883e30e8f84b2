"""Block diffusion (BD3-LM, Arriola et al., ICLR 2025; Fast-dLLM, Wu et al. 2025): blocks of
B tokens denoised over a KV cache, with early stop at EOS and FOCUS's position pruning
(docs/planner_math.md#block-diffusion)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..attention import at_ranks
from ..forward import PhaseCost, forward_cost, sum_of_max_linear
from ..memory import SequenceFootprint
from .base import DecodeInputs, DecodeOutcome, Resolvers
from .registry import register

FOCUS_DENSE_LAYERS = 2  # FOCUS keeps every position in the first layers


def blocks_computed(output_tokens: int, block_size: int, answer_tokens: int | None = None) -> int:
    """Blocks run: ceil(G/B), or ceil((answer + 1)/B) when EOS lands earlier."""
    full = math.ceil(output_tokens / block_size)
    if answer_tokens is None or answer_tokens >= output_tokens:
        return full
    return math.ceil((answer_tokens + 1) / block_size)


def blocks_saved_by_early_stop(output_tokens: int, block_size: int, answer_tokens: int) -> int:
    """ceil(G/B) - ceil((answer + 1)/B) whole blocks never computed."""
    return math.ceil(output_tokens / block_size) - blocks_computed(output_tokens, block_size, answer_tokens)


@dataclass(frozen=True, kw_only=True)
class BlockForwards:
    """The forwards one sequence's generation runs after its prefill, as decode() costs them."""

    blocks: int
    denoising_forwards: float  # S_eff per block
    commit_forwards: int  # one per block, writing its final KV

    @property
    def forwards(self) -> float:
        return self.denoising_forwards + self.commit_forwards


def forwards_per_generation(output_tokens: int, block_size: int, effective_steps: float,
                            answer_tokens: int | None = None) -> BlockForwards:
    """n_blk = blocks_computed(G, B, answer); S_eff denoising forwards per block and one commit forward per
    block but the last computed, whose KV nothing reads (jobs/trials/block_diffusion.py skips it too)."""
    count = blocks_computed(output_tokens, block_size, answer_tokens)
    return BlockForwards(blocks=count, denoising_forwards=count * effective_steps, commit_forwards=max(count - 1, 0))


def focus_flop_scale(num_layers: int, focus_fraction: float) -> float:
    """FOCUS computes every position in the first 2 layers, then only a fraction f."""
    dense = min(FOCUS_DENSE_LAYERS, num_layers)
    return (dense + (num_layers - dense) * focus_fraction) / num_layers


@register
@dataclass(frozen=True, kw_only=True)
class BlockDiffusion:
    method = "block_diffusion"
    is_reference = False

    block_size: int
    steps_per_block: int | None = None
    tokens_per_forward: float | None = None  # confidence-threshold decoding
    expected_answer_tokens: int | None = None  # None: the workload's output tokens
    focus_fraction: float = 1.0  # FOCUS: share of block positions kept after layer 2

    def __post_init__(self) -> None:
        if (self.steps_per_block is None) == (self.tokens_per_forward is None):
            raise ValueError("give exactly one of steps_per_block and tokens_per_forward")
        if not 0.0 < self.focus_fraction <= 1.0:
            raise ValueError("focus_fraction must lie in (0, 1]")

    @property
    def effective_steps(self) -> float:
        """S_eff = S, or B / tau with confidence-threshold decoding."""
        if self.steps_per_block is not None:
            return float(self.steps_per_block)
        return max(self.block_size / self.tokens_per_forward, 1.0)

    @property
    def label(self) -> str:
        return f"block_diffusion(B={self.block_size}, S_eff={self.effective_steps:g})"

    @classmethod
    def from_params(cls, params: Mapping[str, Any], resolvers: Resolvers) -> BlockDiffusion:
        default_block = resolvers.model.default_block_size if resolvers.model is not None else None
        block = int(params.get("block_size") or default_block or 32)
        steps, per_forward = params.get("steps_per_block"), params.get("tokens_per_forward")
        if steps is None and per_forward is None:
            steps = block  # the conservative fixed schedule: one token per step
        return cls(
            block_size=block, steps_per_block=int(steps) if steps is not None else None,
            tokens_per_forward=float(per_forward) if per_forward is not None else None,
            expected_answer_tokens=params.get("expected_answer_tokens"), focus_fraction=float(params.get("focus_fraction", 1.0)),
        )  # fmt: skip

    def answer_tokens(self, output_tokens: int) -> int:
        """Tokens delivered: the expected answer where EOS lands before the G asked for."""
        out = max(output_tokens, 1)
        return min(self.expected_answer_tokens or out, out)

    def forwards(self, output_tokens: int) -> BlockForwards:
        """The forwards decode() charges for `output_tokens` (early stop at expected_answer_tokens)."""
        return forwards_per_generation(max(output_tokens, 1), self.block_size, self.effective_steps, self.expected_answer_tokens)

    def decode(self, inputs: DecodeInputs) -> DecodeOutcome:
        """Per block j (context C_j = P + j*B): S_eff denoising steps of
        b*(2*N*B + 4*L*H*d_h*B*(C_j + B)) FLOPs reading weights + b*(C_j + B) cached
        tokens, then one commit forward writing the block's KV, but for the last block computed (nothing reads
        its KV). Early stop at EOS."""
        model, hw, workload = inputs.model, inputs.hw, inputs.workload
        att = at_ranks(model.attention, hw.tensor_parallel)
        block, out = self.block_size, max(workload.output_tokens, 1)
        answer = self.answer_tokens(out)
        forwards = self.forwards(out)
        count, commits = forwards.blocks, forwards.commit_forwards
        scale = focus_flop_scale(model.num_layers, self.focus_fraction)
        b, s_eff = hw.batch_per_replica, self.effective_steps

        def costs(j: int) -> tuple[PhaseCost, PhaseCost]:
            ctx = float(workload.prompt_tokens + j * block)
            pairs = block * att.attended_positions(ctx + block)
            step = forward_cost(model, hw, sequences=b, new_tokens=float(block), attention_pairs=pairs,
                                kv_read_tokens=att.kv_read_tokens(ctx + block), kv_write_tokens=0.0, flop_scale=scale)  # fmt: skip
            commit = forward_cost(model, hw, sequences=b, new_tokens=float(block), attention_pairs=pairs,
                                  kv_read_tokens=att.kv_read_tokens(ctx), kv_write_tokens=float(block))  # fmt: skip
            return step, commit

        (step0, commit0), step_n, commit_n = costs(0), costs(count - 1)[0], costs(max(commits - 1, 0))[1]

        def summed_time(first: PhaseCost, last: PhaseCost, n: int) -> np.ndarray:
            fixed = first.time_s - np.maximum(first.compute_s, first.memory_s)  # comm + p2p + overhead
            return sum_of_max_linear(first.compute_s, last.compute_s, first.memory_s, last.memory_s, n) + n * fixed

        total = s_eff * summed_time(step0, step_n, count) + summed_time(commit0, commit_n, commits)
        flops = count / 2.0 * s_eff * (step0.flops_per_chip + step_n.flops_per_chip) + commits / 2.0 * (commit0.flops_per_chip + commit_n.flops_per_chip)
        nbytes = count / 2.0 * s_eff * (step0.bytes_per_chip + step_n.bytes_per_chip) + commits / 2.0 * (commit0.bytes_per_chip + commit_n.bytes_per_chip)
        first = s_eff * step0.time_s  # the first block denoised: its tokens are out
        return DecodeOutcome(
            step=step0,
            token_time_s=total / answer,
            streamed_token_time_s=np.maximum(total - first, 0.0) / max(answer - 1.0, 1.0),  # one block: 0, not a rounding's -1e-19
            first_token_extra_s=first,
            achieved_flops_per_s_per_chip=flops / total,
            achieved_bytes_per_s_per_chip=nbytes / total,
            needs_prefill=True,
            tokens_per_step=block / s_eff,
            delivered_tokens=float(answer),
            footprint=SequenceFootprint(cached_tokens=workload.prompt_tokens + count * block, workspace_tokens=float(block), logit_rows=float(block)),
        )

    def warnings(self, compute_warning) -> tuple[str, ...]:
        return ()

    def result_fields(self) -> dict[str, Any]:
        return {"block_size": self.block_size, "effective_steps": self.effective_steps, "focus_fraction": self.focus_fraction,
                "expected_answer_tokens": self.expected_answer_tokens}  # fmt: skip
