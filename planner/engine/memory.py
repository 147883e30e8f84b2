"""Memory fit per chip: weights, paged KV cache, activation workspace, reserve.

Free memory for KV = usable - weights/(tp*pp) - workspace, usable = 0.9 x
capacity (vLLM gpu_memory_utilization), or, under a serving engine whose scheduler gives the KV
cache a fraction of what the weights leave (TensorRT-LLM's free_gpu_memory_fraction), that
fraction of capacity - weights - workspace (specs.Scheduler). KV lives in PagedAttention blocks of 16
tokens (Kwon et al., SOSP 2023): a sequence of P+G tokens holds ceil((P+G)/16)
blocks, so at most one block is partly filled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .attention import at_ranks
from .hardware import CandidateHardware
from .padding import kv_share_per_chip, padded_projection_params
from .specs import ModelSpec
from .units import ACTIVATION_WORKSPACE_PER_TOKEN_HIDDEN, LOGIT_BYTES, PREFILL_CHUNK_TOKENS, SIXTEEN_BIT_BYTES, paged_tokens  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    from .decoding.base import ResidentModel


@dataclass(frozen=True, kw_only=True)
class MemoryArrays:
    weights_bytes_per_chip: np.ndarray
    kv_bytes_per_sequence_per_chip: np.ndarray  # incl. the draft's cache and logits row
    kv_bytes_per_chip: np.ndarray  # at this candidate's batch
    activation_bytes_per_chip: np.ndarray
    usable_bytes_per_chip: np.ndarray
    kv_free_bytes_per_chip: np.ndarray  # what the scheduler's memory rule leaves the KV cache
    max_concurrency_per_replica: np.ndarray
    weights_fit: np.ndarray  # bool


@dataclass(frozen=True, kw_only=True)
class SequenceFootprint:
    """What one sequence keeps resident, decided by the decoding method."""

    cached_tokens: float  # tokens in the KV cache at the end (0: no cache)
    workspace_tokens: float  # extra activations that scale with each sequence
    logit_rows: float  # positions whose logits are materialised at once


def memory_fit(
    model: ModelSpec,
    hw: CandidateHardware,
    *,
    footprint: SequenceFootprint,
    prompt_tokens: np.ndarray | float,
    resident: Sequence[ResidentModel] = (),
) -> MemoryArrays:
    """`resident`: models the decoding method holds beside the target (a draft model, draft
    heads), sharded like it, each with its own cache unless it keeps none."""
    shards = hw.tensor_parallel * hw.pipeline_parallel
    adp = hw.attention_data_parallel
    # Attention data parallelism replicates the dense weights over its adp attention replicas (or, under an
    # engine that keeps them tensor-parallel over the group, all but the attention and embedding) and
    # spreads the routed experts over all tp*adp ranks of the replica.
    # Parameters a format keeps in 16 bits (LM head, embeddings, a checkpoint's listed modules) are dense:
    # on every attention replica.
    sixteen = sixteen_bit_extra_bytes(model, hw)
    if hw.any_attention_dp:
        # An engine that keeps the dense layers tensor-parallel over the group (SGLang) splits them over the adp replicas too.
        spread = (model.total_params - model.routed_expert_params) + model.routed_expert_params / adp
        split = group_split_bytes(model, hw, hw.weight_bytes_per_param, sixteen_bit=True)
        weights = (np.where(adp > 1, spread, model.total_params) * hw.weight_bytes_per_param + sixteen - split) / shards
    else:
        weights, adp = (model.total_params * hw.weight_bytes_per_param + sixteen) / shards, 1.0
    if hw.any_head_padding:  # padded heads' zero projections are stored like the rest (padding.py)
        weights = weights + padded_projection_params(model, hw) * hw.weight_bytes_per_param / shards
    # The projections every TP rank keeps whole (MLA's down-projections, the routers) are held beyond the 1/tp share.
    weights = weights + tp_replicated_bytes(model, hw, hw.weight_bytes_per_param, sixteen_bit=True) / hw.pipeline_parallel
    per_seq_kv = cache_bytes_per_sequence(model, hw, footprint.cached_tokens, resident=resident)
    for extra in resident:  # a draft's replicated projections are held whole like the target's, at its own width
        weights = weights + extra.params * extra.weight_bytes_per_param / shards
        weights = weights + tp_replicated_bytes(extra.model, hw, extra.weight_bytes_per_param, sixteen_bit=False) / hw.pipeline_parallel
    width = model.hidden_size * hw.activation_bytes
    per_seq_extra = (
        footprint.workspace_tokens * width * ACTIVATION_WORKSPACE_PER_TOKEN_HIDDEN + footprint.logit_rows * model.vocab_size * LOGIT_BYTES
    ) / hw.tensor_parallel
    # One prefill chunk of activations is reserved up front, as vLLM profiles it.
    chunk = np.minimum(np.maximum(prompt_tokens, 1.0), hw.prefill_token_budget)
    workspace = chunk * width * ACTIVATION_WORKSPACE_PER_TOKEN_HIDDEN / hw.tensor_parallel
    per_seq = per_seq_kv + per_seq_extra
    # The scheduler's memory rule: the KV cache gets what weights and activations leave of the usable
    # memory (vLLM, SGLang), or its fraction of what they leave of the chip (TensorRT-LLM).
    left = hw.usable_memory_bytes - weights - workspace
    free = np.where(hw.kv_memory_of_free, hw.usable_fraction * left, left)
    held = np.where(free > 0, np.floor(free / np.maximum(per_seq, 1e-30)), 0.0)
    max_conc = np.minimum(held, hw.max_batch_sequences) * adp  # the engine's batch cap, per attention replica
    return MemoryArrays(
        weights_bytes_per_chip=weights,
        kv_bytes_per_sequence_per_chip=per_seq,
        kv_bytes_per_chip=per_seq * hw.batch_per_replica / adp,  # each attention replica holds its share
        activation_bytes_per_chip=workspace,
        usable_bytes_per_chip=hw.usable_memory_bytes,
        kv_free_bytes_per_chip=free,
        max_concurrency_per_replica=max_conc,
        weights_fit=weights + workspace < hw.usable_memory_bytes,
    )


def sixteen_bit_extra_bytes(model: ModelSpec, hw: CandidateHardware) -> np.ndarray | float:
    """What the parameters the weights' format keeps in 16 bits (ModelSpec.weight_layout) add to the
    weights stored, over the format's own width: per candidate, the whole model's."""
    if not hw.any_sixteen_bit:
        return 0.0
    stored = model.weight_tables.sixteen_bit_stored_params[hw.weight_dtype_code]
    return stored * (SIXTEEN_BIT_BYTES - hw.weight_bytes_per_param)


def tp_replicated_bytes(model: ModelSpec, hw: CandidateHardware, bytes_per_param, *, sixteen_bit: bool) -> np.ndarray | float:
    """What each tensor-parallel rank holds (and streams) of the parameters every rank keeps whole
    (ModelSpec.tp_replicated_params) beyond the 1/tp share the rest is counted at: (1 - 1/tp) of them at
    `bytes_per_param`, those the weights' format keeps in 16 bits at 16 (`sixteen_bit`: the priced model's own
    weights, not a draft passing its own width), the whole model's (a pipeline stage holds 1/pp of it). 0 for a
    model with none."""
    if not model.tp_replicated_params:
        return 0.0
    held = model.tp_replicated_params * bytes_per_param
    if sixteen_bit and hw.any_sixteen_bit:
        held = held + model.weight_tables.sixteen_bit_replicated_params[hw.weight_dtype_code] * (SIXTEEN_BIT_BYTES - bytes_per_param)
    return held * (1.0 - 1.0 / hw.tensor_parallel)


def group_split_bytes(model: ModelSpec, hw: CandidateHardware, bytes_per_param, *, sixteen_bit: bool) -> np.ndarray | float:
    """What one attention replica does not hold (nor stream) of the dense layers an engine keeps tensor-parallel
    over the attention-DP group (Scheduler.attention_dp_dense, SGLang): (1 - 1/adp) of ModelSpec.group_sharded_params
    at `bytes_per_param`, and of the extra bytes of those the format keeps in 16 bits (an untied LM head, a
    checkpoint's 16-bit routers, shared experts or dense FFN layers: WeightTables.sixteen_bit_group_params)
    (`sixteen_bit`: the priced model's own weights, not a draft passing its own width). The whole model's; 0
    where no candidate splits them."""
    if not model.group_sharded_params:
        return 0.0
    split = model.group_sharded_params * bytes_per_param
    if sixteen_bit and hw.any_sixteen_bit:
        tables, code = model.weight_tables, hw.weight_dtype_code
        kept = tables.sixteen_bit_group_params[code] + (0.0 if model.tie_word_embeddings else tables.sixteen_bit_head_params[code])
        split = split + kept * (SIXTEEN_BIT_BYTES - bytes_per_param)
    return split * (1.0 - 1.0 / hw.dense_shards)


def cache_bytes_per_sequence(model: ModelSpec, hw: CandidateHardware, cached_tokens: float, *, resident: tuple[ResidentModel, ...] = ()) -> np.ndarray:
    """What one sequence of `cached_tokens` holds on a chip: the model's cache and that of every resident
    model that keeps one (a draft model)."""
    held = _kv_bytes_per_sequence(model, hw, cached_tokens)
    for extra in resident:
        if extra.keeps_cache:
            held = held + _kv_bytes_per_sequence(extra.model, hw, cached_tokens)
    return held


def _kv_bytes_per_sequence(model: ModelSpec, hw: CandidateHardware, cached_tokens: float) -> np.ndarray:
    attention = at_ranks(model.attention, hw.tensor_parallel)  # a hybrid's parts split over TP ranks unlike
    per_token = model.kv_cache_elements_per_token * hw.kv_bytes_per_element * kv_share_per_chip(model, hw)
    # Paged blocks of the tokens held: capped by a window, one unpaged state for SSM layers.
    held = attention.resident_tokens(cached_tokens)
    # Buffers a sequence holds whatever its length, in their own dtype (DeepSeek-V4's compressors).
    fixed = model.attention.fixed_bytes_per_sequence(hw.tensor_parallel)
    # Each pipeline stage holds the cache of its own layers only.
    return (held * per_token + fixed) / hw.pipeline_parallel if cached_tokens > 0 else 0.0 * per_token
