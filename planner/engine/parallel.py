"""Communication costs of tensor and pipeline parallelism, element-wise on arrays."""

from __future__ import annotations

import numpy as np


def ring_allreduce_s(
    message_bytes: np.ndarray,
    participants: np.ndarray,
    link_bytes_per_s: np.ndarray,
    latency_s: np.ndarray,
) -> np.ndarray:
    """Ring all-reduce of M bytes over p chips: alpha + 2(p-1)/p * M / BW.

    The nccl-tests "bus bandwidth" convention (nccl-tests doc/PERFORMANCE.md);
    GenZ `collective_times.py` uses the same form with alpha ~ 5 us. Zero for p = 1.
    """
    p = np.asarray(participants, dtype=float)
    ring = 2.0 * (p - 1.0) / np.maximum(p, 1.0) * message_bytes / link_bytes_per_s
    return np.where(p > 1, latency_s + ring, 0.0)


def tensor_parallel_comm_s(
    layers_in_stage: np.ndarray,
    message_bytes: np.ndarray,
    tensor_parallel: np.ndarray,
    link_bytes_per_s: np.ndarray,
    latency_s: np.ndarray,
) -> np.ndarray:
    """Megatron-LM TP: two all-reduces per layer (after attention and after the MLP;
    Shoeybi et al. 2019, sec. 3). Decode messages are tiny (b*d*beta), so decode
    TP is latency bound: about 2*L*alpha per token."""
    return 2.0 * layers_in_stage * ring_allreduce_s(message_bytes, tensor_parallel, link_bytes_per_s, latency_s)


def pipeline_p2p_s(
    message_bytes: np.ndarray,
    pipeline_parallel: np.ndarray,
    link_bytes_per_s: np.ndarray,
    latency_s: np.ndarray,
) -> np.ndarray:
    """(pp - 1) point-to-point sends of the activations between stages."""
    pp = np.asarray(pipeline_parallel, dtype=float)
    return np.maximum(pp - 1.0, 0.0) * (latency_s + message_bytes / link_bytes_per_s)


def pipeline_micro_batches(batch_per_replica: np.ndarray, pipeline_parallel: np.ndarray) -> np.ndarray:
    """Micro-batches in flight: min(pp, b), so each stage stays busy once b >= pp.

    With m <= pp micro-batches a decode cycle (every sequence advances one token)
    takes pp * (stage time of one micro-batch): each stage runs m micro-batches
    per cycle and each micro-batch crosses pp stages, the first bound dominating.
    """
    return np.maximum(np.minimum(np.asarray(pipeline_parallel, dtype=float), np.ceil(batch_per_replica)), 1.0)
