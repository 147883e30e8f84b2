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
is the bare decode step and the prefill pool is sized from the request rate.

Queueing (docs/planner_math.md#serving), with a request rate lambda:
- colocated, each replica is one prefill server whose service per prompt is the batched
  prefill time s_b: rho = lambda_replica * s_b and the M/D/1 mean wait
  W_q = rho * s_b / (2 * (1 - rho)) (Pollaczek-Khinchine, deterministic service);
- disaggregated, a pool of c prefill replicas serving one prompt each in s: the M/D/c wait,
  half the M/M/c (Erlang C) wait (the cv^2 = 0 case of the Allen-Cunneen approximation).
rho >= 1 means overload.

Closed loop (a benchmark keeping C requests in flight, as the silicon measurements do): the
request rate is not given but follows from Little's law, X = C / (time in system), where the
time in system itself grows with X through the queue; `closed_loop_rate` solves for X by
bisection, element-wise. Requests beyond the batch the engine admits wait for a slot: by
Little's law that queue holds C - b requests, a wait of (C - b) / X.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .units import PREFILL_CHUNK_TOKENS


@dataclass(frozen=True, kw_only=True)
class ServingArrays:
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    tokens_per_s_per_user: np.ndarray
    output_tokens_per_s_total: np.ndarray
    queue_wait_s: np.ndarray
    prefill_utilisation: np.ndarray  # rho: share of a replica's time spent prefilling
    concurrency_needed: np.ndarray  # Little's law: lambda * time in system (NaN without a rate; the clients in a closed loop)
    prefill_chips: np.ndarray  # disaggregated prefill pool (0 when colocated)


def md1_wait_s(utilisation: np.ndarray, service_s: np.ndarray) -> np.ndarray:
    """M/D/1 mean waiting time; infinite at or beyond full utilisation."""
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = utilisation * service_s / (2.0 * (1.0 - utilisation))
    return np.where(utilisation < 1.0, wait, np.inf)


# Past this many servers Erlang C is computed for this many at the same utilisation: the wait
# only shrinks with more servers, so the figure errs long, and the loop stays bounded.
MAX_EXACT_SERVERS = 1024


def erlang_c(servers: np.ndarray, offered_load: np.ndarray) -> np.ndarray:
    """Probability an arrival waits in M/M/c with c servers and offered load a = lambda*s (a < c),
    from the stable Erlang B recurrence B_k = a B_{k-1} / (k + a B_{k-1}), C = c B / (c - a (1 - B))."""
    c, a = np.broadcast_arrays(np.maximum(np.round(np.asarray(servers, dtype=float)), 1.0), np.asarray(offered_load, dtype=float))
    exact = np.minimum(c, MAX_EXACT_SERVERS)
    a = a * exact / c
    b = np.ones_like(a)
    for k in range(1, int(exact.max()) + 1 if exact.size else 1):
        b = np.where(k <= exact, a * b / (k + a * b), b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a < exact, exact * b / (exact - a * (1.0 - b)), 1.0)


def mdc_wait_s(arrival_rate: np.ndarray, service_s: np.ndarray, servers: np.ndarray) -> np.ndarray:
    """M/D/c mean wait: half the M/M/c wait C(c, a) * s / (c - a); infinite at or beyond capacity."""
    a = arrival_rate * service_s
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = 0.5 * erlang_c(servers, a) * service_s / (servers - a)
    return np.where(a < servers, wait, np.inf)


def closed_loop_rate(clients: float, time_in_system, upper: np.ndarray, iterations: int = 60) -> np.ndarray:
    """The request rate X with X * time_in_system(X) = clients, by bisection on (0, upper).

    time_in_system must grow with X (a queue only lengthens with load), so the root is unique;
    `upper` is a rate the system cannot sustain (its capacity)."""
    low, high = np.zeros_like(upper), np.asarray(upper, dtype=float).copy()
    for _ in range(iterations):
        mid = (low + high) / 2.0
        with np.errstate(invalid="ignore", over="ignore"):
            over = mid * time_in_system(mid) > clients
        high = np.where(over, mid, high)
        low = np.where(over, low, mid)
    return (low + high) / 2.0


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
) -> ServingArrays:
    generated = max(delivered_tokens, 1.0)
    prefill_one = prefill_one_s if needs_prefill else np.zeros_like(token_time_s)
    batched = prefill_batched_per_prompt_s if needs_prefill else np.zeros_like(token_time_s)
    # Continuous batching, colocated: every sequence's prefill runs once per `generated`
    # decode steps of its replica. A user's TPOT carries the other b - 1 sequences'
    # prefills (their own is in TTFT); the replica's throughput carries all b of them.
    if disaggregated:
        tpot = token_time_s
        cycle_per_token = token_time_s
    else:
        # ... of the other sequences of its own attention replica (b / adp of them).
        tpot = token_time_s + np.maximum(batch_per_replica - attention_data_parallel, 0.0) * batched / generated
        cycle_per_token = token_time_s + batch_per_replica * batched / generated
    rate = request_rate_per_s
    streamed = (generated - 1.0) * tpot if needs_prefill else 0.0  # masked diffusion releases the answer at once
    throughput = concurrency / cycle_per_token
    if disaggregated:
        # Prefill pool: rate * s replicas' worth of work (docs/planner_math.md#serving), rounded
        # up with room to spare so that each stays below full utilisation.
        pool_replicas = np.floor((rate or 0.0) * prefill_one) + 1.0

        def queue(x):
            return mdc_wait_s(x, prefill_one, pool_replicas), x * prefill_one / pool_replicas

        capacity = pool_replicas / np.maximum(prefill_one, 1e-30)
        prefill_chips = pool_replicas * chips_per_replica if needs_prefill else np.zeros_like(tpot)  # one replica without a rate
    else:

        def queue(x):
            rho = x / replicas * batched
            return md1_wait_s(rho, batched), rho

        capacity = replicas / np.maximum(batched, 1e-30)
        prefill_chips = np.zeros_like(tpot)
    if closed_loop and clients:
        admitted = np.minimum(concurrency, clients)

        def time_in_system(x):
            wait, _ = queue(x)
            return prefill_one + first_token_extra_s + wait + request_overhead_s + streamed

        if disaggregated:
            # The admitted requests cycle through the slots; the rest wait for one.
            upper = np.minimum(capacity, admitted / np.maximum(streamed + prefill_one, 1e-30))
            served = closed_loop_rate(admitted, time_in_system, upper=upper)
            wait, rho = queue(served)
        else:
            # Identical requests started together stay in step: each wave, a replica prefills its
            # b prompts in chunks of the engine's prefill token budget, and a prompt's first token
            # comes when its chunk is done, on average (n + 1) / 2n of the wave's prefill.
            chunks = np.maximum(np.ceil(batch_per_replica * prefill_tokens / PREFILL_CHUNK_TOKENS), 1.0)
            in_slot = batch_per_replica * batched * (chunks + 1.0) / (2.0 * chunks)
            served = admitted / np.maximum(np.maximum(in_slot, prefill_one) + first_token_extra_s + request_overhead_s + streamed, 1e-30)
            wait, rho = np.maximum(in_slot - prefill_one, 0.0), served / replicas * batched
        admission = np.maximum(clients - admitted, 0.0) / np.maximum(served, 1e-30)
        wait = wait + admission
        throughput = served * generated
        rate = None
        needed = np.full(np.shape(tpot), np.nan)  # the clients are the concurrency: no slot count to check
    elif rate:
        wait, rho = queue(np.full(np.shape(tpot), float(rate)))
    else:
        rho = np.zeros_like(tpot)
        wait = np.zeros_like(tpot)
    prefill_chips = np.broadcast_to(prefill_chips, np.shape(tpot)).astype(float)
    ttft = prefill_one + first_token_extra_s + wait + request_overhead_s
    if not (closed_loop and clients):
        needed = rate * (ttft + streamed) if rate else np.full(np.shape(tpot), np.nan)
    return ServingArrays(
        ttft_s=ttft,
        tpot_s=tpot,
        tokens_per_s_per_user=1.0 / tpot,
        output_tokens_per_s_total=throughput,
        queue_wait_s=wait,
        prefill_utilisation=rho,
        concurrency_needed=needed,
        prefill_chips=np.asarray(prefill_chips, dtype=float),
    )
