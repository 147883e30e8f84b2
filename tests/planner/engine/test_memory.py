"""KV cache sizes, paged memory and the memory-fit reasons."""

from __future__ import annotations

import dataclasses

import pytest

from planner.engine import Deployment, Workload, estimate

from .factories import dense_model, h100_sxm, llama_2_70b, llama_3_1_8b, llama_3_1_70b, opt_13b


def test_kv_bytes_per_token_of_opt_13b_is_800_kb():
    # vLLM paper sec. 3: 2 x 5120 x 40 layers x 2 bytes = 800 KB per token.
    assert opt_13b().kv_cache_elements_per_token * 2 == 819_200


def test_kv_bytes_per_token_of_llama_2_70b_is_320_kib():
    # Databricks inference blog, Table 3: 0.312 GiB at 1024 tokens.
    model = llama_2_70b()
    assert model.kv_cache_elements_per_token * 2 == 327_680
    assert model.kv_cache_elements_per_token * 2 * 1024 / 2**30 == pytest.approx(0.3125, rel=1e-6)


def test_paged_kv_wastes_at_most_one_block_per_sequence():
    model = llama_3_1_8b()
    e = estimate(model, Deployment(chip=h100_sxm()), Workload(prompt_tokens=100, output_tokens=1))
    per_token = model.kv_cache_elements_per_token * 2
    logits_row = model.vocab_size * 4
    cached = (e.memory.kv_bytes_per_sequence_per_chip - logits_row) / per_token
    assert cached == 112  # ceil(101 / 16) = 7 blocks of 16 tokens
    assert cached - 101 < 16


def test_kv_heads_split_across_tp_ranks_until_each_rank_holds_one():
    model, chip, work = llama_2_70b(), h100_sxm(), Workload(prompt_tokens=1024, output_tokens=1024)
    kv = {tp: estimate(model, Deployment(chip=chip, chip_count=tp, tensor_parallel=tp), work).memory.kv_bytes_per_sequence_per_chip
          for tp in (2, 8)}  # fmt: skip
    assert kv[2] / kv[8] == pytest.approx(4.0, rel=0.01)  # 8 KV heads: 4 per rank at tp 2, 1 at tp 8
    # A model with 4 KV heads replicates them beyond tp 4: no further saving.
    narrow = type(model)(slug=model.slug, shape=dataclasses.replace(model.shape, num_kv_heads=4), total_params=model.total_params,
                         active_params=model.active_params, max_context_tokens=model.max_context_tokens)  # fmt: skip
    assert narrow.kv_cache_elements_per_token == 2 * 80 * 4 * 128
    at4 = estimate(narrow, Deployment(chip=chip, chip_count=4, tensor_parallel=4), work).memory.kv_bytes_per_sequence_per_chip
    at8 = estimate(narrow, Deployment(chip=chip, chip_count=8, tensor_parallel=8), work).memory.kv_bytes_per_sequence_per_chip
    assert at8 == pytest.approx(at4, rel=0.01)


def test_llama_70b_bf16_on_one_h100_is_rejected_with_a_reason_in_words():
    e = estimate(llama_3_1_70b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=128, output_tokens=128))
    assert not e.fits
    (reason,) = e.reasons
    assert reason.startswith("llama-3.1-70b needs 141 GB of weights at bf16; one nvidia-h100-sxm has 80 GB")
    assert "tensor_parallel*pipeline_parallel >= 2" in reason and "fp8" in reason


def test_llama_70b_bf16_fits_on_two_h100s_with_tensor_parallel():
    e = estimate(llama_3_1_70b(), Deployment(chip=h100_sxm(), chip_count=2, tensor_parallel=2), Workload(prompt_tokens=128, output_tokens=128))
    assert e.feasible
    assert e.memory.weights_bytes_per_chip == pytest.approx(70.6e9, rel=1e-9)


def test_tensor_parallel_that_does_not_divide_the_heads_is_infeasible():
    # GPT-2 small shapes: 12 heads cannot be split 8 ways.
    gpt2 = dense_model("gpt2", total_params=124e6, num_layers=12, hidden_size=768, num_attention_heads=12, num_kv_heads=12,
                       vocab_size=50257, tie_word_embeddings=True, max_context_tokens=1024)  # fmt: skip
    e = estimate(gpt2, Deployment(chip=h100_sxm(), chip_count=8, tensor_parallel=8), Workload(prompt_tokens=128, output_tokens=128))
    assert not e.fits
    assert e.reasons == ("gpt2 has 12 attention heads; tensor_parallel=8 does not divide them",)


def test_batch_beyond_the_kv_capacity_is_rejected_and_names_the_limit():
    model, chip, work = llama_3_1_8b(), h100_sxm(), Workload(prompt_tokens=8192, output_tokens=8192)
    limit = estimate(model, Deployment(chip=chip), work).memory.max_concurrency
    e = estimate(model, Deployment(chip=chip), work, batch=limit + 1)
    assert not e.fits
    assert f"room for {limit} concurrent sequences" in e.reasons[0]
    assert estimate(model, Deployment(chip=chip), work, batch=limit).fits


