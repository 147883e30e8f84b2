"""Per-candidate hardware arrays: chip properties gathered by chip index, plus the
layout (TP, PP, replicas) and the dtype-dependent peaks and efficiencies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from .chips import policy_for
from .dtypes import ComputeTable
from .efficiency import EfficiencyTable
from .grid import CandidateGrid
from .specs import ChipSpec, WeightTables
from .units import (
    CHIP_KIND_CODE,
    DEFAULT_LINK_LATENCY_S,
    DTYPE_BYTES_ARRAY,
    DTYPE_CODE,
    INTER_NODE_BYTES_PER_S,
    INTER_NODE_COLLECTIVE_LATENCY_S,
    PCIE_GEN4_X16_BYTES_PER_S,
    PREFILL_CHUNK_TOKENS,
    SIXTEEN_BIT_BYTES,
)


@dataclass(frozen=True, kw_only=True)
class ChipTable:
    """One entry per chip in the catalog tuple (a loop over chips is fine); the kind's
    rules come from its policy (chips/)."""

    kind_code: np.ndarray
    memory_bytes: np.ndarray  # where weights and KV live (SRAM for an LPU)
    usable_fraction: np.ndarray
    kv_memory_of_free: np.ndarray  # bool: the fraction is of what the weights leave (the scheduler's rule)
    max_batch_sequences: np.ndarray  # per attention replica; inf when the scheduler sets none
    prefill_token_budget: np.ndarray
    balance_timeout_steps: np.ndarray  # steps a prompt is held for every attention-DP rank to have one (Scheduler); 0: none
    tp_spans_nodes: np.ndarray  # bool: tensor parallelism may exceed a node
    stages_cross_network: np.ndarray  # bool: pipeline stages beyond a node use the NICs
    weights_on_chip_only: np.ndarray  # bool: the chips must hold every weight
    bandwidth_bytes_per_s: np.ndarray
    link_bytes_per_s: np.ndarray
    link_latency_s: np.ndarray
    node_size: np.ndarray
    tdp_watts: np.ndarray  # NaN when unknown
    head_ranks_per_chip: np.ndarray  # TP ranks a chip runs as where its SDK pads heads; 0: TP must divide them
    moe_gathers: np.ndarray  # bool: the engine all-gathers the group's tokens for the experts (Scheduler.moe_dispatch)
    dense_over_group: np.ndarray  # bool: the engine keeps the dense layers tensor-parallel over an attention-DP group


def batch_per_replica(batch, replicas):
    """The sequences each data-parallel replica runs: the batch shared out, rounded up (a serving engine's max_num_seqs
    bounds one replica)."""
    return np.ceil(np.asarray(batch, dtype=float) / np.maximum(np.asarray(replicas, dtype=float), 1.0))


def chip_table(chips: Sequence[ChipSpec]) -> ChipTable:
    def column(fn) -> np.ndarray:
        return np.array([fn(c) for c in chips], dtype=float)

    def flag(name: str) -> np.ndarray:
        return np.array([getattr(policy_for(c), name) for c in chips], dtype=bool)

    return ChipTable(
        kind_code=np.array([CHIP_KIND_CODE[c.kind] for c in chips], dtype=np.int64),
        memory_bytes=column(lambda c: policy_for(c).weight_home_bytes(c)),
        usable_fraction=column(lambda c: c.scheduler.kv_memory_fraction if c.scheduler else policy_for(c).usable_memory_fraction),
        kv_memory_of_free=np.array([bool(c.scheduler and c.scheduler.kv_memory_of_free) for c in chips], dtype=bool),
        max_batch_sequences=column(lambda c: (c.scheduler and c.scheduler.max_batch_sequences) or np.inf),
        prefill_token_budget=column(lambda c: (c.scheduler and c.scheduler.prefill_token_budget) or PREFILL_CHUNK_TOKENS),
        balance_timeout_steps=column(lambda c: c.scheduler.attention_dp_balance_timeout_steps if c.scheduler else 0),
        tp_spans_nodes=flag("tensor_parallel_spans_nodes"),
        stages_cross_network=flag("stages_cross_network"),
        weights_on_chip_only=flag("weights_on_chip_only"),
        bandwidth_bytes_per_s=column(lambda c: c.memory_bandwidth_bytes_per_s),
        link_bytes_per_s=column(lambda c: c.link_bandwidth_bytes_per_s or PCIE_GEN4_X16_BYTES_PER_S),
        link_latency_s=column(lambda c: c.link_latency_s if c.link_latency_s is not None else DEFAULT_LINK_LATENCY_S),
        node_size=column(lambda c: c.node_size),
        tdp_watts=column(lambda c: c.tdp_watts if c.tdp_watts else np.nan),
        head_ranks_per_chip=column(lambda c: policy_for(c).head_ranks_per_chip(c)),
        moe_gathers=np.array([bool(c.scheduler and c.scheduler.moe_dispatch == "all_gather") for c in chips], dtype=bool),
        dense_over_group=np.array([bool(c.scheduler and c.scheduler.attention_dp_dense == "tensor_parallel") for c in chips], dtype=bool),
    )


@dataclass(frozen=True, kw_only=True)
class CandidateHardware:
    """Everything the cost functions need per candidate, as arrays of length n."""

    kind_code: np.ndarray
    tp_spans_nodes: np.ndarray
    weights_on_chip_only: np.ndarray
    tensor_parallel: np.ndarray
    pipeline_parallel: np.ndarray
    attention_data_parallel: np.ndarray
    expert_parallel: np.ndarray  # ranks holding whole experts (1: experts sharded over the TP ranks)
    replicas: np.ndarray
    batch_per_replica: np.ndarray
    usable_memory_bytes: np.ndarray  # what weights, activations and KV may take together
    memory_capacity_bytes: np.ndarray
    usable_fraction: np.ndarray
    kv_memory_of_free: np.ndarray  # bool: the KV cache gets usable_fraction of what the weights leave
    max_batch_sequences: np.ndarray  # per attention replica (inf: no cap)
    prefill_token_budget: np.ndarray  # prompt tokens one step prefills
    balance_timeout_steps: np.ndarray  # steps a prompt is held for every attention-DP rank to have one (0: no hold)
    bandwidth_bytes_per_s: np.ndarray
    peak_flops_per_s: np.ndarray  # of the compute dtype chosen for the weights
    expert_peak_flops_per_s: np.ndarray  # the same for a MoE model's routed experts (a CPU engine may run them on its vector units)
    attention_peak_flops_per_s: np.ndarray  # of the math the attention runs in: 16-bit (fp32 for an fp32 cache)
    compute_code: np.ndarray
    compute_fraction: np.ndarray
    bandwidth_fraction: np.ndarray
    step_overhead_s: np.ndarray
    prefill_layer_overhead_s: np.ndarray
    request_overhead_s: np.ndarray
    request_overhead_per_expert_layer_s: np.ndarray
    expert_efficiency: np.ndarray
    link_bytes_per_s: np.ndarray  # achieved: link rate x link efficiency (TP collectives)
    expert_link_bytes_per_s: np.ndarray  # the all-to-all between expert-parallel ranks
    link_latency_s: np.ndarray  # per TP collective: link alpha (the network's past a node) + software overhead
    expert_link_latency_s: np.ndarray  # the same for the expert-parallel all-to-all
    p2p_bytes_per_s: np.ndarray  # between pipeline stages
    weight_bytes_per_param: np.ndarray  # of the weights' stored format, block scales included (ModelSpec.weight_layout)
    # The weights' dtype code: the model a cost function prices reads the parameters its format keeps in
    # 16 bits off its own ModelSpec.weight_tables by it (the target's, a draft head's).
    weight_dtype_code: np.ndarray
    kv_bytes_per_element: np.ndarray
    activation_bytes: np.ndarray
    tdp_watts: np.ndarray
    node_size: np.ndarray
    # Where the chip's SDK pads attention heads to a multiple of its tensor-parallel ranks (chips/ policy
    # head_ranks_per_chip): the ranks per chip and in all (tp x them); 0 elsewhere (TP divides the heads).
    head_ranks_per_chip: np.ndarray
    head_ranks: np.ndarray
    # Under attention data parallelism (the serving engine's Scheduler): whether the experts' tokens are
    # all-gathered over the group rather than sent all-to-all, and over how many attention replicas the
    # dense layers are split (adp where the engine keeps them tensor-parallel over the group, else 1).
    moe_gathers: np.ndarray
    dense_shards: np.ndarray
    # False when no candidate uses attention data parallelism: the cost functions then skip its terms
    # (the same numbers, fewer array passes in a search).
    any_attention_dp: bool = True
    # False when every candidate's weights are 16 or 32 bits, so none keeps parameters in 16 bits apart:
    # the cost functions then skip those terms.
    any_sixteen_bit: bool = True
    # False when no candidate's chip pads attention heads: the cost functions then skip the padding terms.
    any_head_padding: bool = True

    def __len__(self) -> int:
        return len(self.tensor_parallel)

    def take(self, index: np.ndarray) -> CandidateHardware:
        flags = ("any_attention_dp", "any_sixteen_bit", "any_head_padding")
        return CandidateHardware(**{f.name: getattr(self, f.name)[index] for f in fields(self) if f.name not in flags},
                                 **{name: getattr(self, name) for name in flags})  # fmt: skip


def _attention_peak(compute: ComputeTable, c: np.ndarray, w: np.ndarray, kv: np.ndarray) -> np.ndarray:
    """Attention (QK^T, PV) multiplies activations by the KV cache, not by the weights: it runs in 16-bit
    math (the attention kernels dequantise an fp8 cache), fp32 for an fp32 cache, never at an fp8 or fp4
    weight format's peak; a chip with no such path keeps the weights' one."""
    sixteen = np.where(kv == DTYPE_CODE["fp32"], compute.peak_flops_per_s[c, DTYPE_CODE["fp32"]], compute.peak_flops_per_s[c, DTYPE_CODE["bf16"]])
    return np.where(sixteen > 0, sixteen, compute.peak_flops_per_s[c, w])


def candidate_hardware(
    table: ChipTable, grid: CandidateGrid, compute: ComputeTable, efficiency: EfficiencyTable, weights: WeightTables | None = None
) -> CandidateHardware:
    """`weights`: the model's weight formats (ModelSpec.weight_tables), for the bytes a weight takes and
    the bandwidth its format dequantises at; without them every weight takes its dtype's bytes (DTYPE_BYTES)."""
    c, w = grid.chip_index, grid.weight_dtype
    tp = grid.tensor_parallel.astype(float)
    pp = grid.pipeline_parallel.astype(float)
    adp = grid.attention_data_parallel.astype(float)
    per_replica = np.maximum(tp * pp * adp, 1.0)
    replicas = np.maximum(np.floor(grid.chip_count / per_replica), 1.0)
    kind = table.kind_code[c]
    link = table.link_bytes_per_s[c] * efficiency.link_bandwidth_fraction[c, w]
    # Stages beyond one node talk over the inter-node network (one NIC per
    # chip); LPUs are wired chip to chip across racks, so they keep their link.
    network = table.stages_cross_network[c]
    crosses_nodes = (per_replica > table.node_size[c]) & network
    # Tensor parallelism wider than a node (multi-node TP, as TensorRT-LLM runs TP 16 over two
    # 8-GPU nodes) all-reduces over all the node's NICs at once, at the network's latency; so do
    # expert-parallel all-to-alls wider than a node (units.py).
    tp_spans = (tp > table.node_size[c]) & network
    ep_spans = (tp * adp > table.node_size[c]) & network
    rails = np.minimum(link, table.node_size[c] * INTER_NODE_BYTES_PER_S)
    tp_link, ep_link = np.where(tp_spans, rails, link), np.where(ep_spans, rails, link)
    latency = table.link_latency_s[c] + efficiency.collective_overhead_s[c, w]
    network_latency = np.maximum(table.link_latency_s[c], INTER_NODE_COLLECTIVE_LATENCY_S) + efficiency.collective_overhead_s[c, w]
    compute_code = compute.compute_code[c, w]
    return CandidateHardware(
        kind_code=kind,
        tp_spans_nodes=table.tp_spans_nodes[c],
        weights_on_chip_only=table.weights_on_chip_only[c],
        tensor_parallel=tp,
        pipeline_parallel=pp,
        attention_data_parallel=adp,
        expert_parallel=grid.expert_parallel.astype(float),
        any_attention_dp=bool(np.any(adp > 1)),
        any_sixteen_bit=bool(np.any(DTYPE_BYTES_ARRAY[w] < SIXTEEN_BIT_BYTES)),
        replicas=replicas,
        batch_per_replica=batch_per_replica(grid.batch, replicas),
        # Under a free-fraction scheduler (TensorRT-LLM) weights may fill the chip; the fraction is the KV's share of the rest.
        usable_memory_bytes=np.where(table.kv_memory_of_free[c], table.memory_bytes[c], table.memory_bytes[c] * table.usable_fraction[c]),
        memory_capacity_bytes=table.memory_bytes[c],
        usable_fraction=table.usable_fraction[c],
        kv_memory_of_free=table.kv_memory_of_free[c],
        max_batch_sequences=table.max_batch_sequences[c],
        prefill_token_budget=table.prefill_token_budget[c],
        balance_timeout_steps=table.balance_timeout_steps[c],
        bandwidth_bytes_per_s=table.bandwidth_bytes_per_s[c],
        peak_flops_per_s=compute.peak_flops_per_s[c, w],
        expert_peak_flops_per_s=compute.expert_peak_flops_per_s[c, w],
        attention_peak_flops_per_s=_attention_peak(compute, c, w, grid.kv_dtype),
        compute_code=compute_code,
        compute_fraction=efficiency.compute_fraction[c, w],
        # A weight format that dequantises at its own rate (GGUF Q4_K_M) replaces its dtype's scale; never past the peak.
        bandwidth_fraction=efficiency.bandwidth_fraction[c, w] if weights is None else np.minimum(efficiency.bandwidth_fraction[c, w] * weights.bandwidth_ratio[w], 1.0),
        step_overhead_s=efficiency.step_overhead_s[c, w],
        prefill_layer_overhead_s=efficiency.prefill_layer_overhead_s[c, w],
        request_overhead_s=efficiency.request_overhead_s[c, w],
        request_overhead_per_expert_layer_s=efficiency.request_overhead_per_expert_layer_s[c, w],
        expert_efficiency=efficiency.expert_efficiency[c, w],
        link_bytes_per_s=tp_link,
        expert_link_bytes_per_s=ep_link,
        link_latency_s=np.where(tp_spans, network_latency, latency),
        expert_link_latency_s=np.where(ep_spans, network_latency, latency),
        p2p_bytes_per_s=np.where(crosses_nodes, np.minimum(link, INTER_NODE_BYTES_PER_S), link),
        weight_bytes_per_param=DTYPE_BYTES_ARRAY[w] if weights is None else weights.bytes_per_param[w],
        weight_dtype_code=w,
        kv_bytes_per_element=DTYPE_BYTES_ARRAY[grid.kv_dtype],
        # Activations and all-reduce messages stay 16-bit, fp32 only on fp32 math.
        activation_bytes=np.where(compute_code == DTYPE_CODE["fp32"], 4.0, 2.0),
        tdp_watts=table.tdp_watts[c],
        node_size=table.node_size[c],
        head_ranks_per_chip=table.head_ranks_per_chip[c],
        head_ranks=tp * table.head_ranks_per_chip[c],
        moe_gathers=table.moe_gathers[c],
        dense_shards=np.where(table.dense_over_group[c], adp, 1.0),
        any_head_padding=bool(np.any(table.head_ranks_per_chip[c] > 0)),
    )
