"""Communication costs of tensor and pipeline parallelism, element-wise on arrays."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .specs import ChipSpec, ModelSpec

TENSOR_PARALLEL_CHOICES = (1, 2, 4, 8, 16, 32, 64)


def tensor_parallel_options(model: ModelSpec, chip: ChipSpec, chip_count: int, pipeline_parallel: int = 1) -> list[int]:
    """TP degrees worth trying for a fixed chip count, smallest first: each divides the
    attention heads (Megatron splits heads over ranks; a chip whose SDK pads them, padding.py, takes any,
    and its whole node too, as AWS runs 12 Inferentia2 chips) and the chip count into replicas of
    tp x pp, and fits in a node; when none fits a node, the smallest that divides."""
    from .padding import runs_any_tensor_parallel  # padding reads the chip policies, which import this module

    any_tp = runs_any_tensor_parallel(model, chip)
    choices = sorted(set(TENSOR_PARALLEL_CHOICES) | ({chip.node_size} if any_tp else set()))
    options = [
        tp for tp in choices
        if (any_tp or model.num_attention_heads % tp == 0) and chip_count % (tp * pipeline_parallel) == 0
    ]  # fmt: skip
    within_node = [tp for tp in options if tp <= chip.node_size]
    return within_node or options[:1] or [1]


def largest_tensor_parallel(model: ModelSpec, chip: ChipSpec, chip_count: int) -> int:
    """The widest TP of tensor_parallel_options (pipeline stages take the rest)."""
    return tensor_parallel_options(model, chip, chip_count)[-1]


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


def expert_all_to_all_s(
    moe_layers_in_stage: float,
    message_bytes_per_chip: np.ndarray,
    expert_parallel: np.ndarray,
    link_bytes_per_s: np.ndarray,
    latency_s: np.ndarray,
) -> np.ndarray:
    """Expert parallelism: per MoE layer, one all-to-all dispatches each token to the ranks of
    its experts and one combines the results (GShard, Lepikhin et al. 2020, sec. 2; DeepSpeed-MoE,
    Rajbhandari et al. 2022). A rank keeps 1/ep of what it routes: (ep - 1)/ep crosses the link."""
    ep = np.asarray(expert_parallel, dtype=float)
    one = latency_s + (ep - 1.0) / np.maximum(ep, 1.0) * message_bytes_per_chip / link_bytes_per_s
    return np.where(ep > 1, 2.0 * moe_layers_in_stage * one, 0.0)


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
