"""Attention over a bounded span: a sliding window (Mistral 7B, Jiang et al. 2023, sec. 2;
Gemma 2/3's local layers; gpt-oss's banded layers) and chunked attention (Llama 4's local
layers attend within fixed chunks of the sequence).

Both wrap another attention type (its heads and cache layout) and cap what a query sees;
the cache is capped the same way (vLLM frees blocks that slide out of the window).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Attention, Tokens, Wrapping


@dataclass(frozen=True, kw_only=True)
class SlidingWindow(Wrapping):
    inner: Attention
    window_tokens: int

    def __post_init__(self) -> None:
        if self.window_tokens < 1:
            raise ValueError("window_tokens must be >= 1")

    @property
    def name(self) -> str:
        return f"sliding_window({self.inner.name}, W={self.window_tokens})"

    def kv_held_tokens(self, context: Tokens) -> Tokens:
        return np.minimum(context, self.window_tokens)

    def kv_read_tokens(self, context: Tokens) -> Tokens:
        return np.minimum(context, self.window_tokens)

    def attended_positions(self, context: Tokens) -> Tokens:
        return np.minimum(context, self.window_tokens)

    def causal_pairs(self, tokens: Tokens) -> Tokens:
        """sum over i < P of min(i, W): P^2/2 up to the window, then W per further query."""
        w = float(self.window_tokens)
        inside = np.minimum(tokens, w)
        return inside * inside / 2.0 + np.maximum(tokens - w, 0.0) * w

    def bidirectional_pairs(self, tokens: Tokens) -> Tokens:
        """Each position sees at most W neighbours (a band of width W)."""
        return tokens * np.minimum(tokens, self.window_tokens)



@dataclass(frozen=True, kw_only=True)
class Chunked(Wrapping):
    """A query attends to the earlier tokens of its own chunk only: on average half a
    chunk once the context passes one, and the cache keeps the current chunk."""

    inner: Attention
    chunk_tokens: int

    def __post_init__(self) -> None:
        if self.chunk_tokens < 1:
            raise ValueError("chunk_tokens must be >= 1")

    @property
    def name(self) -> str:
        return f"chunked({self.inner.name}, C={self.chunk_tokens})"

    def _span(self, context: Tokens) -> Tokens:
        # Before one chunk fills, the whole context; after, the mean position in a chunk.
        return np.where(np.asarray(context) < self.chunk_tokens, context, self.chunk_tokens / 2.0)

    def kv_held_tokens(self, context: Tokens) -> Tokens:
        return np.minimum(context, self.chunk_tokens)

    def kv_read_tokens(self, context: Tokens) -> Tokens:
        return self._span(context)

    def attended_positions(self, context: Tokens) -> Tokens:
        return self._span(context)

    def causal_pairs(self, tokens: Tokens) -> Tokens:
        """Whole chunks of c^2/2 pairs each plus the causal pairs of the last partial one."""
        c = float(self.chunk_tokens)
        whole = np.floor(np.asarray(tokens, dtype=float) / c)
        rest = tokens - whole * c
        return whole * c * c / 2.0 + rest * rest / 2.0

    def bidirectional_pairs(self, tokens: Tokens) -> Tokens:
        c = float(self.chunk_tokens)
        whole = np.floor(np.asarray(tokens, dtype=float) / c)
        rest = tokens - whole * c
        return whole * c * c + rest * rest

