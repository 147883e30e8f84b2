"""Attention data parallelism: each attention replica keeps its own KV cache and batch share, the
experts are spread over every rank (expert parallelism) and exchanged all-to-all."""

from __future__ import annotations

import dataclasses

import pytest

from planner.engine import ArchShape, ChipSpec, Deployment, ModelSpec, Workload, estimate
from planner.engine.specs import Scheduler
from planner.engine.units import DTYPE_CODE

from .factories import llama_3_1_8b

# DeepSeek-V3 config.json: 61 layers (3 dense), 256 routed experts + 1 shared, 8 per token, MLA.
DEEPSEEK_V3 = ModelSpec(
    slug="deepseek-v3",
    shape=ArchShape(num_layers=61, hidden_size=7168, num_attention_heads=128, num_kv_heads=128, head_dim=192, intermediate_size=18432,
                    vocab_size=129280, attention_kind="mla", q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
                    qk_rope_head_dim=64, v_head_dim=128, num_experts=256, experts_per_token=8, num_shared_experts=1,
                    moe_layer_count=58, moe_intermediate_size=2048),
    total_params=671e9, active_params=37e9, max_context_tokens=163840,
)  # fmt: skip
# H200 SXM: 141 GB HBM3e at 4.8 TB/s, 989 TFLOP/s bf16 and 1,979 fp8 dense, NVLink 450 GB/s per direction.
H200 = ChipSpec(slug="h200", kind="gpu", vendor="NVIDIA", memory_capacity_bytes=141e9, memory_bandwidth_bytes_per_s=4.8e12,
                peak_flops_per_s={"bf16": 989e12, "fp8": 1979e12}, link_bandwidth_bytes_per_s=450e9, chips_per_node=8, tdp_watts=700)  # fmt: skip
WORK = Workload(prompt_tokens=1024, output_tokens=1024)


def _deepseek(tp: int, adp: int, batch: int):
    deployment = Deployment(chip=H200, chip_count=8, tensor_parallel=tp, attention_data_parallel=adp, weight_dtype="fp8", kv_dtype="fp8")
    return estimate(DEEPSEEK_V3, deployment, WORK, batch=batch)


def test_experts_spread_over_every_rank_and_dense_weights_repeat_per_attention_replica():
    tp8, adp8 = _deepseek(8, 1, 64), _deepseek(1, 8, 64)
    assert tp8.fits and adp8.fits and adp8.attention_data_parallel == 8 and adp8.replicas == 1
    assert adp8.memory.weights_bytes_per_chip > tp8.memory.weights_bytes_per_chip  # dense weights not split
    assert adp8.memory.weights_bytes_per_chip < 1.2 * tp8.memory.weights_bytes_per_chip  # experts are most of it


def test_mla_under_attention_dp_holds_many_more_sequences_than_under_tp():
    # TP replicates MLA's latent cache on every rank; attention DP keeps each sequence on one rank.
    tp8, adp8 = _deepseek(8, 1, 64), _deepseek(1, 8, 64)
    assert adp8.memory.max_concurrency > 4 * tp8.memory.max_concurrency
    # The same cache per sequence, 1/8 of the sequences per rank (the logits row is per rank: not split by TP).
    assert adp8.memory.kv_bytes_per_chip == pytest.approx(tp8.memory.kv_bytes_per_chip / 8, rel=0.01)


def test_expert_parallel_moe_layers_exchange_tokens_all_to_all():
    assert _deepseek(1, 8, 256).decode.comm_s > 0
    assert _deepseek(1, 8, 256).decode.comm_s > _deepseek(1, 8, 16).decode.comm_s


def test_for_a_dense_model_attention_dp_is_data_parallel_replicas():
    model, chip = llama_3_1_8b(), H200
    adp = estimate(model, Deployment(chip=chip, chip_count=2, attention_data_parallel=2), WORK, batch=32)
    replicas = estimate(model, Deployment(chip=chip, chip_count=2), WORK, batch=32)
    assert adp.tpot_s == pytest.approx(replicas.tpot_s, rel=1e-9)
    assert adp.output_tokens_per_s_total == pytest.approx(replicas.output_tokens_per_s_total, rel=1e-9)
    assert adp.memory.max_concurrency == replicas.memory.max_concurrency
    # One prompt is one replica's, not spread over both chips.
    assert adp.ttft_s == pytest.approx(replicas.ttft_s, rel=1e-9)


