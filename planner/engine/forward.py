"""FLOPs, bytes and time of one forward pass of a replica, element-wise over
candidates. Every phase (prefill, decode, verification, a diffusion step) is a
forward with a different number of query tokens and attention pairs.

Per step and per chip (docs/planner_math.md#forward-cost, after LLM-Viewer
`model_analyzer.py` and llm-analysis `analysis.py`):
    FLOPs = [b*q*2*N_matmul + b*pairs*attention_flops_per_pair] / (tp*pp)
    bytes = weights touched / (tp*pp) + b*(kv read + kv written)*kv_bytes*share / pp
            + activations b*q*d*beta*L*passes / pp
    time  = pp*(max(FLOPs/(eta_c*peak), bytes/(eta_m*BW)) + TP comm) + PP p2p + overhead
(Roofline: Williams, Waterman, Patterson, CACM 2009.)
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from scipy.special import ndtri

from hwcatalog.architecture import experts_touched

from .hardware import CandidateHardware
from .memory import group_split_bytes, tp_replicated_bytes
from .padding import kv_share_per_chip, padded_projection_params, query_head_factor
from .parallel import expert_all_to_all_s, pipeline_micro_batches, pipeline_p2p_s, tensor_parallel_comm_s
from .specs import ModelSpec
from .units import ACTIVATION_PASSES_PER_LAYER, SIXTEEN_BIT_BYTES

COMPUTE, MEMORY, INTERCONNECT = 0, 1, 2
BOUND_NAMES = ("compute", "memory", "interconnect")


def expert_params_read(model: ModelSpec, tokens: np.ndarray, expert_shards: np.ndarray | None = None) -> np.ndarray:
    """Of params_read, the routed experts' parameters (0 for a dense model)."""
    if not model.is_moe:
        return np.zeros(np.shape(tokens))
    touched = experts_touched(model.num_experts, model.experts_per_token, np.asarray(tokens, dtype=float))
    experts = model.moe_layer_count * model.params_per_expert * touched
    return experts if expert_shards is None else experts / expert_shards


