"""Decoding that puts several tokens per sequence through each forward, as the simulator steps it.

Two kinds, one interface (`MultiTokenDecode`) the scheduler and the step cost read:
- **Speculative rounds** (`Speculation`): a draft model (Leviathan et al., ICML 2023) or draft heads
  (DeepSeek MTP, EAGLE, Medusa). Each decode step the draft proposes k tokens for every decoding
  sequence (the method's draft forwards), then one target forward verifies k + 1 positions per sequence
  (k + 1 new tokens each, attending its context, reading it once). A round emits between 1 and k + 1
  tokens: the first rejected draft token is replaced by the target's, and when all k are accepted the
  bonus token follows. With each draft token accepted independently at rate alpha (Leviathan et al.
  sec. 3.1), a round emits j tokens with probability alpha^(j-1) (1 - alpha) for j <= k and alpha^k for
  j = k + 1, tau = (1 - alpha^(k+1)) / (1 - alpha) on average (their eq. 1). The draft phase's seconds
  are tabulated once per deployment over the number of decoding sequences, at the workload's mean decode
  context (the draft's own cache is small beside the target's).
- **Block diffusion** (`DiffusionBlocks`; BD3-LM, Arriola et al., ICLR 2025; Fast-dLLM v2): the answer is
  generated in blocks of B tokens; each block takes S denoising forwards of its B positions over the
  cached context, then one commit forward writes its KV. A block's tokens are released when its
  denoising ends, so the first token comes S forwards after the prefill. A fractional S (B over the
  tokens a confidence threshold finalises per forward) is rounded per block at random, keeping its mean;
  FOCUS's position pruning scales the decode positions' FLOPs.
A request's forwards are planned when it starts decoding (`planner(...).plan`), so requests differ as
their acceptance does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..decoding import BlockDiffusion, DraftHeads, Speculative
from ..decoding.acceptance import expected_tokens_per_step
from ..decoding.base import DecodeInputs, ResidentModel
from ..decoding.block_diffusion import focus_flop_scale
from ..decoding.speculative import verification_cost
from ..deployment import Deployment
from ..efficiency import Calibration, Override
from ..specs import ModelSpec, Workload
from .arrays import deployment_arrays

SPECULATING = (Speculative, DraftHeads)


class MultiTokenDecode(Protocol):
    label: str

    @property
    def tokens_per_decode(self) -> int: ...  # positions a decoding sequence puts through one forward

    @property
    def slack_tokens(self) -> int: ...  # positions written beyond the answer (reserved with it)

    @property
    def context_per_forward(self) -> float: ...  # mean tokens committed to the context per forward

    @property
    def extra_s_by_sequences(self) -> list[float] | None: ...  # seconds added to a step with n decoding sequences

    @property
    def decode_compute_scale(self) -> float: ...  # of the decode positions' FLOPs, the share computed

    @property
    def first_token_at_prefill(self) -> bool: ...  # the prefill's last position samples the first token

    def planner(self, tokens: int, rng: np.random.Generator) -> Any: ...  # .plan(tokens) -> (release forward, forwards)


@dataclass(frozen=True, kw_only=True)
class Speculation:
    label: str
    draft_tokens: int  # k
    acceptance_rate: float  # alpha, per draft token
    draft_s_by_sequences: list[float]  # the draft phase of one round for n decoding sequences, n = 0..
    first_token_at_prefill = True
    decode_compute_scale = 1.0

    @property
    def tokens_per_decode(self) -> int:
        return self.draft_tokens + 1

    @property
    def slack_tokens(self) -> int:
        return self.draft_tokens

    @property
    def context_per_forward(self) -> float:
        return self.tokens_per_round

    @property
    def extra_s_by_sequences(self) -> list[float]:
        return self.draft_s_by_sequences

    def planner(self, tokens: int, rng: np.random.Generator) -> RoundDrawer:
        return self.drawer(tokens, rng)

    @property
    def tokens_per_round(self) -> float:
        return float(expected_tokens_per_step(self.acceptance_rate, self.draft_tokens))

    @property
    def emitted_probabilities(self) -> np.ndarray:
        """P(a round emits j tokens), j = 1..k+1."""
        a, k = self.acceptance_rate, self.draft_tokens
        p = np.array([a ** (j - 1) * (1.0 - a) for j in range(1, k + 1)] + [a**k])
        return p / p.sum()

    def drawer(self, tokens: int, rng: np.random.Generator) -> RoundDrawer:
        """Draws of the rounds for requests whose answers total at most `tokens` tokens."""
        return RoundDrawer(self, tokens, rng)


class RoundDrawer:
    """How many rounds a request's remaining tokens take, drawn from one stream of rounds for the whole
    run: a round emits the drafts accepted up to the first rejection plus the target's own token, a
    geometric count capped at k + 1. The stream is drawn ahead in chunks sized by tau and extended when
    a run uses it up."""

    def __init__(self, speculation: Speculation, tokens: int, rng: np.random.Generator) -> None:
        self._k1, self._alpha, self._rng = speculation.draft_tokens + 1, speculation.acceptance_rate, rng
        self._emitted_through = np.zeros(0, dtype=np.int64)
        self._next = 0
        self._extend(int(max(tokens, 0) / speculation.tokens_per_round * 1.05) + 1024)

    def _extend(self, rounds: int) -> None:
        if self._alpha >= 1.0:
            emitted = np.full(rounds, self._k1, dtype=np.int64)
        else:
            emitted = np.minimum(self._rng.geometric(1.0 - self._alpha, size=rounds), self._k1)
        base = self._emitted_through[-1] if len(self._emitted_through) else 0
        self._emitted_through = np.concatenate([self._emitted_through, base + np.cumsum(emitted)])

    def plan(self, tokens: int) -> tuple[int, int]:
        """(the forward that releases the first token: 0, the prefill's; the rounds)."""
        return 0, self.rounds(tokens)

    def rounds(self, tokens: int) -> int:
        """Rounds that emit at least `tokens` tokens (0 for none)."""
        if tokens <= 0:
            return 0
        start = self._next
        goal = (int(self._emitted_through[start - 1]) if start else 0) + tokens
        while self._emitted_through[-1] < goal:
            self._extend(max(tokens, 1024))
        last = int(np.searchsorted(self._emitted_through, goal))
        self._next = last + 1
        return last - start + 1

def speculation_for(
    model: ModelSpec,
    deployment: Deployment,
    *,
    workload: Workload,
    max_sequences: int,
    efficiency: Override | None = None,
    calibration: Calibration | None = None,
) -> tuple[Speculation, tuple[ResidentModel, ...]]:
    """The deployment's speculative method as the simulator steps it, and what it holds beside the target
    (the draft model or heads, for the KV capacity): the method's own decode() over 1..max_sequences
    sequences per replica, its draft phase being its cycle less the target's verification."""
    method = deployment.decoding
    if not isinstance(method, SPECULATING):
        raise ValueError(f"decoding {method.label!r} does not speculate")
    n = np.arange(1, max(max_sequences, 1) + 1, dtype=float)
    grid, compute, hw = deployment_arrays(model, deployment, efficiency=efficiency, calibration=calibration, batch=n * deployment.replicas)
    inputs = DecodeInputs(model=model, hw=hw, workload=workload, grid=grid, compute=compute)
    outcome = method.decode(inputs)
    alpha, _ = method.acceptance()
    k = method.draft_tokens
    tau = expected_tokens_per_step(alpha, k)
    draft = outcome.token_time_s * tau - verification_cost(inputs, k).time_s
    speculation = Speculation(label=method.label, draft_tokens=k, acceptance_rate=float(alpha),
                              draft_s_by_sequences=[0.0] + np.maximum(draft, 0.0).tolist())  # fmt: skip
    return speculation, outcome.resident



@dataclass(frozen=True, kw_only=True)
class DiffusionBlocks:
    label: str
    block_size: int  # B
    steps_per_block: float  # S (mean denoising forwards per block)
    focus_scale: float = 1.0  # FOCUS: the decode positions' FLOPs computed
    first_token_at_prefill = False
    extra_s_by_sequences = None

    @property
    def tokens_per_decode(self) -> int:
        return self.block_size

    @property
    def slack_tokens(self) -> int:
        return self.block_size - 1  # the last block is whole

    @property
    def context_per_forward(self) -> float:
        return self.block_size / (self.steps_per_block + 1.0)

    @property
    def decode_compute_scale(self) -> float:
        return self.focus_scale

    def planner(self, tokens: int, rng: np.random.Generator) -> BlockPlanner:
        return BlockPlanner(self, rng)


class BlockPlanner:
    def __init__(self, blocks: DiffusionBlocks, rng: np.random.Generator) -> None:
        self._b, self._s, self._rng = blocks.block_size, blocks.steps_per_block, rng

    def plan(self, tokens: int) -> tuple[int, int]:
        """(the forward whose end releases the first block, the forwards until the last block is released):
        each block's denoising forwards, S rounded up or down at random to keep its mean, and a commit
        between blocks (the last block's KV is never needed)."""
        count = max(math.ceil(tokens / self._b), 1)
        low = math.floor(self._s)
        steps = np.maximum(low + (self._rng.random(count) < self._s - low), 1)
        return int(steps[0]), int(steps.sum()) + count - 1


def diffusion_for(model: ModelSpec, deployment: Deployment) -> DiffusionBlocks:
    method = deployment.decoding
    if not isinstance(method, BlockDiffusion):
        raise ValueError(f"decoding {method.label!r} is not block diffusion")
    return DiffusionBlocks(label=method.label, block_size=method.block_size, steps_per_block=float(method.effective_steps),
                           focus_scale=float(focus_flop_scale(model.num_layers, method.focus_fraction)))  # fmt: skip
