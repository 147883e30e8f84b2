"""One configuration in, one friendly Estimate out: a 1-element grid through the
same vectorised path as the search, so the two can never disagree."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, make_dataclass

import numpy as np

from . import reasons
from .cost import (
    HOURS_PER_MONTH, billed_chips, cost_split_usd_per_chip_hour, offering_usd_per_chip_hour, ownership, usd_per_million_input_tokens,
    usd_per_million_tokens,
)
from .dtypes import default_kv_dtype
from .efficiency import Calibration, Override
from .evaluate import evaluate
from .fields import COST_FIELDS, ESTIMATE_FIELDS, MEMORY_FIELDS, PHASE_FIELDS
from .forward import BOUND_NAMES
from .grid import CandidateGrid
from .results import PhaseArrays, Results
from .deployment import Deployment
from .specs import ModelSpec, OfferingSpec, Workload
from .units import DTYPE_CODE, DTYPES


_PY_TYPES = {"float": float, "int": int, "str": str, "bool": bool, "list": tuple[str, ...], "object": dict}


def _declared(name: str, declarations, *, extra=(), namespace=None) -> type:
    """A keyword-only frozen dataclass whose fields are the declarations (fields.py), in order."""
    columns = [(f.name, _PY_TYPES[f.kind] | None if f.nullable else _PY_TYPES[f.kind]) for f in declarations]
    cls = make_dataclass(name, [*columns, *extra], frozen=True, kw_only=True, namespace=namespace or {})
    cls.__module__ = __name__
    return cls


def _phase_from_arrays(cls, phase: PhaseArrays, i: int):
    values = {f.name: float(getattr(phase, f.name)[i]) for f in PHASE_FIELDS if f.name != "bound"}
    return cls(**values, bound=BOUND_NAMES[int(phase.bound[i])])


PhaseBreakdown = _declared("PhaseBreakdown", PHASE_FIELDS, namespace={"from_arrays": classmethod(_phase_from_arrays)})
PhaseBreakdown.__doc__ = "One phase's forward (prefill, or the representative decode step), per chip."
MemoryBreakdown = _declared("MemoryBreakdown", MEMORY_FIELDS)
MemoryBreakdown.__doc__ = "Memory per chip at this candidate's batch; max_concurrency over all replicas."
CostBreakdown = _declared("CostBreakdown", COST_FIELDS)
CostBreakdown.__doc__ = "One offering's price applied to the candidate's chip time and power draw."
Estimate = _declared(
    "Estimate", ESTIMATE_FIELDS,
    extra=[("prefill", PhaseBreakdown), ("decode", PhaseBreakdown), ("memory", MemoryBreakdown), ("cost", CostBreakdown | None)],
)  # fmt: skip
Estimate.__doc__ = "One evaluated configuration, as people and the API read it (fields: planner/engine/fields.py)."


def _value(kind: str, value):
    return int(value) if kind == "int" else float(value)


def estimate_from_results(results: Results, i: int, offering: OfferingSpec | None = None) -> Estimate:
    """Candidate i of a vectorised evaluation as an Estimate: every declared per-candidate
    field copied from its array, the rest read off the grid and the specs."""
    ctx, g = results.context, results.grid
    chip = ctx.chips[int(g.chip_index[i])]
    decoding = ctx.decodings[int(g.decoding_index[i])]
    compute_code = int(results.compute_dtype_code[i])
    arrays = results.arrays
    copied = {f.name: _value(f.kind, arrays[f.name][i]) for f in ESTIMATE_FIELDS if f.per_candidate}
    return Estimate(
        model_slug=ctx.model.slug,
        chip_slug=chip.slug,
        chip_count=int(g.chip_count[i]),
        tensor_parallel=int(g.tensor_parallel[i]),
        pipeline_parallel=int(g.pipeline_parallel[i]),
        attention_data_parallel=int(g.attention_data_parallel[i]),
        weight_dtype=DTYPES[int(g.weight_dtype[i])],
        kv_dtype=DTYPES[int(g.kv_dtype[i])],
        compute_dtype=DTYPES[compute_code] if compute_code >= 0 else None,
        batch=int(g.batch[i]),
        decoding=decoding.label,
        decoding_fields=dict(decoding.result_fields()),
        feasible=bool(results.feasible[i]),
        fits=bool(results.fits[i]),
        reasons=() if results.feasible[i] else (results.reason_text(i),),
        warnings=results.warnings(i),
        efficiency_source=results.efficiency_source(i),
        prefill=PhaseBreakdown.from_arrays(results.prefill, i),
        decode=PhaseBreakdown.from_arrays(results.decode, i),
        memory=MemoryBreakdown(**{f.name: _value(f.kind, arrays[f.name][i]) for f in MEMORY_FIELDS}),
        cost=_cost(results, i, chip.tdp_watts, offering),
        **copied,
    )


def _cost(results: Results, i: int, tdp_watts: float | None, offering: OfferingSpec | None) -> CostBreakdown | None:
    if offering is None:
        return None
    fraction = float(results.power_w_per_chip[i] / tdp_watts) if tdp_watts else 1.0
    hourly = offering_usd_per_chip_hour(offering, tdp_watts, fraction)
    chips = float(results.total_chips[i])
    billed = float(billed_chips(chips, offering.chips_per_unit))
    g = results.grid
    per_replica = g.tensor_parallel[i] * g.pipeline_parallel[i] * g.attention_data_parallel[i]
    batched_prefill_s = results.prefill_batched_s_per_prompt[i]
    usd_per_hour = billed * hourly
    return CostBreakdown(
        offering_slug=offering.slug,
        ownership=ownership(offering),
        usd_per_chip_hour=hourly,
        chips_per_unit=offering.chips_per_unit,
        billed_chips=int(billed),
        usd_per_hour=usd_per_hour,
        usd_per_month=usd_per_hour * HOURS_PER_MONTH,
        utilisation=(offering.utilisation or 1.0) if offering.owned else None,
        cost_split=cost_split_usd_per_chip_hour(offering, tdp_watts, fraction),
        usd_per_million_output_tokens=float(
            usd_per_million_tokens(np.array([billed]), hourly, results.served_output_tokens_per_s[i : i + 1])[0]
        ),
        usd_per_million_input_tokens=float(
            usd_per_million_input_tokens(per_replica, hourly * billed / chips, batched_prefill_s, results.context.workload.prompt_tokens)
        ),
    )


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """One evaluated deployment: candidate `index` of `results`.

    The evaluation does not depend on the offering (a price applies to its chip time and power draw), so
    one evaluation is priced under any number of offerings without running again."""

    results: Results
    index: int

    def estimate(self, offering: OfferingSpec | None = None) -> Estimate:
        return estimate_from_results(self.results, self.index, offering)

    def cost(self, offering: OfferingSpec) -> CostBreakdown:
        """The same CostBreakdown that estimate(offering=...) carries."""
        chip = self.results.context.chips[int(self.results.grid.chip_index[self.index])]
        return _cost(self.results, self.index, chip.tdp_watts, offering)


def together_extra_s(estimate_: Estimate, prompts: int) -> float:
    """What prefilling `prompts` prompts together on one replica adds over one prompt's prefill (the estimate's
    `prefill`): a static batch's prompts, or a prefill worker's batch, all wait for the whole of it. 0 for one prompt."""
    if prompts < 2:
        return 0.0
    return prompts * estimate_.prefill_batched_s_per_prompt - estimate_.prefill.time_s


def evaluate_batches(
    model: ModelSpec,
    deployment: Deployment,
    workload: Workload,
    batches,
    *,
    efficiency: Override | None = None,
    calibration: Calibration | None = None,
    disaggregated: bool = False,
) -> Results:
    """One deployment at each of `batches` (concurrent sequences): a grid that differs only in batch."""
    model = deployment.stored_model(model)
    n = len(batches)
    kv = deployment.kv_dtype or default_kv_dtype(deployment.weight_dtype, deployment.chip)
    grid = CandidateGrid(
        chip_index=np.zeros(n),
        chip_count=np.full(n, deployment.chip_count),
        tensor_parallel=np.full(n, deployment.tensor_parallel),
        pipeline_parallel=np.full(n, deployment.pipeline_parallel),
        weight_dtype=np.full(n, DTYPE_CODE[deployment.weight_dtype]),
        kv_dtype=np.full(n, DTYPE_CODE[kv]),
        batch=np.asarray(batches),
        decoding_index=np.zeros(n),
        attention_data_parallel=np.full(n, deployment.attention_data_parallel),
        expert_parallel=None if deployment.expert_parallel is None else np.full(n, deployment.expert_parallel),
    )
    return evaluate(model, (deployment.chip,), grid, workload, (deployment.decoding,),
                    efficiency=efficiency, calibration=calibration, disaggregated=disaggregated)  # fmt: skip


def evaluate_deployment(
    model: ModelSpec,
    deployment: Deployment,
    workload: Workload,
    *,
    batch: int | str | None = None,
    efficiency: Override | None = None,
    calibration: Calibration | None = None,
    disaggregated: bool = False,
) -> Evaluation:
    """Evaluate one deployment, unpriced; see estimate() for batch."""
    kwargs = dict(efficiency=efficiency, calibration=calibration, disaggregated=disaggregated)

    def run(batches) -> Results:
        return evaluate_batches(model, deployment, workload, batches, **kwargs)

    if batch == "max":
        results, i = max_throughput_point(run)
    else:
        results, i = run([int(batch or workload.concurrency or 1)]), 0
    return Evaluation(results=results, index=i)


def estimate(
    model: ModelSpec,
    deployment: Deployment,
    workload: Workload,
    *,
    batch: int | str | None = None,
    efficiency: Override | None = None,
    calibration: Calibration | None = None,
    offering: OfferingSpec | None = None,
    disaggregated: bool = False,
) -> Estimate:
    """Estimate one deployment. batch: an int, "max" (the largest batch that fits
    memory and meets the SLOs: the max-throughput point), or None (the
    workload's concurrency, else 1). To price several offerings, evaluate_deployment()
    once and call .cost(offering) for each."""
    evaluation = evaluate_deployment(
        model, deployment, workload, batch=batch, efficiency=efficiency, calibration=calibration, disaggregated=disaggregated
    )
    return evaluation.estimate(offering)


def estimate_admitting(model: ModelSpec, deployment: Deployment, workload: Workload, *, batch: int, **kwargs) -> Estimate:
    """estimate() at `batch`, or, where the KV cache holds fewer sequences, at what it holds: a
    continuous-batching engine admits that many and the rest wait for a slot (issue 11: admission,
    not refusal), said in a warning. Every other reason a configuration cannot run stands. A closed
    loop is admitted inside evaluate() already (evaluate.admitted_batch, its wait in TTFT); this serves a
    static batch, a measured max-throughput run that ran what memory held."""
    result = estimate(model, deployment, workload, batch=max(batch, 1), **kwargs)
    held = result.memory.max_concurrency
    if result.fits or held < 1 or held >= batch:
        return result
    admitted = estimate(model, deployment, workload, batch=held, **kwargs)
    note = f"the KV cache (or the serving engine's batch cap) holds {held} of the {batch} sequences asked for; the others wait for a slot"
    return dataclasses.replace(admitted, warnings=(*admitted.warnings, note))


# batch "max": batches tried per vectorised round of the TPOT search, and per window of the scan below it.
MAX_BATCH_SEARCH_POINTS = 64
MAX_BATCH_SCAN_WINDOW = 4096
MAX_BATCH_SCAN_LIMIT = 1 << 17  # batches scanned at most (about 0.6 s) before giving up on the checks that are not monotone


def max_throughput_point(run) -> tuple[Results, int]:
    """The largest batch that fits memory and meets both SLOs, exactly; batch 1 when none does.

    run(batches) evaluates one deployment at each batch. Memory holds at most max_concurrency sequences
    whatever the batch (the KV cache per sequence and the prefill workspace do not depend on it), and TPOT
    never falls as the batch grows (each step carries more sequences, and more of their prefills), so the
    batches that pass both are exactly 1..T, and T is found by a search over the integers. TTFT and the
    other load checks are not monotone in the batch: under a request rate TTFT falls as the batch grows
    (a bigger batch prefills each prompt in less time, so the queue is shorter) while the slots Little's law
    asks for cross the batch more than once; in a closed loop the first wave waits longer the bigger the
    batch but fewer clients wait for a slot. So below T every batch is evaluated, from T down, in windows,
    until one passes them all: the answer is exact for any TTFT curve (tests/planner/test_batch_max.py)."""
    first = run([1])
    if first.reason[0] != reasons.OK and first.reason[0] < reasons.KV_DOESNT_FIT:
        return first, 0  # cannot run at any batch (layout, dtype, weights, context)
    top = _largest_batch_within_memory_and_tpot(run, first)
    if top <= 1:
        return first, 0
    results = run([top])
    if results.feasible[0]:
        return results, 0
    high, window = top - 1, MAX_BATCH_SCAN_WINDOW
    while high >= 1 and top - high <= MAX_BATCH_SCAN_LIMIT:
        low = max(1, high - window + 1)
        results = run(np.arange(low, high + 1))
        ok = np.flatnonzero(results.feasible)
        if len(ok):
            return results, int(ok[-1])
        high, window = low - 1, window * 2
    return first, 0


def _largest_batch_within_memory_and_tpot(run, first: Results) -> int:
    """T: the largest batch the memory holds whose TPOT meets the SLO (0 when batch 1 misses it). Each
    round evaluates up to MAX_BATCH_SEARCH_POINTS batches spread over [low, high] and keeps the gap where
    the TPOT first misses."""
    limit = int(first.max_concurrency[0])
    workload = first.context.workload
    slo = workload.tpot_slo_s if workload.output_tokens > 1 else None  # a one-token answer has no TPOT to miss (evaluate._reasons)
    if limit < 1 or (slo is not None and first.tpot_s[0] > slo):
        return 0
    if slo is None:
        return limit
    low, high = 1, limit  # TPOT meets the SLO at low; T lies in [low, high]
    while low < high:
        points = np.unique(np.linspace(low + 1, high, min(MAX_BATCH_SEARCH_POINTS, high - low)).round().astype(int))
        meets = run(points).tpot_s <= slo
        if meets.all():
            return high
        miss = int(np.argmax(~meets))
        low, high = (int(points[miss - 1]) if miss else low), int(points[miss]) - 1
    return low
