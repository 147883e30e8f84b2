"""GPUs: device memory (HBM/GDDR), NVLink/xGMI within a node, InfiniBand/Ethernet between nodes."""

from __future__ import annotations

from ..efficiency import Efficiency
from .base import ChipPolicy

# NVIDIA GPUs.
# - compute 0.7: llm-analysis's examples use flops_efficiency = 0.7, about what
#   large bf16 GEMMs reach on A100/H100 under cuBLAS.
# - bandwidth 0.75: gpt-fast Llama-2-7B bf16 batch 1 on A100-80GB reaches
#   104.9 tok/s x 13.5 GB = 1.41 TB/s = 69% of 2.04 TB/s (README @32971d3);
#   Llama-3.1-8B 93.9 tok/s x 16.1 GB = 74%. llm-analysis's examples use 0.9,
#   which is the ceiling of a streaming copy, not of a decode step.
# - overhead 0.3 ms: CUDA-graph decode steps still pay for sampling, the
#   scheduler and kernel tails (the gap between gpt-fast's 69% and a pure
#   copy's ~90%). An assumption of the right order, to be calibrated.
# - link 0.8: nccl-tests all-reduce bus bandwidth on NVLink reaches roughly
#   80% of the per-direction link rate at large messages.
# - collective overhead 15 us: gpt-fast's TP rows (Llama-2-7B bf16, A100, TP
#   2/4/8) leave ~20 us per all-reduce once weights are streamed, of which the
#   5 us alpha of GenZ is the link; the rest is launch and synchronisation.
# - prefill layer overhead 150 us: prefill is not graph-captured (its shape changes with
#   the prompt), so each layer pays its launches and synchronisation once more.
NVIDIA_GPU = Efficiency(
    compute_fraction=0.7, bandwidth_fraction=0.75, step_overhead_s=3e-4, link_bandwidth_fraction=0.8,
    collective_overhead_s=15e-6, prefill_layer_overhead_s=150e-6,
)  # fmt: skip
# AMD GPUs: no public measurement in our reference set; assume a less mature
# kernel stack than CUDA (lower compute fraction). Calibrate before trusting.
AMD_GPU = Efficiency(
    compute_fraction=0.5, bandwidth_fraction=0.7, step_overhead_s=4e-4, link_bandwidth_fraction=0.7,
    collective_overhead_s=15e-6, prefill_layer_overhead_s=150e-6,
)  # fmt: skip

# Other GPUs: the NVIDIA numbers are the best-documented stand-in.
POLICY = ChipPolicy(kind="gpu", efficiency=NVIDIA_GPU, efficiency_by_vendor=(("nvidia", NVIDIA_GPU), ("amd", AMD_GPU)))
