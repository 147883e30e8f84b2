"""LPUs (Groq): weights live in on-chip SRAM only, placed statically by the compiler; the
chip-to-chip network spans racks, so tensor parallelism is not bound to a node."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..efficiency import Efficiency
from ..specs import ChipSpec, ModelSpec
from .base import ChipPolicy

# Statically scheduled by the compiler, so the per-step overhead is small and
# deterministic; SRAM streaming is not the limit, links are.
LPU = Efficiency(compute_fraction=0.5, bandwidth_fraction=0.5, step_overhead_s=5e-5, link_bandwidth_fraction=0.8)

# LPU deployments are sized from the SRAM minimum upwards by these factors.
LPU_COUNT_FACTORS = (1.0, 1.25, 1.5, 2.0)
LPU_TENSOR_PARALLEL = (8, 16, 32, 64)


def sram_bytes(chip: ChipSpec) -> float:
    return chip.on_chip_sram_bytes or chip.memory_capacity_bytes


def min_chips(model: ModelSpec, chip: ChipSpec, weight_dtype: str) -> int:
    """Chips an LPU deployment needs just to hold the weights in SRAM."""
    return math.ceil(model.weight_bytes(weight_dtype) / sram_bytes(chip))


@dataclass(frozen=True, kw_only=True)
class LpuPolicy(ChipPolicy):
    def weight_home_bytes(self, chip: ChipSpec) -> float:
        return sram_bytes(chip)

    def layouts(self, chip, model, weight_dtypes: Sequence[str], *, max_chip_count, tensor_parallel_options=()) -> list[tuple[int, int, int]]:
        """Start at the minimum chip count (rounded up to whole nodes) and spread the model
        over every chip: TP may exceed a node; PP stays within the layers."""
        node = chip.node_size
        counts = set()
        for dtype in weight_dtypes:
            minimum = min_chips(model, chip, dtype)
            for factor in LPU_COUNT_FACTORS:
                counts.add(math.ceil(minimum * factor / node) * node)
        layouts = []
        for count in sorted(counts):
            for tp in LPU_TENSOR_PARALLEL:
                if count % tp == 0 and count // tp <= model.num_layers:
                    layouts.append((count, tp, count // tp))
        return layouts

    def layouts_of_count(
        self, chip: ChipSpec, model: ModelSpec, chip_count: int, *, weight_dtype: str, pipeline_parallel: int | None = None,
        attention_data_parallel: int = 1,
    ) -> list[tuple[int, int]]:
        """With PP unset, the model is sharded over the chips as Groq deploys it: each replica spreads the
        weights over TP x PP chips (TP over LPU_TENSOR_PARALLEL, PP stages of whole layers), with as many
        replicas as hold the weights in SRAM, fewest replicas first. When no replica of the chip count can
        hold them, one replica over every chip (its estimate then says how many chips the weights need)."""
        if pipeline_parallel is not None:
            return super().layouts_of_count(chip, model, chip_count, weight_dtype=weight_dtype, pipeline_parallel=pipeline_parallel,
                                            attention_data_parallel=attention_data_parallel)  # fmt: skip
        needed = min_chips(model, chip, weight_dtype)

        def spread(per_replica: int) -> list[tuple[int, int]]:
            return [
                (tp, per_replica // (tp * attention_data_parallel)) for tp in LPU_TENSOR_PARALLEL
                if model.num_attention_heads % tp == 0 and per_replica % (tp * attention_data_parallel) == 0
                and per_replica // (tp * attention_data_parallel) <= model.num_layers
            ]  # fmt: skip

        holding = [
            layout for replicas in range(1, chip_count + 1)
            if chip_count % replicas == 0 and chip_count // replicas >= needed for layout in spread(chip_count // replicas)
        ]  # fmt: skip
        return holding or spread(chip_count) or super().layouts_of_count(chip, model, chip_count, weight_dtype=weight_dtype,
                                                                         attention_data_parallel=attention_data_parallel)  # fmt: skip

    def notes(self, chip: ChipSpec) -> tuple[str, ...]:
        return ("LPU: statically scheduled, so per-token latency is deterministic; the step overhead is small",)


# The compiler places every tensor statically: no allocator reserve.
POLICY = LpuPolicy(
    kind="lpu", efficiency=LPU, usable_memory_fraction=1.0, tensor_parallel_spans_nodes=True, stages_cross_network=False,
    weights_on_chip_only=True,
)  # fmt: skip
