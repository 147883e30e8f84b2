"""Everything else: Apple unified memory, Gaudi, Inferentia/Trainium, wafer-scale parts
until each earns a policy of its own."""

from __future__ import annotations

from ..efficiency import Efficiency
from .base import ChipPolicy

# llama.cpp Metal Llama-3.1-8B f16 on M2 Ultra runs 36.3 tok/s x 16.1 GB = 0.58 TB/s
# = 73% of 800 GB/s (measured_dev.csv, lcpp-m2u-l3-8b-f16).
OTHER = Efficiency(
    compute_fraction=0.5, bandwidth_fraction=0.7, step_overhead_s=5e-4, link_bandwidth_fraction=0.7,
    collective_overhead_s=15e-6, prefill_layer_overhead_s=150e-6,
)  # fmt: skip

POLICY = ChipPolicy(kind="other", efficiency=OTHER)
