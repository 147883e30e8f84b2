"""A chip whose SDK pads attention heads to a multiple of its tensor-parallel ranks (AWS Neuron: each NeuronCore a
rank) runs any TP degree, and pays for the padded heads; a GPU's TP must divide the heads (planner/engine/padding.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.engine import Deployment, Workload, estimate
from planner.engine.chips import policy_for

from .factories import h100_sxm, inferentia2, llama_2_7b, llama_3_1_8b

WORKLOAD = Workload(prompt_tokens=128, output_tokens=512)


def _neuron(model, tp: int, chip=None, **kwargs):
    chip = chip or inferentia2()
    deployment = Deployment(chip=chip, chip_count=tp, tensor_parallel=tp, weight_dtype="bf16", **kwargs)
    return estimate(model, deployment, WORKLOAD, batch=1)


def test_only_a_chip_whose_sdk_pads_runs_a_tp_that_does_not_divide_the_heads():
    assert policy_for(inferentia2()).head_ranks_per_chip(inferentia2()) == 2  # two NeuronCores a chip
    assert policy_for(h100_sxm()).head_ranks_per_chip(h100_sxm()) == 0
    neuron = _neuron(llama_3_1_8b(), 12)  # 32 heads over the 24 NeuronCores of an inf2.48xlarge, as AWS benchmarks it
    assert neuron.fits, neuron.reasons
    gpu = estimate(llama_3_1_8b(), Deployment(chip=h100_sxm(), chip_count=6, tensor_parallel=6, weight_dtype="bf16"), WORKLOAD, batch=1)
    assert not gpu.fits and "does not divide" in " ".join(gpu.reasons)


def test_padded_heads_cost_memory_traffic_and_kv_cache():
    """Llama-3.1-8B over 24 ranks: 32 query heads pad to 48, 8 KV heads to 24 (one a rank), so each chip caches
    2 of the 8 KV heads, not the 1 of 8 that 12 chips would split them to, and stores the zero projections."""
    model = llama_3_1_8b()
    padded = _neuron(model, 12)
    # Llama-2-7B (32 query and 32 KV heads) over 8 chips = 16 ranks pads nothing: the same as silicon without padding.
    unpadded_chip = dataclasses.replace(inferentia2(), vendor="Example")
    mha = llama_2_7b()
    assert _neuron(mha, 8).memory.weights_bytes_per_chip == pytest.approx(_neuron(mha, 8, chip=unpadded_chip).memory.weights_bytes_per_chip)
    assert _neuron(mha, 8).tpot_s == pytest.approx(_neuron(mha, 8, chip=unpadded_chip).tpot_s)
    d, hd, layers = model.hidden_size, model.head_dim, model.num_layers
    zero_params = layers * (16 * (d * hd + hd * d) + 16 * 2 * d * hd)  # 16 padded query heads, 16 padded KV heads
    real = model.total_params * 2 / 12
    assert padded.memory.weights_bytes_per_chip == pytest.approx(real + zero_params * 2 / 12, rel=0.02)
    kv_per_token_per_chip = padded.memory.kv_bytes_per_sequence_per_chip / (128 + 512)
    full_cache_per_token = model.kv_cache_elements_per_token * 2
    assert kv_per_token_per_chip == pytest.approx(full_cache_per_token * 2 / 8, rel=0.05)


def test_a_tp_over_ranks_that_divide_the_heads_pads_only_the_kv_heads():
    """Over 8 chips = 16 ranks Llama-2-7B (32 query and 32 KV heads) pads nothing, as on silicon without
    padding; Llama-3.1-8B's 8 KV heads replicate to one a rank: 8 more KV heads' projections, and each chip
    caches 2 of the 8 heads."""
    from planner.engine.padding import kv_share_per_chip, padded_projection_params, query_head_factor

    unpadded_chip = dataclasses.replace(inferentia2(), vendor="Example")
    for model, padded_kv_heads in ((llama_2_7b(), 0), (llama_3_1_8b(), 8)):
        padded, plain = _neuron(model, 8), _neuron(model, 8, chip=unpadded_chip)
        zero_params = model.num_layers * padded_kv_heads * 2 * model.hidden_size * model.head_dim
        assert padded.memory.weights_bytes_per_chip - plain.memory.weights_bytes_per_chip == pytest.approx(zero_params * 2 / 8, abs=1.0)
    hw = _hardware(llama_3_1_8b(), 8)
    assert float(query_head_factor(llama_3_1_8b(), hw)[0]) == 1.0
    assert float(kv_share_per_chip(llama_3_1_8b(), hw)[0]) == pytest.approx(2 / 8)
    assert float(padded_projection_params(llama_3_1_8b(), hw)[0]) == pytest.approx(32 * 8 * 2 * 4096 * 128)


def test_a_model_of_another_attention_type_keeps_the_divide_rule():
    from planner.engine.padding import pads_heads, runs_any_tensor_parallel
    from planner.engine.parallel import tensor_parallel_options

    # Searches and "auto" layouts try a padded TP on such a chip (its whole node too), never on a GPU.
    assert 12 in tensor_parallel_options(llama_3_1_8b(), inferentia2(), 12) and 3 not in tensor_parallel_options(llama_3_1_8b(), h100_sxm(), 6)
    assert runs_any_tensor_parallel(llama_3_1_8b(), inferentia2()) and not runs_any_tensor_parallel(llama_3_1_8b(), h100_sxm())

    hw = _hardware(llama_3_1_8b(), 12)
    assert np.all(pads_heads(llama_3_1_8b(), hw))
    latent = dataclasses.replace(llama_3_1_8b(), attention=object())  # not full attention: no padding rule applies
    assert pads_heads(latent, hw) is False


def _hardware(model, tp: int):
    from planner.engine.dtypes import compute_table
    from planner.engine.efficiency import efficiency_table
    from planner.engine.grid import CandidateGrid
    from planner.engine.hardware import candidate_hardware, chip_table

    chips = (inferentia2(),)
    grid = CandidateGrid.single(chip_count=tp, tensor_parallel=tp, batch=1, weight_dtype="bf16", kv_dtype="bf16")
    return candidate_hardware(chip_table(chips), grid, compute_table(chips), efficiency_table(chips), model.weight_tables)


def test_a_search_tries_the_whole_node_as_one_tp_group_where_the_sdk_pads():
    """An inf2.48xlarge's 12 Inferentia2 chips as TP 12 is among the layouts a plan searches; a GPU's node of 8
    adds nothing new, and an explicit list of TP degrees is kept as given."""
    from planner.engine.chips import policy_for

    chip = inferentia2()
    layouts = policy_for(chip).layouts(chip, llama_3_1_8b(), ("bf16",), max_chip_count=24)
    assert (12, 12, 1) in layouts and (24, 12, 2) in layouts
    assert (12, 12, 1) not in policy_for(chip).layouts(chip, llama_3_1_8b(), ("bf16",), max_chip_count=24, tensor_parallel_options=(1, 2, 4))
    gpu = policy_for(h100_sxm()).layouts(h100_sxm(), llama_3_1_8b(), ("bf16",), max_chip_count=16)
    assert {tp for _, tp, _ in gpu} == {1, 2, 4, 8}
