"""NVIDIA AIConfigurator's silicon layout of measured serving results, read as published
(columns and meanings: the layout's README; an example is tests/fixtures/silicon_sample.csv).

Each row is one serving configuration measured at a closed-loop concurrency, with its mean
TTFT and TPOT. `read_silicon` types the rows as they are; `silicon_estimates` turns one row
into the planner's estimate of each of the two metrics:
- agg: one worker of tp x attention_dp x pp GPUs serves prefill and decode (continuous
  batching) for a closed loop of `concurrency` clients; the batch is the concurrency (a published
  batch size is not read as a cap: agg_batch), what the KV cache holds admitted, the rest waiting
  for a slot.
- disagg: TPOT from one decode worker holding concurrency / decode workers sequences (a count
  left unpublished is read as the median the rows that publish theirs deploy); TTFT
  from the prefill workers as an M/D/c queue (c workers, each serving its batch of prompts in
  one prefill) at the rate the closed loop sets: X = concurrency / (TTFT + (G - 1) TPOT), the
  benchmark's first round arriving at once (serving.py, the in-step share).
A parallel degree published as 0 or empty counts as 1 (a degree that is not used); a prefill
worker count published empty leaves the pool to be sized as the planner sizes one (enough
replicas for the highest rate the closed loop can send), a decode worker count published empty or 0 is read
with the median the rows that publish theirs deploy (published_decode_workers); tp_size 0 leaves no layout to predict
and is refused with that reason. A worker published as one GPU that cannot hold the weights is read
as a layout not recorded: the narrowest tensor-parallel worker that holds them, with a warning.
"""

from __future__ import annotations

import csv
import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .decoding import Autoregressive
from .deployment import Deployment
from .dtypes import default_kv_dtype
from .efficiency import Calibration, Efficiency, Override
from .estimate import Estimate, estimate_admitting, together_extra_s
from .serving import pool_ceiling_rate, pool_closed_loop, pool_replicas_for
from .specs import ChipSpec, ModelSpec, Workload

SILICON_COLUMNS = frozenset({"silicon_ttft_ms", "silicon_tpot_ms", "model_path", "system", "isl", "osl"})
METRICS = ("ttft_s", "tpot_s")
# The layout's precision column -> the engine's weight dtype ("" is the unquantised bf16 checkpoint).
WEIGHT_DTYPES = {"": "bf16", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "fp4": "fp4", "int4": "int4"}
ENGINE_NAMES = {"trtllm": "TensorRT-LLM", "sglang": "SGLang", "vllm": "vLLM"}


def is_silicon_layout(fieldnames: Sequence[str] | None) -> bool:
    return bool(fieldnames) and SILICON_COLUMNS <= set(fieldnames)


@dataclass(frozen=True, kw_only=True)
class WorkerLayout:
    workers: int | None  # None: not published
    batch: int | None
    tensor_parallel: int
    pipeline_parallel: int
    attention_data_parallel: int
    moe_tensor_parallel: int
    moe_expert_parallel: int

    @property
    def gpus(self) -> int:
        return self.tensor_parallel * self.attention_data_parallel * self.pipeline_parallel


@dataclass(frozen=True, kw_only=True)
class SiliconRow:
    id: str
    engine: str  # trtllm | sglang | vllm
    engine_version: str
    model_path: str  # the Hugging Face repository
    system: str  # h100_sxm, h200_sxm, b200_sxm, gb200
    precision: str
    mode: str  # agg | disagg
    prompt_tokens: int
    output_tokens: int
    concurrency: int
    agg: WorkerLayout | None
    prefill: WorkerLayout | None
    decode: WorkerLayout | None
    ttft_s: float
    tpot_s: float
    source: str

    @property
    def engine_label(self) -> str:
        return f"{ENGINE_NAMES.get(self.engine, self.engine)} {self.engine_version}".strip()

    def measured(self, metric: str) -> float:
        return self.ttft_s if metric == "ttft_s" else self.tpot_s


def _int(value: str, default: int | None = None) -> int | None:
    value = (value or "").strip()
    return int(float(value)) if value else default


def _degree(value: str) -> int:
    """A parallel degree: 0 or empty as published means the degree is not used (1)."""
    return max(_int(value, 1) or 1, 1)


