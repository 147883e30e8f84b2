"""Decoding methods: one object per method behind the protocol in base.py, registered once
by name in registry.py. Adding a method is one module here, imported below, plus its tests
(docs/architecture.md, "Adding a decoding method")."""

from __future__ import annotations

from typing import Union

from .acceptance import acceptance_rate_from_mean_accepted, expected_tokens_per_step, speculative_speedup
from .autoregressive import Autoregressive
from .base import DecodeInputs, DecodeOutcome, DecodingMethod, ResidentModel, Resolvers
from .block_diffusion import (
    BlockDiffusion, BlockForwards, blocks_computed, blocks_saved_by_early_stop, focus_flop_scale, forwards_per_generation,
)  # fmt: skip
from .diffusion import Diffusion, diffusion_windows
from .draft_heads import DraftHeads
from .registry import METHODS, decoding_from_params, method_class, method_names
from .speculative import Speculative

Decoding = Union[Autoregressive, Speculative, DraftHeads, Diffusion, BlockDiffusion]

__all__ = [
    "METHODS", "Autoregressive", "BlockDiffusion", "BlockForwards", "DecodeInputs", "DecodeOutcome", "Decoding", "DecodingMethod",
    "Diffusion", "DraftHeads", "ResidentModel", "Resolvers", "Speculative", "acceptance_rate_from_mean_accepted", "blocks_computed",
    "blocks_saved_by_early_stop", "decoding_from_params", "diffusion_windows", "expected_tokens_per_step", "focus_flop_scale",
    "forwards_per_generation", "method_class", "method_names", "speculative_speedup",
]  # fmt: skip
