"""One policy per chip kind. Adding a kind is one module here with its POLICY, a line in
POLICIES and the kind's name in units.CHIP_KINDS (docs/architecture.md, "Adding a chip kind")."""

from __future__ import annotations

from ..specs import ChipSpec
from . import cpu, gpu, lpu, other, tpu
from .base import ChipPolicy

POLICIES: dict[str, ChipPolicy] = {p.kind: p for p in (cpu.POLICY, gpu.POLICY, tpu.POLICY, lpu.POLICY, other.POLICY)}


def policy_for(chip: ChipSpec) -> ChipPolicy:
    return POLICIES[chip.kind]


__all__ = ["POLICIES", "ChipPolicy", "policy_for"]
