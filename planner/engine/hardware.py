"""Per-candidate hardware arrays: chip properties gathered by chip index, plus the
layout (TP, PP, replicas) and the dtype-dependent peaks and efficiencies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from .dtypes import ComputeTable
from .efficiency import EfficiencyTable
from .grid import CandidateGrid
from .specs import ChipSpec
from .units import (
    CHIP_KIND_CODE,
    DEFAULT_LINK_LATENCY_S,
    DTYPE_BYTES_ARRAY,
    DTYPE_CODE,
    INTER_NODE_BYTES_PER_S,
    PCIE_GEN4_X16_BYTES_PER_S,
    USABLE_MEMORY_FRACTION,
)

LPU = CHIP_KIND_CODE["lpu"]
TPU = CHIP_KIND_CODE["tpu"]


@dataclass(frozen=True)
class ChipTable:
    """One entry per chip in the catalog tuple (a loop over chips is fine)."""

    kind_code: np.ndarray
    memory_bytes: np.ndarray  # where weights and KV live (SRAM for an LPU)
    usable_fraction: np.ndarray
    bandwidth_bytes_per_s: np.ndarray
    link_bytes_per_s: np.ndarray
    link_latency_s: np.ndarray
    node_size: np.ndarray
    tdp_watts: np.ndarray  # NaN when unknown


def chip_table(chips: Sequence[ChipSpec]) -> ChipTable:
    def column(fn) -> np.ndarray:
        return np.array([fn(c) for c in chips], dtype=float)

    is_lpu = [c.kind == "lpu" for c in chips]
    return ChipTable(
        kind_code=np.array([CHIP_KIND_CODE[c.kind] for c in chips], dtype=np.int64),
        memory_bytes=column(lambda c: (c.on_chip_sram_bytes or c.memory_capacity_bytes) if c.kind == "lpu" else c.memory_capacity_bytes),
        # The LPU compiler places every tensor statically: no allocator reserve.
        usable_fraction=np.where(is_lpu, 1.0, USABLE_MEMORY_FRACTION),
        bandwidth_bytes_per_s=column(lambda c: c.memory_bandwidth_bytes_per_s),
        link_bytes_per_s=column(lambda c: c.link_bandwidth_bytes_per_s or PCIE_GEN4_X16_BYTES_PER_S),
        link_latency_s=column(lambda c: c.link_latency_s if c.link_latency_s is not None else DEFAULT_LINK_LATENCY_S),
        node_size=column(lambda c: c.node_size),
        tdp_watts=column(lambda c: c.tdp_watts if c.tdp_watts else np.nan),
    )


@dataclass(frozen=True)
class CandidateHardware:
    """Everything the cost functions need per candidate, as arrays of length n."""

    kind_code: np.ndarray
    tensor_parallel: np.ndarray
    pipeline_parallel: np.ndarray
    replicas: np.ndarray
    batch_per_replica: np.ndarray
    usable_memory_bytes: np.ndarray
    bandwidth_bytes_per_s: np.ndarray
    peak_flops_per_s: np.ndarray  # of the compute dtype chosen for the weights
    compute_code: np.ndarray
    compute_fraction: np.ndarray
    bandwidth_fraction: np.ndarray
    step_overhead_s: np.ndarray
    prefill_layer_overhead_s: np.ndarray
    link_bytes_per_s: np.ndarray  # achieved: link rate x link efficiency
    link_latency_s: np.ndarray  # per collective: link alpha + software overhead
    p2p_bytes_per_s: np.ndarray  # between pipeline stages
    weight_bytes_per_param: np.ndarray
    kv_bytes_per_element: np.ndarray
    activation_bytes: np.ndarray
    tdp_watts: np.ndarray
    node_size: np.ndarray

    def __len__(self) -> int:
        return len(self.tensor_parallel)

    def take(self, index: np.ndarray) -> CandidateHardware:
        return CandidateHardware(**{f.name: getattr(self, f.name)[index] for f in fields(self)})


def candidate_hardware(
    table: ChipTable, grid: CandidateGrid, compute: ComputeTable, efficiency: EfficiencyTable
) -> CandidateHardware:
    c, w = grid.chip_index, grid.weight_dtype
    tp = grid.tensor_parallel.astype(float)
    pp = grid.pipeline_parallel.astype(float)
    per_replica = np.maximum(tp * pp, 1.0)
    replicas = np.maximum(np.floor(grid.chip_count / per_replica), 1.0)
    kind = table.kind_code[c]
    link = table.link_bytes_per_s[c] * efficiency.link_bandwidth_fraction[c, w]
    # Stages beyond one node talk over the inter-node network (one NIC per
    # chip); LPUs are wired chip to chip across racks, so they keep their link.
    crosses_nodes = (per_replica > table.node_size[c]) & (kind != LPU)
    compute_code = compute.compute_code[c, w]
    return CandidateHardware(
        kind_code=kind,
        tensor_parallel=tp,
        pipeline_parallel=pp,
        replicas=replicas,
        batch_per_replica=np.ceil(grid.batch / replicas),
        usable_memory_bytes=table.memory_bytes[c] * table.usable_fraction[c],
        bandwidth_bytes_per_s=table.bandwidth_bytes_per_s[c],
        peak_flops_per_s=compute.peak_flops_per_s[c, w],
        compute_code=compute_code,
        compute_fraction=efficiency.compute_fraction[c, w],
        bandwidth_fraction=efficiency.bandwidth_fraction[c, w],
        step_overhead_s=efficiency.step_overhead_s[c, w],
        prefill_layer_overhead_s=efficiency.prefill_layer_overhead_s[c, w],
        link_bytes_per_s=link,
        link_latency_s=table.link_latency_s[c] + efficiency.collective_overhead_s[c, w],
        p2p_bytes_per_s=np.where(crosses_nodes, np.minimum(link, INTER_NODE_BYTES_PER_S), link),
        weight_bytes_per_param=DTYPE_BYTES_ARRAY[w],
        kv_bytes_per_element=DTYPE_BYTES_ARRAY[grid.kv_dtype],
        # Activations and all-reduce messages stay 16-bit, fp32 only on fp32 math.
        activation_bytes=np.where(compute_code == DTYPE_CODE["fp32"], 4.0, 2.0),
        tdp_watts=table.tdp_watts[c],
        node_size=table.node_size[c],
    )
