"""The time of one scheduler step, from the planner's own forward model (forward.py).

A continuous-batching step is one forward over every token scheduled in it: the new tokens of the
prefill chunks and one token per decoding sequence. forward_cost() prices such a forward as

    time = max(compute_s, memory_s) + comm_s + overhead_s

with compute_s linear in the (query, key) pairs attended, memory_s linear in the KV tokens read,
and every other term a function of the token count alone (weights streamed, experts touched,
activations, collectives). So a step's cost is tabulated once per deployment, by calling
forward_cost() itself, never by re-deriving it:
- over the token axis t = 0..token_budget, with no pairs and no KV read (each new token writes its
  K/V once): the token-dependent compute, memory and fixed (communication + overhead) terms;
- once more with pairs and once with KV tokens read: the seconds per pair (prefill and decode
  weights differ) and per KV token, exact because forward_cost is linear in both.
A test holds step_time_s against forward_cost for the same step (tests/planner/engine/test_simulation_step_cost.py).

Scope: one replica (simulate.py runs several side by side), one pipeline stage, no attention data
parallelism (the micro-batching of pipeline stages and per-attention-replica KV caches are not
tabulated; `step_cost_for` says so); autoregressive decoding, speculative rounds or diffusion blocks
(multi_token.py: k + 1 verified positions per sequence and the draft phase, or a block's B positions).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..attention import Attention, at_ranks
from ..chips import policy_for
from ..decoding import Autoregressive, BlockDiffusion
from ..decoding.base import ResidentModel
from ..deployment import Deployment
from ..efficiency import Calibration, Override
from ..forward import forward_cost
from ..hardware import CandidateHardware
from ..memory import SequenceFootprint, cache_bytes_per_sequence, memory_fit
from ..specs import ModelSpec, Workload
from ..units import KV_BLOCK_TOKENS
from .arrays import deployment_arrays
from .multi_token import SPECULATING, MultiTokenDecode, diffusion_for, speculation_for

_PROBE = 1e6  # pairs / KV tokens of the linear probes: large enough that rounding is negligible


@dataclass(frozen=True, kw_only=True)
class StepCost:
    """Seconds per scheduler step for one deployment, and the memory its scheduler manages.

    The per-token tables are Python lists on purpose: the simulator indexes them once per step and
    a list index is several times faster than a NumPy scalar index.
    """

    model_slug: str
    chip_slug: str
    token_budget: int  # tokens one step may schedule (prefill chunks + decodes): max_num_batched_tokens
    compute_s_by_tokens: list[float]  # [token_budget + 1]
    memory_s_by_tokens: list[float]
    fixed_s_by_tokens: list[float]  # communication + per-step overhead
    compute_s_per_logit_row: float = 0.0  # the LM head over one position (left out of compute_s_by_tokens)
    compute_s_per_prefill_pair: float
    compute_s_per_decode_pair: float
    memory_s_per_kv_token: float
    prefill_overhead_s: float  # per step that prefills anything (un-captured prefill kernels)
    request_overhead_s: float  # per request, before it reaches the scheduler (tokenise, HTTP)
    kv_block_tokens: int
    kv_blocks: int  # paged blocks the KV cache holds on this replica
    # Blocks' worth a running sequence holds beside those its context grows (kv_block_capacity): once past
    # every window, and for a sequence of k blocks' length, k < len(window_blocks); 0 where the whole cache
    # grows with the context.
    state_blocks: int = 0
    window_blocks: tuple[int, ...] = ()
    grows: bool = True  # False: every layer windowed or recurrent, a sequence's whole cache is its fixed blocks
    max_sequences: int | None  # the engine's cap on running sequences (None: none set)
    full_context: bool  # the attention reads every cached token (full/GQA/MQA/MLA): decode sums are exact
    attention: Attention  # the model's, for the causal pairs of a prefill chunk
    multi_token: MultiTokenDecode | None = None  # speculative rounds or diffusion blocks (multi_token.py)
    prefill_runs_alone: bool = False  # a step that prefills runs no decodes (SGLang's default); else they share steps (specs.Scheduler)

    def fixed_blocks(self, tokens: int) -> int:
        """The fixed blocks of a sequence whose whole length is `tokens` (taken at its admission)."""
        k = -(-tokens // self.kv_block_tokens)
        return self.window_blocks[k] if k < len(self.window_blocks) else self.state_blocks

    @property
    def tokens_per_decode(self) -> int:
        """Tokens a decoding sequence puts through the target per step: 1, k + 1 verified, or a block's B."""
        return 1 if self.multi_token is None else self.multi_token.tokens_per_decode

    def step_time_s(
        self,
        *,
        prefill_tokens: int,
        decode_sequences: int,
        decode_context_tokens: float,
        prefill_pairs: float | None = None,
        prefill_kv_read_tokens: float = 0.0,
        decode_pairs: float | None = None,
    ) -> float:
        """One step prefilling `prefill_tokens` new prompt tokens (with `prefill_pairs` causal pairs,
        by default those of one fresh prompt, and `prefill_kv_read_tokens` cached tokens read by its
        chunks) while `decode_sequences` sequences decode one token each, reading
        `decode_context_tokens` cached tokens in all and attending as many (query, key) pairs unless
        `decode_pairs` says otherwise (a window or a recurrent state)."""
        tokens = prefill_tokens + decode_sequences * self.tokens_per_decode
        if tokens > self.token_budget:
            raise ValueError(f"a step of {tokens} tokens exceeds the token budget of {self.token_budget}")
        if prefill_pairs is None:
            prefill_pairs = float(self.attention.causal_pairs(float(prefill_tokens)))
        pairs = decode_context_tokens if decode_pairs is None else decode_pairs
        return self.seconds(prefill_tokens, decode_sequences, decode_context_tokens, pairs, prefill_pairs, prefill_kv_read_tokens)

    @cached_property
    def seconds(self) -> Callable[[int, int, float, float, float, float], float]:
        """step_time_s without the checks, positional: (prefill tokens, decode sequences, decode KV tokens
        read, decode pairs, prefill pairs, prefill KV tokens read). A closure over local names, as the
        scheduler calls it once per step."""
        compute_t, memory_t, fixed_t = self.compute_s_by_tokens, self.memory_s_by_tokens, self.fixed_s_by_tokens
        per_logit = self.compute_s_per_logit_row  # a decoding position's logits, and those of the prompt a prefill step finishes
        per_prefill_pair, per_decode_pair = self.compute_s_per_prefill_pair, self.compute_s_per_decode_pair
        per_kv = self.memory_s_per_kv_token
        prefill_overhead = self.prefill_overhead_s
        if self.multi_token is not None:  # q positions per decoding sequence, and a draft phase for speculation
            q, extra, scale = self.tokens_per_decode, self.multi_token.extra_s_by_sequences, self.multi_token.decode_compute_scale

            def multi_seconds(prefill_tokens, decode_sequences, decode_kv_tokens, decode_pairs, prefill_pairs, prefill_kv_tokens):
                t = prefill_tokens + decode_sequences * q
                dense = compute_t[t] if scale == 1.0 else compute_t[prefill_tokens] + scale * (compute_t[t] - compute_t[prefill_tokens])
                logits = per_logit * (decode_sequences * q * (1.0 if scale == 1.0 else scale) + (1 if prefill_tokens else 0))
                compute = dense + logits + per_prefill_pair * prefill_pairs + per_decode_pair * q * decode_pairs
                memory = memory_t[t] + per_kv * (decode_kv_tokens + prefill_kv_tokens)
                step = (compute if compute > memory else memory) + fixed_t[t] + (extra[decode_sequences] if extra else 0.0)
                return step + prefill_overhead if prefill_tokens else step

            return multi_seconds

        def seconds(prefill_tokens, decode_sequences, decode_kv_tokens, decode_pairs, prefill_pairs, prefill_kv_tokens):
            t = prefill_tokens + decode_sequences
            logits = per_logit * (decode_sequences + (1 if prefill_tokens else 0))
            compute = compute_t[t] + logits + per_prefill_pair * prefill_pairs + per_decode_pair * decode_pairs
            memory = memory_t[t] + per_kv * (decode_kv_tokens + prefill_kv_tokens)
            step = (compute if compute > memory else memory) + fixed_t[t]
            return step + prefill_overhead if prefill_tokens else step

        return seconds