def _layout(r: dict[str, str], prefix: str) -> WorkerLayout:
    tp = _int(r.get(f"{prefix}tp_size", ""), 0) or 0
    moe_tp, moe_ep = _degree(r.get(f"{prefix}moe_tp_size", "")), _degree(r.get(f"{prefix}moe_ep_size", ""))
    published_adp = (r.get(f"{prefix}attention_dp_size") or "").strip()
    adp = _degree(published_adp)
    # The layout's identity tp x attention_dp = moe_tp x moe_ep: an attention DP left empty where the
    # experts span more GPUs than the attention's TP is that ratio (vLLM's data parallelism, whose MoE
    # layers shard over every DP x TP rank).
    if not published_adp and tp >= 1 and moe_tp * moe_ep > tp and (moe_tp * moe_ep) % tp == 0:
        adp = moe_tp * moe_ep // tp
    return WorkerLayout(
        workers=_int(r.get(f"{prefix}num_workers", "")) or None, batch=_int(r.get(f"{prefix}batch_size", "")),
        tensor_parallel=tp, pipeline_parallel=_degree(r.get(f"{prefix}pp_size", "")), attention_data_parallel=adp,
        moe_tensor_parallel=moe_tp, moe_expert_parallel=moe_ep,
    )  # fmt: skip


_CONCURRENCY = re.compile(r"silicon_concurrency=(\d+)")


def read_silicon(lines: Iterable[str]) -> list[SiliconRow]:
    rows = []
    for r in csv.DictReader(lines):
        found = _CONCURRENCY.search(r["silicon_data_source"])
        agg = r["mode"] == "agg"
        concurrency = int(found.group(1)) if found else _int(r["batch_size"], 1)
        rows.append(
            SiliconRow(
                id=r["id"], engine=r["backend"], engine_version=r["backend_version"], model_path=r["model_path"].strip(), system=r["system"].strip(),
                precision=r["precision"], mode=r["mode"], prompt_tokens=int(r["isl"]), output_tokens=int(r["osl"]),
                concurrency=concurrency, agg=_layout(r, "") if agg else None, prefill=None if agg else _layout(r, "prefill_"),
                decode=None if agg else _layout(r, "decode_"), ttft_s=float(r["silicon_ttft_ms"]) / 1e3,
                tpot_s=float(r["silicon_tpot_ms"]) / 1e3, source=f"AIConfigurator silicon_sample.csv: {r['silicon_data_source']}",
            )
        )  # fmt: skip
    return rows


def _check(layout: WorkerLayout, role: str) -> None:
    if layout.tensor_parallel < 1:
        raise ValueError(f"{role}tp_size is {layout.tensor_parallel} as published: no layout to predict")


def attention_layout(model: ModelSpec, layout: WorkerLayout, node_size: int | None = None) -> tuple[WorkerLayout, str | None]:
    """The layout an engine can run: a tensor-parallel degree that does not divide the attention heads
    cannot shard them (Megatron splits heads over ranks), so a world of that many GPUs runs its
    attention data-parallel, one replica per GPU with its own KV cache, the experts spread over all of
    them, as SGLang's --enable-dp-attention and TensorRT-LLM's attention DP do (the layout then counts
    the world as tp_size). Returns the layout and, when it was read so, a note saying it."""
    tp = layout.tensor_parallel
    squared = squared_expert_layout(layout, node_size)
    if squared is not None:
        return squared
    if tp <= 1 or model.num_attention_heads % tp == 0 or layout.attention_data_parallel > 1:
        return layout, None
    note = (f"tp_size {tp} does not divide the {model.num_attention_heads} attention heads: read as attention data "
            f"parallelism over {tp} GPUs (tensor_parallel 1 x attention_data_parallel {tp})")
    return dataclasses.replace(layout, tensor_parallel=1, attention_data_parallel=tp), note


