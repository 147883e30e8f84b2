"""One configuration in, one friendly Estimate out: a 1-element grid through the
same vectorised path as the search, so the two can never disagree."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cost import offering_usd_per_chip_hour, usd_per_million_input_tokens, usd_per_million_tokens
from .dtypes import default_kv_dtype
from .efficiency import Calibration, Efficiency
from .evaluate import evaluate
from .forward import BOUND_NAMES
from .grid import CandidateGrid
from .results import PhaseArrays, Results
from .deployment import Deployment
from .specs import ModelSpec, OfferingSpec, Workload
from .units import DTYPE_CODE, DTYPES


@dataclass(frozen=True, kw_only=True)
class PhaseBreakdown:
    flops_per_chip: float
    bytes_per_chip: float
    compute_s: float
    memory_s: float
    comm_s: float
    overhead_s: float
    time_s: float
    intensity_flop_per_byte: float
    ridge_flop_per_byte: float
    bound: str  # compute | memory | interconnect

    @classmethod
    def from_arrays(cls, phase: PhaseArrays, i: int) -> PhaseBreakdown:
        values = {k: float(getattr(phase, k)[i]) for k in cls.__dataclass_fields__ if k != "bound"}
        return cls(**values, bound=BOUND_NAMES[int(phase.bound[i])])


@dataclass(frozen=True, kw_only=True)
class MemoryBreakdown:
    weights_bytes_per_chip: float
    kv_bytes_per_chip: float
    kv_bytes_per_sequence_per_chip: float
    activation_bytes_per_chip: float
    usable_bytes_per_chip: float
    max_concurrency: int  # all replicas


@dataclass(frozen=True, kw_only=True)
class CostBreakdown:
    offering_slug: str
    usd_per_chip_hour: float
    usd_per_million_output_tokens: float
    usd_per_million_input_tokens: float


@dataclass(frozen=True, kw_only=True)
class Estimate:
    model_slug: str
    chip_slug: str
    chip_count: int
    tensor_parallel: int
    pipeline_parallel: int
    replicas: int
    total_chips: int  # incl. a disaggregated prefill pool
    weight_dtype: str
    kv_dtype: str
    compute_dtype: str | None
    batch: int
    decoding: str
    feasible: bool  # runs and meets the workload's targets
    fits: bool  # runs at all
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    efficiency_source: str
    ttft_s: float
    tpot_s: float
    tokens_per_s_per_user: float
    output_tokens_per_s_total: float
    decode_token_time_s: float
    ar_tpot_s: float
    speedup_vs_ar: float
    tokens_per_step: float
    prefill_tokens: int
    prefill_padded_tokens: int
    queue_wait_s: float
    prefill: PhaseBreakdown
    decode: PhaseBreakdown
    memory: MemoryBreakdown
    mfu: float
    mbu: float
    power_w_per_chip: float
    energy_per_output_token_j: float
    energy_per_output_token_upper_j: float  # at TDP: an upper bound
    cost: CostBreakdown | None


def estimate_from_results(results: Results, i: int, offering: OfferingSpec | None = None) -> Estimate:
    """Candidate i of a vectorised evaluation as an Estimate."""
    ctx, g = results.context, results.grid
    chip = ctx.chips[int(g.chip_index[i])]
    f = {name: float(getattr(results, name)[i]) for name in (
        "ttft_s", "tpot_s", "tokens_per_s_per_user", "output_tokens_per_s_total", "decode_token_time_s", "ar_tpot_s",
        "speedup_vs_ar", "tokens_per_step", "queue_wait_s", "mfu", "mbu", "power_w_per_chip", "energy_per_output_token_j",
        "energy_per_output_token_upper_j",
    )}  # fmt: skip
    compute_code = int(results.compute_dtype[i])
    reasons = () if results.feasible[i] else (results.reason_text(i),)
    return Estimate(
        model_slug=ctx.model.slug,
        chip_slug=chip.slug,
        chip_count=int(g.chip_count[i]),
        tensor_parallel=int(g.tensor_parallel[i]),
        pipeline_parallel=int(g.pipeline_parallel[i]),
        replicas=int(results.replicas[i]),
        total_chips=int(results.total_chips[i]),
        weight_dtype=DTYPES[int(g.weight_dtype[i])],
        kv_dtype=DTYPES[int(g.kv_dtype[i])],
        compute_dtype=DTYPES[compute_code] if compute_code >= 0 else None,
        batch=int(g.batch[i]),
        decoding=ctx.decodings[int(g.decoding_index[i])].label,
        feasible=bool(results.feasible[i]),
        fits=bool(results.fits[i]),
        reasons=reasons,
        warnings=results.warnings(i),
        efficiency_source=results.efficiency_source(i),
        prefill_tokens=int(results.prefill_tokens[i]),
        prefill_padded_tokens=int(results.prefill_padded_tokens[i]),
        prefill=PhaseBreakdown.from_arrays(results.prefill, i),
        decode=PhaseBreakdown.from_arrays(results.decode, i),
        memory=MemoryBreakdown(
            weights_bytes_per_chip=float(results.weights_bytes_per_chip[i]),
            kv_bytes_per_chip=float(results.kv_bytes_per_chip[i]),
            kv_bytes_per_sequence_per_chip=float(results.kv_bytes_per_sequence_per_chip[i]),
            activation_bytes_per_chip=float(results.activation_bytes_per_chip[i]),
            usable_bytes_per_chip=float(results.usable_bytes_per_chip[i]),
            max_concurrency=int(results.max_concurrency[i]),
        ),
        cost=_cost(results, i, chip.tdp_watts, offering),
        **f,
    )


def _cost(results: Results, i: int, tdp_watts: float | None, offering: OfferingSpec | None) -> CostBreakdown | None:
    if offering is None:
        return None
    fraction = float(results.power_w_per_chip[i] / tdp_watts) if tdp_watts else 1.0
    hourly = offering_usd_per_chip_hour(offering, tdp_watts, fraction)
    chips = results.total_chips[i : i + 1]
    per_replica = results.grid.tensor_parallel[i] * results.grid.pipeline_parallel[i]
    batched_prefill_s = results.prefill_batched_s_per_prompt[i]
    return CostBreakdown(
        offering_slug=offering.slug,
        usd_per_chip_hour=hourly,
        usd_per_million_output_tokens=float(usd_per_million_tokens(chips, hourly, results.output_tokens_per_s_total[i : i + 1])[0]),
        usd_per_million_input_tokens=float(
            usd_per_million_input_tokens(per_replica, hourly, batched_prefill_s, results.context.workload.prompt_tokens)
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


def evaluate_deployment(
    model: ModelSpec,
    deployment: Deployment,
    workload: Workload,
    *,
    batch: int | str | None = None,
    efficiency: Efficiency | None = None,
    calibration: Calibration | None = None,
    disaggregated: bool = False,
) -> Evaluation:
    """Evaluate one deployment, unpriced; see estimate() for batch."""
    kv = deployment.kv_dtype or default_kv_dtype(deployment.weight_dtype, deployment.chip)
    kwargs = dict(efficiency=efficiency, calibration=calibration, disaggregated=disaggregated)

    def run(batches: list[int]) -> Results:
        grid = CandidateGrid(
            chip_index=np.zeros(len(batches)),
            chip_count=np.full(len(batches), deployment.chip_count),
            tensor_parallel=np.full(len(batches), deployment.tensor_parallel),
            pipeline_parallel=np.full(len(batches), deployment.pipeline_parallel),
            weight_dtype=np.full(len(batches), DTYPE_CODE[deployment.weight_dtype]),
            kv_dtype=np.full(len(batches), DTYPE_CODE[kv]),
            batch=np.asarray(batches),
            decoding_index=np.zeros(len(batches)),
        )
        return evaluate(model, (deployment.chip,), grid, workload, (deployment.decoding,), **kwargs)

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
    efficiency: Efficiency | None = None,
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


def max_throughput_point(run) -> tuple[Results, int]:
    """Largest batch that fits and meets the SLOs; batch 1 when none does."""
    first = run([1])
    limit = int(first.max_concurrency[0])
    if limit <= 1:
        return first, 0
    batches = sorted({2**k for k in range(int(np.log2(limit)) + 1)} | {limit})
    results = run(batches)
    ok = np.flatnonzero(results.feasible)
    return (results, int(ok[-1])) if len(ok) else (first, 0)