def deployment_hardware(
    model: ModelSpec, deployment: Deployment, *, efficiency: Override | None = None, calibration: Calibration | None = None
) -> CandidateHardware:
    """The one-candidate hardware arrays estimate() builds for this deployment (the same calls as evaluate())."""
    return deployment_arrays(model, deployment, efficiency=efficiency, calibration=calibration)[2]


def _unsupported(deployment: Deployment) -> str | None:
    if deployment.pipeline_parallel != 1:
        return f"pipeline_parallel={deployment.pipeline_parallel}: the simulator models one pipeline stage (no micro-batching)"
    if deployment.attention_data_parallel != 1:
        return f"attention_data_parallel={deployment.attention_data_parallel}: per-replica KV caches are not simulated"
    if not isinstance(deployment.decoding, (Autoregressive, BlockDiffusion, *SPECULATING)):
        return f"decoding {deployment.decoding.label!r}: the simulator steps autoregressive, speculative and block-diffusion decoding only"
    return None


def step_cost_for(
    model: ModelSpec,
    deployment: Deployment,
    *,
    efficiency: Override | None = None,
    calibration: Calibration | None = None,
    token_budget: int | None = None,
    max_sequences: int | None = None,
    kv_block_tokens: int = KV_BLOCK_TOKENS,
    workload: Workload | None = None,
) -> StepCost:
    """The step cost of one replica of `deployment` under the same efficiency factors an estimate uses.

    token_budget / max_sequences: the scheduler's max_num_batched_tokens and max_num_seqs; by default
    the chip's serving-engine scheduler values (specs.Scheduler), as the estimate reads them. workload: the
    mean lengths a speculative method's draft phase is priced at (multi_token.py); needed for one."""
    problem = _unsupported(deployment)
    if problem:
        raise ValueError(f"cannot simulate {model.slug} on {deployment.chip.slug}: {problem}")
    if policy_for(deployment.chip).prefill_tokens(1000) != 1000:
        raise ValueError(f"cannot simulate {deployment.chip.slug}: its chip kind pads prompts to buckets, which is not simulated")
    hw = deployment_hardware(model, deployment, efficiency=efficiency, calibration=calibration)
    budget = int(token_budget or hw.prefill_token_budget[0])
    if budget < 1:
        raise ValueError("token_budget must be >= 1")
    if kv_block_tokens < 1:
        raise ValueError("kv_block_tokens must be >= 1")
    cap = max_sequences if max_sequences is not None else (None if np.isinf(hw.max_batch_sequences[0]) else int(hw.max_batch_sequences[0]))
    if cap is not None and cap < 1:
        raise ValueError("max_sequences must be >= 1")
    multi_token, resident = None, ()
    if isinstance(deployment.decoding, BlockDiffusion):
        multi_token = diffusion_for(model, deployment)
        if budget < multi_token.block_size:
            raise ValueError(f"token_budget {budget} is below the block of {multi_token.block_size} tokens one sequence denoises per forward")
    elif isinstance(deployment.decoding, SPECULATING):
        if workload is None:
            raise ValueError("a speculative step cost needs the workload's mean lengths for its draft phase")
        k1 = deployment.decoding.draft_tokens + 1
        if budget < k1:
            raise ValueError(f"token_budget {budget} is below the {k1} tokens one sequence verifies per round")
        multi_token, resident = speculation_for(model, deployment, workload=workload, max_sequences=budget // k1,
                                                efficiency=efficiency, calibration=calibration)  # fmt: skip
    tokens = np.arange(budget + 1, dtype=float)
    row = hw.take(np.zeros(budget + 1, dtype=np.int64))
    ones = np.ones(budget + 1)
    # The token table leaves out the LM head's FLOPs, which go with the positions whose logits a step
    # computes: one per decoding position and one for the prompt a chunk finishes (evaluate._prefill).
    base = forward_cost(model, row, sequences=ones, new_tokens=tokens, attention_pairs=0.0, kv_read_tokens=0.0, kv_write_tokens=tokens,
                        logit_tokens=0.0)  # fmt: skip
    attention = at_ranks(model.attention, float(deployment.tensor_parallel))  # per TP rank (attention/hybrid.py)
    one = np.ones(1)
    zero = forward_cost(model, hw, sequences=one, new_tokens=one, attention_pairs=0.0, kv_read_tokens=0.0, kv_write_tokens=one)
    headless = forward_cost(model, hw, sequences=one, new_tokens=one, attention_pairs=0.0, kv_read_tokens=0.0, kv_write_tokens=one,
                            logit_tokens=0.0)  # fmt: skip
    prefill_pairs = forward_cost(model, hw, sequences=one, new_tokens=one, attention_pairs=_PROBE, kv_read_tokens=0.0, kv_write_tokens=one,
                                 attention_flops_per_pair=attention.prefill_flops_per_pair)  # fmt: skip
    decode_pairs = forward_cost(model, hw, sequences=one, new_tokens=one, attention_pairs=_PROBE, kv_read_tokens=0.0, kv_write_tokens=one,
                                attention_flops_per_pair=attention.decode_flops_per_position)  # fmt: skip
    kv_read = forward_cost(model, hw, sequences=one, new_tokens=one, attention_pairs=0.0, kv_read_tokens=_PROBE, kv_write_tokens=one)
    capacity = kv_block_capacity(model, hw, block_tokens=kv_block_tokens, token_budget=budget, resident=resident)
    return StepCost(
        model_slug=model.slug,
        chip_slug=deployment.chip.slug,
        token_budget=budget,
        compute_s_by_tokens=base.compute_s.tolist(),
        memory_s_by_tokens=base.memory_s.tolist(),
        fixed_s_by_tokens=(base.comm_s + base.overhead_s).tolist(),
        compute_s_per_logit_row=float((zero.compute_s - headless.compute_s)[0]),
        compute_s_per_prefill_pair=float((prefill_pairs.compute_s - zero.compute_s)[0] / _PROBE),
        compute_s_per_decode_pair=float((decode_pairs.compute_s - zero.compute_s)[0] / _PROBE),
        memory_s_per_kv_token=float((kv_read.memory_s - zero.memory_s)[0] / _PROBE),
        prefill_overhead_s=float(hw.prefill_layer_overhead_s[0] * model.num_layers),
        request_overhead_s=float(model.request_overhead_s(hw.request_overhead_s[0], hw.request_overhead_per_expert_layer_s[0])),
        kv_block_tokens=kv_block_tokens,
        kv_blocks=capacity.blocks,
        state_blocks=capacity.state_blocks,
        window_blocks=capacity.window_blocks,
        grows=capacity.grows,
        max_sequences=cap,
        full_context=_reads_full_context(attention),
        attention=attention,
        multi_token=multi_token,
        prefill_runs_alone=bool(deployment.chip.scheduler and deployment.chip.scheduler.prefill_runs_alone),
    )


