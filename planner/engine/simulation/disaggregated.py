"""Disaggregated serving: a pool of prefill replicas and a pool of decode replicas, the KV cache moved
between them (DistServe, arxiv.org/abs/2401.09670; SGLang's and Dynamo's prefill/decode disaggregation).

A request runs in three stages, each simulated by the same iteration-level scheduler (scheduler.py):
1. a prefill replica (round robin, in arrival order) schedules its prompt as a one-token request:
   chunked prefill within the token budget, its KV blocks held until the first token;
2. its KV moves to a decode replica: `KvTransfer.seconds` (every rank of the prefill replica sends its
   shard over its own NIC, so the link is chips x one NIC, plus the network's latency);
3. the decode replica (round robin, in the order the KVs arrive) receives the prompt's KV with the
   request (`Requests.kv_transferred_tokens`: the blocks are taken at admission, nothing is
   recomputed unless the request is preempted) and generates the other output - 1 tokens, the first
   of its steps computing the first token's own KV.
The first token reaches the client when its KV is in place on the decode replica (SGLang and Dynamo
stream every token from the decode worker); a one-token answer ends on the prefill replica and never
moves. Arrivals are open loop (a rate or a trace): a closed loop couples the two pools through every
client's next request, which two passes of the scheduler cannot follow, so it is refused.

The merged run counts both pools' queues, sequences and KV blocks, and the requests whose KV is on
the wire as waiting, so Little's law and the overload check read the whole system.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..attention import at_ranks
from ..deployment import Deployment
from ..specs import ModelSpec
from ..units import INTER_NODE_BYTES_PER_S, INTER_NODE_COLLECTIVE_LATENCY_S
from .replicas import merge_schedules, merge_steps, split_round_robin
from .results import SimulationResult, Slos, summarise
from .scheduler import Schedule, run_schedule
from .step_cost import StepCost, deployment_hardware
from .workload import Requests, SimulationWorkload


@dataclass(frozen=True, kw_only=True)
class KvTransfer:
    """The move of one request's KV from a prefill replica to a decode replica."""

    bytes_per_token: float  # every layer's K/V of one token, all ranks together
    bytes_per_s: float  # the link between the two replicas, all ranks together
    latency_s: float
    # The prompt's tokens' worth of cache the replica holds (attention/: a window caps it, a recurrent
    # state is one token's worth whatever the prompt, a hybrid weighs its parts as its ranks hold them);
    # None: every token's K/V.
    attention: Any = None
    bytes_per_request: float = 0.0  # buffers a sequence holds whatever its length (DeepSeek-V4's compressors), all ranks

    def seconds(self, tokens: np.ndarray) -> np.ndarray:
        tokens = np.asarray(tokens, dtype=float)
        held = tokens if self.attention is None else np.asarray(self.attention.kv_held_tokens(tokens), dtype=float)
        return self.latency_s + (held * self.bytes_per_token + self.bytes_per_request) / self.bytes_per_s


def kv_transfer_for(
    model: ModelSpec, deployment: Deployment, *, bytes_per_s_per_chip: float | None = None, latency_s: float = INTER_NODE_COLLECTIVE_LATENCY_S
) -> KvTransfer:
    """The KV transfer between two replicas of `deployment`'s shape on different nodes: each of the
    replica's chips sends its shard over its own NIC (units.INTER_NODE_BYTES_PER_S: one 400 Gb/s NIC per
    GPU, the DGX layout) unless `bytes_per_s_per_chip` says otherwise; the fixed cost is one network
    round's (units.INTER_NODE_COLLECTIVE_LATENCY_S)."""
    hw = deployment_hardware(model, deployment)
    chips = deployment.tensor_parallel * deployment.pipeline_parallel  # the ranks that hold one request's KV
    per_chip = INTER_NODE_BYTES_PER_S if bytes_per_s_per_chip is None else bytes_per_s_per_chip
    if not per_chip > 0:
        raise ValueError(f"the KV link must move > 0 bytes/s per chip, got {per_chip!r}")
    # KV elements per token, all layers, times the replica's replication of them across TP ranks (MLA's
    # latent is held whole by every rank, so every rank sends it).
    replicated = float(np.asarray(model.attention.kv_share_per_chip(np.asarray(float(deployment.tensor_parallel))))) * deployment.tensor_parallel
    bytes_per_token = model.kv_cache_elements_per_token * float(hw.kv_bytes_per_element[0]) * replicated
    tp = np.asarray(float(deployment.tensor_parallel))
    fixed = float(np.asarray(model.attention.fixed_bytes_per_sequence(tp))) * deployment.tensor_parallel  # every rank sends its own
    return KvTransfer(bytes_per_token=bytes_per_token, bytes_per_s=per_chip * chips, latency_s=latency_s,
                      attention=at_ranks(model.attention, tp), bytes_per_request=fixed)  # fmt: skip


