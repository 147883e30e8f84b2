"""Attention heads padded to a multiple of the tensor-parallel ranks, where a chip's SDK pads them.

Megatron-style tensor parallelism splits the heads over the ranks, so the TP degree must divide them
(vLLM, SGLang and TensorRT-LLM refuse any other). The Neuron SDK instead pads: over R ranks (its
tp_degree, counted in NeuronCores) each rank holds ceil(H/R) query heads and ceil(H_kv/R) KV heads, the
padding all zeros yet stored, streamed and multiplied like real heads (chips/other.py; the chip policy's
head_ranks_per_chip gives a chip's ranks, CandidateHardware.head_ranks R in all, 0 where TP divides).

Over R ranks of a model with H query heads, H_kv KV heads of head_dim h_d, hidden size d and L attention
layers:
- attention FLOPs (QK^T, PV) grow by ceil(H/R) R / H;
- the projections gain (ceil(H/R) R - H) query heads of d h_d (q, twice with an output gate) + h_d d
  (the output projection) and (ceil(H_kv/R) R - H_kv) KV heads of 2 d h_d each, per layer;
- a chip of r ranks caches r ceil(H_kv/R) of the H_kv KV heads (replicated up to one a rank, as the
  planner already replicates KV heads once TP exceeds them).
Only for full (GQA/MHA/MQA) attention, windowed or not; a model of another attention type keeps the
TP-divides rule. The SDK pads the MLP's intermediate size to a multiple of the ranks as well; that is at
most ranks - 1 columns of tens of thousands and is not counted.
"""

from __future__ import annotations

import numpy as np

from .attention.full import FullAttention
from .hardware import CandidateHardware
from .specs import ChipSpec, ModelSpec


def _full_attention(model: ModelSpec) -> FullAttention | None:
    """The model's full attention, through a window or chunking around it (attention/ Wrapping); None for
    another type (latent, linear, hybrid)."""
    attention = model.attention
    while not isinstance(attention, FullAttention) and hasattr(attention, "inner"):
        attention = attention.inner
    return attention if isinstance(attention, FullAttention) else None


def pads_heads(model: ModelSpec, hw: CandidateHardware) -> np.ndarray | bool:
    """Per candidate: its chip pads this model's heads (False everywhere when none does)."""
    if not hw.any_head_padding or _full_attention(model) is None:
        return False
    return hw.head_ranks > 0


def runs_any_tensor_parallel(model: ModelSpec, chip: ChipSpec) -> bool:
    """Whether `chip` runs `model` at a TP degree that does not divide its heads (its SDK pads them)."""
    from .chips import policy_for  # chips/ imports the layouts that ask this

    return policy_for(chip).head_ranks_per_chip(chip) > 0 and _full_attention(model) is not None


def _padded(count: float, ranks: np.ndarray) -> np.ndarray:
    return np.ceil(count / np.maximum(ranks, 1.0)) * np.maximum(ranks, 1.0)


def query_head_factor(model: ModelSpec, hw: CandidateHardware) -> np.ndarray | float:
    """ceil(H/R) R / H where the chip pads, 1 elsewhere: the attention's FLOPs over the real heads'."""
    padding = pads_heads(model, hw)
    if padding is False:
        return 1.0
    heads = float(model.num_attention_heads)
    return np.where(padding, _padded(heads, hw.head_ranks) / heads, 1.0)


def padded_projection_params(model: ModelSpec, hw: CandidateHardware) -> np.ndarray | float:
    """The zero parameters the padded heads add to the attention projections, over all ranks (0 elsewhere)."""
    padding = pads_heads(model, hw)
    if padding is False:
        return 0.0
    shape, ranks = model.shape, hw.head_ranks
    d, hd = float(shape.hidden_size), float(shape.head_dim)
    query_heads = _padded(float(shape.num_attention_heads), ranks) - shape.num_attention_heads
    kv_heads = _padded(float(shape.num_kv_heads), ranks) - shape.num_kv_heads
    per_query_head = d * hd * (2.0 if shape.attention_output_gate else 1.0) + hd * d
    per_layer = query_heads * per_query_head + kv_heads * 2.0 * d * hd
    return np.where(padding, _full_attention(model).num_layers * per_layer, 0.0)


def kv_share_per_chip(model: ModelSpec, hw: CandidateHardware) -> np.ndarray:
    """The share of a token's KV cache one chip holds: the attention type's split over TP ranks, or where
    the chip pads, its ranks' r ceil(H_kv/R) of the H_kv heads."""
    base = model.attention.kv_share_per_chip(hw.tensor_parallel)
    padding = pads_heads(model, hw)
    if padding is False:
        return base
    kv = float(model.num_kv_heads)
    padded = hw.head_ranks_per_chip * np.ceil(kv / np.maximum(hw.head_ranks, 1.0)) / kv
    return np.where(padding, padded, base)
