"""Several identical replicas behind a round-robin router: each simulated on its own, then merged.

Request j goes to replica j mod R (open loop or trace); in a closed loop, client c and its requests
stay on replica c mod R. The merged schedule keeps every request's times and sums the replicas'
queues, running sequences and KV blocks over the union of their step boundaries, counting a replica
as empty while it idles, so Little's law, the overload slope and the time series read the whole
deployment.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .scheduler import Schedule
from .workload import Requests


def split_round_robin(requests: Requests, replicas: int) -> list[tuple[np.ndarray, Requests]]:
    """(global indices, that replica's requests), one pair per replica that receives any."""
    parts = []
    clients = requests.closed_loop_concurrency
    for r in range(replicas):
        index = np.arange(r, len(requests), replicas)
        if len(index) == 0:
            continue
        share = None if not clients else len(range(r, clients, replicas))
        if clients and share == 0:
            continue
        parts.append((index, Requests(
            arrival_s=requests.arrival_s[index], prompt_tokens=requests.prompt_tokens[index], output_tokens=requests.output_tokens[index],
            prefix_tokens=requests.prefix_tokens[index], closed_loop_concurrency=share, think_time_s=requests.think_time_s,
            kv_transferred_tokens=None if requests.kv_transferred_tokens is None else requests.kv_transferred_tokens[index],
        )))  # fmt: skip
    return parts


def merge_schedules(parts: list[tuple[np.ndarray, Schedule]], requests: int) -> Schedule:
    if len(parts) == 1:
        return parts[0][1]
    per_request = {name: np.full(requests, np.nan) for name in ("arrival_s", "first_token_s", "finish_s")}
    preemptions = np.zeros(requests, dtype=np.int64)
    for index, schedule in parts:
        for name, values in per_request.items():
            values[index] = getattr(schedule, name)
        preemptions[index] = schedule.preemptions
    return dataclasses.replace(
        merge_steps([schedule for _, schedule in parts]),
        arrival_s=per_request["arrival_s"],
        first_token_s=per_request["first_token_s"],
        finish_s=per_request["finish_s"],
        preemptions=preemptions,
    )


def merge_steps(schedules: list[Schedule]) -> Schedule:
    """The schedules' step records summed over the union of their step boundaries (a schedule counts as
    empty while it idles); the per-request fields are the first schedule's, for the caller to replace."""
    edges = np.unique(np.concatenate([np.concatenate([s.step_start_s, s.step_start_s + s.step_duration_s]) for s in schedules]))
    totals = {name: np.zeros(len(edges) - 1) for name in ("waiting", "running", "kv_blocks_used", "prefill_tokens", "decode_sequences")}
    for schedule in (s for s in schedules if len(s.step_start_s)):
        at = np.searchsorted(schedule.step_start_s, edges[:-1], side="right") - 1
        safe = np.maximum(at, 0)
        busy = (at >= 0) & (edges[:-1] < schedule.step_start_s[safe] + schedule.step_duration_s[safe])
        for name in totals:
            values = getattr(schedule, f"step_{name}")[safe]
            idle = schedule.prefix_blocks if name == "kv_blocks_used" else 0
            totals[name] += np.where(busy, values, idle)
    return dataclasses.replace(
        schedules[0],
        step_start_s=edges[:-1],
        step_duration_s=np.diff(edges),
        step_waiting=totals["waiting"].astype(np.int64),
        step_running=totals["running"].astype(np.int64),
        step_kv_blocks_used=totals["kv_blocks_used"].astype(np.int64),
        step_prefill_tokens=totals["prefill_tokens"].astype(np.int64),
        step_decode_sequences=totals["decode_sequences"].astype(np.int64),
        kv_blocks=sum(s.kv_blocks for s in schedules),
        prefix_blocks=sum(s.prefix_blocks for s in schedules),
        steps=sum(s.steps for s in schedules),
    )
