"""Attention types: one object per type behind the protocol in base.py.

Adding a type is one module here with its tests, plus a line in `attention_for` if the
catalog's shape can name it (docs/architecture.md, "Adding an attention type").
"""

from __future__ import annotations

from hwcatalog import architecture
from hwcatalog.architecture import DTYPE_BYTES, ArchShape

from .base import Attention
from .compressed import CompressedKV
from .full import FullAttention
from .hybrid import Hybrid, RankWeighted, at_ranks
from .latent import LatentAttention
from .linear import LinearState
from .sliding import Chunked, SlidingWindow
from .sparse import SparseTopK

ATTENTION_KINDS = ("mha", "gqa", "mqa", "mla")


def attention_for(shape: ArchShape) -> Attention:
    """The attention object a catalog shape describes: full (MHA/GQA/MQA) or latent (MLA) attention on its
    attention layers, windowed on `sliding_window_layers` of them, read sparsely (top-k) where the shape has a
    sparse-attention indexer, and a constant recurrent state on its linear-attention / Mamba-2 layers; DeepSeek-V4's
    compressed attention (window + CSA / HCA layers) where the shape has it."""
    if shape.attention_kind not in ATTENTION_KINDS:
        raise ValueError(f"attention_kind must be one of {ATTENTION_KINDS}, not {shape.attention_kind!r}")
    layers = architecture.attention_layer_count(shape)
    parts: list[Attention] = []
    if layers > 0:
        parts.extend(_attention_parts(shape, layers))
    if shape.has_linear_layers:
        parts.append(linear_state_for(shape))
    if not parts:
        raise ValueError("a model needs attention or linear-attention layers")
    return parts[0] if len(parts) == 1 else Hybrid(parts=tuple(parts))


def _attention_parts(shape: ArchShape, layers: int) -> list[Attention]:
    if shape.is_compressed:
        return compressed_parts(shape, layers)
    if shape.is_mla:
        if shape.kv_lora_rank is None or shape.qk_rope_head_dim is None:
            raise ValueError("MLA needs kv_lora_rank and qk_rope_head_dim")
        main: Attention = LatentAttention(
            num_layers=layers, num_heads=shape.num_attention_heads, head_dim=shape.head_dim,
            kv_lora_rank=shape.kv_lora_rank, qk_rope_head_dim=shape.qk_rope_head_dim,
        )  # fmt: skip
        return [sparse_for(shape, main, layers) if shape.is_sparse else main]

    def full(count: int) -> FullAttention:
        return FullAttention(num_layers=count, num_heads=shape.num_attention_heads, num_kv_heads=shape.num_kv_heads, head_dim=shape.head_dim)

    if not shape.sliding_window:
        return [sparse_for(shape, full(layers), layers) if shape.is_sparse else full(layers)]
    windowed = min(shape.sliding_window_layers or layers, layers)
    banded = SlidingWindow(inner=full(windowed), window_tokens=shape.sliding_window)
    if windowed == layers:
        return [banded]
    return [full(layers - windowed), banded]


def sparse_for(shape: ArchShape, inner: Attention, layers: int) -> SparseTopK:
    """DeepSeek Sparse Attention: the indexer caches one key of indexer_head_dim per token and layer and
    scores every cached token with indexer_num_heads heads (2 FLOPs per multiply-add); the attention then
    reads the top sparse_attention_topk tokens."""
    return SparseTopK(
        inner=inner, top_k=shape.sparse_attention_topk,
        indexer_elements_per_token=float(layers * (shape.indexer_head_dim or 0)),
        indexer_flops_per_position=2.0 * layers * (shape.indexer_num_heads or 0) * (shape.indexer_head_dim or 0),
    )  # fmt: skip


def compressed_parts(shape: ArchShape, layers: int) -> list[Attention]:
    """DeepSeek-V4 (attention/compressed.py): the window of raw shared key-value entries on every attention layer;
    on csa_layers, entries pooled over csa_compress_ratio tokens read through the indexer's top
    sparse_attention_topk entries (top_k x ratio tokens' worth), the indexer caching and scoring one pooled key
    of indexer_head_dim per ratio tokens with indexer_num_heads heads (2 FLOPs per multiply-add); on hca_layers,
    entries pooled over hca_compress_ratio tokens, all read."""
    heads, dim = shape.num_attention_heads, shape.num_kv_heads * shape.head_dim

    def pooled(count: int, ratio: int, state_bytes_per_layer: float = 0.0) -> CompressedKV:
        return CompressedKV(num_layers=count, num_heads=heads, head_dim=dim, compress_ratio=ratio, state_bytes_per_layer=state_bytes_per_layer)

    def buffers(ratio: int, overlapping: bool, width: int) -> float:
        """A compressor's FP32 key-value and score buffers of the group it is pooling, kept per sequence whatever
        its length: 2 x ratio x coff x width x 4 bytes, coff 2 where consecutive windows overlap (CSA)
        (ai-dynamo/aiconfigurator sdk/models/deepseek_v4.py, get_kvcache_bytes_per_sequence)."""
        return 2.0 * ratio * (2 if overlapping else 1) * width * DTYPE_BYTES["fp32"]

    parts: list[Attention] = []
    if not shape.sliding_window:
        raise ValueError("compressed attention needs its sliding_window")
    parts.append(SlidingWindow(inner=pooled(layers, 1), window_tokens=shape.sliding_window))
    csa, hca = architecture.csa_layer_count(shape), architecture.hca_layer_count(shape)
    if csa:
        ratio = shape.csa_compress_ratio
        # A CSA layer's indexer pools its keys with a compressor of its own, overlapping too.
        state = buffers(ratio, True, dim) + buffers(ratio, True, shape.indexer_head_dim or 0)
        parts.append(SparseTopK(
            inner=pooled(csa, ratio, state), top_k=(shape.sparse_attention_topk or 0) * ratio,
            indexer_elements_per_token=csa * (shape.indexer_head_dim or 0) / ratio,
            indexer_flops_per_position=2.0 * csa * (shape.indexer_num_heads or 0) * (shape.indexer_head_dim or 0) / ratio,
        ))  # fmt: skip
    if hca:
        parts.append(pooled(hca, shape.hca_compress_ratio, buffers(shape.hca_compress_ratio, False, dim)))
    return parts


def linear_state_for(shape: ArchShape) -> LinearState:
    """Gated DeltaNet / Mamba-2 layers: the state per layer (architecture.linear_state_elements_per_layer);
    each token reads, updates and reads out the recurrent part once, ~4 FLOPs per element (2 for the
    update's multiply-add, 2 for the readout), plus 2 per convolution tap."""
    state = architecture.linear_state_elements_per_layer(shape)
    _, _, conv = architecture.linear_dims(shape)
    recurrent = state - conv * max((shape.linear_conv_kernel_dim or 1) - 1, 0)
    flops = 4.0 * recurrent + 2.0 * conv * (shape.linear_conv_kernel_dim or 0)
    return LinearState(num_layers=architecture.linear_layer_count(shape), state_elements_per_layer=float(state), flops_per_token_per_layer=flops)


__all__ = [
    "ATTENTION_KINDS", "Attention", "Chunked", "CompressedKV", "FullAttention", "Hybrid", "LatentAttention", "LinearState",
    "RankWeighted", "SlidingWindow", "SparseTopK", "at_ranks", "attention_for", "compressed_parts", "linear_state_for", "sparse_for",
]  # fmt: skip