def test_one_prompt_under_attention_dp_is_one_attention_replicas_work():
    """The busiest attention replica sets the step (every rank waits for it at the experts' exchange): a prompt
    prefilled alone runs its attention and dense layers on its own rank's chips, its experts over all eight."""
    tp8, adp8 = _deepseek(8, 1, 1), _deepseek(1, 8, 1)
    assert adp8.prefill.time_s > 1.2 * tp8.prefill.time_s and adp8.ttft_s > tp8.ttft_s
    assert adp8.prefill.compute_s > 3.0 * tp8.prefill.compute_s  # its attention and dense GEMMs on one GPU of eight
    # Eight prompts, one an attention replica, take one forward: the same rank-local work, eight prompts' experts.
    assert adp8.prefill_rank_service_s > adp8.prefill.time_s and adp8.prefill_rank_service_s < 8 * adp8.prefill.time_s
    assert tp8.prefill_rank_service_s == tp8.prefill.time_s
    # A dense model's decode over two attention replicas: three sequences are a step of the replica holding two, as four are.
    three, four = (estimate(llama_3_1_8b(), Deployment(chip=H200, chip_count=2, attention_data_parallel=2), WORK, batch=b).decode for b in (3, 4))
    assert three.time_s == pytest.approx(four.time_s, rel=1e-9)
    assert three.bytes_per_chip < four.bytes_per_chip  # the work per chip reported is the mean replica's


def test_docs_example_one_long_prompt_takes_four_times_as_long_under_attention_dp_as_under_tp():
    """docs/planner_math.md#parallelism: one DeepSeek-V3 prompt of 8,192 tokens on eight H200s, fp8, takes 223 ms as
    TP 8 and 984 ms as attention DP 8."""
    prompt = Workload(prompt_tokens=8192, output_tokens=256)

    def ttft_s(tp, adp):
        deployment = Deployment(chip=H200, chip_count=8, tensor_parallel=tp, attention_data_parallel=adp, weight_dtype="fp8", kv_dtype="fp8")
        return estimate(DEEPSEEK_V3, deployment, prompt, batch=1).ttft_s

    assert ttft_s(8, 1) == pytest.approx(0.223, rel=0.01)
    assert ttft_s(1, 8) == pytest.approx(0.984, rel=0.01)


def test_a_disaggregated_pool_of_attention_dp_replicas_serves_one_prompt_on_each_attention_replica():
    rated = Workload(prompt_tokens=1024, output_tokens=64, request_rate_per_s=4.0)

    def pool(tp, adp):
        deployment = Deployment(chip=H200, chip_count=8, tensor_parallel=tp, attention_data_parallel=adp, weight_dtype="fp8", kv_dtype="fp8")
        return estimate(DEEPSEEK_V3, deployment, rated, batch=64, disaggregated=True)

    tp8, adp8 = pool(8, 1), pool(1, 8)
    assert tp8.total_chips == adp8.total_chips == 16  # one pool replica each
    # Eight servers at 4 prompts a second wait for nothing; one server of a 45 ms prefill waits a few ms.
    assert adp8.queue_wait_s < 1e-3 < tp8.queue_wait_s
    # A nearly idle pool: a prompt's prefill is within a few per cent of its forward alone.
    assert adp8.ttft_s == pytest.approx(adp8.prefill.time_s + adp8.queue_wait_s, rel=0.05)


def test_a_layout_that_does_not_divide_the_chips_is_refused():
    e = estimate(DEEPSEEK_V3, Deployment(chip=H200, chip_count=8, tensor_parallel=2, attention_data_parallel=3, weight_dtype="fp8"), WORK)
    assert not e.fits and "cannot be split" in e.reasons[0]


def _under(engine: str, adp: int, batch: int, model: ModelSpec = DEEPSEEK_V3, **scheduler):
    """`model` (DeepSeek-V3) in fp8 on eight H200s, tp 1 x attention DP `adp`, under a serving engine's exchange
    (specs.Scheduler)."""
    chip = dataclasses.replace(H200, scheduler=Scheduler(engine=engine, kv_memory_fraction=0.9, **scheduler))
    deployment = Deployment(chip=chip, chip_count=max(adp, 8), tensor_parallel=1, attention_data_parallel=adp, weight_dtype="fp8", kv_dtype="fp8")
    return estimate(model, deployment, WORK, batch=batch)


def test_an_engine_that_keeps_the_dense_layers_tensor_parallel_over_the_group_splits_them_over_the_replicas():
    """SGLang's DP attention: "DP for attention, TP for FFN". The dense FFN layers, the shared experts, the routers
    and the LM head are split over the 8 ranks; the attention and the input embedding stay whole on each."""
    replicated, split = _under("TensorRT-LLM-like", 8, 64), _under("SGLang-like", 8, 64, attention_dp_dense="tensor_parallel")
    saved_params = DEEPSEEK_V3.group_sharded_params * (1 - 1 / 8)
    assert 4e9 < DEEPSEEK_V3.group_sharded_params < 6e9  # 3 dense FFN layers, 58 shared experts, routers, LM head
    # fp8 weights, the LM head kept in 16 bits: the head's extra byte is split too.
    head_extra = DEEPSEEK_V3.lm_head_params * (1 - 1 / 8)
    assert replicated.memory.weights_bytes_per_chip - split.memory.weights_bytes_per_chip == pytest.approx(saved_params + head_extra, rel=0.01)
    assert split.memory.max_concurrency > replicated.memory.max_concurrency
    # Each step streams fewer dense weights; the dense layers now gather the group's tokens instead of all-reducing.
    assert split.decode.memory_s < replicated.decode.memory_s


