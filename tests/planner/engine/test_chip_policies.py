"""Each chip kind's rules live in one policy; the engine asks the policy, not the kind's name."""

from __future__ import annotations

from planner.engine import ChipPolicy, policy_for
from planner.engine.chips import POLICIES
from planner.engine.units import CHIP_KINDS

from .factories import epyc_9654, groq_lpu, h100_sxm, tpu_v5e


def test_every_chip_kind_has_exactly_one_policy():
    assert sorted(POLICIES) == sorted(CHIP_KINDS)
    assert all(isinstance(p, ChipPolicy) for p in POLICIES.values())


def test_a_tpu_pads_prompts_to_power_of_two_buckets_and_a_gpu_does_not():
    assert policy_for(tpu_v5e()).prefill_tokens(1000) == 1024
    assert policy_for(tpu_v5e()).prefill_tokens(5) == 16
    assert policy_for(h100_sxm()).prefill_tokens(1000) == 1000


def test_an_lpu_keeps_weights_in_sram_with_no_allocator_reserve_and_tp_across_racks():
    lpu = policy_for(groq_lpu())
    assert lpu.weight_home_bytes(groq_lpu()) == 230e6
    assert lpu.usable_memory_fraction == 1.0
    assert lpu.tensor_parallel_spans_nodes and lpu.weights_on_chip_only and not lpu.stages_cross_network
    assert lpu.notes(groq_lpu())


def test_a_cpu_socket_is_a_chip_with_the_default_layouts_and_its_own_efficiency():
    cpu = policy_for(epyc_9654())
    assert cpu.usable_memory_fraction == 0.9
    assert cpu.default_efficiency(epyc_9654()).bandwidth_fraction == 0.6


def test_gpu_efficiency_defaults_depend_on_the_vendor():
    gpu = POLICIES["gpu"]
    assert gpu.default_efficiency(h100_sxm()).compute_fraction == 0.7
    amd = type(h100_sxm())(**{**h100_sxm().__dict__, "slug": "mi", "vendor": "AMD"})
    assert gpu.default_efficiency(amd).compute_fraction == 0.5
