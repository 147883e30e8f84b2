"""Iteration-level continuous batching on one replica, as vLLM's V1 scheduler runs it
(github.com/vllm-project/vllm, vllm/v1/core/sched/scheduler.py: `schedule()`), or as SGLang's does where
its engine runs prefills alone (StepCost.prefill_runs_alone, below).

Each step (one forward of the model):
1. requests that have arrived join the waiting queue (first come, first served);
2. every decoding sequence advances one token: a sequence whose next token starts a new KV block
   takes one from the free pool. Sequences still prefilling (chunked prefill) take the next chunk of
   their prompt, oldest first, within the step's token budget (max_num_batched_tokens, which the
   decodes' one token each also spends) and the blocks that chunk fills;
3. when the free blocks do not cover that, the newest running sequence is preempted by recompute
   (vLLM: `self.running.pop()`): its blocks are freed and it goes back to the head of the queue, to
   prefill its prompt and the tokens it had generated again;
4. unless the step preempted, waiting requests are admitted, in order, while the budget, the free
   blocks for their first chunk and the cap on running sequences (max_num_seqs) allow; the first that
   does not fit stops admission;
5. the step takes StepCost time; a sequence whose prefill completes emits its first token at the
   step's end, each decoding sequence one token.
Where prefills run alone (SGLang's scheduler without --enable-mixed-chunk, its default: a prefill batch
when the queue has a request it can admit or a chunked prompt under way, else a decode batch;
sgl-project/sglang python/sglang/srt/managers/scheduler.py, `get_next_batch_to_run`), a step that
prefills advances no decoding sequence: decoding sequences advance with the steps that decode (`d`
below), not with every step (`s`). Such a replica admits a request as SGLang's PrefillAdder does:
when the free blocks, less new_token_ratio times the running sequences' answers still to come, cover
all it has to prefill (its prompt, or after a preemption its prompt and generated tokens, less cached
prefix blocks) and its own answer (up to 4,096 tokens); it takes the prefill's blocks at admission, so
a chunk never has to be preempted and prefilled again while the decodes that would free blocks never
ran. The ratio starts at 0.7 and falls each decoding step to 0.098 (SGLang's defaults); a decoding
step that preempts restarts it at 0.7, where SGLang re-estimates it from the batch.
A multi-token step cost (multi_token.py: speculative rounds of k + 1 verified positions, or block
diffusion's denoising and commit forwards of B positions) makes each decode step put several tokens per
sequence through the model; such a replica reserves each request's whole context at admission
(TensorRT-LLM's GUARANTEED_NO_EVICT), so steps 2-3 never grow or preempt, and each request's forwards
(and, for block diffusion, the forward that releases its first token) are planned when it starts decoding.

Speed (10,000 requests in well under a second on one core, in plain Python): nothing here loops over
the running sequences per step. Decoding sequences advance together, so the scheduler keeps only
their count, the sum of their contexts, the step each finishes at, and how many sit at each offset
within a block (a sequence's context modulo the block size moves with the index of the steps that
decode, so the sequences needing a new block at decoding step d are those of one residue class). Per-sequence work happens
only when a sequence joins, leaves or is preempted. The main loop is one function for the same reason:
its state lives in local variables, the fastest Python has.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from .step_cost import StepCost
from .workload import Requests

WAITING, PREFILLING, DECODING, FINISHED = 0, 1, 2, 3

# SGLang's admission reserve (python/sglang/srt/environ.py defaults; managers/schedule_policy.py, PrefillAdder):
# a request is admitted when the free tokens, less new_token_ratio x each running request's remaining answer
# (clipped at 4,096), cover its prompt and its whole answer (clipped); the ratio starts at 0.7 and falls by
# (0.7 - 0.7 x 0.14) / 600 each decoding step to 0.7 x 0.14.
SGLANG_CLIP_ANSWER_TOKENS = 4096
SGLANG_INIT_NEW_TOKEN_RATIO = 0.7
SGLANG_MIN_NEW_TOKEN_RATIO = SGLANG_INIT_NEW_TOKEN_RATIO * 0.14
SGLANG_NEW_TOKEN_RATIO_DECAY = (SGLANG_INIT_NEW_TOKEN_RATIO - SGLANG_MIN_NEW_TOKEN_RATIO) / 600


class StepBudgetSpent(RuntimeError):
    """The steps a caller allowed (step_budget) ran out before its schedules finished."""


# The steps left to every schedule run inside step_budget blocks, one count per block from the outermost (empty outside
# any): lists, so that the runs inside (replicas, pools, a sweep's rates, a plan's candidates) draw on one count.
_STEPS_LEFT: ContextVar[tuple[list[int], ...]] = ContextVar("simulation_steps_left", default=())


@contextmanager
def step_budget(steps: int) -> Iterator[None]:
    """Every run_schedule inside the block shares `steps` forwards; the one that would run past them raises StepBudgetSpent.
    It bounds what a caller may spend (a simulation run inside a web request) by construction, whatever its requests, token
    budget, batch cap and decoding make of the steps: the tokens alone do not bound them (block diffusion runs steps_per_block
    forwards for a block of one token; a token budget of 1 runs a prompt of P tokens in P steps)."""
    token = _STEPS_LEFT.set((*_STEPS_LEFT.get(), [int(steps)]))  # a block inside one draws on both
    try:
        yield
    finally:
        _STEPS_LEFT.reset(token)


class RequestTooLarge(ValueError):
    """A request whose whole context the KV cache cannot hold: no schedule can run it (run_schedule, check_fits).
    A ValueError, so callers that refuse every engine error alike still do; a service tells it apart by its type."""


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """What one run produced: per request (scheduler view, i.e. after the request overhead) and per step."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    preemptions: np.ndarray  # per request
    step_start_s: np.ndarray
    step_duration_s: np.ndarray
    step_waiting: np.ndarray  # queue length at the step's start
    step_running: np.ndarray  # running sequences at the step's start (before its admissions)
    step_kv_blocks_used: np.ndarray  # after the step's allocations
    step_prefill_tokens: np.ndarray
    step_decode_sequences: np.ndarray
    kv_blocks: int
    prefix_blocks: int  # pinned by the shared prefix
    steps: int  # forwards run (merged replicas: all of theirs; their step records are then intervals)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def run_schedule(
    cost: StepCost, requests: Requests, *, prefix_caching: bool = True, arrival_offset_s: float = 0.0, max_steps: int = 50_000_000,
    seed: int = 0,
) -> Schedule:
    """Simulate `requests` on one replica whose steps cost `cost`; see the module docstring.
    arrival_offset_s: how long after a client sends a request the scheduler sees it (the request overhead).
    seed: a speculative cost's draws of the tokens each round emits."""
    counts = _STEPS_LEFT.get()
    left = min((count[0] for count in counts), default=None)
    budgeted = left is not None and left < max_steps  # a budget, not the schedule's own cap, binds
    if budgeted:
        max_steps = max(left, 0)
    bt = cost.kv_block_tokens
    n = len(requests)
    prompt, output, cached, arrived, g, prefix_blocks, slack, fixed = _blocks_of(cost, requests, prefix_caching)
    free = cost.kv_blocks - prefix_blocks
    _check_fits(prompt, output, cached, bt, free, slack, fixed, g)
    # Multi-token decoding (multi_token.py): each decode step puts q tokens per sequence through the
    # model. A request's forwards are planned when it starts decoding; its whole context (and the
    # positions a step writes ahead) is reserved at admission, as TensorRT-LLM's GUARANTEED_NO_EVICT
    # capacity scheduler does, so nothing grows or is preempted; the context read per forward advances
    # by the mean tokens a forward commits.
    multi = cost.multi_token
    reserve = multi is not None
    q = cost.tokens_per_decode
    tau = multi.context_per_forward if reserve else 1.0
    plan = multi.planner(sum(output), np.random.default_rng(seed)).plan if reserve else None
    first_at_prefill = multi is None or multi.first_token_at_prefill
    release_at: dict[int, list[int]] = {}  # block diffusion: the step whose end releases a request's first block
    cap = cost.token_budget // q if cost.max_sequences is None else min(cost.max_sequences, cost.token_budget // q)
    attention = cost.attention
    exact = cost.full_context

    closed = requests.closed_loop_concurrency
    if closed:
        times = [arrival_offset_s] * min(closed, n)
        order = list(range(len(times)))
    else:
        times = (requests.arrival_s + arrival_offset_s).tolist()
        order = list(range(n))
    think = requests.think_time_s + arrival_offset_s
    issued = len(order)

    state = [WAITING] * n
    gen = [0] * n  # tokens generated (at decode start, for decoding sequences)
    target = [0] * n  # tokens the current prefill computes: prompt + generated
    done = [0] * n  # of those, computed (starts at the cached prefix)
    held = [0] * n  # blocks a prefilling sequence holds
    s0 = [0] * n  # step of a decoding sequence's first decode
    start_ctx = [0] * n  # its context at that step
    finish_step = [-1] * n
    first = [np.nan] * n
    finish = [np.nan] * n
    preempted = [0] * n
    for i in range(n):
        target[i], done[i] = prompt[i], cached[i] + min(arrived[i], prompt[i] - 1)

    waiting: deque[int] = deque()
    running: dict[int, None] = {}  # admission order: the last is the newest
    prefilling: list[int] = []
    phase = [0] * bt  # decoding sequences by (first decode step - its context) mod bt
    finish_at: dict[int, list[int]] = {}
    n_dec = 0
    ctx_sum = 0
    ptr = 0
    now = 0.0
    s = 0  # steps run
    d = 0  # steps that decoded: a decoding sequence's progress (every step, unless prefills run alone)
    # A disaggregated decode pool's requests arrive with their KV (disaggregated.py): SGLang's decode server
    # adds them to its running batch without a prefill forward, so there nothing prefills alone.
    alone = cost.prefill_runs_alone and requests.kv_transferred_tokens is None
    # Where prefills run alone, SGLang's admission reserve: its ratio, and the decoding sequences' answers still
    # to come at their decode start with the sum of their start steps, whose difference at decoding step d is
    # what they have left (not clipped: the same as SGLang's for answers up to 4,096 tokens).
    ratio = SGLANG_INIT_NEW_TOKEN_RATIO
    left_at_start = 0
    s0_sum = 0
    starts, durations, q_len, r_len, used, p_tok, d_seq = [], [], [], [], [], [], []
    seconds = cost.seconds  # positional and unchecked: the hot path
    causal, kv_read = attention.causal_pairs, attention.kv_read_tokens
    token_budget, kv_blocks = cost.token_budget, cost.kv_blocks
    q_append, r_append, start_append, duration_append = q_len.append, r_len.append, starts.append, durations.append
    used_append, p_append, d_append = used.append, p_tok.append, d_seq.append

    def preempt_newest() -> None:
        nonlocal free, n_dec, ctx_sum, left_at_start, s0_sum
        victim = next(reversed(running))
        del running[victim]
        if state[victim] == DECODING:
            ctx = start_ctx[victim] + (d - s0[victim])
            free += g * (_ceil_div(ctx, bt) - cached[victim] // bt) + fixed[victim]
            n_dec -= 1
            ctx_sum -= ctx
            phase[(s0[victim] - start_ctx[victim]) % bt] -= 1
            gen[victim] += d - s0[victim]
            left_at_start -= output[victim] - gen[victim] + (d - s0[victim])
            s0_sum -= s0[victim]
            finish_step[victim] = -1
        else:
            free += held[victim]
            prefilling.remove(victim)
        held[victim] = 0
        state[victim] = WAITING
        target[victim] = prompt[victim] + gen[victim]
        done[victim] = cached[victim]
        preempted[victim] += 1
        waiting.appendleft(victim)

    def first_blocks(i: int, budget: int) -> int:
        """The blocks request i takes at admission: its whole context, the answer's tokens still to come and a
        round's draft positions (reserving); its whole prompt (prefills alone: SGLang admits a request only
        when all of its input fits); else the blocks of its first chunk within `budget` tokens."""
        if reserve:
            return g * (_ceil_div(target[i] + output[i] - gen[i] + slack, bt) - cached[i] // bt) + fixed[i]
        if alone:
            return g * (_ceil_div(target[i], bt) - cached[i] // bt) + fixed[i]
        return g * (_ceil_div(done[i] + min(target[i] - done[i], budget), bt) - cached[i] // bt) + fixed[i]

    def answer_reserve(i: int) -> int:
        """The blocks SGLang keeps free for request i's answer (clipped) when it admits it, beyond its prompt's."""
        return g * (_ceil_div(target[i] + min(output[i] - gen[i], SGLANG_CLIP_ANSWER_TOKENS), bt) - _ceil_div(target[i], bt))

    def running_reserve() -> float:
        """The blocks SGLang keeps for the running sequences' answers: the ratio of what they have left."""
        return ratio * (left_at_start - (n_dec * d - s0_sum)) / bt if g else 0.0

    def admissible(i: int) -> bool:
        """Whether request i, at the queue's head, could be admitted in a step that prefills alone."""
        return first_blocks(i, token_budget) + answer_reserve(i) <= free - running_reserve()

    def plan_chunks(budget: int) -> tuple[list[tuple[int, int, int]], int, int]:
        """The chunks of the sequences mid-prefill this step: (id, tokens, new blocks), and what is left."""
        chunks, blocks = [], 0
        for i in prefilling:
            if budget <= 0:
                break
            k = min(target[i] - done[i], budget)
            nb = 0 if reserve else max(g * (_ceil_div(done[i] + k, bt) - cached[i] // bt) + fixed[i] - held[i], 0)
            chunks.append((i, k, nb))
            blocks += nb
            budget -= k
        return chunks, blocks, budget

    while s < max_steps:
        while ptr < issued and times[ptr] <= now:
            waiting.append(order[ptr])
            ptr += 1
        if not running and not waiting:
            if ptr >= issued:
                break
            now = times[ptr]
            continue
        q_append(len(waiting))
        r_append(len(running))  # both at the step's start: together, the requests in the system
        # Prefills alone (SGLang): a step that can prefill (a chunk under way, or the queue's head admissible)
        # runs no decodes; they wait for the next step that has nothing to prefill.
        decoding = not alone or not (prefilling or (waiting and len(running) < cap and admissible(waiting[0])))
        nd = n_dec if decoding else 0
        # 2-3: decode growth and the chunks of sequences mid-prefill, preempting until they fit.
        grow = g * phase[d % bt] if decoding else 0
        p_tokens, p_pairs, p_read = 0, 0.0, 0.0
        completed = []
        admit = True
        if prefilling or grow > free:
            while True:
                chunks, chunk_blocks, budget = plan_chunks(token_budget - nd * q)
                if grow + chunk_blocks <= free or not running:
                    break
                preempt_newest()
                admit = False  # vLLM admits no waiting request in a step that preempted
                nd = n_dec if decoding else 0
                grow = g * phase[d % bt] if decoding else 0
            free -= grow + chunk_blocks
            for i, k, nb in chunks:
                p_pairs += float(causal(float(done[i] + k))) - float(causal(float(done[i])))
                p_read += float(kv_read(float(done[i]))) if done[i] else 0.0
                done[i] += k
                held[i] += nb
                p_tokens += k
                if done[i] == target[i]:
                    completed.append(i)
        else:  # the common step: decodes only, and blocks to spare
            free -= grow
            budget = token_budget - nd * q
        # 4: admission, first come first served.
        promised = running_reserve() if alone and waiting else 0.0
        while admit and waiting and budget > 0 and len(running) < cap:
            i = waiting[0]
            k = min(target[i] - done[i], budget)
            nb = first_blocks(i, budget)
            if nb > free:
                break
            if alone:
                promised += answer_reserve(i)
                if nb + promised > free:
                    break
            waiting.popleft()
            free -= nb
            running[i] = None
            state[i] = PREFILLING
            prefilling.append(i)
            p_pairs += float(causal(float(done[i] + k))) - float(causal(float(done[i])))
            p_read += float(kv_read(float(done[i]))) if done[i] else 0.0
            done[i] += k
            held[i] = nb
            p_tokens += k
            budget -= k
            if done[i] == target[i]:
                completed.append(i)
        # 5: the step.
        if not decoding:
            dt = seconds(p_tokens, 0, 0.0, 0.0, p_pairs, p_read)
        elif exact:
            dt = seconds(p_tokens, nd, ctx_sum, ctx_sum, p_pairs, p_read)
        else:  # a window or a recurrent state: each sequence at the mean context (docs/simulation.md)
            mean = ctx_sum / nd if nd else 0.0
            dt = seconds(p_tokens, nd, nd * float(attention.kv_read_tokens(mean)), nd * float(attention.attended_positions(mean)),
                         p_pairs, p_read)  # fmt: skip
        start_append(now)
        duration_append(dt)
        used_append(kv_blocks - free)
        p_append(p_tokens)
        d_append(nd)
        now += dt
        ended = finish_at.pop(d, ()) if decoding else ()
        released = release_at.pop(d, ()) if decoding else ()
        if decoding:
            ctx_sum += n_dec * tau
        for i in ended:
            if finish_step[i] != d:
                continue  # preempted since: its entry is stale
            finish_step[i] = -1  # a request preempted and prefilled again between two decoding steps has two entries here
            if reserve:
                free += held[i]
                held[i] = 0
                ctx_sum -= start_ctx[i] + (d - s0[i] + 1) * tau
            else:
                ctx = start_ctx[i] + (d - s0[i]) + 1
                free += g * (_ceil_div(ctx, bt) - cached[i] // bt) + fixed[i]
                ctx_sum -= ctx
                phase[(s0[i] - start_ctx[i]) % bt] -= 1
            n_dec -= 1
            left_at_start -= output[i] - gen[i]
            s0_sum -= s0[i]
            del running[i]
            state[i] = FINISHED
            finish[i] = now
            if closed and issued < n:
                times.append(now + think)
                order.append(issued)
                issued += 1
        for i in released:
            if first[i] != first[i]:
                first[i] = now
        if decoding:
            d += 1
            if alone:  # SGLang: a step that retracted restarts the ratio (its estimate after a retraction is cruder)
                ratio = SGLANG_INIT_NEW_TOKEN_RATIO if not admit else max(ratio - SGLANG_NEW_TOKEN_RATIO_DECAY, SGLANG_MIN_NEW_TOKEN_RATIO)
        for i in completed:
            prefilling.remove(i)
            if first_at_prefill:
                gen[i] += 1
                if first[i] != first[i]:  # NaN: the first token of this request
                    first[i] = now
            if gen[i] >= output[i]:
                free += held[i]
                held[i] = 0
                del running[i]
                state[i] = FINISHED
                finish[i] = now
                if closed and issued < n:
                    times.append(now + think)
                    order.append(issued)
                    issued += 1
                continue
            state[i] = DECODING
            s0[i], start_ctx[i] = d, target[i]  # it decodes from the next decoding step on
            n_dec += 1
            left_at_start += output[i] - gen[i]
            s0_sum += d
            ctx_sum += target[i]
            if reserve:  # it keeps its reserved blocks; its forwards are planned
                release, forwards = plan(output[i] - gen[i])
                end = d - 1 + forwards
                if release:
                    release_at.setdefault(d - 1 + release, []).append(i)
            else:
                held[i] = 0  # a decoding sequence's blocks follow from its context
                phase[(d - target[i]) % bt] += 1
                end = d - 1 + output[i] - gen[i]
            finish_step[i] = end
            finish_at.setdefault(end, []).append(i)
        s += 1
    else:
        # The loop notices it is done at the top of a step: a schedule whose last step was the last one allowed is done.
        while ptr < issued and times[ptr] <= now:
            waiting.append(order[ptr])
            ptr += 1
        if running or waiting or ptr < issued:
            if budgeted:
                for count in counts:
                    count[0] -= s
                raise StepBudgetSpent(f"the simulation did not finish within the {max_steps:,} steps left to it")
            raise RuntimeError(f"the simulation did not finish within {max_steps:,} steps")
    for count in counts:
        count[0] -= s

    arrival = np.asarray(times, dtype=float) if not closed else _closed_arrivals(order, times, n)
    return Schedule(
        arrival_s=arrival,
        first_token_s=np.asarray(first, dtype=float),
        finish_s=np.asarray(finish, dtype=float),
        preemptions=np.asarray(preempted, dtype=np.int64),
        step_start_s=np.asarray(starts, dtype=float),
        step_duration_s=np.asarray(durations, dtype=float),
        step_waiting=np.asarray(q_len, dtype=np.int64),
        step_running=np.asarray(r_len, dtype=np.int64),
        step_kv_blocks_used=np.asarray(used, dtype=np.int64),
        step_prefill_tokens=np.asarray(p_tok, dtype=np.int64),
        step_decode_sequences=np.asarray(d_seq, dtype=np.int64),
        kv_blocks=cost.kv_blocks,
        prefix_blocks=prefix_blocks,
        steps=len(starts),
    )


def _closed_arrivals(order: list[int], times: list[float], n: int) -> np.ndarray:
    out = np.full(n, np.nan)
    out[np.asarray(order, dtype=np.int64)] = times
    return out


def _blocks_of(cost: StepCost, requests: Requests, prefix_caching: bool) -> tuple:
    """Per request, what the KV blocks are reckoned from: prompt and output tokens, the prefix tokens cached, the KV
    tokens that arrive with it, whether the cache grows (1) or not (0), the shared prefix's pinned blocks, the
    positions a multi-token step writes ahead, and the blocks held beside the growing ones."""
    bt = cost.kv_block_tokens
    n = len(requests)
    prompt = requests.prompt_tokens.tolist()
    output = requests.output_tokens.tolist()
    # Only whole blocks are cached (vLLM hashes full blocks); at least one prompt token is always computed.
    raw_prefix = requests.prefix_tokens.tolist() if prefix_caching else [0] * n
    cached = [min(p, max(prompt[i] - 1, 0)) // bt * bt for i, p in enumerate(raw_prefix)]
    # KV that arrives with a request (disaggregated.py) is its own: its blocks are taken at admission
    # and freed with it, and a preemption loses it (the request then recomputes its whole context).
    arrived = [0] * n if requests.kv_transferred_tokens is None else requests.kv_transferred_tokens.tolist()
    cached = [0 if arrived[i] else c for i, c in enumerate(cached)]
    # A cache that grows with the context (0 where every layer is windowed or recurrent: StepCost.grows, the
    # sequence's whole cache then its fixed blocks).
    g = 1 if cost.grows else 0
    prefix_blocks = g * max(cached) // bt if n else 0  # the shared prompt's blocks, pinned once
    slack = cost.multi_token.slack_tokens if cost.multi_token is not None else 0
    # Blocks a running sequence holds beside those its context grows (a recurrent state, its windows at its whole
    # length: StepCost.fixed_blocks), taken at admission.
    fixed = [cost.fixed_blocks(p + o + slack) for p, o in zip(prompt, output)] if cost.state_blocks else [0] * n
    return prompt, output, cached, arrived, g, prefix_blocks, slack, fixed


def check_fits(cost: StepCost, requests: Requests, *, prefix_caching: bool = True) -> None:
    """run_schedule's first check alone, before anything is simulated: a ValueError naming the first request whose
    whole context the KV cache cannot hold."""
    prompt, output, cached, _arrived, g, prefix_blocks, slack, fixed = _blocks_of(cost, requests, prefix_caching)
    _check_fits(prompt, output, cached, cost.kv_block_tokens, cost.kv_blocks - prefix_blocks, slack, fixed, g)


def _check_fits(prompt: list[int], output: list[int], cached: list[int], bt: int, free: int, slack: int, fixed: list[int], grows: int) -> None:
    """A request whose whole context exceeds the KV cache could never finish: say which, up front."""
    need = [grows * (_ceil_div(p + o + slack, bt) - c // bt) + f for p, o, c, f in zip(prompt, output, cached, fixed)]
    worst = int(np.argmax(need)) if need else 0
    if need and need[worst] > free:
        raise RequestTooLarge(
            f"request {worst} needs {need[worst]} KV blocks ({prompt[worst]} prompt + {output[worst]} output tokens) "
            f"but the cache holds {free}; no schedule can run it"
        )