def expert_imbalance(model: ModelSpec, tokens: np.ndarray, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How much more than the mean the busiest of `ranks` expert-parallel ranks does in one MoE layer, as
    factors (>= 1) on the experts' weights read and on their FLOPs, for `tokens` tokens routed uniformly.

    A rank holds E/ranks whole experts, each touched with probability p = touched/E: the distinct experts
    it reads are about Binomial(E/ranks, p), the token-expert pairs it computes about Binomial(tokens*k,
    1/ranks). The busiest rank is taken at the expected maximum of `ranks` normal draws, z = Phi^-1((G -
    0.375)/(G + 0.25)) (Blom's approximation to normal order statistics). Uniform routing is the best
    case: real routers are skewed, which balancers (EPLB) work against. Sharding each expert over the
    tensor-parallel ranks instead (ranks 1) reads and computes the same share everywhere: 1."""
    g = np.maximum(np.asarray(ranks, dtype=float), 1.0)
    z = ndtri((g - 0.375) / (g + 0.25))
    tokens = np.asarray(tokens, dtype=float)
    touched = experts_touched(model.num_experts, model.experts_per_token, tokens)
    p = touched / model.num_experts
    per_rank = model.num_experts / g
    busiest = np.minimum(per_rank, per_rank * p + z * np.sqrt(per_rank * p * (1.0 - p)))
    pairs = tokens * model.experts_per_token / g
    busiest_pairs = pairs + z * np.sqrt(pairs * (1.0 - 1.0 / g))
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.where((g > 1) & (touched > 0), busiest * g / touched, 1.0)
        flops = np.where((g > 1) & (pairs > 0), busiest_pairs / pairs, 1.0)
    return np.maximum(weights, 1.0), np.maximum(flops, 1.0)


def params_read(model: ModelSpec, tokens: np.ndarray, expert_shards: np.ndarray | None = None) -> np.ndarray:
    """Parameters one tensor-parallel rank group streams from memory in a forward over `tokens` tokens.

    Everything but the untied input embedding (only b rows are gathered) and the
    routed experts nobody picked. The LM head is read in full (tied or not). With
    attention data parallelism the touched experts are spread over `expert_shards`
    more ranks (expert parallelism), the dense weights are not.
    """
    dense = float(model.total_params) - model.gathered_params - model.routed_expert_params
    return dense + expert_params_read(model, tokens, expert_shards)


@dataclass(frozen=True, kw_only=True)
class PhaseCost:
    """One forward (or one pipeline cycle) per candidate; all arrays of length n."""

    flops_per_chip: np.ndarray
    bytes_per_chip: np.ndarray
    compute_s: np.ndarray  # on the critical path: pp x one stage
    memory_s: np.ndarray
    expert_compute_s: np.ndarray  # of compute_s, the routed experts' GEMMs
    comm_s: np.ndarray
    overhead_s: np.ndarray
    time_s: np.ndarray

    @property
    def intensity_flop_per_byte(self) -> np.ndarray:
        return self.flops_per_chip / np.maximum(self.bytes_per_chip, 1e-30)

    def take(self, index) -> PhaseCost:
        return PhaseCost(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    @property
    def bound(self) -> np.ndarray:
        """compute | memory | interconnect: whichever term is largest."""
        c, m, x = self.compute_s, self.memory_s, self.comm_s
        return np.where((c >= m) & (c >= x), COMPUTE, np.where(m >= x, MEMORY, INTERCONNECT))


def forward_cost(
    model: ModelSpec,
    hw: CandidateHardware,
    *,
    sequences: np.ndarray,
    new_tokens: np.ndarray | float,
    attention_pairs: np.ndarray | float,
    kv_read_tokens: np.ndarray | float,
    kv_write_tokens: np.ndarray | float,
    attention_flops_per_pair: float | None = None,
    weight_bytes_per_param: np.ndarray | None = None,
    peak_flops_per_s: np.ndarray | None = None,
    expert_peak_flops_per_s: np.ndarray | None = None,
    flop_scale: float = 1.0,
    extra_overhead_s: np.ndarray | float = 0.0,
    logit_tokens: np.ndarray | float | None = None,
) -> PhaseCost:
    """Cost of a forward where each of `sequences` sequences (per replica) runs
    `new_tokens` query positions against `attention_pairs` (query, key) pairs,
    reads `kv_read_tokens` cached tokens and writes `kv_write_tokens`.

    `flop_scale` < 1 skips work on positions (FOCUS); weights are still read.
    The draft model of speculative decoding passes its own dtype and peaks (`expert_peak_flops_per_s`: its routed
    experts'; `peak_flops_per_s` alone stands for both).
    `logit_tokens`: positions per sequence whose logits the LM head computes (None: every new one, as
    a decode, a verify or a diffusion block needs; a prefill needs its last position's only).
    """
    tp, pp, adp = hw.tensor_parallel, hw.pipeline_parallel, hw.attention_data_parallel
    beta_w = hw.weight_bytes_per_param if weight_bytes_per_param is None else weight_bytes_per_param
    peak = hw.peak_flops_per_s if peak_flops_per_s is None else peak_flops_per_s
    per_pair = model.attention.decode_flops_per_position if attention_flops_per_pair is None else attention_flops_per_pair
    micro = pipeline_micro_batches(sequences, pp)
    seqs = sequences / micro  # sequences per micro-batch
    tokens = seqs * new_tokens
    # With attention data parallelism each of the adp attention replicas runs 1/adp of the
    # sequences (its own KV cache) and the experts are spread over all tp*adp ranks: every
    # rank does 1/(tp*pp*adp) of the FLOPs, reads its dense weights in full and 1/adp of the
    # touched experts.
    # Without attention DP anywhere in the block its terms are skipped: the same numbers, fewer array passes.
    split = hw.any_attention_dp
    flop_ranks = tp * pp * adp if split else tp * pp
    # The busiest attention replica's sequences, ceil(b / adp), over the mean b / adp (below): 1 where they divide evenly.
    # A replica that holds any sequence holds a whole one, however small an average `seqs` is.
    busiest = np.maximum(np.ceil(seqs / adp - 1e-9), 1.0)
    rank_share = np.where((adp > 1) & (seqs > 0), busiest * adp / np.maximum(seqs, 1e-30), 1.0) if split else 1.0
    # Where the chip's SDK pads the heads to a multiple of its ranks, the padded heads compute too (padding.py).
    attention_flops = seqs * attention_pairs * per_pair * flop_scale / flop_ranks * query_head_factor(model, hw)
    # The LM head multiplies only the positions whose logits are wanted (its weights are read whole either way).
    head = float(model.lm_head_params)
    rows = tokens if logit_tokens is None else seqs * logit_tokens
    if logit_tokens is None:
        flops = tokens * 2.0 * model.matmul_params * flop_scale / flop_ranks + attention_flops
    else:
        flops = (tokens * (model.matmul_params - head) + rows * head) * 2.0 * flop_scale / flop_ranks + attention_flops
    weights = params_read(model, tokens, expert_shards=adp if split else None) * beta_w / (tp * pp)
    if split:  # dense layers kept tensor-parallel over the attention-DP group (SGLang) stream 1/adp of them
        weights = weights - group_split_bytes(model, hw, beta_w, sixteen_bit=weight_bytes_per_param is None) / (tp * pp)
    if hw.any_head_padding:  # the padded heads' zero projections are stored, streamed and multiplied (padding.py)
        padded = padded_projection_params(model, hw)
        weights = weights + padded * beta_w / (tp * pp)
        flops = flops + tokens * 2.0 * padded * flop_scale / flop_ranks
    # Every TP rank streams the projections it keeps whole and multiplies its replica's tokens by them.
    replicated_share = (1.0 - 1.0 / tp) * flop_scale / (pp * (adp if split else 1.0))
    if model.tp_replicated_params:
        weights = weights + tp_replicated_bytes(model, hw, beta_w, sixteen_bit=weight_bytes_per_param is None) / pp
        flops = flops + tokens * 2.0 * model.tp_replicated_params * replicated_share
    sixteen_flops = 0.0
    # The parameters the weights' format keeps in 16 bits (LM head, a checkpoint's 16-bit modules: all
    # dense, read in full by every rank) stream at 16 bits and multiply in 16-bit math; they are the
    # priced model's own (ModelSpec.weight_tables: the target's, a draft head's). A draft model passing
    # its own width keeps none apart. Without any in the block the terms are skipped: the same numbers,
    # fewer array passes.
    if hw.any_sixteen_bit and weight_bytes_per_param is None:
        tables, code = model.weight_tables, hw.weight_dtype_code
        sixteen, sixteen_head = tables.sixteen_bit_streamed_params[code], tables.sixteen_bit_head_params[code]
        weights = weights + sixteen * (SIXTEEN_BIT_BYTES - beta_w) / (tp * pp)
        sixteen_flops = (tokens * (sixteen - sixteen_head) + rows * sixteen_head) * 2.0 * flop_scale / flop_ranks
        # and of the replicated projections, those kept in 16 bits multiply at the 16-bit rate too
        sixteen_flops = sixteen_flops + tokens * 2.0 * tables.sixteen_bit_replicated_params[code] * replicated_share
    # The routed experts' FLOPs run at expert_efficiency of the dense GEMMs' share of peak
    # (docs/planner_math.md#forward-cost); their weights stream like any other. Under expert
    # parallelism the busiest rank sets the layer's time (expert_imbalance): the times below take its
    # reads and FLOPs, the reported work per chip stays the mean.
    expert_flops = tokens * (2.0 * model.active_routed_expert_params * flop_scale) / flop_ranks if model.is_moe else 0.0
    busiest_extra_bytes, busiest_expert_flops = 0.0, expert_flops
    if model.is_moe and np.any(hw.expert_parallel > 1):
        weight_skew, flop_skew = expert_imbalance(model, tokens, hw.expert_parallel)
        experts_read = expert_params_read(model, tokens, expert_shards=adp if split else None) * beta_w / (tp * pp)
        busiest_extra_bytes, busiest_expert_flops = experts_read * (weight_skew - 1.0), expert_flops * flop_skew
    kv_token_bytes = model.kv_cache_elements_per_token * hw.kv_bytes_per_element * kv_share_per_chip(model, hw)
    kv = seqs * (kv_read_tokens + kv_write_tokens) * kv_token_bytes / pp
    replica_tokens = tokens
    if split:
        kv, replica_tokens = kv / adp * rank_share, tokens / adp * rank_share
    message = replica_tokens * model.hidden_size * hw.activation_bytes  # one attention replica's activations
    activations = message * model.num_layers * ACTIVATION_PASSES_PER_LAYER * flop_scale / pp
    nbytes = weights + kv + activations  # the busiest attention replica's rank (memory_stage)
    # What the work per chip reports is the mean rank's, as its FLOPs are (intensity, MBU): the busiest's KV and activations
    # over rank_share (at least 1 where there are sequences; with none there is nothing to share out, not 0/0).
    mean_bytes = weights + (kv + activations) / np.maximum(rank_share, 1.0) if split else nbytes
    achieved_flops_per_s = hw.compute_fraction * np.maximum(peak, 1e-30)
    # Attention (QK^T, PV) multiplies activations by the KV cache, not by the weights: it runs at the
    # attention's own peak (hardware._attention_peak), whatever the weights' format.
    attention_peak = hw.attention_peak_flops_per_s if peak_flops_per_s is None else np.minimum(hw.attention_peak_flops_per_s, peak)
    attention_flops_per_s = hw.compute_fraction * np.maximum(attention_peak, 1e-30)
    # With attention data parallelism the busiest attention replica holds ceil(b / adp) of the b sequences, and every
    # rank waits for it at the experts' exchange: one prompt prefilled alone is one replica's work. Its attention, its
    # projections and the dense layers it keeps, its cache and its activations take `rank_share` times the mean; the
    # routed experts (and the dense layers an engine keeps tensor-parallel over the group, SGLang) are spread over every
    # rank whatever the balance (docs/planner_math.md#parallelism).
    local_dense = flops - attention_flops - expert_flops - sixteen_flops
    sixteen_stage = sixteen_flops * rank_share
    if split:
        group_flops, group_sixteen = _group_kept_flops(model, hw, tokens, rows, flop_scale / flop_ranks,
                                                       sixteen_bit=hw.any_sixteen_bit and weight_bytes_per_param is None)  # fmt: skip
        local_dense = (local_dense - group_flops) * rank_share + group_flops
        sixteen_stage = (sixteen_flops - group_sixteen) * rank_share + group_sixteen
    compute_stage = local_dense / achieved_flops_per_s + (attention_flops * rank_share + sixteen_stage) / attention_flops_per_s
    if model.is_moe:
        # The experts' GEMMs at their own peak: a CPU engine may run them on its vector units (ChipSpec.math_peak_flops_per_s).
        if expert_peak_flops_per_s is None:  # a draft's own peak alone stands for its experts' too
            expert_peak_flops_per_s = hw.expert_peak_flops_per_s if peak_flops_per_s is None else peak
        expert_flops_per_s = hw.expert_efficiency * hw.compute_fraction * np.maximum(expert_peak_flops_per_s, 1e-30)
        expert_compute_stage = busiest_expert_flops / expert_flops_per_s
        compute_stage = compute_stage + expert_compute_stage
    else:  # a dense model: no experts' term, and no array spent on it
        expert_compute_stage = np.zeros(np.shape(flops))
    memory_stage = (nbytes + busiest_extra_bytes) / (hw.bandwidth_fraction * hw.bandwidth_bytes_per_s)
    comm_stage = _communication(model, hw, message)
    p2p = pipeline_p2p_s(message, pp, hw.p2p_bytes_per_s, hw.link_latency_s)
    overhead = hw.step_overhead_s + extra_overhead_s
    time = pp * (np.maximum(compute_stage, memory_stage) + comm_stage) + p2p + overhead
    return PhaseCost(
        flops_per_chip=flops * micro,
        bytes_per_chip=mean_bytes * micro,
        compute_s=pp * compute_stage,
        memory_s=pp * memory_stage,
        expert_compute_s=pp * expert_compute_stage,
        comm_s=pp * comm_stage + p2p,
        overhead_s=np.broadcast_to(overhead, np.shape(time)).copy(),
        time_s=time,
    )


def _group_kept_flops(model: ModelSpec, hw: CandidateHardware, tokens, rows, scale, *, sixteen_bit: bool) -> tuple:
    """Per rank, the FLOPs of the dense layers an engine keeps tensor-parallel over the attention-DP group
    (ModelSpec.group_sharded_params, where hw.dense_shards > 1; 0 elsewhere), counted as forward_cost counts them: an
    untied LM head at the `rows` whose logits are wanted, the rest at every token; split into those at the weights'
    rate and those the format keeps in 16 bits (`sixteen_bit`: in forward_cost's sixteen_flops). `scale` is
    flop_scale / flop_ranks."""
    head = 0.0 if model.tie_word_embeddings else float(model.lm_head_params)
    total = (tokens * (model.group_sharded_params - head) + rows * head) * 2.0 * scale
    sixteen = 0.0
    if sixteen_bit and model.group_sharded_params:
        tables, code = model.weight_tables, hw.weight_dtype_code
        sixteen_head = 0.0 if model.tie_word_embeddings else tables.sixteen_bit_head_params[code]
        sixteen = (tokens * tables.sixteen_bit_group_params[code] + rows * sixteen_head) * 2.0 * scale
    kept = hw.dense_shards > 1
    return np.where(kept, total - sixteen, 0.0), np.where(kept, sixteen, 0.0)


def _communication(model: ModelSpec, hw: CandidateHardware, message: np.ndarray) -> np.ndarray:
    """Per pipeline stage: Megatron's two all-reduces per layer; with attention data parallelism a
    MoE layer keeps the attention all-reduce and exchanges its tokens across the tp*adp expert-parallel
    ranks instead of all-reducing the FFN: all-to-all to the experts' ranks and back, or, under an engine
    that gathers (Scheduler.moe_dispatch all_gather: vLLM's and SGLang's defaults), an all-gather of every
    rank's tokens and a reduce-scatter of the results. A dense FFN layer all-reduces within the attention
    replica's TP, or, kept tensor-parallel over the whole group (SGLang), gathers and scatters the same way.
    A LatentMoE's experts exchange its latents (ModelSpec.expert_token_width), not hidden states."""
    tp, pp, adp = hw.tensor_parallel, hw.pipeline_parallel, hw.attention_data_parallel
    layers = model.num_layers / pp
    megatron = tensor_parallel_comm_s(layers, message, tp, hw.link_bytes_per_s, hw.link_latency_s)
    if not model.is_moe or not hw.any_attention_dp:
        return megatron
    moe_layers = model.moe_layer_count / pp
    attention = tensor_parallel_comm_s(layers, message, tp, hw.link_bytes_per_s, hw.link_latency_s) / 2.0
    dense_ffn = tensor_parallel_comm_s(layers - moe_layers, message, tp, hw.link_bytes_per_s, hw.link_latency_s) / 2.0
    # Each rank routes its share of its attention replica's tokens (message: the busiest replica's) to
    # experts_per_token experts, at the width they travel (a LatentMoE dispatches its latents).
    width = model.expert_token_width
    routed = message / tp * model.experts_per_token * width / model.hidden_size
    a2a = expert_all_to_all_s(moe_layers, routed, tp * adp, hw.expert_link_bytes_per_s, hw.expert_link_latency_s)
    # Gathered: each of the tp*adp ranks receives every other rank's tokens (message is one attention
    # replica's) and sends its part of the results back, per layer.
    group = tp * adp

    def gather_s(replica_bytes):
        return 2.0 * (hw.expert_link_latency_s + (group - 1.0) / np.maximum(group, 1.0) * replica_bytes * adp / hw.expert_link_bytes_per_s)

    moe = np.where(hw.moe_gathers, moe_layers * gather_s(message * width / model.hidden_size), a2a)
    dense_ffn = np.where(hw.dense_shards > 1, (layers - moe_layers) * gather_s(message), dense_ffn)
    return np.where(adp > 1, attention + dense_ffn + moe, megatron)


def sum_of_max_linear(a_first: np.ndarray, a_last: np.ndarray, b_first: np.ndarray, b_last: np.ndarray, count: int) -> np.ndarray:
    """Exact sum over j = 0..count-1 of max(a_j, b_j) for two sequences linear in j.

    Block diffusion's per-block step time is max(compute, memory) with both terms
    linear in the context C_j = P + j*B; summing in closed form keeps the search
    free of a loop over blocks. The difference a_j - b_j changes sign at most once.
    """
    if count <= 0:
        return np.zeros(np.shape(a_first))
    n = float(count)
    span = max(n - 1.0, 1.0)
    slope_a, slope_b = (a_last - a_first) / span, (b_last - b_first) / span
    sum_b = n * b_first + slope_b * n * (n - 1.0) / 2.0
    d0, s = a_first - b_first, slope_a - slope_b  # diff_j = d0 + s*j
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.where(s != 0.0, -d0 / s, 0.0)
    # Range [lo, hi] of j where diff_j > 0.
    lo = np.where(s > 0, np.floor(root) + 1.0, 0.0)
    hi = np.where(s < 0, np.ceil(root) - 1.0, n - 1.0)
    flat = s == 0.0
    lo = np.where(flat, np.where(d0 > 0, 0.0, n), np.clip(lo, 0.0, n))
    hi = np.where(flat, n - 1.0, np.clip(hi, -1.0, n - 1.0))
    k = np.maximum(hi - lo + 1.0, 0.0)
    sum_j = np.where(k > 0, (lo + hi) * k / 2.0, 0.0)
    return sum_b + k * d0 + s * sum_j
