"""The rules a chip kind brings to the engine, in one policy object per kind
(docs/planner_math.md#chip-kinds). The engine asks a chip's policy, never its kind string:
where weights live, how much memory is usable, whether tensor parallelism may span nodes,
whether pipeline stages beyond a node go over the network, how a prompt is padded, how a
model is laid out over chips, the default efficiency, and the notes a result carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..efficiency import Efficiency
from ..layouts import DEFAULT_TENSOR_PARALLEL, chip_layouts
from ..parallel import tensor_parallel_options
from ..specs import ChipSpec, ModelSpec
from ..units import USABLE_MEMORY_FRACTION


@dataclass(frozen=True, kw_only=True)
class ChipPolicy:
    """The defaults every kind shares; a kind overrides what differs."""

    kind: str
    efficiency: Efficiency  # the kind's spec default (before the weight dtype's scaling)
    efficiency_by_vendor: tuple[tuple[str, Efficiency], ...] = ()
    usable_memory_fraction: float = USABLE_MEMORY_FRACTION
    tensor_parallel_spans_nodes: bool = False
    stages_cross_network: bool = True  # pipeline stages beyond one node use the inter-node NICs
    weights_on_chip_only: bool = False  # an LPU needs enough chips to hold every weight in SRAM
    # Vendors whose SDK pads attention heads to a multiple of the tensor-parallel ranks, each compute core
    # of a chip a rank (head_ranks_per_chip), so any TP degree runs; elsewhere TP must divide the heads.
    head_padding_vendors: tuple[str, ...] = ()

    def weight_home_bytes(self, chip: ChipSpec) -> float:
        """Where weights and KV live: device memory (SRAM for an LPU)."""
        return chip.memory_capacity_bytes

    def prefill_tokens(self, prompt_tokens: int) -> float:
        """Tokens a prefill of `prompt_tokens` actually computes (bucket padding on a TPU)."""
        return float(prompt_tokens)

    def layouts(
        self,
        chip: ChipSpec,
        model: ModelSpec,
        weight_dtypes: Sequence[str],
        *,
        max_chip_count: int,
        tensor_parallel_options: Sequence[int] = DEFAULT_TENSOR_PARALLEL,
    ) -> list[tuple[int, int, int]]:
        """The default TP degrees gain the chip's whole node where its SDK pads the model's heads (an
        inf2.48xlarge's 12 Inferentia2 chips as one TP group, as AWS benchmarks it: padding.py)."""
        from ..padding import runs_any_tensor_parallel  # padding reads the policies

        options = tuple(tensor_parallel_options)
        if options == tuple(DEFAULT_TENSOR_PARALLEL) and runs_any_tensor_parallel(model, chip):
            options = tuple(sorted(set(options) | {chip.node_size}))
        return chip_layouts(chip, max_chip_count=max_chip_count, tensor_parallel_options=options)

    def layouts_of_count(
        self, chip: ChipSpec, model: ModelSpec, chip_count: int, *, weight_dtype: str, pipeline_parallel: int | None = None,
        attention_data_parallel: int = 1,
    ) -> list[tuple[int, int]]:
        """(tp, pp) layouts of a fixed `chip_count` worth trying when TP is "auto" (an estimate), in order of
        preference: every TP of tensor_parallel_options at the given PP (1 when unset)."""
        pp = pipeline_parallel or 1
        return [(tp, pp) for tp in tensor_parallel_options(model, chip, chip_count, pp * attention_data_parallel)]

    def head_ranks_per_chip(self, chip: ChipSpec) -> int:
        """Tensor-parallel ranks one chip runs as where its SDK pads the attention heads to a multiple of
        the ranks (its compute cores, `cores`; 1 when not recorded); 0 where TP must divide the heads."""
        if chip.vendor.strip().lower() not in self.head_padding_vendors:
            return 0
        return max(int(chip.cores or 1), 1)

    def default_efficiency(self, chip: ChipSpec) -> Efficiency:
        vendor = chip.vendor.strip().lower()
        return dict(self.efficiency_by_vendor).get(vendor, self.efficiency)

    def notes(self, chip: ChipSpec) -> tuple[str, ...]:
        return ()
