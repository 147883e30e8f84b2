"""The one protocol every decoding method answers (docs/planner_math.md#decoding-methods).

A method turns one replica's hardware arrays into a DecodeOutcome: the cost per emitted
token (as a sequence of forwards costed by forward.forward_cost), what each sequence keeps
resident, any model held beside the target's weights, and the facts it reports. Methods
register once (registry.py) under the name the API, the CSV and the UI use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from ..dtypes import ComputeTable
from ..forward import PhaseCost
from ..grid import CandidateGrid
from ..hardware import CandidateHardware
from ..memory import SequenceFootprint
from ..specs import ModelSpec, Workload


@dataclass(frozen=True, kw_only=True)
class DecodeInputs:
    """Everything a method may read, for one block of candidates."""

    model: ModelSpec
    hw: CandidateHardware
    workload: Workload
    grid: CandidateGrid
    compute: ComputeTable


@dataclass(frozen=True, kw_only=True)
class ResidentModel:
    """A model held in memory beside the target (a draft model, draft heads), sharded like it."""

    model: ModelSpec
    weight_bytes_per_param: np.ndarray
    resident_params: float | None = None  # None: model.total_params (heads share the target's LM head)
    keeps_cache: bool = True

    @property
    def params(self) -> float:
        return self.model.total_params if self.resident_params is None else self.resident_params


@dataclass(frozen=True, kw_only=True)
class DecodeOutcome:
    step: PhaseCost  # the representative forward, reported as the decode phase
    token_time_s: np.ndarray  # steady state, per output token per sequence, no prefill
    first_token_extra_s: np.ndarray  # after the prefill, until the first token is out
    achieved_flops_per_s_per_chip: np.ndarray
    achieved_bytes_per_s_per_chip: np.ndarray
    needs_prefill: bool  # False for masked diffusion: the prompt rides in every step
    tokens_per_step: float  # tokens committed per (target) forward
    delivered_tokens: float
    footprint: SequenceFootprint
    resident: tuple[ResidentModel, ...] = ()
    no_math_path: np.ndarray | None = None  # bool per candidate: a resident model has no math path
    # After the first token, per output token per sequence, where a user sees other than token_time_s (block diffusion:
    # the first block is in first_token_extra_s, so the rest of the answer streams in the other blocks' time); None: token_time_s
    streamed_token_time_s: np.ndarray | None = None

    def take(self, index) -> DecodeOutcome:
        return DecodeOutcome(
            step=self.step.take(index), token_time_s=self.token_time_s[index], first_token_extra_s=self.first_token_extra_s[index],
            achieved_flops_per_s_per_chip=self.achieved_flops_per_s_per_chip[index],
            achieved_bytes_per_s_per_chip=self.achieved_bytes_per_s_per_chip[index], needs_prefill=self.needs_prefill,
            tokens_per_step=self.tokens_per_step, delivered_tokens=self.delivered_tokens, footprint=self.footprint,
            resident=self.resident, no_math_path=None if self.no_math_path is None else self.no_math_path[index],
            streamed_token_time_s=None if self.streamed_token_time_s is None else self.streamed_token_time_s[index],
        )  # fmt: skip


ComputeWarning = Callable[[str], "str | None"]  # weight dtype -> the chip's fallback warning for it


@runtime_checkable
class DecodingMethod(Protocol):
    method: ClassVar[str]  # the registry name: "ar", "speculative", ...
    # True only for the autoregressive reference, which evaluate() computes once for every
    # candidate (speedup_vs_ar needs it) and reuses instead of evaluating it twice.
    is_reference: ClassVar[bool]

    @property
    def label(self) -> str: ...

    def decode(self, inputs: DecodeInputs) -> DecodeOutcome: ...

    def warnings(self, compute_warning: ComputeWarning) -> tuple[str, ...]: ...

    def result_fields(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True, kw_only=True)
class Resolvers:
    """What from_params may need from the caller: catalog look-ups and the workload."""

    model: ModelSpec | None = None  # the target
    output_tokens: int | None = None
    resolve_model: Callable[[Any], ModelSpec] | None = None  # a slug or a row -> ModelSpec


def achieved(cost: PhaseCost) -> tuple[np.ndarray, np.ndarray]:
    """Achieved FLOP/s and bytes/s per chip of one forward."""
    return cost.flops_per_chip / cost.time_s, cost.bytes_per_chip / cost.time_s