def test_an_engine_that_gathers_the_experts_tokens_moves_every_ranks_tokens_not_each_tokens_k_copies():
    """vLLM's and SGLang's default dispatch (all-gather, reduce-scatter) moves the whole group's activations to
    every one of its N ranks each MoE layer; an all-to-all moves each token to its k experts' ranks. DeepSeek-V3
    routes to k = 8: over 8 ranks the two move the same bytes, over 16 the gather moves twice as many."""
    for adp in (8, 16):
        # 8,192 sequences: the bytes, not the collectives' latency, set the exchange's time.
        a2a, gathered = _under("TensorRT-LLM-like", adp, 8192), _under("vLLM-like", adp, 8192, moe_dispatch="all_gather")
        ratio = gathered.decode.comm_s / a2a.decode.comm_s
        if adp == 8:
            assert ratio == pytest.approx(1.0)
        else:  # twice the bytes; the collectives' fixed latency, the same for both, keeps it under 2
            assert 1.6 < ratio < 2.0
    assert _under("vLLM-like", 16, 512, moe_dispatch="all_gather").decode.comm_s > _under("vLLM-like", 16, 64, moe_dispatch="all_gather").decode.comm_s
    # Without attention data parallelism the engines agree: nothing is exchanged across replicas.
    assert _under("TensorRT-LLM-like", 1, 64).decode.comm_s == pytest.approx(_under("vLLM-like", 1, 64, moe_dispatch="all_gather").decode.comm_s)


def test_a_dense_model_under_such_an_engine_keeps_plain_data_parallel_replicas():
    """Attention DP of a dense model is data parallelism: nothing is split over the group, nothing exchanged."""
    import dataclasses

    from planner.engine.specs import Scheduler

    model = llama_3_1_8b()
    assert model.group_sharded_params == 0.0 and DEEPSEEK_V3.group_sharded_params > 0
    sglang = dataclasses.replace(H200, scheduler=Scheduler(engine="SGLang-like", kv_memory_fraction=0.9, moe_dispatch="all_gather",
                                                           attention_dp_dense="tensor_parallel"))  # fmt: skip
    plain = dataclasses.replace(H200, scheduler=Scheduler(engine="plain", kv_memory_fraction=0.9))
    under, replicas = (estimate(model, Deployment(chip=c, chip_count=8, attention_data_parallel=8), WORK, batch=64) for c in (sglang, plain))
    assert under.memory.weights_bytes_per_chip == replicas.memory.weights_bytes_per_chip
    assert under.tpot_s == pytest.approx(replicas.tpot_s)


def test_a_scheduler_names_only_the_exchanges_it_knows():
    from planner.engine.specs import Scheduler

    with pytest.raises(ValueError, match="moe_dispatch"):
        Scheduler(engine="x", kv_memory_fraction=0.9, moe_dispatch="broadcast")
    with pytest.raises(ValueError, match="attention_dp_dense"):
        Scheduler(engine="x", kv_memory_fraction=0.9, attention_dp_dense="pipelined")



def test_a_latent_moe_exchanges_its_latents_not_its_hidden_states():
    """A LatentMoE (Nemotron 3 `moe_latent_size`, Kimi K3 `routed_expert_hidden_size`) projects each token down
    before the dispatch and up after the combine, so the experts' exchange moves latents: its bytes grow with the
    latent's width, and the attention's and dense layers' exchanges stay as they are (time = fixed + k x width)."""
    import dataclasses

    from planner.engine.specs import Scheduler

    def comm_s(width: int | None, dispatch: str) -> float:
        model = dataclasses.replace(DEEPSEEK_V3, shape=dataclasses.replace(DEEPSEEK_V3.shape, moe_latent_size=width))
        chip = dataclasses.replace(H200, scheduler=Scheduler(engine="x", kv_memory_fraction=0.9, moe_dispatch=dispatch))
        deployment = Deployment(chip=chip, chip_count=8, tensor_parallel=1, attention_data_parallel=8, weight_dtype="fp8", kv_dtype="fp8")
        return estimate(model, deployment, WORK, batch=8192).decode.comm_s

    for dispatch in ("all_to_all", "all_gather"):
        hidden, half, quarter = comm_s(None, dispatch), comm_s(3584, dispatch), comm_s(1792, dispatch)
        assert hidden > half > quarter
        assert hidden - half == pytest.approx(2 * (half - quarter), rel=1e-6)
        assert comm_s(7168, dispatch) == pytest.approx(hidden)


