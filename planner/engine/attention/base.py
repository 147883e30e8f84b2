"""The protocol every attention type answers (docs/planner_math.md#attention-types).

A model's attention, over all its layers, is one object. The engine asks it five things
at a context length C (tokens already in the sequence), element-wise over NumPy arrays:
- `kv_elements_per_token`: cache elements one full-attention token holds, all layers;
- `kv_held_tokens(C)`: tokens' worth of those elements a sequence keeps resident;
- `kv_read_tokens(C)`: tokens' worth read by one decode query;
- `attended_positions(C)`: (query, key) pairs per query, in units that cost
  `decode_flops_per_position` FLOPs each;
- `causal_pairs(P)` / `bidirectional_pairs(S)`: pairs of a causal prefill of P tokens
  and of a bidirectional pass over S tokens (masked diffusion), each costing
  `prefill_flops_per_pair`;
- `resident_tokens(T)`: tokens' worth a sequence of T tokens keeps in memory, in whole
  PagedAttention blocks where the cache is paged (a recurrent state is not);
- `kv_share_per_chip(tp)`: the share of a token's cache one tensor-parallel rank holds;
- `fixed_bytes_per_sequence(tp)`: bytes one rank holds for a sequence whatever its length, in a dtype
  of their own rather than the cache's (DeepSeek-V4's FP32 compressor buffers); 0 for most types.

Full attention answers C, C, C, P*P/2 and S*S unchanged: the other types cap or replace
them. "Tokens' worth" keeps one unit through the engine (bytes = tokens x elements per
token x bytes per element), so a hybrid of layer groups is one object too.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ..units import paged_tokens

Tokens = np.ndarray | float


@runtime_checkable
class Attention(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def kv_elements_per_token(self) -> float: ...

    @property
    def decode_flops_per_position(self) -> float: ...

    @property
    def prefill_flops_per_pair(self) -> float: ...

    def kv_held_tokens(self, context: Tokens) -> Tokens: ...

    def kv_read_tokens(self, context: Tokens) -> Tokens: ...

    def resident_tokens(self, tokens: float) -> float: ...

    def attended_positions(self, context: Tokens) -> Tokens: ...

    def causal_pairs(self, tokens: Tokens) -> Tokens: ...

    def bidirectional_pairs(self, tokens: Tokens) -> Tokens: ...

    def kv_share_per_chip(self, tensor_parallel: np.ndarray) -> np.ndarray: ...

    def fixed_bytes_per_sequence(self, tensor_parallel: np.ndarray) -> np.ndarray: ...


class Paged:
    """Mixin: the cache lives in PagedAttention blocks of 16 tokens (Kwon et al., SOSP 2023)."""

    def resident_tokens(self, tokens: float) -> float:
        return paged_tokens(self.kv_held_tokens(tokens))

    def fixed_bytes_per_sequence(self, tensor_parallel: np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(tensor_parallel))


class FullContext(Paged):
    """Mixin: every position attends to every earlier one (the default the other types cap)."""

    def kv_held_tokens(self, context: Tokens) -> Tokens:
        return context

    def kv_read_tokens(self, context: Tokens) -> Tokens:
        return context

    def attended_positions(self, context: Tokens) -> Tokens:
        return context

    def causal_pairs(self, tokens: Tokens) -> Tokens:
        """P^2/2 (query, key) pairs under the causal mask: half of LLM-Viewer's P^2."""
        return tokens * tokens / 2.0

    def bidirectional_pairs(self, tokens: Tokens) -> Tokens:
        return tokens * tokens


class Wrapping(Paged):
    """Mixin for a type that caps another's span (sliding window, chunks, top-k): the heads,
    cache layout and FLOPs per pair are the inner type's. Needs an `inner` field."""

    @property
    def kv_elements_per_token(self) -> float:
        return self.inner.kv_elements_per_token

    @property
    def decode_flops_per_position(self) -> float:
        return self.inner.decode_flops_per_position

    @property
    def prefill_flops_per_pair(self) -> float:
        return self.inner.prefill_flops_per_pair

    def kv_share_per_chip(self, tensor_parallel: np.ndarray) -> np.ndarray:
        return self.inner.kv_share_per_chip(tensor_parallel)

    def fixed_bytes_per_sequence(self, tensor_parallel: np.ndarray) -> np.ndarray:
        return self.inner.fixed_bytes_per_sequence(tensor_parallel)
