"""Results of a vectorised evaluation: a struct of arrays, one entry per candidate."""

from __future__ import annotations

from functools import cached_property

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np

from . import reasons
from .chips import policy_for
from .decoding import Decoding
from .dtypes import ComputeTable, vector_units_warning
from .efficiency import EfficiencyTable
from .fields import ARRAY_FIELDS
from .forward import BOUND_NAMES, PhaseCost
from .grid import CandidateGrid
from .specs import ChipSpec, ModelSpec, Workload
from .units import DTYPES


@dataclass(frozen=True, kw_only=True)
class PhaseArrays:
    flops_per_chip: np.ndarray
    bytes_per_chip: np.ndarray
    compute_s: np.ndarray
    memory_s: np.ndarray
    expert_compute_s: np.ndarray
    comm_s: np.ndarray
    overhead_s: np.ndarray
    time_s: np.ndarray
    intensity_flop_per_byte: np.ndarray
    ridge_flop_per_byte: np.ndarray  # peak / BW of the chip's compute dtype (datasheet; on a CPU, the engine's math units')
    effective_ridge_flop_per_byte: np.ndarray  # eta_c*peak / (eta_m*BW): where the phase times cross
    bound: np.ndarray  # index into BOUND_NAMES

    @classmethod
    def from_cost(cls, cost: PhaseCost, ridge: np.ndarray, effective_ridge: np.ndarray) -> PhaseArrays:
        return cls(
            flops_per_chip=cost.flops_per_chip,
            bytes_per_chip=cost.bytes_per_chip,
            compute_s=cost.compute_s,
            memory_s=cost.memory_s,
            expert_compute_s=cost.expert_compute_s,
            comm_s=cost.comm_s,
            overhead_s=cost.overhead_s,
            time_s=cost.time_s,
            intensity_flop_per_byte=cost.intensity_flop_per_byte,
            ridge_flop_per_byte=ridge,
            effective_ridge_flop_per_byte=effective_ridge,
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
    """One array per candidate for every per-candidate field of fields.RESULT_FIELDS,
    read as attributes (`results.tpot_s`), plus the two phase breakdowns."""

    context: EvaluationContext
    grid: CandidateGrid
    prefill: PhaseArrays
    decode: PhaseArrays
    arrays: Mapping[str, np.ndarray]

    def __post_init__(self) -> None:
        missing, extra = set(ARRAY_FIELDS) - set(self.arrays), set(self.arrays) - set(ARRAY_FIELDS)
        if missing or extra:
            raise ValueError(f"result arrays: missing {sorted(missing)}, undeclared {sorted(extra)} (planner/engine/fields.py)")

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("arrays")
        if arrays is not None and name in arrays:
            return arrays[name]
        raise AttributeError(f"{type(self).__name__} has no field {name!r}")

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
        return Results(context=self.context, grid=self.grid.take(index), prefill=self.prefill.take(index), decode=self.decode.take(index),
                       arrays={name: values[index] for name, values in self.arrays.items()})  # fmt: skip

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
            attention_data_parallel=int(g.attention_data_parallel[i]),
            num_attention_heads=model.num_attention_heads,
            weights_total_bytes=model.weight_bytes(dtype),
            resident_weights_bytes=float(self.resident_weights_bytes[i]),
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
            closed_loop=workload.looped,
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
        expert_peak = float(ctx.compute.expert_peak_flops_per_s[chip_i, w])
        if ctx.model.is_moe and expert_peak < float(ctx.compute.peak_flops_per_s[chip_i, w]):
            chip, compute_dtype = ctx.chips[chip_i], DTYPES[int(ctx.compute.compute_code[chip_i, w])]
            if said := vector_units_warning(chip, compute_dtype, DTYPES[w], expert_peak, experts=True):
                out.append(said)
        decoding = ctx.decodings[int(g.decoding_index[i])]
        out.extend(decoding.warnings(lambda dtype: ctx.compute.warnings[chip_i][DTYPES.index(dtype)]))
        if self.prefill_padded_tokens[i] > 0:
            out.append(
                f"{ctx.chips[chip_i].slug} pads the {ctx.workload.prompt_tokens}-token prompt to a "
                f"{int(self.prefill_tokens[i])}-token bucket; the {int(self.prefill_padded_tokens[i])} padded tokens cost prefill compute"
            )
        out.extend(policy_for(ctx.chips[chip_i]).notes(ctx.chips[chip_i]))
        if said := self.admission_note(i):
            out.append(said)
        return tuple(out)

    def admission_note(self, i: int) -> str | None:
        """A closed loop with more clients than candidate i runs at once (evaluate.admitted_batch): who waits."""
        workload, batch = self.context.workload, int(self.grid.batch[i])
        if not workload.looped or batch >= workload.concurrency:
            return None
        why = ("all the KV cache (or the serving engine's batch cap) holds" if batch >= self.max_concurrency[i]
               else "the batch given")  # fmt: skip
        return (f"runs {batch} of the {workload.concurrency} clients' requests at once ({why}); the other "
                f"{workload.concurrency - batch} wait for a slot, and the TTFT includes that wait")

    def efficiency_source(self, i: int) -> str:
        return self.context.efficiency.sources[int(self.grid.chip_index[i])][int(self.grid.weight_dtype[i])]


def results_from_arrays(
    context: EvaluationContext, grid: CandidateGrid, prefill: PhaseArrays, decode: PhaseArrays, arrays: dict[str, np.ndarray]
) -> Results:
    return Results(context=context, grid=grid, prefill=prefill, decode=decode, arrays=dict(arrays))


def group_reasons(results: Results, codes: Sequence[int] | None = None) -> dict[int, np.ndarray]:
    """Candidate indices per reason code (excluding OK)."""
    present = np.unique(results.reason) if codes is None else np.asarray(codes)
    return {int(c): np.flatnonzero(results.reason == c) for c in present if c != reasons.OK}


def concatenate_results(parts: Sequence[Results], grid: CandidateGrid) -> Results:
    """Join results evaluated on consecutive slices of `grid`."""
    def join(objects, cls):
        return cls(**{f.name: np.concatenate([getattr(o, f.name) for o in objects]) for f in fields(cls)})

    arrays = {name: np.concatenate([p.arrays[name] for p in parts]) for name in ARRAY_FIELDS}
    prefill = join([p.prefill for p in parts], PhaseArrays)
    decode = join([p.decode for p in parts], PhaseArrays)
    return Results(context=parts[0].context, grid=grid, prefill=prefill, decode=decode, arrays=arrays)
