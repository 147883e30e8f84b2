"""Multi-head, grouped-query and multi-query attention (docs/planner_math.md#attention-types).

MHA (Vaswani et al. 2017) has one K/V head per query head, MQA (Shazeer 2019) one K/V head
in all, GQA (Ainslie et al., EMNLP 2023) groups of query heads sharing one: all three are
this object with a different `num_kv_heads`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import FullContext


@dataclass(frozen=True, kw_only=True)
class FullAttention(FullContext):
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int

    @property
    def name(self) -> str:
        if self.num_kv_heads == self.num_heads:
            return "mha"
        return "mqa" if self.num_kv_heads == 1 else "gqa"

    @property
    def kv_elements_per_token(self) -> float:
        """K and V for every layer: 2*L*H_kv*d_h (vLLM, Kwon et al. SOSP 2023, sec. 3)."""
        return float(2 * self.num_layers * self.num_kv_heads * self.head_dim)

    @property
    def decode_flops_per_position(self) -> float:
        """4*L*H*d_h per (query, key) pair: QK^T and AV, 2 FLOPs per multiply-add each
        (LLM-Viewer `model_analyzer.py`)."""
        return 4.0 * self.num_layers * self.num_heads * self.head_dim

    @property
    def prefill_flops_per_pair(self) -> float:
        return 4.0 * self.num_layers * self.num_heads * self.head_dim

    def kv_share_per_chip(self, tensor_parallel: np.ndarray) -> np.ndarray:
        """max(H_kv/tp, 1)/H_kv: KV heads split over TP ranks, replicated once tp > H_kv
        (llm-analysis `analysis.py`)."""
        return np.maximum(self.num_kv_heads / tensor_parallel, 1.0) / self.num_kv_heads
