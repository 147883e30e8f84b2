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

# AWS Inferentia and Trainium run under the Neuron SDK, whose tp_degree counts NeuronCores (two a chip on
# Inferentia2 and Trainium1, eight physical on Trainium2 and 3, where a logical NeuronCore configuration of 2
# presents them as four: awsdocs-neuron .../neuron-features/logical-neuroncore-config; the catalog's `cores`
# keeps the physical count, so padding there is at most that of eight ranks) and which pads what does not divide: the query heads and the KV cache's heads to a multiple of
# tp_degree (aws-neuron/transformers-neuronx src/transformers_neuronx/decoder.py: the attention-output padding,
# init_caches' round_up_to_divisor of n_kv_head; the MLP's intermediate_size_padded too, not counted). The Neuron benchmarks run Llama-3-8B's 32 heads over 24
# NeuronCores of an inf2.48xlarge (benchmarks/measurements/other_chips.csv, inf2-tnx-*).
POLICY = ChipPolicy(kind="other", efficiency=OTHER, head_padding_vendors=("aws",))
