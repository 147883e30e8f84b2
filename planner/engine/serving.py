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

Queueing: with a request rate, a new prompt waits for the prefill server. We use
the M/D/1 mean wait (Pollaczek-Khinchine with deterministic service s):
    W_q = rho * s / (2 * (1 - rho)),   rho = lambda_replica * s_batched
which keeps the formula closed-form and vectorised; rho >= 1 means overload.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, kw_only=True)
class ServingArrays:
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    tokens_per_s_per_user: np.ndarray
    output_tokens_per_s_total: np.ndarray
    queue_wait_s: np.ndarray
    prefill_utilisation: np.ndarray  # rho: share of a replica's time spent prefilling
    concurrency_needed: np.ndarray  # Little's law: lambda * time in system (NaN without a rate)
    prefill_chips: np.ndarray  # disaggregated prefill pool (0 when colocated)


def md1_wait_s(utilisation: np.ndarray, service_s: np.ndarray) -> np.ndarray:
    """M/D/1 mean waiting time; infinite at or beyond full utilisation."""
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = utilisation * service_s / (2.0 * (1.0 - utilisation))
    return np.where(utilisation < 1.0, wait, np.inf)


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
        tpot = token_time_s + np.maximum(batch_per_replica - 1.0, 0.0) * batched / generated
        cycle_per_token = token_time_s + batch_per_replica * batched / generated
    rate = request_rate_per_s
    if rate:
        if disaggregated:
            # Prefill pool: rate * s replicas' worth of work (docs/planner_math.md#serving), rounded
            # up with room to spare so that each stays below full utilisation.
            pool_replicas = np.floor(rate * prefill_one) + 1.0
            rho = rate * prefill_one / pool_replicas
            wait = md1_wait_s(rho, prefill_one)
            prefill_chips = pool_replicas * chips_per_replica if needs_prefill else np.zeros_like(tpot)
        else:
            rho = rate / replicas * batched
            wait = md1_wait_s(rho, prefill_one)
            prefill_chips = np.zeros_like(tpot)
    else:
        rho = np.zeros_like(tpot)
        wait = np.zeros_like(tpot)
        prefill_chips = chips_per_replica if (disaggregated and needs_prefill) else np.zeros_like(tpot)
        prefill_chips = np.broadcast_to(prefill_chips, np.shape(tpot)).astype(float)
    ttft = prefill_one + first_token_extra_s + wait
    needed = rate * (ttft + generated * tpot) if rate else np.full(np.shape(tpot), np.nan)
    return ServingArrays(
        ttft_s=ttft,
        tpot_s=tpot,
        tokens_per_s_per_user=1.0 / tpot,
        output_tokens_per_s_total=concurrency / cycle_per_token,
        queue_wait_s=wait,
        prefill_utilisation=rho,
        concurrency_needed=needed,
        prefill_chips=np.asarray(prefill_chips, dtype=float),
    )
