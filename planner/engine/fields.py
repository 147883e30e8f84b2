"""Every result field, declared once: its name, type, unit, meaning, and where it shows.

The declarations below are the one list. From them:
- `Results` holds one array per candidate for each field with `per_candidate=True`
  (results.py checks the evaluation produced exactly these);
- `Estimate` and its `MemoryBreakdown` are built (estimate.py), and `estimate_from_results`
  copies every per-candidate field into them;
- the API's OpenAPI schema for estimates and ranked plan rows (planner/result_schema.py),
  the plan CSV export (planner/exports.py) and the web UI's columns (frontend/) read
  `label`, `format` and `csv`.
Adding a metric is one `ResultField` here and the array that computes it in evaluate.py.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("float", "int", "str", "bool", "list", "object")
FORMATS = ("num", "duration", "usd", "percent", "gb", "text")
GROUPS = (None, "memory")


@dataclass(frozen=True, kw_only=True)
class ResultField:
    name: str
    kind: str  # float | int | str | bool | list (of str) | object
    unit: str  # "" for words, flags and counts of things
    description: str
    per_candidate: bool = True  # an array of Results (False: set by estimate_from_results)
    in_estimate: bool = True  # a field of Estimate (or of its `group`)
    group: str | None = None  # "memory": a field of Estimate.memory
    nullable: bool = False  # None in JSON (NaN or infinity becomes None there too)
    label: str | None = None  # a column header where the web UI shows it
    format: str = "num"  # how the UI writes it (frontend/templatetags/hwformat.py)
    csv: str | None = None  # the plan CSV export's column name (None: not exported)
    validated: bool = False  # a validation trial measures it: predicted vs measured rows

    def __post_init__(self) -> None:
        if self.kind not in KINDS or self.format not in FORMATS or self.group not in GROUPS:
            raise ValueError(f"result field {self.name}: bad kind, format or group")


def _f(name: str, unit: str, description: str, **kwargs) -> ResultField:
    return ResultField(name=name, kind=kwargs.pop("kind", "float"), unit=unit, description=description, **kwargs)


def _layout(name: str, description: str, **kwargs) -> ResultField:
    return ResultField(name=name, kind=kwargs.pop("kind", "int"), unit="", description=description, per_candidate=False, **kwargs)


RESULT_FIELDS: tuple[ResultField, ...] = (
    # What was evaluated (from the grid and the specs).
    _layout("model_slug", "the model's catalog slug", kind="str"),
    _layout("chip_slug", "the chip's catalog slug", kind="str", csv="chip"),
    _layout("chip_count", "chips serving decode (all replicas)", csv="chip_count"),
    _layout("tensor_parallel", "tensor-parallel degree of one replica", csv="tensor_parallel"),
    _layout("pipeline_parallel", "pipeline stages of one replica", csv="pipeline_parallel"),
    _layout("attention_data_parallel", "attention replicas in one replica, each with its own KV cache, the experts spread over all",
            csv="attention_data_parallel"),  # fmt: skip
    _f("replicas", "", "data-parallel replicas: chip_count / (tensor_parallel x pipeline_parallel x attention_data_parallel)",
       kind="int", csv="replicas"),  # fmt: skip
    _f("total_chips", "", "chips in all, with a disaggregated prefill pool", kind="int", label="Chips", csv="total_chips"),
    _layout("weight_dtype", "weight format", kind="str", csv="weight_dtype"),
    _layout("kv_dtype", "KV-cache format", kind="str", csv="kv_dtype"),
    _layout("compute_dtype", "the math path used (None: the chip has none for these weights)", kind="str", nullable=True),
    _layout("batch", "concurrent sequences of the whole deployment", csv="batch"),
    _layout("decoding", "the decoding method and its settings", kind="str", csv="decoding"),
    _layout("decoding_fields", "the decoding method's own facts (acceptance rate, block size, ...)", kind="object"),
    _layout("feasible", "runs and meets every target of the workload", kind="bool"),
    _layout("fits", "runs at all (it may still miss an SLO)", kind="bool"),
    _layout("reasons", "why it is out, in words (empty when feasible)", kind="list"),
    _layout("warnings", "fallbacks and assumptions behind the numbers, in words", kind="list"),
    _layout("efficiency_source", "where the efficiency factors came from (spec defaults, a calibration, an override)", kind="str",
            csv="efficiency_source"),  # fmt: skip
    # Why a candidate is out; internal codes.
    _f("reason", "", "reason code (planner/engine/reasons.py; 0 = ok)", kind="int", in_estimate=False),
    _f("compute_dtype_code", "", "code of the compute dtype, -1 for none", kind="int", in_estimate=False),
    # Latency and throughput.
    _f("ttft_s", "s", "time to first token, queueing included", nullable=True, label="TTFT", format="duration", validated=True, csv="ttft_s"),
    _f("tpot_s", "s", "time per output token a user sees, interleaved prefills included", nullable=True, label="TPOT",
       format="duration", validated=True, csv="tpot_s"),  # fmt: skip
    _f("tokens_per_s_per_user", "tokens/s", "1 / TPOT", nullable=True, label="Tok/s per user", validated=True, csv="tokens_per_s_per_user"),
    _f("output_tokens_per_s_total", "tokens/s", "output tokens per second over all replicas", nullable=True, label="Tok/s total",
       validated=True, csv="output_tokens_per_s_total"),  # fmt: skip
    _f("served_output_tokens_per_s", "tokens/s", "output tokens per second the workload's request rate asks of it (at most "
       "output_tokens_per_s_total; without a rate, or in a closed loop, the same): what $/1M output tokens and energy per token are "
       "charged to, idle capacity included", nullable=True, csv="served_output_tokens_per_s"),
    _f("decode_token_time_s", "s", "decoding alone, per output token per sequence", nullable=True),
    _f("ar_tpot_s", "s", "TPOT of the same deployment decoding autoregressively", nullable=True),
    _f("speedup_vs_ar", "", "ar_tpot_s / tpot_s", nullable=True),
    _f("tokens_per_step", "tokens", "tokens committed per target forward", nullable=True),
    _f("queue_wait_s", "s", "mean wait before the prefill: under a request rate for a free slot of the batch and for the prefill; in a "
       "closed loop behind the other clients", nullable=True),
    _f("prefill_s", "s", "one prompt's prefill alone (the TTFT part)", in_estimate=False),
    _f("prefill_batched_s_per_prompt", "s", "per prompt, prefilling a replica's batch of prompts together (a static batch's prompts "
       "wait for all of them: this times the batch per replica)"),
    _f("prefill_rank_service_s", "s", "with attention data parallelism, an attention replica's prefill of its prompt while each of the "
       "attention_data_parallel replicas prefills one (a forward of that many prompts; a prompt alone is one replica's work, its "
       "experts spread over all); without it, one prompt's prefill. A disaggregated prefill pool's replica serves that many prompts "
       "in this time"),
    _f("prefill_tokens", "tokens", "prompt tokens computed (after TPU bucket padding)", kind="int"),
    _f("prefill_padded_tokens", "tokens", "padding tokens a bucket adds", kind="int"),
    _f("prefill_utilisation", "", "share of a replica's time spent prefilling", in_estimate=False),
    _f("concurrency_needed", "sequences", "sequences a request rate keeps in flight: rate x each request's stay before any wait for a slot "
       "(Little's law), or the slots its tokens need at this batch's speed where more (NaN without a rate)", in_estimate=False),
    _f("prefill_chips", "", "chips of a disaggregated prefill pool", in_estimate=False),
    _f("batch_per_replica", "sequences", "concurrent sequences per replica", in_estimate=False),
    _f("resident_weights_bytes", "B", "weights of the models the decoding method holds beside the target (a draft model, draft heads), "
       "every shard together: what a refusal for weights that do not fit names", in_estimate=False),
    # Memory per chip.
    _f("weights_bytes_per_chip", "B", "weights one chip holds", group="memory"),
    _f("kv_bytes_per_chip", "B", "KV cache one chip holds at this batch", group="memory"),
    _f("kv_bytes_per_sequence_per_chip", "B", "KV cache (and draft caches, logits) per sequence on one chip", group="memory"),
    _f("activation_bytes_per_chip", "B", "activation workspace reserved for one prefill chunk", group="memory"),
    _f("usable_bytes_per_chip", "B", "memory usable after the runtime's reserve", group="memory"),
    _f("max_concurrency", "sequences", "sequences the KV cache holds, all replicas", kind="int", group="memory"),
    # Utilisation, power, energy.
    _f("mfu", "", "achieved FLOP/s / dense peak of the compute dtype (decode; on a CPU, of the units the serving engine multiplies the "
       "dense weights on, though a MoE model's experts may run on slower ones)", nullable=True, label="MFU", format="percent", validated=True, csv="mfu"),
    _f("mbu", "", "achieved bytes/s / peak memory bandwidth (decode)", nullable=True, label="MBU", format="percent", validated=True, csv="mbu"),
    _f("power_w_per_chip", "W", "modelled mean draw per chip: at this operating point while it serves, idle for the share of the time "
       "a request rate leaves it idle; with a disaggregated prefill pool, the chip-weighted mean of the decode chips' draw and "
       "the pool's (at one prefill's operating point for the share of the time it prefills)", nullable=True),
    _f("energy_per_output_token_j", "J", "energy per served output token at the modelled draw", nullable=True,
       csv="energy_per_output_token_j"),
    _f("energy_per_output_token_upper_j", "J", "energy per served output token at TDP: an upper bound", nullable=True),
)

BY_NAME: dict[str, ResultField] = {f.name: f for f in RESULT_FIELDS}
if len(BY_NAME) != len(RESULT_FIELDS):
    raise ImportError("a result field is declared twice")

# Arrays of Results, in declaration order.
ARRAY_FIELDS: tuple[str, ...] = tuple(f.name for f in RESULT_FIELDS if f.per_candidate)
# Fields of Estimate itself / of Estimate.memory, in declaration order.
ESTIMATE_FIELDS: tuple[ResultField, ...] = tuple(f for f in RESULT_FIELDS if f.in_estimate and f.group is None)
MEMORY_FIELDS: tuple[ResultField, ...] = tuple(f for f in RESULT_FIELDS if f.in_estimate and f.group == "memory")


def _trial(name: str, unit: str, description: str, **kwargs) -> ResultField:
    return _f(name, unit, description, per_candidate=False, in_estimate=False, validated=True, **kwargs)


# What the speculative and block-diffusion trials measure (jobs/trials/, under these keys) and the planner predicts
# (planner/engine/trial_predictions.py): their cards' predicted-vs-measured rows. No Estimate carries them.
TRIAL_FIELDS: dict[str, tuple[ResultField, ...]] = {
    "speculative": (
        _trial("acceptance_rate", "", "drafted tokens accepted / drafted; predicted: the acceptance the planner assumes",
               label="Acceptance per drafted token (predicted: assumed)", format="percent"),
        _trial("mean_accepted_tokens_per_target_step", "tokens", "tokens emitted per verifying target forward; predicted: "
               "Leviathan eq. 1 at the assumed acceptance", label="Tokens per target forward (predicted: eq. 1, assumed acceptance)"),
        _trial("speedup", "", "plain greedy time / speculative time; predicted: Leviathan thm 3.8 at the measured acceptance "
               "and draft/target cost ratio", label="Speedup over plain decoding, × (predicted: thm 3.8, measured acceptance and c)"),
        _trial("speculative_token_time_s", "s", "speculative wall time per token, prefill included; predicted: plain time "
               "per token / predicted speedup", nullable=True, label="Time per token, speculative", format="duration"),
        _trial("plain_token_time_s", "s", "the target's plain greedy wall time per token, prefill included (measured: an input)",
               nullable=True, label="Time per token, plain target (measured, an input)", format="duration"),
        _trial("draft_token_time_s", "s", "the draft's plain greedy wall time per token, prefill included (measured only)",
               nullable=True, label="Time per token, plain draft (measured)", format="duration"),
        _trial("draft_cost_ratio", "", "draft time per token / target time per token: Leviathan's c (measured: an input)",
               nullable=True, label="Draft / target cost ratio c (measured, an input)"),
    ),
    "block_diffusion": (
        _trial("blocks", "", "blocks of B tokens denoised", kind="int", label="Blocks"),
        _trial("denoise_forwards", "", "denoising forwards, all blocks (S_eff per block)",
               label="Denoising forwards (all blocks)"),
        _trial("commit_forwards", "", "forwards writing a finished block's KV", kind="int", label="Commit forwards"),
        _trial("forwards", "", "forwards after the prompt's prefill: denoising + commit", label="Forwards after the prefill"),
        _trial("tokens_per_forward", "tokens", "tokens generated (all sequences) / forwards after the prefill",
               label="Tokens per forward (all sequences, tokens)"),
        _trial("time_s", "s", "wall time of the generation, the prompt's prefill included",
               label="Generation time, prefill included", format="duration"),
        _trial("tokens_per_s", "tokens/s", "tokens generated (all sequences) / generation time",
               label="Tokens/s (all sequences)"),
        _trial("mfu", "", "achieved FLOP/s / dense peak, prefill included (measured only)", nullable=True,
               label="MFU (whole run)", format="percent"),
    ),
}

# Phase breakdowns (Estimate.prefill and .decode) and the cost of one offering.
PHASE_FIELDS: tuple[ResultField, ...] = (
    _f("flops_per_chip", "FLOP", "FLOPs one chip runs in the phase's forward"),
    _f("bytes_per_chip", "B", "bytes one chip moves"),
    _f("compute_s", "s", "FLOPs at the efficiency-scaled peak (critical path)"),
    _f("memory_s", "s", "bytes at the efficiency-scaled bandwidth (critical path)"),
    _f("expert_compute_s", "s", "of compute_s, the routed experts' GEMMs (at expert_efficiency of the dense share, at the experts' own peak: "
       "on a CPU, of the units the serving engine runs them on; 0 for a dense model)"),
    _f("comm_s", "s", "tensor- and pipeline-parallel communication"),
    _f("overhead_s", "s", "fixed cost per forward (launches, scheduler, sampling)"),
    _f("time_s", "s", "the forward's time"),
    _f("intensity_flop_per_byte", "FLOP/B", "arithmetic intensity"),
    _f("ridge_flop_per_byte", "FLOP/B", "peak / bandwidth of the compute dtype: the datasheet's peak, on a CPU that of the units the "
       "serving engine multiplies the weights on"),
    _f("effective_ridge_flop_per_byte", "FLOP/B", "the ridge the times use: efficiency-scaled peak / efficiency-scaled bandwidth; "
       "the bound is compute above it, memory below it (communication and overhead aside)"),
    _f("bound", "", "compute | memory | interconnect: the largest term", kind="str"),
)
COST_FIELDS: tuple[ResultField, ...] = (
    _f("offering_slug", "", "the priced offering", kind="str"),
    _f("ownership", "", "rent (a rental: host, network, power and building included) or own (a purchase priced as a whole system)",
       kind="str"),
    _f("usd_per_chip_hour", "USD/h", "per chip: the rent, or an owned system's capex, datacentre and power per chip-hour served"),
    _f("chips_per_unit", "", "the fewest chips the offering rents or sells at once (an 8-GPU server, a TPU slice, an NVL72 rack)",
       kind="int"),
    _f("billed_chips", "", "the chips paid for: whole units covering the configuration's chips", kind="int"),
    _f("usd_per_hour", "USD/h", "the whole configuration per hour: billed chips x $/chip-hour"),
    _f("usd_per_month", "USD", "the whole configuration per month (730.5 h)"),
    _f("utilisation", "", "owned: the share of hours the system is expected to serve (each served hour carries the idle ones)",
       nullable=True),
    _f("cost_split", "USD/h", "where a chip-hour's price goes: rent; or each part's capex (accelerators, system, host, network, rack), "
       "datacentre, host power and accelerator power", kind="object"),
    _f("usd_per_million_output_tokens", "USD", "per 1M output tokens", nullable=True),
    _f("usd_per_million_input_tokens", "USD", "per 1M input tokens (the prefill's chip time)", nullable=True),
)
