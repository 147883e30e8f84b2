"""DeepSeek-V4's compressed attention (DeepSeek-V4 report, "hybrid attention"; deepseek-ai/DeepSeek-V4-Flash
inference/model.py Attention, Compressor, Indexer).

Every layer is multi-query attention whose one cached vector of head_dim per entry is both the key and the
value, so an entry holds head_dim elements, not 2 x head_dim, and a (query, entry) pair costs QK^T plus AV,
4 x heads x head_dim FLOPs. Each layer keeps the last `sliding_window` raw entries (SlidingWindow around this
type, compress_ratio 1). On top of them a CSA layer pools every 4 tokens into one entry with a gated
compressor and reads the entries its indexer ranks top-k (SparseTopK around this type), and an HCA layer pools
every 128 tokens into one entry and reads them all (this type alone). In tokens' worth, an entry pooled over r
tokens is head_dim / r elements per token: a context of C tokens holds C tokens' worth, a query reads and
attends C of them, and a causal prefill pairs P^2/2, all exact up to the last, incomplete group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import FullContext


@dataclass(frozen=True, kw_only=True)
class CompressedKV(FullContext):
    num_layers: int
    num_heads: int
    head_dim: int  # of the one shared key-value vector (DeepSeek-V4: 512, RoPE on its last 64)
    compress_ratio: int = 1  # tokens pooled into one cached entry (1: the raw window entries)
    # The compressor's FP32 buffers of the group it is pooling, per layer (attention_for: compressor_state_bytes).
    state_bytes_per_layer: float = 0.0

    def __post_init__(self) -> None:
        if self.compress_ratio < 1:
            raise ValueError("compress_ratio must be >= 1")

    @property
    def name(self) -> str:
        return "shared_kv_mqa" if self.compress_ratio == 1 else f"compressed_kv(r={self.compress_ratio})"

    @property
    def kv_elements_per_token(self) -> float:
        """head_dim per entry and layer (key = value), an entry per compress_ratio tokens."""
        return self.num_layers * self.head_dim / self.compress_ratio

    @property
    def decode_flops_per_position(self) -> float:
        """4 x heads x head_dim per (query, entry) pair, QK^T and AV at 2 FLOPs per multiply-add, per
        compress_ratio tokens."""
        return 4.0 * self.num_layers * self.num_heads * self.head_dim / self.compress_ratio

    @property
    def prefill_flops_per_pair(self) -> float:
        return self.decode_flops_per_position

    def kv_share_per_chip(self, tensor_parallel: np.ndarray) -> np.ndarray:
        """One key-value head: every tensor-parallel rank holds all of it (MQA)."""
        return np.ones(np.shape(tensor_parallel))

    def fixed_bytes_per_sequence(self, tensor_parallel: np.ndarray) -> np.ndarray:
        """The compressors' buffers, whole on every rank like the key-value head they pool."""
        return np.full(np.shape(tensor_parallel), float(self.num_layers * self.state_bytes_per_layer))
