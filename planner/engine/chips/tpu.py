"""TPUs: XLA-compiled static graphs; prompts padded to power-of-two prefill buckets."""

from __future__ import annotations

from dataclasses import dataclass

from ..efficiency import Efficiency
from ..units import TPU_MIN_PREFILL_BUCKET_TOKENS, next_power_of_two
from .base import ChipPolicy

# XLA-compiled static graphs keep launch overhead small; bandwidth as on GPUs.
# Assumption pending calibration (JetStream publishes no MBU figure).
TPU = Efficiency(
    compute_fraction=0.6, bandwidth_fraction=0.75, step_overhead_s=2e-4, link_bandwidth_fraction=0.8,
    collective_overhead_s=5e-6, prefill_layer_overhead_s=30e-6,
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class TpuPolicy(ChipPolicy):
    def prefill_tokens(self, prompt_tokens: int) -> float:
        """JetStream/MaxText pad a prompt up to a power-of-two prefill bucket (16 at least)."""
        if prompt_tokens <= 0:
            return 0.0
        return max(float(next_power_of_two(prompt_tokens)), TPU_MIN_PREFILL_BUCKET_TOKENS)


POLICY = TpuPolicy(kind="tpu", efficiency=TPU)
