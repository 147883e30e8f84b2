"""The one vectorised evaluation path: every candidate of a grid with array
expressions. Python loops run only over chips and decoding settings."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import reasons
from .attention import at_ranks
from .cost import energy_per_token_j, power_fraction
from .chips import lpu, policy_for
from .decoding import Autoregressive, DecodeInputs, DecodeOutcome, Decoding
from .dtypes import compute_table
from .efficiency import Calibration, Override, efficiency_table
from .forward import PhaseCost, forward_cost
from .grid import CandidateGrid
from .hardware import CandidateHardware, candidate_hardware, chip_table
from .memory import memory_fit, sixteen_bit_extra_bytes
from .padding import pads_heads
from .results import EvaluationContext, PhaseArrays, Results, concatenate_results, results_from_arrays
from .serving import serving_metrics
from .specs import ChipSpec, ModelSpec, Workload

CHUNK_CANDIDATES = 1 << 20  # bounds temporaries for very large grids

_PHASE_KEYS = ("flops_per_chip", "bytes_per_chip", "compute_s", "memory_s", "expert_compute_s", "comm_s", "overhead_s", "time_s",
               "intensity_flop_per_byte", "ridge_flop_per_byte", "effective_ridge_flop_per_byte", "bound")  # fmt: skip
_RIDGES = ("ridge_flop_per_byte", "effective_ridge_flop_per_byte")


def evaluate(
    model: ModelSpec,
    chips: Sequence[ChipSpec],
    grid: CandidateGrid,
    workload: Workload,
    decodings: Sequence[Decoding] = (Autoregressive(),),
    *,
    efficiency: Override | None = None,
    calibration: Calibration | None = None,
    disaggregated: bool = False,
) -> Results:
    """Evaluate every candidate of `grid`; grid.decoding_index indexes `decodings`.

    What does not depend on the decoding method (prefill, the autoregressive
    reference, layout) is computed once over the whole grid; the rest per method
    on contiguous blocks of it.
    """
    chips, decodings = tuple(chips), tuple(decodings)
    compute = compute_table(chips)
    context = EvaluationContext(
        model=model, chips=chips, workload=workload, decodings=decodings, compute=compute,
        efficiency=efficiency_table(chips, calibration=calibration, override=efficiency), disaggregated=disaggregated,
    )  # fmt: skip
    results = _evaluate_grid(context, grid)
    if workload.looped:  # a closed loop's clients wait for a slot where memory holds fewer: run what it holds
        held = admitted_batch(results)
        if np.any(held != grid.batch):
            results = _evaluate_grid(context, dataclasses.replace(grid, batch=held))
    return results


def _evaluate_grid(context: EvaluationContext, grid: CandidateGrid) -> Results:
    if len(grid) <= CHUNK_CANDIDATES:
        return _evaluate_chunk(context, grid)
    chunks = [
        _evaluate_chunk(context, grid.take(slice(start, start + CHUNK_CANDIDATES)))
        for start in range(0, len(grid), CHUNK_CANDIDATES)
    ]
    return concatenate_results(chunks, grid)


def admitted_batch(results: Results) -> np.ndarray:
    """The sequences each candidate runs at once when its batch is a closed loop's clients: the batch, or, where
    the KV cache (or the serving engine's batch cap) holds fewer, what every replica holds. A continuous-batching
    engine admits that many and queues the rest for a slot (issue 11: admission, not refusal); serving.py adds their
    wait to TTFT. What memory holds does not depend on the batch (the KV cache per sequence and the prefill
    workspace do not), so one evaluation reads it for every candidate."""
    batch = results.grid.batch
    held = np.asarray(results.max_concurrency, dtype=float)  # every replica's, a multiple of the replicas
    over = (results.reason == reasons.KV_DOESNT_FIT) & (held >= 1.0) & (held < batch)
    return np.where(over, np.minimum(held, batch), batch).astype(np.int64)


def _evaluate_chunk(context: EvaluationContext, grid: CandidateGrid) -> Results:
    chips, decodings, workload = context.chips, context.decodings, context.workload
    compute = context.compute
    hw = candidate_hardware(chip_table(chips), grid, compute, context.efficiency, context.model.weight_tables)
    shared = _shared(context, grid, hw)
    parts = []
    for d, index in enumerate(_decoding_blocks(grid.decoding_index, len(decodings))):
        size = _size(index)
        if size == 0 and (len(grid) or d):
            continue  # an empty grid still runs one (empty) block, so every result array exists
        whole = size == len(grid)
        sub = (grid, hw, shared) if whole else (grid.take(index), hw.take(index), shared.take(index))
        parts.append((index, _evaluate_one_decoding(context, decodings[d], *sub)))
    arrays = _assemble(parts, len(grid))
    # The datasheet ridge, and the one the phase times (and so the bound label) use: each peak
    # scaled by its efficiency factor (docs/planner_math.md#forward-cost).
    ridge = hw.peak_flops_per_s / hw.bandwidth_bytes_per_s
    effective = ridge * hw.compute_fraction / hw.bandwidth_fraction
    prefill = PhaseArrays.from_cost(shared.prefill, ridge, effective)
    decode = PhaseArrays(ridge_flop_per_byte=ridge, effective_ridge_flop_per_byte=effective,
                         **{k: arrays.pop("decode_" + k) for k in _PHASE_KEYS if k not in _RIDGES})  # fmt: skip
    arrays.update(
        replicas=hw.replicas,
        batch_per_replica=hw.batch_per_replica,
        compute_dtype_code=hw.compute_code,
        ar_tpot_s=shared.ar_tpot_s,
        prefill_s=shared.prefill_one_s,
        prefill_batched_s_per_prompt=shared.prefill_batched_s,
        prefill_rank_service_s=shared.prefill_rank_service_s,
        prefill_tokens=shared.tokens,
        prefill_padded_tokens=np.maximum(shared.tokens - workload.prompt_tokens, 0.0),
        usable_bytes_per_chip=hw.usable_memory_bytes,
    )
    return results_from_arrays(context, grid, prefill, decode, arrays)


@dataclass(frozen=True, kw_only=True)
class _Shared:
    """Arrays every decoding method needs and none changes."""

    tokens: np.ndarray  # prompt tokens after bucket padding
    prefill: PhaseCost  # one prompt alone
    prefill_one_s: np.ndarray
    prefill_batched_s: np.ndarray  # per prompt, prefilling b prompts together
    # With attention data parallelism, a forward of one prompt on each attention replica (each one's time for its prompt
    # while all prefill); prefill_one_s without it.
    prefill_rank_service_s: np.ndarray
    rank_prefill: PhaseCost  # that forward (the prompt alone without attention DP): a pool replica's operating point
    ar: DecodeOutcome
    ar_tpot_s: np.ndarray

    def take(self, index) -> _Shared:
        return _Shared(
            tokens=self.tokens[index], prefill=self.prefill.take(index), prefill_one_s=self.prefill_one_s[index],
            prefill_batched_s=self.prefill_batched_s[index], prefill_rank_service_s=self.prefill_rank_service_s[index],
            rank_prefill=self.rank_prefill.take(index), ar=self.ar.take(index), ar_tpot_s=self.ar_tpot_s[index],
        )  # fmt: skip


def _shared(ctx: EvaluationContext, grid: CandidateGrid, hw: CandidateHardware) -> _Shared:
    model, workload = ctx.model, ctx.workload
    tokens = prompt_tokens_computed(ctx.chips, grid.chip_index, workload.prompt_tokens)
    has_prompt = tokens > 0
    one = _prefill(model, hw, tokens, np.ones(len(grid)))
    batched = _prefill(model, hw, tokens, hw.batch_per_replica)
    prefill_one_s = np.where(has_prompt, one.time_s, 0.0)
    prefill_batched_s = np.where(has_prompt, batched.time_s / hw.batch_per_replica, 0.0)
    # A prompt alone is one attention replica's work (forward.py: the busiest rank); with every attention replica
    # prefilling one, each takes a forward of adp prompts (the experts see all of them).
    rank_service_s, rank = prefill_one_s, one
    if hw.any_attention_dp:
        rank = _prefill(model, hw, tokens, hw.attention_data_parallel)
        rank_service_s = np.where(has_prompt, rank.time_s, 0.0)
    ar = Autoregressive().decode(DecodeInputs(model=model, hw=hw, workload=workload, grid=grid, compute=ctx.compute))
    ar_serve = _serve(ctx, grid, hw, ar, prefill_one_s, prefill_batched_s, tokens, rank_service_s)
    return _Shared(tokens=tokens, prefill=one, prefill_one_s=prefill_one_s, prefill_batched_s=prefill_batched_s,
                   prefill_rank_service_s=rank_service_s, rank_prefill=rank, ar=ar, ar_tpot_s=ar_serve.tpot_s)  # fmt: skip


def _decoding_blocks(decoding_index: np.ndarray, count: int) -> list[slice | np.ndarray]:
    """Candidates of each decoding setting: slices when the grid is sorted by
    setting (cartesian_grid builds it so), index arrays otherwise."""
    if len(decoding_index) == 0 or np.all(decoding_index[1:] >= decoding_index[:-1]):
        bounds = np.searchsorted(decoding_index, np.arange(count + 1))
        return [slice(int(bounds[d]), int(bounds[d + 1])) for d in range(count)]
    return [np.flatnonzero(decoding_index == d) for d in range(count)]


def _size(index: slice | np.ndarray) -> int:
    return index.stop - index.start if isinstance(index, slice) else len(index)


def _assemble(parts: list[tuple[slice | np.ndarray, dict[str, np.ndarray]]], n: int) -> dict[str, np.ndarray]:
    if len(parts) == 1 and _size(parts[0][0]) == n:
        return parts[0][1]
    if all(isinstance(index, slice) for index, _ in parts):  # contiguous blocks, in order
        return {key: np.concatenate([values[key] for _, values in parts]) for key in parts[0][1]}
    out: dict[str, np.ndarray] = {}
    for index, values in parts:
        for key, value in values.items():
            if key not in out:
                out[key] = np.zeros(n, dtype=np.asarray(value).dtype)
            out[key][index] = value
    return out


def prompt_tokens_computed(chips: Sequence[ChipSpec], chip_index: np.ndarray, prompt_tokens: int) -> np.ndarray:
    """Tokens each candidate's prefill computes: the prompt, padded where the chip kind's
    policy pads it (TPU buckets)."""
    if prompt_tokens <= 0:
        return np.zeros(np.shape(chip_index))
    per_chip = np.array([policy_for(chip).prefill_tokens(prompt_tokens) for chip in chips], dtype=float)
    return per_chip[chip_index]


def _prefill(model: ModelSpec, hw: CandidateHardware, tokens: np.ndarray, sequences: np.ndarray):
    """Causal prefill: P^2/2 (query, key) pairs for full attention, i.e. 2*L*H*d_h*P^2 FLOPs,
    half of LLM-Viewer's 4*L*H*d_h*P^2 which ignores the causal mask (docs/planner_math.md#prefill).
    The LM head computes the last position's logits only, as serving engines do (vLLM and TensorRT-LLM
    gather the last token of each prompt before the head unless asked for every position's logits)."""
    attention = at_ranks(model.attention, hw.tensor_parallel)
    return forward_cost(
        model, hw, sequences=sequences, new_tokens=tokens, attention_pairs=attention.causal_pairs(tokens), kv_read_tokens=0.0,
        kv_write_tokens=attention.kv_held_tokens(tokens), attention_flops_per_pair=attention.prefill_flops_per_pair,
        extra_overhead_s=hw.prefill_layer_overhead_s * model.num_layers, logit_tokens=1.0,
    )  # fmt: skip


def _evaluate_one_decoding(
    ctx: EvaluationContext, decoding: Decoding, grid: CandidateGrid, hw: CandidateHardware, shared: _Shared
) -> dict[str, np.ndarray]:
    model, workload = ctx.model, ctx.workload
    if decoding.is_reference:  # autoregressive: already evaluated for every candidate
        outcome = shared.ar
    else:
        outcome = decoding.decode(DecodeInputs(model=model, hw=hw, workload=workload, grid=grid, compute=ctx.compute))
    serve = _serve(ctx, grid, hw, outcome, shared.prefill_one_s, shared.prefill_batched_s, shared.tokens, shared.prefill_rank_service_s)
    mem = memory_fit(model, hw, footprint=outcome.footprint, prompt_tokens=shared.tokens, resident=outcome.resident)
    no_math = outcome.no_math_path if outcome.no_math_path is not None else np.zeros(len(grid), dtype=bool)
    mfu = outcome.achieved_flops_per_s_per_chip / np.maximum(hw.peak_flops_per_s, 1e-30)
    mbu = outcome.achieved_bytes_per_s_per_chip / hw.bandwidth_bytes_per_s
    # Under a request rate a replica steps whenever a sequence is in flight, and a memory-bound step reads every weight
    # however few: it is busy the share of the time its Poisson occupancy (Little's law, M/G/inf) is not zero,
    # 1 - exp(-n) with n = concurrency_needed / replicas, and idles the rest (cost.power_fraction).
    rated = workload.request_rate_per_s is not None and not workload.looped
    busy = -np.expm1(-np.nan_to_num(serve.concurrency_needed, nan=np.inf) / hw.replicas) if rated else 1.0
    total_chips = grid.chip_count + serve.prefill_chips
    # A pool replica's time per prompt: its attention replicas prefill one each at once (one prompt alone without attention DP).
    per_prompt_s = shared.prefill_rank_service_s / hw.attention_data_parallel
    watts = hw.tdp_watts * _mean_power_fraction(power_fraction(mfu, mbu, busy), grid, hw, serve, shared.rank_prefill, per_prompt_s,
                                                 outcome.delivered_tokens)  # fmt: skip
    out = {
        "reason": _reasons(ctx, grid, hw, mem, serve, no_math),
        "ttft_s": serve.ttft_s,
        "tpot_s": serve.tpot_s,
        "tokens_per_s_per_user": serve.tokens_per_s_per_user,
        "output_tokens_per_s_total": serve.output_tokens_per_s_total,
        "served_output_tokens_per_s": serve.served_output_tokens_per_s,
        "decode_token_time_s": outcome.token_time_s,
        "speedup_vs_ar": _ratio(shared.ar_tpot_s, serve.tpot_s),
        "queue_wait_s": serve.queue_wait_s,
        "prefill_utilisation": serve.prefill_utilisation,
        "concurrency_needed": serve.concurrency_needed,
        "prefill_chips": serve.prefill_chips,
        "total_chips": total_chips.astype(float),
        "weights_bytes_per_chip": mem.weights_bytes_per_chip,
        "resident_weights_bytes": np.broadcast_to(sum((extra.params * extra.weight_bytes_per_param for extra in outcome.resident), np.zeros(1)),
                                                  (len(grid),)).astype(float),
        "kv_bytes_per_chip": mem.kv_bytes_per_chip,
        "kv_bytes_per_sequence_per_chip": np.broadcast_to(mem.kv_bytes_per_sequence_per_chip, (len(grid),)).copy(),
        "activation_bytes_per_chip": mem.activation_bytes_per_chip,
        "max_concurrency": mem.max_concurrency_per_replica * hw.replicas,
        "tokens_per_step": np.full(len(grid), outcome.tokens_per_step),
        "mfu": mfu,
        "mbu": mbu,
        "power_w_per_chip": watts,
        "energy_per_output_token_j": energy_per_token_j(total_chips, watts, serve.served_output_tokens_per_s),
        "energy_per_output_token_upper_j": energy_per_token_j(total_chips, hw.tdp_watts, serve.served_output_tokens_per_s),
    }
    step = outcome.step
    for k in ("flops_per_chip", "bytes_per_chip", "compute_s", "memory_s", "expert_compute_s", "comm_s", "overhead_s", "time_s"):
        out["decode_" + k] = getattr(step, k)
    out["decode_intensity_flop_per_byte"] = step.intensity_flop_per_byte
    out["decode_bound"] = step.bound
    return out


def _mean_power_fraction(decode_fraction, grid, hw, serve, prefill: PhaseCost, prefill_one_s, delivered_tokens: float) -> np.ndarray:
    """The draw per chip, as a share of TDP, averaged over the configuration's chips. A disaggregated prefill pool draws at
    its own operating point (the MFU or MBU of the forward a pool replica serves, `prefill`: one prompt, or with attention data
    parallelism one on each attention replica; compute-bound at any length that matters) for the share of the time
    its replicas prefill: the served requests x a replica's time per prompt (`prefill_one_s`: one prefill, or with
    attention data parallelism a forward of one prompt per attention replica over their number; none without a
    prompt) over the pool's replicas, at most all of it (the pool's utilisation, the M/D/c rho of
    serving.py); idle the rest. The decode chips draw at theirs (`decode_fraction`)."""
    pool = serve.prefill_chips
    if not np.any(pool > 0):
        return decode_fraction
    time_s = np.maximum(prefill.time_s, 1e-30)
    prefill_mfu = prefill.flops_per_chip / (time_s * np.maximum(hw.peak_flops_per_s, 1e-30))
    prefill_mbu = prefill.bytes_per_chip / (time_s * hw.bandwidth_bytes_per_s)
    chips_per_replica = hw.tensor_parallel * hw.pipeline_parallel * hw.attention_data_parallel
    requests_per_s = np.nan_to_num(serve.served_output_tokens_per_s, nan=0.0, posinf=0.0) / max(delivered_tokens, 1.0)
    busy = np.clip(np.nan_to_num(requests_per_s * prefill_one_s * chips_per_replica / np.maximum(pool, 1e-30), nan=0.0), 0.0, 1.0)
    prefill_fraction = power_fraction(prefill_mfu, prefill_mbu, busy)
    return (grid.chip_count * decode_fraction + pool * prefill_fraction) / (grid.chip_count + pool)


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, infinite (null in JSON) where the denominator is 0: a TPOT of 0 has no speed-up to state."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return numerator / denominator


def _serve(ctx, grid, hw, outcome: DecodeOutcome, prefill_one_s, prefill_batched_s, prefill_tokens, prefill_rank_service_s):
    return serving_metrics(
        concurrency=grid.batch.astype(float),
        replicas=hw.replicas,
        batch_per_replica=hw.batch_per_replica,
        chips_per_replica=hw.tensor_parallel * hw.pipeline_parallel * hw.attention_data_parallel,
        prefill_one_s=prefill_one_s,
        prefill_batched_per_prompt_s=prefill_batched_s,
        token_time_s=outcome.token_time_s,
        streamed_token_time_s=outcome.streamed_token_time_s,
        first_token_extra_s=outcome.first_token_extra_s,
        needs_prefill=outcome.needs_prefill,
        delivered_tokens=outcome.delivered_tokens,
        request_rate_per_s=ctx.workload.request_rate_per_s,
        disaggregated=ctx.disaggregated,
        closed_loop=ctx.workload.closed_loop,
        clients=ctx.workload.concurrency,
        prefill_tokens=prefill_tokens,
        attention_data_parallel=hw.attention_data_parallel,
        request_overhead_s=ctx.model.request_overhead_s(hw.request_overhead_s, hw.request_overhead_per_expert_layer_s),
        in_step_share=ctx.workload.in_step_share,
        prefill_token_budget=hw.prefill_token_budget,
        prefill_rank_service_s=prefill_rank_service_s,
        balance_timeout_steps=hw.balance_timeout_steps,
        engine_step_s=outcome.token_time_s * outcome.tokens_per_step,
    )


def _reasons(ctx, grid, hw, mem, serve, no_math) -> np.ndarray:
    """First failing check per candidate, in the order of reasons.py."""
    model, workload = ctx.model, ctx.workload
    tp, pp = grid.tensor_parallel, grid.pipeline_parallel
    adp = grid.attention_data_parallel
    per_replica = tp * pp * adp
    weights_bytes = model.total_params * hw.weight_bytes_per_param + sixteen_bit_extra_bytes(model, hw)
    min_chips_for_weights = np.ceil(weights_bytes / hw.usable_memory_bytes)
    context_tokens = workload.context_tokens
    inf = np.inf
    checks = [
        # A chip whose SDK pads the heads to a multiple of its ranks runs any TP (padding.py).
        (reasons.TP_NOT_DIVIDING_HEADS, (model.num_attention_heads % np.maximum(tp, 1) != 0) & np.logical_not(pads_heads(model, hw))),
        (reasons.INVALID_LAYOUT, (tp < 1) | (pp < 1) | (adp < 1) | (grid.chip_count % np.maximum(per_replica, 1) != 0)
         | (pp > model.num_layers)),  # fmt: skip
        (reasons.NO_MATH_PATH, (hw.compute_code < 0) | no_math),
        (reasons.LPU_TOO_FEW_CHIPS, hw.weights_on_chip_only & (per_replica < min_chips_for_weights)),
        (reasons.WEIGHTS_DONT_FIT, ~mem.weights_fit),
        (reasons.CONTEXT_TOO_LONG, np.full(len(grid), context_tokens > model.max_context_tokens)),
        (reasons.KV_DOESNT_FIT, hw.batch_per_replica > mem.max_concurrency_per_replica),
        # A closed loop's clients wait for their answers, so its rate never outruns the prefill (one-token requests
        # keep the prefill busy all the time: a utilisation of 1 that is not an overload).
        (reasons.OVERLOADED, (serve.prefill_utilisation >= 1.0) & (not workload.looped)),
        (reasons.TTFT_SLO_MISSED, serve.ttft_s > (workload.ttft_slo_s or inf)),
        # A one-token answer has no time per output token to miss (vLLM's benchmark leaves its TPOT undefined).
        (reasons.TPOT_SLO_MISSED, (serve.tpot_s > (workload.tpot_slo_s or inf)) & (workload.output_tokens > 1)),
        (reasons.TOO_FEW_SLOTS, np.nan_to_num(serve.concurrency_needed, nan=0.0) > grid.batch),
    ]
    reason = np.zeros(len(grid), dtype=np.int64)
    for code, failed in reversed(checks):
        reason = np.where(failed, code, reason)
    return reason


def weights_total_bytes(model: ModelSpec, weight_dtype: str) -> float:
    return model.weight_bytes(weight_dtype)


def lpu_min_chips(model: ModelSpec, chip: ChipSpec, weight_dtype: str) -> int:
    """Chips an LPU deployment needs just to hold the weights in SRAM (chips/lpu.py)."""
    return lpu.min_chips(model, chip, weight_dtype)
