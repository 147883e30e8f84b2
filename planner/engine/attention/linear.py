"""Linear attention and state-space layers: a constant recurrent state per sequence
instead of a growing KV cache (Mamba-2, Dao and Gu, ICML 2024; Gated DeltaNet, Yang et al.,
ICLR 2025, as in Qwen3-Next; Nemotron-H's Mamba layers).

Each token reads and rewrites the whole state once: the cache is one "token's worth" of
`state_elements` whatever the context, and a query costs one state update, not a pass
over the context.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Tokens


@dataclass(frozen=True, kw_only=True)
class LinearState:
    num_layers: int
    state_elements_per_layer: float  # e.g. Mamba-2: heads x head_dim x state_size (+ conv state)
    flops_per_token_per_layer: float  # state update and readout, ~4 x state elements

    name = "linear_state"

    @property
    def kv_elements_per_token(self) -> float:
        return float(self.num_layers * self.state_elements_per_layer)

    @property
    def decode_flops_per_position(self) -> float:
        return float(self.num_layers * self.flops_per_token_per_layer)

    @property
    def prefill_flops_per_pair(self) -> float:
        return float(self.num_layers * self.flops_per_token_per_layer)

    def kv_held_tokens(self, context: Tokens) -> Tokens:
        return np.where(np.asarray(context) > 0, 1.0, 0.0)

    def kv_read_tokens(self, context: Tokens) -> Tokens:
        return np.where(np.asarray(context) > 0, 1.0, 0.0)

    def resident_tokens(self, tokens: float) -> float:
        """The state is one fixed allocation per sequence, not paged."""
        return float(self.kv_held_tokens(tokens))

    def attended_positions(self, context: Tokens) -> Tokens:
        return np.ones(np.shape(context))

    def causal_pairs(self, tokens: Tokens) -> Tokens:
        """A chunked scan does one state update per token."""
        return tokens

    def bidirectional_pairs(self, tokens: Tokens) -> Tokens:
        return 2.0 * np.asarray(tokens, dtype=float)  # one scan each way

    def kv_share_per_chip(self, tensor_parallel: np.ndarray) -> np.ndarray:
        """State heads split over TP ranks like attention heads (vLLM's Mamba layers)."""
        return 1.0 / np.asarray(tensor_parallel, dtype=float)

    def fixed_bytes_per_sequence(self, tensor_parallel: np.ndarray) -> np.ndarray:
        """None beyond the state, which is counted in the cache's elements."""
        return np.zeros(np.shape(tensor_parallel))