def squared_expert_layout(layout: WorkerLayout, node_size: int | None = None) -> tuple[WorkerLayout, str] | None:
    """A worker published with MoE TP N x MoE EP N and N x N GPUs of attention (tp 1 x attention DP N x N, or
    tp N x N) wider than the chip's node is N GPUs, the experts over the N (MoE TP 1), the attention as
    attention DP N or TP N: 175 DeepSeek agg rows of the dev file on 8-GPU B200 and H200 nodes (N = 8, and
    N = 4), TensorRT-LLM and SGLang. The rows' own ids name the layout "tp8_ep8" / "tp4_ep4", and 32 of them
    repeat, to the last digit in TTFT and TPOT, a row of the dev file published as the N GPUs (attention
    DP N x EP N, or TP N x EP N) (docs/accuracy.md, "What the published columns cannot say"). Within a node
    (or with no node size given) such fields are consistent (tp x adp = moe_tp x moe_ep) and kept. Returns
    None for any other layout."""
    n, tp, adp = layout.moe_expert_parallel, layout.tensor_parallel, layout.attention_data_parallel
    if not (n > 1 and layout.moe_tensor_parallel == n and tp * adp == n * n and (tp == 1 or adp == 1)):
        return None
    if node_size is None or n * n <= node_size:
        return None
    if adp > 1:
        read = dataclasses.replace(layout, attention_data_parallel=n, moe_tensor_parallel=1)
        published, attention = f"attention_dp_size {n * n}", f"attention data parallelism {n}"
    else:
        read = dataclasses.replace(layout, tensor_parallel=n, moe_tensor_parallel=1)
        published, attention = f"tp_size {n * n}", f"tensor parallelism {n}"
    note = (f"{published} with moe_tp_size {n} x moe_ep_size {n} is read as {n} GPUs: {attention} with the experts over "
            f"the {n} (the published fields square the worker's width)")  # fmt: skip
    return read, note


def agg_batch(row: SiliconRow) -> int:
    """The sequences an agg worker is asked to hold: the concurrency, capped by the engine's max batch
    per attention-DP rank times the ranks (batch_size x attention_dp_size equals the concurrency in most
    rows) where that cap reaches the concurrency. A published batch that times its ranks falls short of
    the concurrency is not read as a cap: 22 of the dev file's 23 such rows (TensorRT-LLM; 17 of them
    publish the concurrency divided by tp_size, a per-GPU figure) measure a TTFT 20-250 times shorter
    than waiting for a slot would take, and a TPOT that only the whole concurrency decoding explains
    (docs/accuracy.md, "What the published columns cannot say"). The KV cache still caps what is
    admitted (estimate_admitting)."""
    admits = (row.agg.batch or row.concurrency) * row.agg.attention_data_parallel
    return row.concurrency if admits < row.concurrency else min(row.concurrency, admits)


def _one(model, chip, layout: WorkerLayout, workload: Workload, batch: int, dtype: str, disaggregated: bool, calibration, efficiency):
    layout, note = attention_layout(model, layout, chip.node_size)

    def run(worker: WorkerLayout) -> Estimate:
        deployment = Deployment(
            chip=chip, chip_count=worker.gpus, tensor_parallel=worker.tensor_parallel, pipeline_parallel=worker.pipeline_parallel,
            attention_data_parallel=worker.attention_data_parallel, expert_parallel=worker.moe_expert_parallel, weight_dtype=dtype,
            kv_dtype=default_kv_dtype(dtype, chip), decoding=Autoregressive(),
        )  # fmt: skip
        # The engine admits what its KV cache holds; the rest of the closed loop waits for a slot.
        return estimate_admitting(model, deployment, workload, batch=batch, calibration=calibration, efficiency=efficiency,
                                  disaggregated=disaggregated)  # fmt: skip

    result = run(layout)
    if layout.gpus == 1 and layout.moe_expert_parallel == 1 and not _weights_fit(result):
        result, note = _unpublished_width(model, chip, layout, run, result)
    return dataclasses.replace(result, warnings=(*result.warnings, note)) if note else result


def _weights_fit(result: Estimate) -> bool:
    memory = result.memory
    return memory.weights_bytes_per_chip + memory.activation_bytes_per_chip < memory.usable_bytes_per_chip


