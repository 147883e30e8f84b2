"""One configuration: what `estimate` evaluates."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from hwcatalog.architecture import FORMAT_DTYPE

from .decoding import Autoregressive, Decoding
from .specs import ChipSpec, ModelSpec


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
    # The format the weights are stored in (architecture.WEIGHT_FORMAT_BITS), one of weight_dtype's: GGUF
    # q4_k_m for llama.cpp's int4, say; None: the model's checkpoint format of that dtype, else the dtype's
    # default (ModelSpec.weight_layout).
    weight_format: str | None = None
    kv_dtype: str | None = None  # None: default_kv_dtype()
    decoding: Decoding = field(default_factory=Autoregressive)

    def __post_init__(self) -> None:
        if self.weight_format is None:
            return
        if self.weight_format not in FORMAT_DTYPE:
            raise ValueError(f"weight_format {self.weight_format!r} is not one of {', '.join(FORMAT_DTYPE)}")
        if FORMAT_DTYPE[self.weight_format] != self.weight_dtype:
            raise ValueError(f"weight_format {self.weight_format} stores {FORMAT_DTYPE[self.weight_format]} weights, not {self.weight_dtype}")

    def stored_model(self, model: ModelSpec) -> ModelSpec:
        """The model as this deployment stores its weights: in weight_format where one is given."""
        return model if self.weight_format is None else dataclasses.replace(model, checkpoint_format=self.weight_format)

    @property
    def replicas(self) -> int:
        return max(self.chip_count // (self.tensor_parallel * self.pipeline_parallel * self.attention_data_parallel), 1)
