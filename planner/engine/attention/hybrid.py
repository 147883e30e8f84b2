"""A model whose layer groups use different attention types: gpt-oss (alternating sliding
window and full layers), Gemma 3 (5 local : 1 global), Qwen3-Next and Nemotron-H (linear or
Mamba layers with a few full-attention layers). Each part covers its own layers.

The engine counts in "tokens' worth of the whole model's cache", so each answer is the
parts' answers weighted by their share of the elements (bytes) or of the FLOPs per pair.
Bytes per rank multiply two such averages (tokens held, share per TP rank), which is exact
when the parts split over TP ranks alike (the usual case: all GQA, or GQA with linear
layers at tp <= H_kv) and an approximation otherwise.
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
