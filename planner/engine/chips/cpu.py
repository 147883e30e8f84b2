"""CPUs: one socket is one chip (its memory channels are its bandwidth); a node's sockets
are its chips_per_node, joined by UPI/Infinity Fabric, and tensor parallelism runs across
them as across GPUs in a node."""

from __future__ import annotations

from ..efficiency import Efficiency
from .base import ChipPolicy

# llama.cpp and IPEX decode reach roughly half to two-thirds of theoretical DDR
# bandwidth; AMX/AVX-512 GEMMs fall well short of the peak instruction rate.
# Assumption pending calibration.
CPU = Efficiency(compute_fraction=0.4, bandwidth_fraction=0.6, step_overhead_s=1e-3, link_bandwidth_fraction=0.6, collective_overhead_s=20e-6)

POLICY = ChipPolicy(kind="cpu", efficiency=CPU)
