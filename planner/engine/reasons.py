"""Why a candidate is out: integer codes in arrays, words for people.

Codes are checked in this order; a candidate carries the first that applies.
Codes below SLO_CODES_START mean it cannot run at all; the rest mean it runs
but misses the workload's targets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

OK = 0
TP_NOT_DIVIDING_HEADS = 1
INVALID_LAYOUT = 2
NO_MATH_PATH = 3
LPU_TOO_FEW_CHIPS = 4
WEIGHTS_DONT_FIT = 5
CONTEXT_TOO_LONG = 6
KV_DOESNT_FIT = 7
OVERLOADED = 8
TTFT_SLO_MISSED = 9
TPOT_SLO_MISSED = 10
TOO_FEW_SLOTS = 11
SLO_CODES_START = OVERLOADED

REASON_NAMES = {
    OK: "ok",
    TP_NOT_DIVIDING_HEADS: "tensor_parallel does not divide the attention heads",
    INVALID_LAYOUT: "invalid layout",
    NO_MATH_PATH: "no math path for the weight dtype",
    LPU_TOO_FEW_CHIPS: "too few LPU chips to hold the weights in SRAM",
    WEIGHTS_DONT_FIT: "weights do not fit",
    CONTEXT_TOO_LONG: "prompt + output exceed the model's context",
    KV_DOESNT_FIT: "KV cache for the batch does not fit",
    OVERLOADED: "prefill cannot keep up with the request rate",
    TTFT_SLO_MISSED: "misses the TTFT SLO",
    TPOT_SLO_MISSED: "misses the TPOT SLO",
    TOO_FEW_SLOTS: "too few concurrent slots for the request rate",
}


def _gb(value: float) -> str:
    return f"{value / 1e9:.3g} GB" if value >= 1e8 else f"{value / 1e6:.3g} MB"


@dataclass(frozen=True, kw_only=True)
class ReasonFacts:
    """The numbers a message needs, read from one candidate's results."""

    model_slug: str
    chip_slug: str
    weight_dtype: str
    chip_count: int
    tensor_parallel: int
    pipeline_parallel: int
    num_attention_heads: int
    weights_total_bytes: float
    weights_per_chip_bytes: float
    chip_memory_bytes: float
    usable_bytes: float
    batch: int
    max_concurrency: int
    context_tokens: int
    max_context_tokens: int
    ttft_s: float
    tpot_s: float
    ttft_slo_s: float | None
    tpot_slo_s: float | None
    request_rate_per_s: float | None
    concurrency_needed: float
    node_size: int
    num_layers: int
    closed_loop: bool = False  # the load is a closed loop's clients (Workload.looped)
    attention_data_parallel: int = 1
    resident_weights_bytes: float = 0.0  # a draft model's (or draft heads') weights held beside the target's


def reason_text(code: int, f: ReasonFacts) -> str:
    """One sentence a person can act on."""
    layout = f"tensor_parallel={f.tensor_parallel} x pipeline_parallel={f.pipeline_parallel}" + (
        f" x attention_data_parallel={f.attention_data_parallel}" if f.attention_data_parallel != 1 else "")
    if code == OK:
        return "fits and meets the workload's targets"
    if code == TP_NOT_DIVIDING_HEADS:
        return f"{f.model_slug} has {f.num_attention_heads} attention heads; tensor_parallel={f.tensor_parallel} does not divide them"
    if code == INVALID_LAYOUT:
        return (
            f"{f.chip_count} chips cannot be split as {layout}: chip_count must be a multiple of tp*pp*attention_dp "
            f"and pp at most {f.num_layers} layers"
        )
    if code == NO_MATH_PATH:
        return f"{f.chip_slug} lists no compute peak usable for {f.weight_dtype} weights"
    if code == LPU_TOO_FEW_CHIPS:
        need = math.ceil(f.weights_total_bytes / f.chip_memory_bytes)
        return (
            f"{f.chip_slug} keeps weights in on-chip SRAM only: {f.model_slug} at {f.weight_dtype} "
            f"({_gb(f.weights_total_bytes)}) needs at least {need} chips of {_gb(f.chip_memory_bytes)}; got {f.chip_count}"
        )
    if code == WEIGHTS_DONT_FIT:
        total = f.weights_total_bytes + f.resident_weights_bytes
        shards = math.ceil(total / max(f.usable_bytes, 1.0))
        draft = f" and its draft {_gb(f.resident_weights_bytes)}" if f.resident_weights_bytes > 0 else ""
        wider = shards > f.tensor_parallel * f.pipeline_parallel
        return (
            f"{f.model_slug} needs {_gb(f.weights_total_bytes)} of weights at {f.weight_dtype}{draft}; one {f.chip_slug} has "
            f"{_gb(f.chip_memory_bytes)} ({_gb(f.usable_bytes)} usable) and holds {_gb(f.weights_per_chip_bytes)} with {layout}; "
            + (f"try tensor_parallel*pipeline_parallel >= {shards} or a smaller weight dtype (fp8, int8, int4)" if wider else
               "what every shard keeps whole (replicated projections, 16-bit modules) does not fit either: try a smaller weight dtype "
               "(fp8, int8, int4)")
            + (" or a smaller draft" if f.resident_weights_bytes > 0 else "")
        )  # fmt: skip
    if code == CONTEXT_TOO_LONG:
        return f"prompt + output - 1 = {f.context_tokens} tokens exceeds {f.model_slug}'s context of {f.max_context_tokens}"
    if code == KV_DOESNT_FIT:
        return (
            f"batch {f.batch} does not fit: the KV cache (or the serving engine's batch cap) leaves room for "
            f"{f.max_concurrency} concurrent sequences on {f.chip_count} x {f.chip_slug} ({layout}); lower the batch or add chips"
            # Clients that queue for a slot need one slot to queue for, and a rate of their own is an open loop.
            + (", or give the load as a closed loop (workload closed_loop), whose clients wait for a slot"
               if f.max_concurrency >= 1 and f.request_rate_per_s is None and not f.closed_loop else "")
        )
    if code == OVERLOADED:
        return f"prefill alone cannot keep up with {f.request_rate_per_s:g} requests/s on {f.chip_count} x {f.chip_slug}"
    if code == TTFT_SLO_MISSED:
        return f"TTFT {f.ttft_s * 1e3:.1f} ms exceeds the SLO of {f.ttft_slo_s * 1e3:.1f} ms"
    if code == TPOT_SLO_MISSED:
        return f"TPOT {f.tpot_s * 1e3:.2f} ms exceeds the SLO of {f.tpot_slo_s * 1e3:.2f} ms"
    if code == TOO_FEW_SLOTS:
        return (
            f"{f.request_rate_per_s:g} requests/s keep {f.concurrency_needed:.0f} sequences in flight (Little's law); "
            f"batch {f.batch} is too small"
        )
    raise ValueError(f"unknown reason code {code}")
