"""Which (chip count, tensor parallel, pipeline parallel) layouts a search tries by default:
TP within a node, pipeline stages across nodes once TP fills one, the rest data-parallel
replicas. A chip kind with other rules (the LPU) gives its own (chips/)."""

from __future__ import annotations

from collections.abc import Sequence

from .specs import ChipSpec

DEFAULT_CHIP_COUNTS = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_TENSOR_PARALLEL = (1, 2, 4, 8)


def chip_layouts(
    chip: ChipSpec,
    *,
    max_chip_count: int = 64,
    tensor_parallel_options: Sequence[int] = DEFAULT_TENSOR_PARALLEL,
) -> list[tuple[int, int, int]]:
    """(chip_count, tp, pp) triples: TP within a node, PP across nodes when TP
    fills the node, the rest data-parallel replicas."""
    node = chip.node_size
    counts = {c for c in DEFAULT_CHIP_COUNTS if c <= max_chip_count}
    counts |= {k * node for k in range(1, max_chip_count // node + 1)}
    layouts = []
    for count in sorted(counts):
        for tp in tensor_parallel_options:
            if tp > min(node, count) or count % tp:
                continue
            layouts.append((count, tp, 1))
            if tp != min(node, count):
                continue  # pipeline stages only once TP fills a node
            pp = 2
            while tp * pp <= count:
                if count % (tp * pp) == 0:
                    layouts.append((count, tp, pp))
                pp *= 2
    return layouts
