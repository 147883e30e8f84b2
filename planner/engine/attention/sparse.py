"""Sparse top-k attention: DeepSeek Sparse Attention (DeepSeek-V3.2-Exp technical report,
sec. 2.1). A light indexer scores every cached token, then the main attention reads only
the top k of them. The cache still holds every token; a decode query reads k full cache
entries plus the indexer's small key for each of the C tokens.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .base import Attention, Tokens, Wrapping


@dataclass(frozen=True, kw_only=True)
class SparseTopK(Wrapping):
    inner: Attention
    top_k: int  # DeepSeek-V3.2: 2,048
    indexer_elements_per_token: float = 0.0  # all layers; V3.2: 128-dim fp8 key x L
    indexer_flops_per_position: float = 0.0  # all layers; V3.2: 64 heads x 128 x 2 x L

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError("top_k must be >= 1")

    @property
    def name(self) -> str:
        return f"sparse_top_k({self.inner.name}, k={self.top_k})"

    @property
    def kv_elements_per_token(self) -> float:
        return self.inner.kv_elements_per_token + self.indexer_elements_per_token

    def _indexer_share(self) -> float:
        return self.indexer_elements_per_token / self.kv_elements_per_token

    def kv_held_tokens(self, context: Tokens) -> Tokens:
        return context

    def kv_read_tokens(self, context: Tokens) -> Tokens:
        main = np.minimum(context, self.top_k) * (1.0 - self._indexer_share())
        return main + np.asarray(context, dtype=float) * self._indexer_share()

    def attended_positions(self, context: Tokens) -> Tokens:
        indexer = self.indexer_flops_per_position / self.decode_flops_per_position if self.decode_flops_per_position else 0.0
        return np.minimum(context, self.top_k) + np.asarray(context, dtype=float) * indexer

    def at_ranks(self, tensor_parallel) -> SparseTopK:
        """The attention as one of `tensor_parallel` ranks runs it: the main attention's heads split over the
        ranks, the indexer runs whole on each (vLLM's and SGLang's Indexer is replicated), so its FLOPs, which
        the engine divides over the ranks with the rest, count tensor_parallel times."""
        return dataclasses.replace(self, indexer_flops_per_position=self.indexer_flops_per_position * np.asarray(tensor_parallel, dtype=float))

    def _indexer_per_pair(self) -> float:
        """The indexer's FLOPs for one (query, key) pair in the main attention's prefill pairs."""
        return self.indexer_flops_per_position / self.prefill_flops_per_pair if self.prefill_flops_per_pair else 0.0

    def causal_pairs(self, tokens: Tokens) -> Tokens:
        """Dense up to k keys per query, then k per query (V3.2 prefills sparsely too); the indexer
        still scores every earlier token of every query, P^2/2 pairs at its own FLOPs (counted at the
        attention's rate, though V3.2's indexer runs in FP8)."""
        k = float(self.top_k)
        tokens = np.asarray(tokens, dtype=float)
        inside = np.minimum(tokens, k)
        return inside * inside / 2.0 + np.maximum(tokens - k, 0.0) * k + tokens * tokens / 2.0 * self._indexer_per_pair()

    def bidirectional_pairs(self, tokens: Tokens) -> Tokens:
        tokens = np.asarray(tokens, dtype=float)
        return tokens * np.minimum(tokens, self.top_k) + tokens * tokens * self._indexer_per_pair()