def simulate_disaggregated_with_cost(
    prefill_cost: StepCost,
    decode_cost: StepCost,
    workload: SimulationWorkload,
    *,
    prefill_replicas: int,
    decode_replicas: int,
    transfer: KvTransfer,
    slos: Slos | None = None,
    prefix_caching: bool = True,
) -> SimulationResult:
    for name, count in (("prefill_replicas", prefill_replicas), ("decode_replicas", decode_replicas)):
        if count < 1:
            raise ValueError(f"{name} must be >= 1, got {count}")
    for cost in (prefill_cost, decode_cost):
        if cost.multi_token is not None and not cost.multi_token.first_token_at_prefill:
            raise ValueError(f"{cost.multi_token.label}: a block-diffusion model's first token comes from its first block, not the "
                             "prefill, which separate prefill and decode pools are not simulated for")  # fmt: skip
    requests = workload.sample()
    if requests.closed_loop_concurrency:
        raise ValueError("a closed loop couples the prefill and decode pools through every client's next request; "
                         "simulate disaggregated serving under an arrival rate or a trace")  # fmt: skip
    n = len(requests)
    offset = prefill_cost.request_overhead_s
    prompt, output = requests.prompt_tokens, requests.output_tokens
    # 1: prefill, a one-token request on its replica.
    first_stage = dataclasses.replace(requests, output_tokens=np.ones(n, dtype=output.dtype))
    prefill = merge_schedules([(index, run_schedule(prefill_cost, share, prefix_caching=prefix_caching, arrival_offset_s=offset))
                               for index, share in split_round_robin(first_stage, prefill_replicas)], n)  # fmt: skip
    # 2: the KV on the wire.
    moves = output > 1
    sent = prefill.finish_s
    ready = np.where(moves, sent + transfer.seconds(prompt), sent)
    # 3: decode, in the order the KVs arrive.
    order = np.flatnonzero(moves)
    order = order[np.argsort(ready[order], kind="stable")]
    decode = None
    finish = ready.copy()
    preemptions = prefill.preemptions.copy()
    if len(order):
        second_stage = Requests(
            arrival_s=ready[order], prompt_tokens=prompt[order] + 1, output_tokens=output[order] - 1,
            prefix_tokens=np.zeros(len(order), dtype=prompt.dtype), kv_transferred_tokens=prompt[order],
        )  # fmt: skip
        decode = merge_schedules([(index, run_schedule(decode_cost, share, prefix_caching=False, seed=workload.seed + r))
                                  for r, (index, share) in enumerate(split_round_robin(second_stage, decode_replicas))], len(order))  # fmt: skip
        finish[order] = decode.finish_s
        preemptions[order] += decode.preemptions
    pools = [prefill] + ([decode, _on_the_wire(sent[moves], ready[moves])] if decode is not None else [])
    schedule = dataclasses.replace(merge_steps(pools), arrival_s=prefill.arrival_s, first_token_s=ready, finish_s=finish,
                                   preemptions=preemptions, steps=prefill.steps + (decode.steps if decode is not None else 0))  # fmt: skip
    notes = (
        f"disaggregated: {prefill_replicas} prefill and {decode_replicas} decode replicas, each pool behind a round-robin router; "
        f"the KV moves at {transfer.bytes_per_s / 1e9:.0f} GB/s ({transfer.bytes_per_token / 1e3:.1f} kB per token) after "
        f"{transfer.latency_s * 1e6:.0f} us, and the first token reaches the client when it is in place",
        "queue length, running sequences and KV use sum both pools; requests whose KV is on the wire count as waiting",
    )
    return summarise(schedule, requests, offset_s=offset, slos=slos or Slos(), notes=notes)


def _on_the_wire(sent: np.ndarray, ready: np.ndarray) -> Schedule:
    """The transfers as a step record: one interval per change in the number of KVs in flight, that number as waiting."""
    times = np.concatenate([sent, ready])
    change = np.concatenate([np.ones(len(sent)), -np.ones(len(ready))])
    order = np.lexsort((change, times))  # at one instant, an arrival (-1) before a departure (+1)
    times, level = times[order], np.cumsum(change[order])
    keep = (np.diff(times) > 0) & (level[:-1] > 0)
    start, duration, count = times[:-1][keep], np.diff(times)[keep], level[:-1][keep].astype(np.int64)
    zeros = np.zeros(len(start), dtype=np.int64)
    nothing = np.zeros(0)
    return Schedule(
        arrival_s=nothing, first_token_s=nothing, finish_s=nothing, preemptions=np.zeros(0, dtype=np.int64),
        step_start_s=start, step_duration_s=duration, step_waiting=count, step_running=zeros, step_kv_blocks_used=zeros,
        step_prefill_tokens=zeros, step_decode_sequences=zeros, kv_blocks=0, prefix_blocks=0, steps=0,
    )  # fmt: skip