# Where kv_block_capacity reads a block's growth: past every window a catalog model has (Gemma 3's 1,024,
# Llama 4's 8,192 tokens), 1M tokens.
LONG_CONTEXT_BLOCKS = 65_536


@dataclass(frozen=True, kw_only=True)
class BlockCapacity:
    blocks: int  # paged blocks the KV cache holds
    state_blocks: int = 0  # what a sequence holds beyond its growing blocks once past every window
    window_blocks: tuple[int, ...] = ()  # the same for a sequence of k blocks' length, k < len (then state_blocks)
    grows: bool = True  # whether any of the cache grows with the context


def kv_block_capacity(
    model: ModelSpec, hw: CandidateHardware, *, block_tokens: int, token_budget: int, resident: tuple[ResidentModel, ...] = ()
) -> BlockCapacity:
    """The blocks of `block_tokens` the KV cache holds, by memory.py's own rule (memory_fit() with the engine's
    batch cap lifted, as it caps sequences, not blocks, and the activation workspace of one full step reserved;
    `resident`, a draft model or heads, holds its weights and, with a cache, its own KV for every block's
    tokens), and what a sequence holds beyond them. A block is what one more block adds to a long context, where
    only the layers that keep every token still grow; what a sequence of T tokens holds beyond its T/block_tokens
    blocks is its fixed part: a hybrid's recurrent state and DeepSeek-V4's compressor buffers, whatever T, and the
    windows of sliding-window layers, min(T, window) tokens of them (the engines free the blocks behind a window:
    vLLM's hybrid KV cache manager, SGLang's SWA pool). The scheduler takes a request's fixed blocks at admission,
    at its whole length (StepCost.fixed_blocks)."""
    uncapped = dataclasses.replace(hw, max_batch_sequences=np.full(1, np.inf))
    one_block = memory_fit(model, uncapped, footprint=SequenceFootprint(cached_tokens=float(block_tokens), workspace_tokens=0.0, logit_rows=0.0),
                           prompt_tokens=float(token_budget), resident=resident)  # fmt: skip

    def held(blocks: int) -> float:
        return float(np.asarray(cache_bytes_per_sequence(model, uncapped, float(blocks * block_tokens), resident=resident)).ravel()[0])

    # memory.py pages a sequence's cache in KV_BLOCK_TOKENS: slopes are read over `pages` blocks, a whole number
    # of its pages, so that a scheduler block of another size (SGLang's 1-token pages) is measured as itself.
    pages = KV_BLOCK_TOKENS // math.gcd(block_tokens, KV_BLOCK_TOKENS)
    at_long = held(LONG_CONTEXT_BLOCKS)
    block = (held(LONG_CONTEXT_BLOCKS + pages) - at_long) / pages
    grows = block > 1e-9 * at_long
    if not grows:  # every layer windowed or recurrent: the unit is a block of the windows (or one state)
        block = (held(2 * pages) - held(pages)) / pages or held(1)
    fixed = at_long - (LONG_CONTEXT_BLOCKS * block if grows else 0.0)
    free = max(float(one_block.kv_free_bytes_per_chip[0]), 0.0)
    if not (block > 0 and fixed > 1e-6 * block):  # the whole cache grows with the context (or there is none)
        if block_tokens % KV_BLOCK_TOKENS == 0:  # a one-block sequence is its blocks, nothing rounded
            return BlockCapacity(blocks=int(one_block.max_concurrency_per_replica[0]))
        return BlockCapacity(blocks=int(free // block) if block > 0 else 0)

    def fixed_blocks(blocks: int) -> int:
        return max(int(-(-(held(blocks) - (blocks * block if grows else 0.0)) // block)), 0)

    state_blocks = int(-(-fixed // block))
    # The lengths in blocks below which the windows still fill: doubling, then every block below the first
    # length that holds them whole.
    saturated = 1
    while saturated < LONG_CONTEXT_BLOCKS and fixed_blocks(saturated) < state_blocks:
        saturated *= 2
    windows = tuple(fixed_blocks(k) for k in range(saturated)) if saturated > 1 else ()
    return BlockCapacity(blocks=int(free // block), state_blocks=state_blocks, window_blocks=windows, grows=grows)


def _reads_full_context(attention) -> bool:
    """Whether a decode query at context C attends C positions and reads C cached tokens (so the sum
    over sequences is the sum of contexts); windows, chunks and recurrent states do not."""
    probes = np.array([1.0, 100.0, 10_000.0, 1_000_000.0])
    return bool(np.allclose(attention.attended_positions(probes), probes) and np.allclose(attention.kv_read_tokens(probes), probes))
