"""Collectives wider than a node: over every GPU's NIC at once, at the network's latency (units.py)."""

from __future__ import annotations

import pytest

from planner.engine import Deployment, Workload, estimate
from planner.engine.units import DEFAULT_LINK_LATENCY_S, INTER_NODE_BYTES_PER_S, INTER_NODE_COLLECTIVE_LATENCY_S

from .factories import h100_sxm, llama_2_70b


def _comm_s(tensor_parallel: int, *, prompt_tokens: int, batch: int = 1):
    chip, model = h100_sxm(), llama_2_70b()
    e = estimate(model, Deployment(chip=chip, chip_count=tensor_parallel, tensor_parallel=tensor_parallel),
                 Workload(prompt_tokens=prompt_tokens, output_tokens=16), batch=batch)  # fmt: skip
    return model, e


def test_a_long_prompt_all_reduces_across_two_nodes_at_eight_nics_of_bandwidth():
    model, e = _comm_s(16, prompt_tokens=8192)
    moved_bytes = 2 * model.num_layers * 2 * 15 / 16 * 8192 * model.hidden_size * 2.0  # bf16 activations, two all-reduces a layer
    # The bandwidth term of eight 400 Gb/s NICs at once is a floor; one NIC alone would take 8x as long.
    assert moved_bytes / (8 * INTER_NODE_BYTES_PER_S) < e.prefill.comm_s < moved_bytes / (4 * INTER_NODE_BYTES_PER_S)


def test_a_decode_step_across_nodes_pays_the_network_latency_per_all_reduce():
    model, inside = _comm_s(8, prompt_tokens=128)
    _, across = _comm_s(16, prompt_tokens=128)
    # At batch 1 the all-reduces are latency-bound: the network's 20 us against NVLink's 5 us, each.
    extra_s = 2 * model.num_layers * (INTER_NODE_COLLECTIVE_LATENCY_S - DEFAULT_LINK_LATENCY_S)
    assert across.decode.comm_s - inside.decode.comm_s == pytest.approx(extra_s, rel=0.1)
