"""The simulator's front door: a deployment and a workload in, a SimulationResult out.

`simulate` builds the step cost from the same specs and efficiency factors an estimate uses
(step_cost.py), draws the requests (workload.py), runs the scheduler (scheduler.py) and summarises
(results.py). `simulate_with_cost` takes any step cost instead, so the same scheduler runs under
another latency model (a fitted one, say) as long as it answers StepCost's fields and step_time_s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..chips import policy_for
from ..deployment import Deployment
from ..efficiency import Calibration, Override
from ..specs import ChipSpec, ModelSpec, Scheduler, Workload
from ..units import DTYPES, KV_BLOCK_TOKENS
from .disaggregated import kv_transfer_for, simulate_disaggregated_with_cost
from .results import SimulationResult, Slos, summarise
from .replicas import merge_schedules, split_round_robin
from .scheduler import run_schedule
from .step_cost import StepCost, step_cost_for
from .workload import SimulationWorkload


@dataclass(frozen=True, kw_only=True)
class SchedulerOptions:
    """The serving engine's knobs, by vLLM's names where it has them. token_budget and max_sequences
    default to the chip's serving-engine scheduler (specs.Scheduler), as the estimate reads them;
    with no scheduler recorded the budget is units.PREFILL_CHUNK_TOKENS and running sequences are
    capped only by the budget and the KV blocks."""

    token_budget: int | None = None  # max_num_batched_tokens
    max_sequences: int | None = None  # max_num_seqs
    kv_block_tokens: int = KV_BLOCK_TOKENS  # block_size
    prefix_caching: bool = True  # enable_prefix_caching
    # The engine's memory knob under its own rule (specs.Scheduler.kv_memory_fraction): vLLM's gpu_memory_utilization and
    # SGLang's mem_fraction_static are of the chip's memory, TensorRT-LLM's free_gpu_memory_fraction of what the weights
    # leave; with no serving engine, of the chip's memory. None: the engine's default.
    memory_fraction: float | None = None
    # Whether a step that prefills runs without the decodes (SGLang's default; vLLM's V0 scheduler with chunked prefill
    # off) or prefill chunks and decodes share steps (vLLM V1, TensorRT-LLM). None: the engine's default.
    prefill_alone: bool | None = None
    # On a CPU, the weight dtypes whose GEMMs the run's build multiplies on the chip's matrix units (specs.Scheduler's
    # field; () for none: a build without those kernels, such as llama.cpp before its AMX backend). None: the engine's.
    cpu_matrix_dtypes: tuple[str, ...] | None = None
    # Under attention data parallelism, the steps a prompt is held for every attention replica to have one (TensorRT-LLM's
    # attention_dp_config timeout_iters with enable_balance; 0: balance off). None: the engine's (specs.Scheduler's field).
    # The closed form reads it; the simulator runs no attention data parallelism.
    attention_dp_balance_steps: int | None = None

    def __post_init__(self) -> None:
        if self.memory_fraction is not None and not 0.0 < self.memory_fraction <= 1.0:
            raise ValueError(f"memory_fraction must be in (0, 1], got {self.memory_fraction}")
        for name in ("token_budget", "max_sequences"):
            if (value := getattr(self, name)) is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if self.attention_dp_balance_steps is not None and self.attention_dp_balance_steps < 0:
            raise ValueError(f"attention_dp_balance_steps must be at least 0, got {self.attention_dp_balance_steps}")
        if self.cpu_matrix_dtypes is not None:
            if unknown := sorted(set(self.cpu_matrix_dtypes) - set(DTYPES)):
                raise ValueError(f"cpu_matrix_dtypes: unknown weight dtypes {unknown}")
            object.__setattr__(self, "cpu_matrix_dtypes", tuple(self.cpu_matrix_dtypes))

    def refusal(self, chip_kind: str, chip_slug: str) -> str | None:
        """Why these options cannot be a chip's: a CPU build's setting (cpu_matrix_dtypes) named for a chip that is not a
        CPU. None where they can."""
        if self.cpu_matrix_dtypes is not None and chip_kind != "cpu":
            return f"cpu_matrix_dtypes is a CPU build's setting; {chip_slug} is a {chip_kind}"
        return None

    def configured(self, chip: ChipSpec, *, caps: bool = True) -> ChipSpec:
        """`chip` with these options in its serving-engine scheduler (the chip kind's memory default where no engine is
        named): the memory fraction, prefill mode, attention-DP balance and, on a CPU, matrix-unit dtypes, and with `caps` the batch cap and prefill
        token budget, which the closed form reads off the scheduler (the simulator takes those two as its own arguments);
        unchanged where the options keep the defaults."""
        named = [("kv_memory_fraction", self.memory_fraction), ("prefill_runs_alone", self.prefill_alone),
                 ("attention_dp_balance_timeout_steps", self.attention_dp_balance_steps)]
        if chip.kind == "cpu":  # a CPU build's setting: a plan's other chips keep their engine's
            named.append(("cpu_matrix_dtypes", self.cpu_matrix_dtypes))
        if caps:
            named += [("max_batch_sequences", self.max_sequences), ("prefill_token_budget", self.token_budget)]
        changes = {name: value for name, value in named if value is not None}
        if not changes:
            return chip
        scheduler = chip.scheduler or Scheduler(engine="", kv_memory_fraction=policy_for(chip).usable_memory_fraction)
        return dataclasses.replace(chip, scheduler=dataclasses.replace(scheduler, **changes))

    def applied(self, deployment: Deployment) -> Deployment:
        """`deployment` with these options' memory fraction, prefill mode and CPU matrix-unit dtypes in its chip's scheduler
        (configured); unchanged where they keep the defaults."""
        chip = self.configured(deployment.chip, caps=False)
        return deployment if chip is deployment.chip else dataclasses.replace(deployment, chip=chip)


def simulate(
    model: ModelSpec,
    deployment: Deployment,
    workload: SimulationWorkload,
    *,
    slos: Slos | None = None,
    options: SchedulerOptions | None = None,
    efficiency: Override | None = None,
    calibration: Calibration | None = None,
) -> SimulationResult:
    options = options or SchedulerOptions()
    cost = _step_cost(model, deployment, workload, options, efficiency, calibration)
    return simulate_with_cost(cost, workload, slos=slos, prefix_caching=options.prefix_caching, replicas=deployment.replicas)


def _step_cost(model: ModelSpec, deployment: Deployment, workload: SimulationWorkload, options: SchedulerOptions, efficiency,
               calibration) -> StepCost:  # fmt: skip
    return step_cost_for(model, options.applied(deployment), efficiency=efficiency, calibration=calibration, token_budget=options.token_budget,
                         max_sequences=options.max_sequences, kv_block_tokens=options.kv_block_tokens,
                         workload=mean_lengths(workload))  # fmt: skip


def mean_lengths(workload: SimulationWorkload) -> Workload:
    """The workload's mean prompt and output lengths (what a speculative method's draft phase is priced at)."""
    requests = workload.sample()
    return Workload(prompt_tokens=max(int(round(float(requests.prompt_tokens.mean()))), 1),
                    output_tokens=max(int(round(float(requests.output_tokens.mean()))), 1))  # fmt: skip


def simulate_disaggregated(
    model: ModelSpec,
    deployment: Deployment,
    workload: SimulationWorkload,
    *,
    prefill_replicas: int,
    kv_bytes_per_s_per_chip: float | None = None,
    slos: Slos | None = None,
    options: SchedulerOptions | None = None,
    efficiency: Override | None = None,
    calibration: Calibration | None = None,
) -> SimulationResult:
    """`deployment`'s replicas as the decode pool and `prefill_replicas` more of the same shape as the
    prefill pool, under the same scheduler options and efficiency factors (disaggregated.py)."""
    options = options or SchedulerOptions()
    cost = _step_cost(model, deployment, workload, options, efficiency, calibration)
    transfer = kv_transfer_for(model, deployment, bytes_per_s_per_chip=kv_bytes_per_s_per_chip)
    return simulate_disaggregated_with_cost(cost, cost, workload, prefill_replicas=prefill_replicas, decode_replicas=deployment.replicas,
                                            transfer=transfer, slos=slos, prefix_caching=options.prefix_caching)  # fmt: skip


def simulate_with_cost(
    cost: StepCost, workload: SimulationWorkload, *, slos: Slos | None = None, prefix_caching: bool = True, replicas: int = 1
) -> SimulationResult:
    """`replicas` identical replicas of `cost` behind a round-robin router (replicas.py)."""
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    requests = workload.sample()
    offset = cost.request_overhead_s
    parts = [(index, run_schedule(cost, share, prefix_caching=prefix_caching, arrival_offset_s=offset, seed=workload.seed + r))
             for r, (index, share) in enumerate(split_round_robin(requests, replicas))]  # fmt: skip
    schedule = merge_schedules(parts, len(requests))
    notes = _notes(cost, workload, prefix_caching, replicas)
    return summarise(schedule, requests, offset_s=offset, slos=slos or Slos(), notes=notes)


def _notes(cost: StepCost, workload: SimulationWorkload, prefix_caching: bool, replicas: int) -> tuple[str, ...]:
    notes = []
    multi = cost.multi_token
    if multi is not None and hasattr(multi, "draft_tokens"):
        notes.append(f"{multi.label}: each decode step is a round of {multi.draft_tokens} draft tokens verified, emitting 1 to "
                     f"{multi.draft_tokens + 1} tokens per sequence (acceptance {multi.acceptance_rate:.2f} per draft token, "
                     f"{multi.tokens_per_round:.2f} on average), each request's rounds drawn; its KV for the whole answer is "
                     f"reserved at admission (no growth, no preemption), and the draft phase is priced at the workload's mean context")  # fmt: skip
    elif multi is not None:
        notes.append(f"{multi.label}: each block of {multi.block_size} tokens takes {multi.steps_per_block:g} denoising forwards "
                     f"(rounded per block at random when fractional) and a commit forward between blocks; a block's tokens are "
                     f"released when its denoising ends, so the first token waits for the first block; each request's answer is "
                     f"its drawn output length (expected_answer_tokens is not used); its KV for the whole answer, in whole "
                     f"blocks, is reserved at admission")  # fmt: skip
    if replicas > 1:
        notes.append(f"{replicas} replicas behind a round-robin router, each with its own queue and KV cache")
    if cost.prefill_runs_alone:
        notes.append("prefills run alone (SGLang's default, without --enable-mixed-chunk; vLLM's V0 scheduler with chunked prefill "
                     "off): a step that prefills runs no decodes, and a request is admitted as SGLang admits one, only when the free KV "
                     "blocks, less a share of the running requests' answers still to come, hold all it has to prefill and its own answer")  # fmt: skip
    if not cost.full_context:
        notes.append("attention with a window or a recurrent state: each decode step prices every sequence at the mean context, "
                     "and KV blocks are counted for the full context (an upper bound on KV use)")  # fmt: skip
    if workload.shared_prefix_tokens and workload.shared_prefix_fraction:
        if prefix_caching:
            notes.append("the shared prefix is cached from the start (a warm cache) and its blocks stay pinned")
        else:
            notes.append("prefix caching is off: the shared prefix is prefilled with every request")
    return tuple(notes)


MAX_SWEEP_RATES = 12


def rate_sweep(
    run: Callable[[SimulationWorkload], SimulationResult], workload: SimulationWorkload, rates_per_s: Sequence[float]
) -> list[SimulationResult]:
    """`run` (a configuration's simulate, bound to its deployment and options) at each arrival rate: the
    workload's own arrival process (Poisson or gamma, its cv kept), requests, lengths and seed, only the
    rate changed, so the points differ by the load alone. The percentiles against the rate show where
    the queue takes over (the goodput knee)."""
    if workload.trace is not None or workload.arrivals is None or workload.arrivals.kind not in ("poisson", "gamma"):
        raise ValueError("a rate sweep changes the rate of Poisson or gamma arrivals; a trace or a closed loop has none to change")
    if not 1 <= len(rates_per_s) <= MAX_SWEEP_RATES:
        raise ValueError(f"a rate sweep takes 1 to {MAX_SWEEP_RATES} rates, got {len(rates_per_s)}")
    if any(not r > 0 for r in rates_per_s) or list(rates_per_s) != sorted(set(rates_per_s)):
        raise ValueError("rates must be > 0, distinct and ascending")
    return [run(dataclasses.replace(workload, arrivals=dataclasses.replace(workload.arrivals, rate_per_s=float(r)))) for r in rates_per_s]
