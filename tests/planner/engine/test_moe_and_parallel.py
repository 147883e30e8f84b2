"""Mixture-of-experts weight traffic and tensor/pipeline parallel communication."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engine import Deployment, Workload, estimate, experts_touched
from planner.engine.parallel import ring_allreduce_s

from .factories import a100_sxm_80gb, h100_sxm, llama_2_7b, llama_2_70b, mixtral_8x7b


def test_one_token_touches_exactly_its_top_k_experts():
    assert experts_touched(8, 2, np.array([1.0]))[0] == pytest.approx(2.0)


def test_experts_touched_follows_uniform_routing_and_saturates_at_large_batch():
    # E(1 - (1 - k/E)^b): 8 * (1 - 0.75^4) = 5.47 at b = 4
    assert experts_touched(8, 2, np.array([4.0]))[0] == pytest.approx(5.46875)
    assert experts_touched(8, 2, np.array([64.0]))[0] == pytest.approx(8.0, rel=1e-6)


def test_mixtral_batch_one_decode_reads_about_its_active_params_not_its_total():
    e = estimate(mixtral_8x7b(), Deployment(chip=h100_sxm(), chip_count=2, tensor_parallel=2), Workload(prompt_tokens=16, output_tokens=16))
    weight_bytes = e.decode.bytes_per_chip * 2
    active_without_embedding = (12.9e9 - 32000 * 4096) * 2
    assert weight_bytes == pytest.approx(active_without_embedding, rel=0.02)
    assert weight_bytes < 0.35 * 46.7e9 * 2


def test_mixtral_large_batch_decode_reads_every_expert():
    e = estimate(mixtral_8x7b(), Deployment(chip=h100_sxm(), chip_count=2, tensor_parallel=2), Workload(prompt_tokens=16, output_tokens=16), batch=64)
    assert e.decode.bytes_per_chip * 2 > 0.99 * (46.7e9 - 32000 * 4096) * 2


def test_ring_allreduce_follows_the_bus_bandwidth_formula():
    # alpha + 2(p-1)/p * M / BW: 5 us + 2 * 7/8 * 1 MB / 100 GB/s = 22.5 us
    t = ring_allreduce_s(np.array([1e6]), np.array([8.0]), np.array([100e9]), np.array([5e-6]))
    assert t[0] == pytest.approx(22.5e-6)
    assert ring_allreduce_s(np.array([1e6]), np.array([1.0]), np.array([100e9]), np.array([5e-6]))[0] == 0.0


def test_tensor_parallel_adds_two_all_reduces_per_layer_to_each_decode_step():
    model, chip, work = llama_2_7b(), a100_sxm_80gb(), Workload(prompt_tokens=5, output_tokens=200)
    one = estimate(model, Deployment(chip=chip), work)
    eight = estimate(model, Deployment(chip=chip, chip_count=8, tensor_parallel=8), work)
    assert one.decode.comm_s == 0.0
    # 2 x 32 layers x (5 us link + 15 us collective overhead + a tiny ring term)
    assert eight.decode.comm_s == pytest.approx(64 * 20e-6, rel=0.05)
    assert eight.tokens_per_s_per_user < 8 * one.tokens_per_s_per_user


def test_achieved_bandwidth_per_chip_falls_as_tensor_parallel_grows():
    # gpt-fast Llama-2-70B bf16 on A100 reports 1,482 / 1,341 / 1,135 GB/s per GPU at TP 2/4/8.
    model, chip, work = llama_2_70b(), a100_sxm_80gb(), Workload(prompt_tokens=5, output_tokens=200)
    per_chip = []
    for tp in (2, 4, 8):
        e = estimate(model, Deployment(chip=chip, chip_count=tp, tensor_parallel=tp), work)
        per_chip.append(e.decode.bytes_per_chip / e.decode_token_time_s)
    assert per_chip[0] > per_chip[1] > per_chip[2]


def test_pipeline_stages_add_latency_but_let_batches_fill_the_pipe():
    model, chip, work = llama_2_70b(), h100_sxm(), Workload(prompt_tokens=128, output_tokens=128)
    single = estimate(model, Deployment(chip=chip, chip_count=2, tensor_parallel=2), work, batch=1)
    piped = estimate(model, Deployment(chip=chip, chip_count=4, tensor_parallel=2, pipeline_parallel=2), work, batch=1)
    assert piped.decode.comm_s > 0
    assert piped.decode_token_time_s == pytest.approx(single.decode_token_time_s, rel=0.05)  # same bytes per token, in series
    piped_many = estimate(model, Deployment(chip=chip, chip_count=4, tensor_parallel=2, pipeline_parallel=2), work, batch=64)
    single_many = estimate(model, Deployment(chip=chip, chip_count=2, tensor_parallel=2), work, batch=64)
    assert piped_many.output_tokens_per_s_total > single_many.output_tokens_per_s_total


def test_data_parallel_replicas_split_the_concurrency():
    model, chip, work = llama_2_7b(), h100_sxm(), Workload(prompt_tokens=128, output_tokens=128)
    one = estimate(model, Deployment(chip=chip), work, batch=16)
    two = estimate(model, Deployment(chip=chip, chip_count=2), work, batch=32)
    assert two.replicas == 2
    assert two.tpot_s == pytest.approx(one.tpot_s)
    assert two.output_tokens_per_s_total == pytest.approx(2 * one.output_tokens_per_s_total)
