"""A model whose layer groups use different attention types: gpt-oss (alternating sliding
window and full layers), Gemma 3 (5 local : 1 global), Qwen3-Next and Nemotron-H (linear or
Mamba layers with a few full-attention layers). Each part covers its own layers.

The engine counts in "tokens' worth of the whole model's cache", so each answer is the
parts' answers weighted by their share of the elements (bytes) or of the FLOPs per pair.
Bytes per rank multiply tokens' worth by the share per TP rank (`kv_share_per_chip`, weighted by
elements). Where the parts split over TP ranks differently (an MLA latent or a GQA cache past
tp = H_kv stays whole on every rank while a linear layer's state splits), the product of the two
averages is wrong, by 7.6x for Kimi K3 at TP 8 and 128k tokens; `at_ranks(tp)` gives the tokens'
worth weighted by each part's elements times its share per rank, which makes the product exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Attention, Tokens


@dataclass(frozen=True, kw_only=True)
class Hybrid:
    parts: tuple[Attention, ...]

    def __post_init__(self) -> None:
        if not self.parts:
            raise ValueError("a hybrid needs at least one part")

    @property
    def name(self) -> str:
        return "hybrid(" + ", ".join(p.name for p in self.parts) + ")"

    @property
    def kv_elements_per_token(self) -> float:
        return float(sum(p.kv_elements_per_token for p in self.parts))

    @property
    def decode_flops_per_position(self) -> float:
        return float(sum(p.decode_flops_per_position for p in self.parts))

    @property
    def prefill_flops_per_pair(self) -> float:
        return float(sum(p.prefill_flops_per_pair for p in self.parts))

    def _by_elements(self, answer) -> Tokens:
        total = self.kv_elements_per_token
        return sum(p.kv_elements_per_token / total * answer(p) for p in self.parts)

    def _by_flops(self, answer, per_pair) -> Tokens:
        total = sum(per_pair(p) for p in self.parts)
        return sum(per_pair(p) / total * answer(p) for p in self.parts)

    def kv_held_tokens(self, context: Tokens) -> Tokens:
        return self._by_elements(lambda p: p.kv_held_tokens(context))

    def resident_tokens(self, tokens: float) -> float:
        return float(self._by_elements(lambda p: p.resident_tokens(tokens)))

    def kv_read_tokens(self, context: Tokens) -> Tokens:
        return self._by_elements(lambda p: p.kv_read_tokens(context))

    def attended_positions(self, context: Tokens) -> Tokens:
        return self._by_flops(lambda p: p.attended_positions(context), lambda p: p.decode_flops_per_position)

    def causal_pairs(self, tokens: Tokens) -> Tokens:
        return self._by_flops(lambda p: p.causal_pairs(tokens), lambda p: p.prefill_flops_per_pair)

    def bidirectional_pairs(self, tokens: Tokens) -> Tokens:
        return self._by_flops(lambda p: p.bidirectional_pairs(tokens), lambda p: p.prefill_flops_per_pair)

    def kv_share_per_chip(self, tensor_parallel: np.ndarray) -> np.ndarray:
        return self._by_elements(lambda p: p.kv_share_per_chip(tensor_parallel))

    def fixed_bytes_per_sequence(self, tensor_parallel: np.ndarray) -> np.ndarray:
        return sum(p.fixed_bytes_per_sequence(tensor_parallel) for p in self.parts)

    def at_ranks(self, tensor_parallel: np.ndarray) -> RankWeighted:
        """The cache's tokens' worth as one tensor-parallel rank of `tensor_parallel` holds and reads them."""
        return RankWeighted(hybrid=self, tensor_parallel=np.asarray(tensor_parallel, dtype=float))


@dataclass(frozen=True, kw_only=True)
class RankWeighted:
    """A hybrid's cache answers for one TP rank: tokens' worth weighted by each part's elements per token times
    its share per rank, so tokens' worth x kv_elements_per_token x hybrid.kv_share_per_chip(tp) is the sum over
    the parts of what the rank holds (or reads). Everything else is the hybrid's."""

    hybrid: Hybrid
    tensor_parallel: np.ndarray

    def __getattr__(self, name: str):
        return getattr(self.hybrid, name)

    def _weighted(self, answer) -> Tokens:
        weights = [p.kv_elements_per_token * p.kv_share_per_chip(self.tensor_parallel) for p in self.hybrid.parts]
        total = sum(weights)
        return sum(w / total * answer(p) for w, p in zip(weights, self.hybrid.parts))

    def kv_held_tokens(self, context: Tokens) -> Tokens:
        return self._weighted(lambda p: p.kv_held_tokens(context))

    def resident_tokens(self, tokens: float):
        return self._weighted(lambda p: p.resident_tokens(tokens))

    def kv_read_tokens(self, context: Tokens) -> Tokens:
        return self._weighted(lambda p: p.kv_read_tokens(context))

    def _ranked_parts(self) -> Hybrid:
        """The hybrid of its parts' own per-rank views, for the FLOPs a rank does (a DSA indexer's, whole)."""
        return Hybrid(parts=tuple(at_ranks(p, self.tensor_parallel) for p in self.hybrid.parts))

    def attended_positions(self, context: Tokens) -> Tokens:
        return self._ranked_parts().attended_positions(context)

    def causal_pairs(self, tokens: Tokens) -> Tokens:
        return self._ranked_parts().causal_pairs(tokens)

    def bidirectional_pairs(self, tokens: Tokens) -> Tokens:
        return self._ranked_parts().bidirectional_pairs(tokens)


def at_ranks(attention, tensor_parallel):
    """The attention whose answers are per TP rank: a hybrid's rank-weighted view (RankWeighted), a type with
    work every rank does whole its own view (SparseTopK's indexer), any other type itself (its parts all split
    alike)."""
    ranked = getattr(attention, "at_ranks", None)
    return ranked(tensor_parallel) if ranked is not None else attention