def test_max_concurrency_grows_when_tensor_parallel_frees_memory():
    model, chip, work = llama_3_1_70b(), h100_sxm(), Workload(prompt_tokens=2048, output_tokens=2048)
    at2 = estimate(model, Deployment(chip=chip, chip_count=2, tensor_parallel=2), work).memory.max_concurrency
    at4 = estimate(model, Deployment(chip=chip, chip_count=4, tensor_parallel=4), work).memory.max_concurrency
    assert at4 > 2 * at2


def test_context_longer_than_the_model_allows_is_rejected():
    e = estimate(opt_13b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=2000, output_tokens=100))
    assert not e.fits and "context of 2048" in e.reasons[0]


def test_the_projections_every_tensor_parallel_rank_keeps_whole_are_held_once_per_rank():
    """DeepSeek-V3 at TP 8: MLA's down-projections and the routers (1.03e9 parameters) are replicated, not split,
    so the eight ranks together hold them eight times: 7 x 1.03 GB more at FP8 than the one GPU that holds it all."""
    from planner.engine import ChipSpec

    from .test_attention_catalog_shapes import spec_of

    model = spec_of("deepseek-v3")
    chip = ChipSpec(slug="big", kind="gpu", vendor="x", memory_capacity_bytes=2e12, memory_bandwidth_bytes_per_s=8e12,
                    peak_flops_per_s={"bf16": 2.25e15, "fp8": 4.5e15}, link_bandwidth_bytes_per_s=900e9, chips_per_node=8, tdp_watts=1000)  # fmt: skip
    work = Workload(prompt_tokens=1024, output_tokens=1024)
    weights = {tp: estimate(model, Deployment(chip=chip, chip_count=tp, tensor_parallel=tp, weight_dtype="fp8"), work).memory.weights_bytes_per_chip
               for tp in (1, 8)}  # fmt: skip
    assert 8 * weights[8] - weights[1] == pytest.approx(7 * model.tp_replicated_params * 1.0, rel=1e-6)


def test_replicated_projections_a_checkpoint_keeps_in_16_bits_are_held_at_16_bits():
    """NVIDIA's NVFP4 DeepSeek-V3 keeps the attention's input projections in BF16 (sixteen_bit_modules): the
    replicated MLA down-projections (0.92e9 parameters) are held whole by every rank at 2 bytes, the routers at
    NVFP4's 0.5625."""
    import dataclasses

    from planner.engine import ChipSpec

    from .test_attention_catalog_shapes import spec_of

    model = dataclasses.replace(spec_of("deepseek-v3"), sixteen_bit_modules={"nvfp4": ("attention_inputs",)})
    chip = ChipSpec(slug="big", kind="gpu", vendor="x", memory_capacity_bytes=2e12, memory_bandwidth_bytes_per_s=8e12,
                    peak_flops_per_s={"bf16": 2.25e15, "fp8": 4.5e15, "fp4": 9e15}, link_bandwidth_bytes_per_s=900e9,
                    chips_per_node=8, tdp_watts=1000)  # fmt: skip
    work = Workload(prompt_tokens=1024, output_tokens=1024)
    weights = {tp: estimate(model, Deployment(chip=chip, chip_count=tp, tensor_parallel=tp, weight_dtype="fp4"), work).memory.weights_bytes_per_chip
               for tp in (1, 8)}  # fmt: skip
    mla_down, routers = 61 * 7168 * (1536 + 576), 58 * 7168 * 256
    assert 8 * weights[8] - weights[1] == pytest.approx(7 * (mla_down * 2.0 + routers * 0.5625), rel=1e-6)


def test_a_resident_drafts_replicated_projections_are_held_whole_too():
    """A DeepSeek-V3 draft held beside its target at TP 8 (as an MTP layer or a draft model is): its MLA
    down-projections and routers sit whole on every rank like the target's, as its step cost streams them."""
    import numpy as np

    from planner.engine import ChipSpec
    from planner.engine.decoding.base import ResidentModel
    from planner.engine.memory import SequenceFootprint, memory_fit
    from planner.engine.simulation.step_cost import deployment_hardware

    from .test_attention_catalog_shapes import spec_of

    model = spec_of("deepseek-v3")
    chip = ChipSpec(slug="big", kind="gpu", vendor="x", memory_capacity_bytes=4e12, memory_bandwidth_bytes_per_s=8e12,
                    peak_flops_per_s={"bf16": 2.25e15, "fp8": 4.5e15}, link_bandwidth_bytes_per_s=900e9, chips_per_node=8, tdp_watts=1000)  # fmt: skip
    footprint = SequenceFootprint(cached_tokens=1024.0, workspace_tokens=0.0, logit_rows=0.0)
    draft = (ResidentModel(model=model, weight_bytes_per_param=np.array([1.0]), keeps_cache=False),)
    held = {}
    for tp in (1, 8):
        hw = deployment_hardware(model, Deployment(chip=chip, chip_count=tp, tensor_parallel=tp, weight_dtype="fp8"))
        held[tp] = [float(memory_fit(model, hw, footprint=footprint, prompt_tokens=1024.0, resident=r).weights_bytes_per_chip[0]) for r in ((), draft)]
    draft_extra = {tp: with_draft - alone for tp, (alone, with_draft) in held.items()}
    assert 8 * draft_extra[8] - draft_extra[1] == pytest.approx(7 * model.tp_replicated_params * 1.0, rel=1e-6)
