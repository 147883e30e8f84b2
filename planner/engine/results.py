"""Results of a vectorised evaluation: a struct of arrays, one entry per candidate."""

from __future__ import annotations

from functools import cached_property

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from . import reasons
from .chips import policy_for
from .decoding import Decoding
from .dtypes import ComputeTable
from .efficiency import EfficiencyTable
from .forward import BOUND_NAMES, PhaseCost
from .grid import CandidateGrid
from .specs import ChipSpec, ModelSpec, Workload
from .units import DTYPE_BYTES, DTYPES


@dataclass(frozen=True, kw_only=True)
class PhaseArrays:
    flops_per_chip: np.ndarray
    bytes_per_chip: np.ndarray
    compute_s: np.ndarray
    memory_s: np.ndarray
    comm_s: np.ndarray
    overhead_s: np.ndarray
    time_s: np.ndarray
    intensity_flop_per_byte: np.ndarray
    ridge_flop_per_byte: np.ndarray  # peak / BW of the chip's compute dtype
    bound: np.ndarray  # index into BOUND_NAMES

    @classmethod
    def from_cost(cls, cost: PhaseCost, ridge: np.ndarray) -> PhaseArrays:
        return cls(
            flops_per_chip=cost.flops_per_chip,
            bytes_per_chip=cost.bytes_per_chip,
            compute_s=cost.compute_s,
            memory_s=cost.memory_s,
            comm_s=cost.comm_s,
            overhead_s=cost.overhead_s,
            time_s=cost.time_s,
            intensity_flop_per_byte=cost.intensity_flop_per_byte,
            ridge_flop_per_byte=ridge,
            bound=cost.bound,
        )

    def take(self, index: np.ndarray) -> PhaseArrays:
        return PhaseArrays(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def bound_names(self) -> list[str]:
        return [BOUND_NAMES[i] for i in self.bound]


@dataclass(frozen=True, kw_only=True)
class EvaluationContext:
    """What the arrays refer to: needed to turn codes back into words."""

    model: ModelSpec
    chips: tuple[ChipSpec, ...]
    workload: Workload
    decodings: tuple[Decoding, ...]
    compute: ComputeTable
    efficiency: EfficiencyTable
    disaggregated: bool


@dataclass(frozen=True, kw_only=True)
class Results:
    context: EvaluationContext
    grid: CandidateGrid
    prefill: PhaseArrays
    decode: PhaseArrays
    reason: np.ndarray
    replicas: np.ndarray
    batch_per_replica: np.ndarray
    compute_dtype: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray  # as users see it, incl. interleaved prefills (colocated)
    tokens_per_s_per_user: np.ndarray
    output_tokens_per_s_total: np.ndarray
    decode_token_time_s: np.ndarray  # decoding alone, per output token per sequence
    ar_tpot_s: np.ndarray  # the same deployment decoding autoregressively
    speedup_vs_ar: np.ndarray
    prefill_s: np.ndarray  # one prompt alone (the TTFT part)
    prefill_batched_s_per_prompt: np.ndarray  # prefilling b prompts together, per prompt
    prefill_tokens: np.ndarray  # after TPU bucket padding
    prefill_padded_tokens: np.ndarray
    queue_wait_s: np.ndarray
    prefill_utilisation: np.ndarray
    concurrency_needed: np.ndarray
    prefill_chips: np.ndarray
    total_chips: np.ndarray
    weights_bytes_per_chip: np.ndarray
    kv_bytes_per_chip: np.ndarray
    kv_bytes_per_sequence_per_chip: np.ndarray
    activation_bytes_per_chip: np.ndarray
    usable_bytes_per_chip: np.ndarray
    max_concurrency: np.ndarray  # all replicas
    tokens_per_step: np.ndarray
    mfu: np.ndarray
    mbu: np.ndarray
    power_w_per_chip: np.ndarray
    energy_per_output_token_j: np.ndarray
    energy_per_output_token_upper_j: np.ndarray  # at TDP: an upper bound

    def __len__(self) -> int:
        return len(self.reason)

    # Cached: estimate_from_results reads them once per row of a ranked list.
    @cached_property
    def feasible(self) -> np.ndarray:
        """Runs and meets every target of the workload."""
        return self.reason == reasons.OK

    @cached_property
    def fits(self) -> np.ndarray:
        """Runs at all (it may still miss an SLO)."""
        return (self.reason == reasons.OK) | (self.reason >= reasons.SLO_CODES_START)

    def take(self, index: np.ndarray) -> Results:
        arrays = {name: getattr(self, name)[index] for name in _ARRAY_FIELDS}
        return Results(context=self.context, grid=self.grid.take(index), prefill=self.prefill.take(index), decode=self.decode.take(index),
                       **arrays)  # fmt: skip

    def reason_facts(self, i: int) -> reasons.ReasonFacts:
        ctx, g = self.context, self.grid
        chip = ctx.chips[g.chip_index[i]]
        model, workload = ctx.model, ctx.workload
        dtype = DTYPES[g.weight_dtype[i]]
        return reasons.ReasonFacts(
            model_slug=model.slug,
            chip_slug=chip.slug,
            weight_dtype=dtype,
            chip_count=int(g.chip_count[i]),
            tensor_parallel=int(g.tensor_parallel[i]),
            pipeline_parallel=int(g.pipeline_parallel[i]),
            num_attention_heads=model.num_attention_heads,
            weights_total_bytes=model.total_params * DTYPE_BYTES[dtype],
            weights_per_chip_bytes=float(self.weights_bytes_per_chip[i]),
            chip_memory_bytes=float(policy_for(chip).weight_home_bytes(chip)),
            usable_bytes=float(self.usable_bytes_per_chip[i]),
            batch=int(g.batch[i]),
            max_concurrency=int(self.max_concurrency[i]),
            context_tokens=workload.context_tokens,
            max_context_tokens=model.max_context_tokens,
            ttft_s=float(self.ttft_s[i]),
            tpot_s=float(self.tpot_s[i]),
            ttft_slo_s=workload.ttft_slo_s,
            tpot_slo_s=workload.tpot_slo_s,
            request_rate_per_s=workload.request_rate_per_s,
            concurrency_needed=float(self.concurrency_needed[i]),
            node_size=chip.node_size,
            num_layers=model.num_layers,
        )

    def reason_text(self, i: int) -> str:
        return reasons.reason_text(int(self.reason[i]), self.reason_facts(i))

    def warnings(self, i: int) -> tuple[str, ...]:
        """Fallbacks and assumptions behind candidate i, in words."""
        ctx, g = self.context, self.grid
        chip_i, w = int(g.chip_index[i]), int(g.weight_dtype[i])
        out: list[str] = []
        fallback = ctx.compute.warnings[chip_i][w]
        if fallback:
            out.append(fallback)
        decoding = ctx.decodings[int(g.decoding_index[i])]
        out.extend(decoding.warnings(lambda dtype: ctx.compute.warnings[chip_i][DTYPES.index(dtype)]))
        if self.prefill_padded_tokens[i] > 0:
            out.append(
                f"{ctx.chips[chip_i].slug} pads the {ctx.workload.prompt_tokens}-token prompt to a "
                f"{int(self.prefill_tokens[i])}-token bucket; the {int(self.prefill_padded_tokens[i])} padded tokens cost prefill compute"
            )
        out.extend(policy_for(ctx.chips[chip_i]).notes(ctx.chips[chip_i]))
        return tuple(out)

    def efficiency_source(self, i: int) -> str:
        return self.context.efficiency.sources[int(self.grid.chip_index[i])][int(self.grid.weight_dtype[i])]


# Every per-candidate array of Results, from its declaration above (one place to add a metric).
_ARRAY_FIELDS = tuple(f.name for f in fields(Results) if f.name not in ("context", "grid", "prefill", "decode"))


def results_from_arrays(
    context: EvaluationContext, grid: CandidateGrid, prefill: PhaseArrays, decode: PhaseArrays, arrays: dict[str, np.ndarray]
) -> Results:
    missing = set(_ARRAY_FIELDS) - set(arrays)
    if missing:
        raise ValueError(f"missing result arrays: {sorted(missing)}")
    return Results(context=context, grid=grid, prefill=prefill, decode=decode, **{name: arrays[name] for name in _ARRAY_FIELDS})


def group_reasons(results: Results, codes: Sequence[int] | None = None) -> dict[int, np.ndarray]:
    """Candidate indices per reason code (excluding OK)."""
    present = np.unique(results.reason) if codes is None else np.asarray(codes)
    return {int(c): np.flatnonzero(results.reason == c) for c in present if c != reasons.OK}


def concatenate_results(parts: Sequence[Results], grid: CandidateGrid) -> Results:
    """Join results evaluated on consecutive slices of `grid`."""
    def join(objects, cls):
        return cls(**{f.name: np.concatenate([getattr(o, f.name) for o in objects]) for f in fields(cls)})

    arrays = {name: np.concatenate([getattr(p, name) for p in parts]) for name in _ARRAY_FIELDS}
    prefill = join([p.prefill for p in parts], PhaseArrays)
    decode = join([p.decode for p in parts], PhaseArrays)
    return Results(context=parts[0].context, grid=grid, prefill=prefill, decode=decode, **arrays)
