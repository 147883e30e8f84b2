"""Attention types: one object per type behind the protocol in base.py.

Adding a type is one module here with its tests, plus a line in `attention_for` if the
catalog's shape can name it (docs/architecture.md, "Adding an attention type").
"""

from __future__ import annotations

from hwcatalog.architecture import ArchShape

from .base import Attention
from .full import FullAttention
from .hybrid import Hybrid
from .latent import LatentAttention
from .linear import LinearState
from .sliding import Chunked, SlidingWindow
from .sparse import SparseTopK

ATTENTION_KINDS = ("mha", "gqa", "mqa", "mla")


def attention_for(shape: ArchShape) -> Attention:
    """The attention object a catalog shape describes."""
    if shape.attention_kind not in ATTENTION_KINDS:
        raise ValueError(f"attention_kind must be one of {ATTENTION_KINDS}, not {shape.attention_kind!r}")
    if shape.is_mla:
        if shape.kv_lora_rank is None or shape.qk_rope_head_dim is None:
            raise ValueError("MLA needs kv_lora_rank and qk_rope_head_dim")
        return LatentAttention(
            num_layers=shape.num_layers, num_heads=shape.num_attention_heads, head_dim=shape.head_dim,
            kv_lora_rank=shape.kv_lora_rank, qk_rope_head_dim=shape.qk_rope_head_dim,
        )  # fmt: skip
    def full(layers: int) -> FullAttention:
        return FullAttention(num_layers=layers, num_heads=shape.num_attention_heads, num_kv_heads=shape.num_kv_heads, head_dim=shape.head_dim)

    if not shape.sliding_window:
        return full(shape.num_layers)
    windowed = min(shape.sliding_window_layers or shape.num_layers, shape.num_layers)
    banded = SlidingWindow(inner=full(windowed), window_tokens=shape.sliding_window)
    if windowed == shape.num_layers:
        return banded
    return Hybrid(parts=(full(shape.num_layers - windowed), banded))


__all__ = [
    "ATTENTION_KINDS", "Attention", "Chunked", "FullAttention", "Hybrid", "LatentAttention", "LinearState", "SlidingWindow",
    "SparseTopK", "attention_for",
]  # fmt: skip
