"""Multi-head latent attention, MLA (DeepSeek-V2, arXiv:2405.04434, sec. 2.1).

The cache holds one compressed latent of kv_lora_rank elements plus the decoupled RoPE key
per token and layer (Table 1: 576 elements per layer at DeepSeek-V3's sizes). Decode runs
with the up-projections absorbed, in the latent space; prefill runs un-absorbed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import FullContext


@dataclass(frozen=True, kw_only=True)
class LatentAttention(FullContext):
    num_layers: int
    num_heads: int
    head_dim: int  # the un-absorbed q/k head width used by prefill
    kv_lora_rank: int
    qk_rope_head_dim: int

    name = "mla"

    @property
    def kv_elements_per_token(self) -> float:
        return float(self.num_layers * (self.kv_lora_rank + self.qk_rope_head_dim))

    @property
    def decode_flops_per_position(self) -> float:
        """2*L*H*(2*kv_lora_rank + qk_rope_head_dim): scores over the latent plus RoPE key,
        values from the latent (DeepSeek-V2 sec. 2.1.2 and appendix C)."""
        return 2.0 * self.num_layers * self.num_heads * (2 * self.kv_lora_rank + self.qk_rope_head_dim)

    @property
    def prefill_flops_per_pair(self) -> float:
        return 4.0 * self.num_layers * self.num_heads * self.head_dim

    def kv_share_per_chip(self, tensor_parallel: np.ndarray) -> np.ndarray:
        """The latent is not split by heads: every TP rank holds all of it."""
        return np.ones(np.shape(tensor_parallel))