def test_the_layers_an_engine_keeps_over_the_group_cost_one_prompt_an_eighth_of_eight_whatever_width_they_are_stored_at():
    """SGLang spreads the dense FFN layers, the shared experts, the routers and the LM head over all eight ranks
    whatever the balance: kept in 16 bits, they add to one prompt an eighth of what they add to eight prompts."""
    sixteen = dataclasses.replace(DEEPSEEK_V3, sixteen_bit_modules={"fp8": ("router", "shared_experts", "dense_ffn")})

    def compute_s(model, batch):
        chip = dataclasses.replace(H200, scheduler=Scheduler(engine="SGLang-like", kv_memory_fraction=0.9, moe_dispatch="all_gather",
                                                             attention_dp_dense="tensor_parallel"))  # fmt: skip
        deployment = Deployment(chip=chip, chip_count=8, tensor_parallel=1, attention_data_parallel=8, weight_dtype="fp8", kv_dtype="fp8")
        return estimate(model, deployment, Workload(prompt_tokens=8192, output_tokens=8), batch=batch).decode.compute_s

    one, eight = (compute_s(sixteen, b) - compute_s(DEEPSEEK_V3, b) for b in (1, 8))
    assert one > 0
    assert one == pytest.approx(eight / 8, rel=1e-6)


def test_the_layers_an_engine_keeps_over_the_group_are_held_an_eighth_each_whatever_width_they_are_stored_at():
    """Kept in 16 bits (Kimi-K2.5's int4 checkpoint keeps its shared experts and dense FFN layer in BF16), the layers
    SGLang spreads over the group are held at their 16 bits, an eighth on each rank: splitting them saves 7/8 of their
    two bytes a parameter, not of the format's one."""
    sixteen = dataclasses.replace(DEEPSEEK_V3, sixteen_bit_modules={"fp8": ("router", "shared_experts", "dense_ffn")})
    kept = sixteen.weight_tables.sixteen_bit_group_params[DTYPE_CODE["fp8"]]
    assert 2e9 < kept < sixteen.group_sharded_params

    def saved_bytes(model):
        replicated = _under("TensorRT-LLM-like", 8, 64, model)
        split = _under("SGLang-like", 8, 64, model, attention_dp_dense="tensor_parallel")
        return replicated.memory.weights_bytes_per_chip - split.memory.weights_bytes_per_chip

    extra_saved = saved_bytes(sixteen) - saved_bytes(DEEPSEEK_V3)
    assert extra_saved == pytest.approx(kept * (2.0 - 1.0) * (1 - 1 / 8), rel=1e-6)


def test_one_prompt_on_one_attention_replica_sends_all_its_tokens_to_the_experts():
    """Over eight ranks an all-to-all to k = 8 experts and a gather move the same bytes, for one prompt too: its
    replica's rank sends every one of its tokens, not an eighth of them."""
    one = Workload(prompt_tokens=8192, output_tokens=8)

    def prefill_comm_s(engine, **scheduler):
        chip = dataclasses.replace(H200, scheduler=Scheduler(engine=engine, kv_memory_fraction=0.9, **scheduler))
        deployment = Deployment(chip=chip, chip_count=8, tensor_parallel=1, attention_data_parallel=8, weight_dtype="fp8", kv_dtype="fp8")
        return estimate(DEEPSEEK_V3, deployment, one, batch=1).prefill.comm_s

    assert prefill_comm_s("TensorRT-LLM-like") == pytest.approx(prefill_comm_s("vLLM-like", moe_dispatch="all_gather"), rel=1e-6)


def test_a_pool_of_attention_dp_replicas_is_sized_by_the_forward_that_gives_each_attention_replica_a_prompt():
    """Eight 8,192-token DeepSeek-V3 prompts, one an attention replica, take one forward of about 1.3 s: an eight-GPU
    replica serves about six a second, so eight a second need a second replica, though a prompt alone takes under one."""
    rated = Workload(prompt_tokens=8192, output_tokens=64, request_rate_per_s=8.0)
    deployment = Deployment(chip=H200, chip_count=8, tensor_parallel=1, attention_data_parallel=8, weight_dtype="fp8", kv_dtype="fp8")
    pool = estimate(DEEPSEEK_V3, deployment, rated, batch=64, disaggregated=True)
    assert 8.0 * pool.prefill.time_s / 8 < 1.0 < 8.0 * pool.prefill_rank_service_s / 8
    assert pool.total_chips == 8 + 2 * 8
    # A busy pool's forwards carry the other attention replicas' prompts: a prompt's own prefill is longer than alone.
    own = pool.ttft_s - pool.queue_wait_s
    assert pool.prefill.time_s < own < pool.prefill_rank_service_s