def _unpublished_width(model: ModelSpec, chip: ChipSpec, layout: WorkerLayout, run, refused: Estimate) -> tuple[Estimate, str | None]:
    """A worker published as one GPU (every parallel field 1) whose weights one GPU cannot hold: the
    layout was not recorded (the dev file's SGLang GB200 DeepSeek-R1 disagg rows of 2026-04-06, 74
    values, publish 1 in every prefill and decode field), so the worker is read as the narrowest
    tensor-parallel one that holds the weights: a power of two dividing the attention heads, within
    one scale-up domain (the widths engines launch, e.g. TP 4 beside them in the same file). Said in
    a warning; where none holds them the refusal stands."""
    width = 2
    while width <= chip.node_size:
        if model.num_attention_heads % width == 0:
            wider = dataclasses.replace(layout, tensor_parallel=width, moe_tensor_parallel=width)
            result = run(wider)
            if _weights_fit(result):
                note = (f"one GPU per worker is published, which cannot hold {model.slug}'s weights at {result.weight_dtype}: the layout "
                        f"is read as not recorded, and the worker as the narrowest that holds them (tensor_parallel {width})")  # fmt: skip
                return result, note
        width *= 2
    return refused, None


# An engine's own prior needs at least this many disaggregated rows that publish their decode workers.
MIN_PUBLISHED_WORKERS = 10
POOLED_ENGINES = "*"


def published_decode_workers(rows: Iterable[SiliconRow]) -> dict[str, float]:
    """What a disaggregated row that leaves decode_num_workers empty is read as: the median count the
    rows that publish theirs deploy, per engine (by the layout's backend name) where at least
    MIN_PUBLISHED_WORKERS of its rows publish one, pooled over every engine ("*") otherwise; {} where no
    row publishes one (read as one worker). The lower median of an even number of counts, a count a
    deployment can have. A deployment prior read off the published layouts, not fitted to any error.
    The dev file: TensorRT-LLM 4 (81 rows: 3, 4, 1, 9 and 5 workers most often), SGLang 1 (56 rows),
    pooled 3 (140 rows). One decode worker holding the whole concurrency, as these rows were read
    before, put up to C sequences where the published twins of 136 of them (the same measurement
    with the layout recorded) hold C / 3 to C / 9 a worker: their TPOT over-predicted 1.4x
    (docs/accuracy.md, "What the published columns cannot say")."""
    counts: dict[str, list[int]] = {}
    for row in rows:
        if row.decode is not None and row.decode.workers:
            counts.setdefault(row.engine, []).append(row.decode.workers)
    every = [n for published in counts.values() for n in published]
    if not every:
        return {}
    priors = {POOLED_ENGINES: float(_lower_median(every))}
    priors.update({engine: float(_lower_median(n)) for engine, n in counts.items() if len(n) >= MIN_PUBLISHED_WORKERS})
    return priors


