"""One configuration: what `estimate` evaluates."""

from __future__ import annotations

from dataclasses import dataclass, field

from .decoding import Autoregressive, Decoding
from .specs import ChipSpec


@dataclass(frozen=True, kw_only=True)
class Deployment:
    chip: ChipSpec
    chip_count: int = 1
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    # Attention replicas inside a replica, each with its own KV cache, sharing experts spread
    # over all of them (expert parallelism): chips per replica = tp x pp x attention_data_parallel.
    attention_data_parallel: int = 1
    # Ranks that hold whole experts (expert parallelism; grid.CandidateGrid); None: tp x attention DP
    # where attention DP is on, else 1.
    expert_parallel: int | None = None
    weight_dtype: str = "bf16"
    kv_dtype: str | None = None  # None: default_kv_dtype()
    decoding: Decoding = field(default_factory=Autoregressive)

    @property
    def replicas(self) -> int:
        return max(self.chip_count // (self.tensor_parallel * self.pipeline_parallel * self.attention_data_parallel), 1)
