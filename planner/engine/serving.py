"""Serving under continuous batching (Orca, OSDI 2022; vLLM, SOSP 2023).

Steady state at b sequences per replica: every step advances each sequence by
one token, and over a sequence's G steps the replica also prefills b new prompts
(the sequences that replace finished ones). Colocated, those prefills share the
chips with decoding, so the time per output token a user sees is

    TPOT = decode step time + (b - 1) * (prefill time per prompt in a batch of b) / G

(a user's own prefill is in its TTFT), while the replica's time per token carries all b:
total throughput = concurrency / (step + b * prefill per prompt / G)
(docs/planner_math.md#serving). With prefill/decode disaggregation
(DistServe, OSDI 2024; Splitwise, ISCA 2024) a separate pool prefills, so TPOT
is the bare decode step and the prefill pool is sized from the request rate (without one, from the
requests the decode batch finishes).

Queueing (docs/planner_math.md#serving), with a request rate lambda:
- colocated, each replica is one prefill server whose service per prompt is the batched
  prefill time s_b: rho = lambda_replica * s_b and the M/D/1 mean wait
  W_q = rho * s_b / (2 * (1 - rho)) (Pollaczek-Khinchine, deterministic service);
- disaggregated, a pool of c prefill replicas serving one prompt each in s: the M/D/c wait,
  half the M/M/c (Erlang C) wait (the cv^2 = 0 case of the Allen-Cunneen approximation). With
  attention data parallelism each of a replica's adp attention replicas serves its own prompts:
  c x adp servers whose service is a forward of adp prompts, while a prompt's own prefill runs from
  its forward alone (an idle pool) to that whole forward (a busy one) with the load (shared_forward_s).
rho >= 1 means overload.

Closed loop (a benchmark keeping C requests in flight, as the silicon measurements do): the
request rate is not given but follows from Little's law, X = C / (time in system), where the
time in system itself grows with X through the queue; `closed_loop_rate` solves for X by
regula falsi within a bracket, element-wise. Requests beyond the batch the engine admits wait for a slot: by
Little's law that queue holds C - b requests, a wait of (C - b) / X.

The clients of a benchmark start together, so its first round is one wave: every prompt queued
at once (colocated, a replica prefills its b prompts in chunks of the engine's prefill token
budget and a prompt waits on average for the chunks before its own; disaggregated, C prompts
share the c prefill replicas). Each later round arrives staggered by the prefills before it and
meets the steady queue above. The mean wait mixes the two by the workload's in-step share s
(1 / requests per client): W = (1 - s) W_steady + s max(W_wave, W_steady), and the loop's rate is the one at which
its clients' time in system with that mixed wait satisfies Little's law (docs/planner_math.md#serving).

An engine that balances attention-data-parallel replicas (TensorRT-LLM's attention_dp_config with
enable_balance) holds a new prompt, while every replica has decodes running, until each replica has
one or its timeout of steps has passed (balance_hold_s); a staggered arrival waits that hold too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import digamma, gammaln, pdtr

from .units import PREFILL_CHUNK_TOKENS


@dataclass(frozen=True, kw_only=True)
class ServingArrays:
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    tokens_per_s_per_user: np.ndarray
    output_tokens_per_s_total: np.ndarray
    served_output_tokens_per_s: np.ndarray  # what a request rate asks of it, at most the total (the total without a rate)
    queue_wait_s: np.ndarray
    prefill_utilisation: np.ndarray  # rho: share of a replica's time spent prefilling
    concurrency_needed: np.ndarray  # Little's law: lambda * time in system (NaN without a rate or in a closed loop)
    prefill_chips: np.ndarray  # disaggregated prefill pool (0 when colocated)


def md1_wait_s(utilisation: np.ndarray, service_s: np.ndarray) -> np.ndarray:
    """M/D/1 mean waiting time; infinite at or beyond full utilisation."""
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = utilisation * service_s / (2.0 * (1.0 - utilisation))
    return np.where(utilisation < 1.0, wait, np.inf)


def erlang_c(servers: np.ndarray, offered_load: np.ndarray) -> np.ndarray:
    """Probability an arrival waits in M/M/c with c servers and offered load a = lambda*s (a < c).
    Erlang B is the Poisson(a) probability of c over its distribution up to c,
    B = (a^c / c!) / sum_{k<=c} a^k / k!, computed in closed form (no loop over the servers);
    then C = c B / (c - a (1 - B))."""
    c, a = np.broadcast_arrays(np.maximum(np.round(np.asarray(servers, dtype=float)), 1.0), np.asarray(offered_load, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        safe = np.maximum(a, 1e-300)
        b = np.exp(c * np.log(safe) - safe - gammaln(c + 1.0)) / np.maximum(pdtr(c, safe), 1e-300)
        b = np.where(a > 0.0, np.clip(b, 0.0, 1.0), 0.0)
        return np.where(a < c, c * b / (c - a * (1.0 - b)), 1.0)


def mdc_wait_s(arrival_rate: np.ndarray, service_s: np.ndarray, servers: np.ndarray) -> np.ndarray:
    """M/D/c mean wait: half the M/M/c wait C(c, a) * s / (c - a); infinite at or beyond capacity."""
    a = arrival_rate * service_s
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = 0.5 * erlang_c(servers, a) * service_s / (servers - a)
    return np.where(a < servers, wait, np.inf)


def seen_share(clients) -> np.ndarray:
    """The share of the load a closed loop's arrival finds ahead of it: (N - 1) / N, since it never
    meets itself (the arrival theorem of closed networks; Schweitzer's approximation). A loop of one
    client never waits."""
    n = np.maximum(np.asarray(clients, dtype=float), 1.0)
    return (n - 1.0) / n


def md1_closed_loop_rate(clients, base_s, service_s, servers) -> np.ndarray:
    """The rate X of a closed loop of N clients through M/D/1 queues (`servers` of them, each serving
    in s), with T0 the rest of the time in system: X (T0 + W(X)) = N where an arrival sees the load
    rho = X a, a = (N - 1) / N * s / servers, and waits W = rho s / (2 (1 - rho)). Multiplied out, a
    quadratic A X^2 + B X - N = 0 with A = a (s / 2 - T0), B = T0 + N a, whose root below capacity
    is X = 2 N / (B + sqrt(B^2 + 4 A N)) (no bisection)."""
    a = seen_share(clients) * np.asarray(service_s, dtype=float) / np.asarray(servers, dtype=float)
    n = np.asarray(clients, dtype=float)
    quadratic = a * (np.asarray(service_s) / 2.0 - base_s)
    linear = base_s + n * a
    rate = 2.0 * n / np.maximum(linear + np.sqrt(np.maximum(linear * linear + 4.0 * quadratic * n, 0.0)), 1e-30)
    return np.minimum(rate, np.asarray(servers, dtype=float) / np.maximum(service_s, 1e-30))


def closed_loop_rate(clients: ArrayLike, time_in_system, upper: ArrayLike, iterations: int = 200, rtol: float = 1e-15) -> np.ndarray:
    """The request rate X with X * time_in_system(X) = clients on (0, upper), element-wise (`clients` and `upper`
    broadcast), each bracket narrowed until it lies within `rtol` of its upper end.

    time_in_system must grow with X (a queue only lengthens with load), so the root is unique;
    `upper` is a rate the system cannot sustain (its capacity), and where it is not (X * time_in_system
    stays at or below the clients there) the rate is `upper`. A time in system that is not a number counts as
    short (not over the clients), except at `upper` itself, which is taken as over. The bracket narrows by regula
    falsi with the Illinois modification (an end kept twice counts for half, so both ends close in: ten to twenty
    evaluations on the silicon file's loops where bisection took sixty), by halving where a value is not finite (a
    wait at capacity) or where two steps did not halve the bracket (a time in system that jumps), down to 1e-30 of
    `upper` for a root at zero."""
    shape = np.broadcast_shapes(np.shape(upper), np.shape(clients))
    high = np.array(np.broadcast_to(np.asarray(upper, dtype=float), shape))
    target = np.broadcast_to(np.asarray(clients, dtype=float), shape)

    def excess(x, undefined):
        with np.errstate(invalid="ignore", over="ignore"):
            value = x * time_in_system(x) - target
        return np.where(np.isnan(value), undefined, value)

    floor = 1e-30 * np.where(np.isfinite(high), high, 0.0)
    f_low, f_high = -target, excess(high, np.inf)
    low = np.where(target <= 0.0, 0.0, np.where(f_high <= 0.0, high, 0.0))  # never over on the bracket: its upper end
    high = np.where(target <= 0.0, 0.0, high)  # no clients, no rate
    done = (f_high <= 0.0) | (target <= 0.0) | ~np.isfinite(high)
    kept = np.zeros(shape)  # +1: the low end was kept last step, -1: the high end
    widths = (np.full(shape, np.inf), high - low)  # the bracket's width two steps ago and one step ago
    halve = np.zeros(shape, dtype=bool)
    for _ in range(iterations):
        with np.errstate(invalid="ignore"):
            done = done | (high - low <= np.maximum(np.maximum(rtol * high, 4.0 * np.spacing(high)), floor))
        if np.all(done):
            break
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            secant = high - f_high * (high - low) / (f_high - f_low)
            mid = (low + high) / 2.0
            # A point on (or within a hair of) an end would leave the bracket as wide as it was: step a quarter of the
            # tolerance inside, so that a root there closes the bracket on the next evaluation.
            inside = np.maximum(0.25 * rtol * high, np.spacing(high))
            usable = ~halve & np.isfinite(f_low) & np.isfinite(f_high) & (secant >= low) & (secant <= high)
            x = np.where(done | ~usable, mid, np.clip(secant, low + inside, high - inside))
        f_x = excess(x, -np.inf)
        over = f_x > 0.0
        f_low = np.where(over & (kept > 0), f_low / 2.0, f_low)
        f_high = np.where(~over & (kept < 0), f_high / 2.0, f_high)
        high, f_high = np.where(done | ~over, high, x), np.where(done | ~over, f_high, f_x)
        low, f_low = np.where(done | over, low, x), np.where(done | over, f_low, f_x)
        kept = np.where(over, 1.0, -1.0)
        with np.errstate(invalid="ignore"):
            halve = high - low > 0.5 * widths[0]
        widths = (widths[1], high - low)
    return (low + high) / 2.0


def in_step_wait_s(steady_s: np.ndarray, wave_s: np.ndarray, in_step_share: float) -> np.ndarray:
    """Mean wait of a closed loop whose share s of requests arrives in one wave, the rest staggered."""
    return (1.0 - in_step_share) * steady_s + in_step_share * np.maximum(wave_s, steady_s)


def balance_hold_s(*, rate_per_replica, step_s, timeout_steps, ranks, sequences_per_rank, busy=0.0, routed=False) -> np.ndarray:
    """The mean time a prompt is held by an engine that balances its attention-DP ranks (TensorRT-LLM's
    attention_dp_config.enable_balance; PyExecutor._balance_adp_requests): while every rank has decodes running, a
    step runs no prompt unless each of the `ranks` ranks has one. The engine counts the steps on which they do not,
    prompts or none, and releases whatever waits when the count reaches `timeout_steps` or every rank has a prompt,
    starting the count again: the hold runs in cycles of T = timeout_steps engine steps (`step_s` each), each cut
    short where prompts arriving at `rate_per_replica` (lambda), each at a rank where a sequence ended, any rank alike,
    have covered every rank: ranks * H(ranks) of them on average (the coupon collector), or `ranks` where they are
    `routed` to the least-loaded rank as they come (an open loop's arrivals, which no finished sequence places). A prompt
    arrives at a uniform point of its cycle and waits out the rest, half a cycle of min(T, covering / lambda) on average.

    No hold where a rank may have no decode running: a rank holding one sequence has none while that sequence's
    successor waits, and the engine then releases every prompt; in full from two sequences per rank
    (`sequences_per_rank`), in proportion between. Nor where the prefill is busy (`busy`, its utilisation): prompts
    queued behind it give every rank one (docs/planner_math.md#serving)."""
    ranks = np.asarray(ranks, dtype=float)
    lam = np.asarray(rate_per_replica, dtype=float)
    timeout = np.asarray(timeout_steps, dtype=float) * np.asarray(step_s, dtype=float)
    covering = ranks if routed else ranks * (digamma(ranks + 1.0) + np.euler_gamma)  # ranks * H(ranks)
    with np.errstate(divide="ignore", invalid="ignore"):
        cycle = np.minimum(timeout, np.where(lam > 0, covering / np.maximum(lam, 1e-300), np.inf))
    share = np.clip(np.asarray(sequences_per_rank, dtype=float) - 1.0, 0.0, 1.0) * np.clip(1.0 - np.asarray(busy, dtype=float), 0.0, 1.0)
    return np.where((ranks > 1) & (timeout > 0) & np.isfinite(cycle), cycle / 2.0 * share, 0.0)


def pool_ceiling_rate(clients, service_s, streamed_s) -> np.ndarray:
    """The highest rate a closed loop of `clients` can send: each request no shorter than its
    own prefill and stream."""
    return np.asarray(clients, dtype=float) / np.maximum(np.asarray(service_s) + streamed_s, 1e-30)


def pool_replicas_for(rate, service_s) -> np.ndarray:
    """Prefill replicas for a rate: rate * s replicas' worth of work, rounded up with room to spare
    so that each stays below full utilisation (docs/planner_math.md#serving)."""
    return np.floor(np.asarray(rate, dtype=float) * service_s) + 1.0


def pool_replicas_within_wait(rate, service_s, ranks) -> np.ndarray:
    """A disaggregated prefill pool for an estimate: the fewest replicas, each `ranks` servers of `service_s`, whose
    M/D/c mean wait is at most one service. `pool_replicas_for` alone keeps each below full utilisation but lets the
    wait grow without bound just below each whole replica's worth of work (Llama-3.1-8B's 8,192-token prompts on
    H100s under vLLM: TTFT 8.6 s at 4.7 requests/s and 0.26 s at 4.8, so a higher load had passed a TTFT SLO that a
    lower one missed); one replica more than that bounds the wait to half a service, so the loop ends in a step or two."""
    rate, service, ranks = np.broadcast_arrays(np.asarray(rate, dtype=float), np.asarray(service_s, dtype=float), np.asarray(ranks, dtype=float))
    replicas = pool_replicas_for(rate, service / ranks)
    for _ in range(8):
        over = mdc_wait_s(rate, service, replicas * ranks) > service
        if not np.any(over):
            break
        replicas = np.where(over, replicas + 1.0, replicas)
    return replicas


def shared_forward_s(own_s, service_s, utilisation) -> np.ndarray:
    """A prompt's own prefill on a pool whose servers are busy `utilisation` of the time, where its forward alone
    (`own_s`) is shorter than a server's (`service_s`: with attention data parallelism, a prompt on every attention
    replica): alone on an idle pool, the whole forward on a busy one, and in between that share of the way."""
    with np.errstate(invalid="ignore"):  # an infinite forward (both infinite) is its own, not inf - inf
        return np.where(service_s > own_s, own_s + np.clip(utilisation, 0.0, 1.0) * (service_s - own_s), own_s)


@dataclass(frozen=True, kw_only=True)
class PoolLoop:
    rate_per_s: np.ndarray  # requests per second the closed loop sends
    wait_s: np.ndarray  # the mean wait at that rate: staggered and wave arrivals mixed by the in-step share
    steady_wait_s: np.ndarray  # M/D/c wait of a staggered arrival at that rate (wait_s carries the Little's-law floor)
    wave_wait_s: np.ndarray  # mean wait when every client's prompt arrives at once
    utilisation: np.ndarray
    own_s: np.ndarray  # a prompt's own prefill at this load (shared_forward_s)


def pool_closed_loop(*, clients, service_s, servers, prompts_per_service=1.0, streamed_s, overhead_s=0.0, own_s=None,
                     in_step_share=0.0) -> PoolLoop:  # fmt: skip
    """A prefill pool of `servers` servers, each prefilling `prompts_per_service` prompts in one
    service of `service_s`, fed by a closed loop of `clients` (disaggregated serving). `own_s`: a prompt's
    prefill alone where it is shorter than the service (an attention-DP replica's prompt; default the service).
    The rate is solved with the wave in the time in system: a share `in_step_share` of the rounds arrives at once
    (in_step_wait_s), and the clients send at the rate their mean time in system allows (Little's law)."""
    k = np.maximum(np.asarray(prompts_per_service, dtype=float), 1.0)
    seen = seen_share(clients)
    own = service_s if own_s is None else own_s
    # The wave: ceil(C / k) batches over the servers, a prompt waiting for the rounds before its own; and every server it
    # fills prefills a whole service, not a prompt's forward at the steady load (an attention-DP replica's prompt rides
    # on the forward of a prompt on every replica: s (R + 1) / 2 in all, R rounds).
    batches = np.ceil(np.asarray(clients, dtype=float) / k)
    filled = np.clip(batches / np.maximum(servers, 1e-30), 0.0, 1.0)

    def at(x):
        """A prompt's own prefill, its steady wait, its wave wait and their mix at a rate x."""
        own_now = shared_forward_s(own, service_s, seen * x * service_s / (k * servers))
        steady = mdc_wait_s(seen * x / k, service_s, servers)
        wave = np.maximum(batches / servers - 1.0, 0.0) * service_s / 2.0 + filled * np.maximum(service_s - own_now, 0.0)
        return own_now, steady, wave, in_step_wait_s(steady, wave, in_step_share)

    def time_in_system(x):
        own_now, _, _, mixed = at(x)
        return own_now + mixed + overhead_s + streamed_s

    upper = np.minimum(servers * k / np.maximum(service_s, 1e-30), pool_ceiling_rate(clients, own, streamed_s))
    rate = closed_loop_rate(clients, time_in_system, upper=upper)
    own_at_load, steady, wave, mixed = at(rate)
    # Little's law closes the loop: each client's turn lasts C / X. Below the pool's capacity the mixed wait at the seen
    # load solves it already; at capacity (the rate held at what the pool serves) it falls short, and the wait is what
    # C / X leaves (serving_metrics applies the same floor to a colocated replica).
    with np.errstate(divide="ignore", invalid="ignore"):
        floor = np.asarray(clients, dtype=float) / np.maximum(rate, 1e-30) - (own_at_load + overhead_s + streamed_s)
    return PoolLoop(rate_per_s=rate, wait_s=np.maximum(mixed, floor), steady_wait_s=steady,
                    wave_wait_s=wave, utilisation=rate * service_s / (k * servers), own_s=own_at_load)  # fmt: skip


def serving_metrics(
    *,
    concurrency: np.ndarray,
    replicas: np.ndarray,
    batch_per_replica: np.ndarray,
    chips_per_replica: np.ndarray,
    prefill_one_s: np.ndarray,
    prefill_batched_per_prompt_s: np.ndarray,
    token_time_s: np.ndarray,
    first_token_extra_s: np.ndarray,
    needs_prefill: bool,
    delivered_tokens: float,
    request_rate_per_s: float | None,
    disaggregated: bool,
    closed_loop: bool = False,
    clients: float | None = None,
    prefill_tokens: np.ndarray | float = 0.0,
    attention_data_parallel: np.ndarray | float = 1.0,
    request_overhead_s: np.ndarray | float = 0.0,
    in_step_share: float = 0.0,
    prefill_token_budget: np.ndarray | float = PREFILL_CHUNK_TOKENS,
    prefill_rank_service_s: np.ndarray | None = None,
    balance_timeout_steps: np.ndarray | float = 0.0,
    engine_step_s: np.ndarray | None = None,
    streamed_token_time_s: np.ndarray | None = None,
) -> ServingArrays:
    """`prefill_rank_service_s`: with attention data parallelism, one attention replica's time for its prompt
    while each of the `attention_data_parallel` replicas prefills one (a forward of that many prompts); a
    disaggregated pool's replica serves that many prompts at once, each rank one (default: `prefill_one_s`, a
    replica of one attention replica). `balance_timeout_steps`: an engine that holds a colocated replica's prompts
    until every attention replica has one (specs.Scheduler.attention_dp_balance_timeout_steps; balance_hold_s), counting
    its steps of `engine_step_s` (a speculative cycle commits several tokens; default: `token_time_s`).
    `streamed_token_time_s`: what a user waits a token after the first where it is not `token_time_s`, the replica's
    time per token (block diffusion: the first block is in `first_token_extra_s`); TPOT and a request's time in
    system take it, the replica's throughput `token_time_s`."""
    generated = max(delivered_tokens, 1.0)
    user_token_s = token_time_s if streamed_token_time_s is None else streamed_token_time_s
    prefill_one = prefill_one_s if needs_prefill else np.zeros_like(token_time_s)
    batched = prefill_batched_per_prompt_s if needs_prefill else np.zeros_like(token_time_s)
    # Continuous batching, colocated: every sequence's prefill runs once per `generated`
    # decode steps of its replica. A user's TPOT carries the other b - 1 sequences'
    # prefills (their own is in TTFT); the replica's throughput carries all b of them.
    if disaggregated:
        tpot = user_token_s
        cycle_per_token = token_time_s
    else:
        # ... of the other sequences of its own attention replica (b / adp of them).
        tpot = user_token_s + np.maximum(batch_per_replica - attention_data_parallel, 0.0) * batched / generated
        cycle_per_token = token_time_s + batch_per_replica * batched / generated
    rate = request_rate_per_s
    streamed = (generated - 1.0) * tpot if needs_prefill else 0.0  # masked diffusion releases the answer at once
    throughput = concurrency / cycle_per_token
    looped = bool(closed_loop and clients)
    if disaggregated:
        # Prefill pool sized for the rate; a closed loop sizes it for the highest rate it can send; without either, for the
        # requests the decode replicas finish at their full batch (each holds its slot for its `generated` steps), so
        # that the pool keeps that batch fed.
        if looped:
            pool_rate = pool_ceiling_rate(np.minimum(concurrency, clients), prefill_one, streamed)
        else:
            pool_rate = rate if rate else throughput / generated
        # Each attention replica of a pool replica is a server of its own prompts (one where there is no attention DP).
        ranks = np.broadcast_to(np.asarray(attention_data_parallel, dtype=float), np.shape(token_time_s))
        service = prefill_one if prefill_rank_service_s is None or not needs_prefill else prefill_rank_service_s
        pool_replicas = pool_replicas_within_wait(pool_rate, service, ranks)
        servers = pool_replicas * ranks

        def queue(x):
            return mdc_wait_s(x, service, servers), x * service / servers

        prefill_chips = pool_replicas * chips_per_replica if needs_prefill else np.zeros_like(tpot)
    else:

        def queue(x):
            rho = x / replicas * batched
            return md1_wait_s(rho, batched), rho

        prefill_chips = np.zeros_like(tpot)
    own = prefill_one  # a prompt's own prefill (on a loaded attention-DP pool, part of the way to its server's forward)

    ranks_per_replica = np.broadcast_to(np.asarray(attention_data_parallel, dtype=float), np.shape(tpot))
    # Only a replica of several attention ranks holds its prompts for them (balance_hold_s is zero elsewhere).
    holds = needs_prefill and bool(np.any((np.asarray(balance_timeout_steps) > 0) & (ranks_per_replica > 1)))

    def balance_hold(requests_per_s, in_flight_per_replica, busy, routed=False):
        if not holds:
            return np.zeros_like(tpot)
        step = token_time_s if engine_step_s is None else engine_step_s
        return balance_hold_s(rate_per_replica=requests_per_s / replicas, step_s=step, timeout_steps=balance_timeout_steps,
                              ranks=ranks_per_replica, sequences_per_rank=in_flight_per_replica / ranks_per_replica, busy=busy,
                              routed=routed)  # fmt: skip

    if looped:
        admitted = np.minimum(concurrency, clients)
        if disaggregated:
            # The pool's rate is solved with its wave in the time in system (pool_closed_loop).
            loop = pool_closed_loop(clients=admitted, service_s=service, servers=servers, streamed_s=streamed,
                                    overhead_s=first_token_extra_s + request_overhead_s, own_s=prefill_one,
                                    in_step_share=in_step_share)  # fmt: skip
            served, mixed, rho, own = loop.rate_per_s, loop.wait_s, loop.utilisation, loop.own_s
        else:
            base = prefill_one + first_token_extra_s + request_overhead_s + streamed
            # The wave: a replica prefills its b prompts in chunks of the engine's prefill token budget,
            # and a prompt's first token comes when its chunk is done, on average (n + 1) / 2n of the
            # wave's prefill.
            # A prompt longer than the budget is done only at its last chunk: at most b completions, one per prompt.
            chunks = np.clip(np.ceil(batch_per_replica * prefill_tokens / prefill_token_budget), 1.0, np.maximum(batch_per_replica, 1.0))
            wave = np.maximum(batch_per_replica * batched * (chunks + 1.0) / (2.0 * chunks) - prefill_one, 0.0)

            def colocated_wait(x):
                # A staggered arrival meets the M/D/1 queue at the load it sees; a round that arrives in one wave gives every
                # attention replica its prompts at once, so only the staggered arrivals are held for the others
                # (balance_hold_s).
                steady = md1_wait_s(seen_share(admitted) * x / replicas * batched, batched)
                hold = balance_hold(x, batch_per_replica, x / replicas * batched)
                return in_step_wait_s(steady, wave, in_step_share) + (1.0 - in_step_share) * hold

            # Little's law closes the loop at the mixed wait: X (base + W(X)) = admitted. The rate solved on the steady
            # queue alone (md1_closed_loop_rate, in closed form) bounds it from above: the wave and the hold only add to a
            # request's time in system at any rate. X (base + W(X)) itself need not rise everywhere (the hold shortens as
            # the rate grows); the bracketed search finds where it crosses the clients. A scan of 3,000 random configurations
            # found none that crosses twice below capacity, and a second scan 1-2 in 2,000 random attention-DP loops of
            # one-token requests with long balance timeouts that cross three times, where the search takes the crossing
            # its bracket closes on (2026-12-07, reviewing helpers; their scan scripts are not kept).
            steady_rate = md1_closed_loop_rate(admitted, base, batched, replicas)
            if in_step_share > 0.0 or holds:
                solved = closed_loop_rate(admitted, lambda x: base + colocated_wait(x), upper=steady_rate * (1.0 + 1e-9))
                served = np.minimum(solved, steady_rate)  # never past the prefill's capacity, where the closed form holds it
            else:
                served = steady_rate
            # At the prefill's capacity (the rate held at what it serves: one-token requests, say) the wait at the seen load
            # falls short of what Little's law leaves, and the clients' time in system is admitted / X.
            mixed = np.maximum(colocated_wait(served), admitted / np.maximum(served, 1e-30) - base)
            rho = served / replicas * batched
        admission = np.maximum(clients - admitted, 0.0) / np.maximum(served, 1e-30)
        wait = mixed + admission
        throughput = served * generated
        rate = None
        needed = np.full(np.shape(tpot), np.nan)  # the clients are the concurrency: no slot count to check
    elif rate:
        wait, rho = queue(np.full(np.shape(tpot), float(rate)))
        if disaggregated:
            own = shared_forward_s(prefill_one, service, rho)
        else:
            # The sequences in flight are what the rate keeps there (Little's law), at most the batch.
            in_flight = np.minimum(batch_per_replica, float(rate) / replicas * (own + first_token_extra_s + request_overhead_s + wait + streamed))
            # An open loop's arrivals go to the least-loaded rank as they come: the ranks one after another.
            wait = wait + balance_hold(float(rate), in_flight, rho, routed=True)
    else:
        rho = np.zeros_like(tpot)
        wait = np.zeros_like(tpot)
    prefill_chips = np.broadcast_to(prefill_chips, np.shape(tpot)).astype(float)
    ttft = own + first_token_extra_s + wait + request_overhead_s
    served_tokens = throughput
    if rate and not looped:
        needed = rate * (ttft + streamed)
        # The rate's tokens need their share of the slots at this batch's speed too: a batch that cannot produce
        # lambda * G tokens/s is short of slots however short each stay, and TOO_FEW_SLOTS refuses it.
        needed = np.maximum(needed, float(rate) * generated * concurrency / np.maximum(throughput, 1e-30))
        # An open loop's requests hold a slot of their replica's batch (max_num_seqs) from admission to their last
        # token; a Poisson arrival, routed to a replica, that finds every slot of it taken waits for one. With
        # near-fixed lengths the holding time is near-deterministic: the M/D/c wait, half the M/M/c (Erlang C) one,
        # per replica. Where the slots do not suffice the queue grows without bound and TOO_FEW_SLOTS refuses it.
        held_s = ttft + streamed
        per_replica = float(rate) / replicas
        slot_wait = np.where(needed / replicas < batch_per_replica, mdc_wait_s(per_replica, held_s, batch_per_replica), 0.0)
        ttft, wait = ttft + slot_wait, wait + slot_wait
        # The rate sets the tokens served: the capacity it leaves idle is paid for all the same (cost and energy per token).
        served_tokens = np.minimum(throughput, float(rate) * generated)
    elif not looped:
        needed = np.full(np.shape(tpot), np.nan)
    with np.errstate(divide="ignore"):  # a block-diffusion answer of one block comes out at once: TPOT 0, no rate to state
        per_user = 1.0 / tpot
    return ServingArrays(
        ttft_s=ttft,
        tpot_s=tpot,
        tokens_per_s_per_user=per_user,
        output_tokens_per_s_total=throughput,
        served_output_tokens_per_s=served_tokens,
        queue_wait_s=wait,
        prefill_utilisation=rho,
        concurrency_needed=needed,
        prefill_chips=np.asarray(prefill_chips, dtype=float),
    )