def _lower_median(counts: list[int]) -> int:
    """The median of worker counts, the lower middle one of an even number: a count a deployment can have."""
    return sorted(counts)[(len(counts) - 1) // 2]


def decode_workers_for(row: SiliconRow, priors: dict[str, float] | None) -> tuple[float, str | None]:
    """The row's decode workers: as published, else its engine's prior or the pooled one (with a note saying which)."""
    if row.decode.workers:
        return float(row.decode.workers), None
    if priors is None:
        return 1.0, None
    if row.engine in priors:
        workers, whose = priors[row.engine], f"the median of the {ENGINE_NAMES.get(row.engine, row.engine)} rows that publish theirs"
    elif POOLED_ENGINES in priors:
        workers, whose = priors[POOLED_ENGINES], "the median of every engine's rows that publish theirs (too few of this engine's do)"
    else:
        workers, whose = 1.0, "no row publishes one: one worker holds the whole concurrency"
    workers = max(workers, 1.0)
    return workers, f"decode_num_workers is not published: read as {workers:g} ({whose}; silicon.published_decode_workers)"


def silicon_estimates(
    row: SiliconRow,
    model: ModelSpec,
    chip: ChipSpec,
    *,
    calibration: Calibration | None = None,
    efficiency: Override | None = None,
    in_step_share: float | None = None,
    decode_workers: dict[str, float] | None = None,
) -> dict[str, Estimate]:
    """The estimate behind each metric of the row: {"ttft_s": ..., "tpot_s": ...}; `efficiency`
    overrides factors and `in_step_share` the closed loop's (a fitted serving-engine profile);
    `decode_workers` the priors a disaggregated row without its decode worker count is read with
    (published_decode_workers; without them, one worker holds the whole concurrency)."""
    if row.precision not in WEIGHT_DTYPES:
        known = ", ".join(p or "(empty)" for p in WEIGHT_DTYPES)
        raise ValueError(f"precision {row.precision!r} is not one of {known}")
    dtype = WEIGHT_DTYPES[row.precision]
    workload = Workload(prompt_tokens=row.prompt_tokens, output_tokens=row.output_tokens, concurrency=row.concurrency, closed_loop=True)
    if in_step_share is not None:
        workload = dataclasses.replace(workload, in_step_share=in_step_share)
    if row.agg is not None:
        _check(row.agg, "")
        # batch_size is the engine's max batch per attention-DP rank (it times attention_dp_size equals
        # the concurrency in every such row), so the worker admits batch_size x attention_dp_size.
        batch = agg_batch(row)
        both = _one(model, chip, row.agg, workload, batch, dtype, False, calibration, efficiency)
        return {"ttft_s": both, "tpot_s": both}
    _check(row.prefill, "prefill_")
    _check(row.decode, "decode_")
    open_loop = dataclasses.replace(workload, closed_loop=False)
    prompts_per_prefill = row.prefill.batch or 1
    prefill = _one(model, chip, row.prefill, open_loop, prompts_per_prefill, dtype, True, calibration, efficiency)
    workers, note = decode_workers_for(row, decode_workers)
    per_decode_worker = max(int(np.ceil(row.concurrency / workers)), 1)
    decode = _one(model, chip, row.decode, open_loop, per_decode_worker, dtype, True, calibration, efficiency)
    if isinstance(efficiency, Efficiency):
        base, per_expert_layer = efficiency.request_overhead_s, efficiency.request_overhead_per_expert_layer_s
    else:
        base, per_expert_layer = ((efficiency or {}).get(name, 0.0) for name in ("request_overhead_s", "request_overhead_per_expert_layer_s"))
    overhead = float(model.request_overhead_s(base, per_expert_layer))
    ttft = _queued_prefill(prefill, decode, row, prompts_per_prefill, overhead, workload.in_step_share)
    if note:  # both metrics rest on the decode workers: TPOT directly, TTFT through the closed loop's rate
        decode, ttft = (dataclasses.replace(e, warnings=(*e.warnings, note)) for e in (decode, ttft))
    return {"ttft_s": ttft, "tpot_s": decode}


# Every efficiency at its ceiling and no fixed cost: the planner's roofline (each peak reached, nothing spent between
# kernels or before a first token).
ROOFLINE = {"compute_fraction": 1.0, "bandwidth_fraction": 1.0, "link_bandwidth_fraction": 1.0, "expert_efficiency": 1.0,
            "step_overhead_s": 0.0, "collective_overhead_s": 0.0, "prefill_layer_overhead_s": 0.0, "request_overhead_s": 0.0,
            "request_overhead_per_expert_layer_s": 0.0}  # fmt: skip


def tpot_roofline_s(row: SiliconRow, model: ModelSpec, chip: ChipSpec, *, calibration: Calibration | None = None) -> float | None:
    """The least TPOT the planner's physics allows the row's measurements: one autoregressive decode step of its published
    layout on the planner's roofline (ROOFLINE), no prefill beside it, holding as few sequences as the measurements allow.
    By Little's law a closed loop of C clients that send each request as the last one ends decodes
    C x (G - 1) TPOT / (TTFT + (G - 1) TPOT) sequences at a time on average (G output tokens, the measured TTFT and
    TPOT); they are spread over the published decode workers, each worker taking the whole sequences below its share,
    and one a worker where the row leaves the count out. None where the measurements are not finite or the planner
    cannot run the layout."""
    if not all(np.isfinite(v) and v >= 0 for v in (row.ttft_s, row.tpot_s)) or row.concurrency < 1:
        return None
    streamed = max(row.output_tokens - 1, 0) * row.tpot_s
    decoding = row.concurrency * streamed / max(row.ttft_s + streamed, 1e-30)
    workers = row.decode.workers if row.decode is not None and row.decode.workers else 1
    per_worker = max(int(decoding // workers), 1)
    fewest = dataclasses.replace(row, concurrency=per_worker * workers)
    priors = {row.engine: float(fewest.concurrency)}  # read only where decode_num_workers is not published: one sequence each
    try:
        est = silicon_estimates(fewest, model, chip, calibration=calibration, efficiency=ROOFLINE, in_step_share=0.0, decode_workers=priors)
    except ValueError:
        return None
    decode = est["tpot_s"]
    return float(decode.decode.time_s) if decode.fits else None


def _queued_prefill(prefill: Estimate, decode: Estimate, row: SiliconRow, batch: int, request_overhead_s: float, in_step_share: float) -> Estimate:
    """The prefill estimate with the closed loop's queue in its TTFT (the request overhead is
    spent before the queue, not in a prefill worker); `batch` prompts are prefilled at once."""
    batch = max(batch, 1)
    own = np.array([prefill.ttft_s - request_overhead_s])  # one prompt's prefill on one worker
    # Each attention replica of a worker serves `batch` prompts at once: with attention DP, in a forward of one
    # prompt on each of them (serving.serving_metrics' pool), without it in one prompt's own prefill; a batch of
    # several prompts takes their prefill together.
    ranks = float(prefill.attention_data_parallel)
    service = own + together_extra_s(prefill, batch) + (prefill.prefill_rank_service_s - prefill.prefill.time_s)
    streamed = (row.output_tokens - 1) * decode.tpot_s
    if row.prefill.workers:
        servers = np.array([float(row.prefill.workers)]) * ranks
    else:
        servers = pool_replicas_for(pool_ceiling_rate(float(row.concurrency), own, streamed) / batch, service / ranks) * ranks
    loop = pool_closed_loop(clients=float(row.concurrency), service_s=service, servers=servers, prompts_per_service=batch,
                            streamed_s=streamed, overhead_s=request_overhead_s, own_s=own, in_step_share=in_step_share)  # fmt: skip
    wait = float(loop.wait_s[0])
    shared = float(loop.own_s[0] - own[0])  # at load a prompt's forward carries the other attention replicas' prompts
    return dataclasses.replace(prefill, ttft_s=prefill.ttft_s + wait + shared, queue_wait_s=wait)


def replicate_spread(rows: Sequence[SiliconRow]) -> dict:
    """Configurations published more than once with different measurements: rows equal in every column
    the planner reads (engine, model, system, precision, mode, lengths, concurrency, layouts) whose TTFT or
    TPOT differ. Each such value's absolute percentage error against its group's geometric mean is the
    least error any prediction from those columns can have on it (the best constant per group), a floor
    set by what the file does not record (speculative decoding, worker counts, the engine's version).
    {"groups": n, metric: {"mdape": %, "count": n, "by_mode_engine": {"agg TensorRT-LLM": {...}}}}."""
    groups: dict[tuple, list[SiliconRow]] = {}
    for row in rows:
        key = (row.engine, row.model_path, row.system, row.precision, row.mode, row.prompt_tokens, row.output_tokens,
               row.concurrency, row.agg, row.prefill, row.decode)  # fmt: skip
        groups.setdefault(key, []).append(row)
    out: dict = {"groups": 0}
    spread: dict[str, dict[str, list[float]]] = {metric: {} for metric in METRICS}
    for members in groups.values():
        for metric in METRICS:
            values = np.array(sorted({round(r.measured(metric), 12) for r in members}))
            if len(values) < 2:
                continue
            centre = float(np.exp(np.log(values).mean()))
            label = f"{members[0].mode} {ENGINE_NAMES.get(members[0].engine, members[0].engine)}"
            spread[metric].setdefault(label, []).extend((np.abs(centre - values) / values * 100.0).tolist())
        if any(len({round(r.measured(m), 12) for r in members}) > 1 for m in METRICS):
            out["groups"] += 1
    for metric, by_label in spread.items():
        every = [e for errors in by_label.values() for e in errors]
        out[metric] = {
            "mdape": float(np.median(every)) if every else None, "count": len(every),
            "by_mode_engine": {label: {"mdape": float(np.median(e)), "count": len(e)} for label, e in sorted(by_label.items())},
        }  # fmt: skip
    return out
