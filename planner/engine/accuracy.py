"""Accuracy against measured runs: parse the measurements CSV, predict each row,
and summarise the absolute percentage errors (MdAPE, MAPE) overall, by chip kind
and by metric. The CSV format is tests/fixtures/measured_dev.csv's (docs/accuracy.md); the Django
side looks the specs up in the catalog and calls these pure functions.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .dtypes import default_kv_dtype
from .efficiency import Calibration, Override
from .estimate import Estimate, estimate, estimate_admitting, together_extra_s
from .decoding import Decoding, Resolvers
from .decoding import decoding_from_params as _method_from_params
from .deployment import Deployment
from .parallel import largest_tensor_parallel
from .simulation.simulate import SchedulerOptions
from .specs import ChipSpec, ModelSpec, Workload
from .units import DTYPES

METRICS = ("decode_tokens_per_s_per_user", "output_tokens_per_s", "ttft_s", "tpot_s", "speedup_vs_ar")
CLOSED_LOOP = "closed_loop"
LOADS = (None, CLOSED_LOOP)


def absolute_percentage_error(predicted: float, measured: float) -> float:
    """|predicted - measured| / measured, in percent."""
    if measured == 0:
        raise ValueError("measured value is zero: percentage error undefined")
    return abs(predicted - measured) / abs(measured) * 100.0


def _stats(errors: Sequence[float]) -> dict[str, float]:
    return {"mdape": statistics.median(errors), "mape": statistics.fmean(errors), "count": len(errors)}


def summarize(rows: Iterable[Mapping]) -> dict:
    """rows: mappings with predicted, measured, metric and chip_kind (an `ape` key,
    if present, is used as is). Errors in percent."""
    items = [dict(r) for r in rows]
    if not items:
        return {"mdape": float("nan"), "mape": float("nan"), "by_chip_kind": {}, "by_metric": {}, "by_engine": {}, "count": 0}
    for r in items:
        r.setdefault("ape", absolute_percentage_error(float(r["predicted"]), float(r["measured"])))
    out = _stats([r["ape"] for r in items])
    for key, name in (("chip_kind", "by_chip_kind"), ("metric", "by_metric"), ("engine", "by_engine")):
        groups: dict[str, list[float]] = {}
        for r in items:
            groups.setdefault(str(r.get(key, "")), []).append(r["ape"])
        out[name] = {g: _stats(e) for g, e in sorted(groups.items())}
    return out


def ratio_stats(rows: Iterable[Mapping]) -> dict[str, float]:
    """MdAPE, count and the median of predicted / measured (above 1: predicted too high) of some predicted values
    (a value with either side not positive has no ratio and counts in the MdAPE only)."""
    items = list(rows)
    if not items:
        return {"mdape": float("nan"), "count": 0, "ratio": float("nan")}
    logs = [math.log(float(r["predicted"]) / float(r["measured"])) for r in items if float(r["predicted"]) > 0 and float(r["measured"]) > 0]
    ratio = math.exp(statistics.median(logs)) if logs else float("nan")
    return {"mdape": statistics.median(float(r["ape"]) for r in items), "count": len(items), "ratio": ratio}


def group_stats(rows: Iterable[Mapping], key: str | Callable[[Mapping], tuple[int, str] | None]) -> dict[str, dict[str, dict[str, float]]]:
    """{group: {metric: ratio_stats}} over the rows: grouped by a row key, the groups in the order of their names; or by
    a function of the row giving (rank, label), the groups in the order of rank (None leaves the row out)."""
    of = key if callable(key) else (lambda r: (0, str(r[key])) if r.get(key) is not None else None)
    groups: dict[tuple[int, str], dict[str, list[Mapping]]] = {}
    for r in rows:
        group = of(r)
        if group is not None:
            groups.setdefault(group, {}).setdefault(r["metric"], []).append(r)
    return {label: {m: ratio_stats(v) for m, v in sorted(by_metric.items())} for (_, label), by_metric in sorted(groups.items())}


def predict_metric(metric: str, estimate_: Estimate) -> float:
    """The number an Estimate predicts for a measured metric name."""
    if metric == "decode_tokens_per_s_per_user":
        return estimate_.tokens_per_s_per_user
    if metric == "output_tokens_per_s":  # total over all chips
        return estimate_.output_tokens_per_s_total
    if metric == "ttft_s":
        return estimate_.ttft_s
    if metric == "tpot_s":
        return estimate_.tpot_s
    if metric == "speedup_vs_ar":  # the same deployment decoding autoregressively
        return estimate_.speedup_vs_ar
    raise ValueError(f"unknown metric {metric!r}; expected one of {', '.join(METRICS)}")


def predict_measured(row: MeasuredRow, estimate_: Estimate) -> float:
    """The number an Estimate predicts for a measured row: predict_metric's, but for a static batch's TTFT (no `load`,
    a batch of several prompts sent together, as the Neuron throughput tables run them): every prompt of a replica's
    batch is prefilled before the first token of any, so each waits for the batch's prefill, not one prompt's."""
    predicted = predict_metric(row.metric, estimate_)
    if row.metric != "ttft_s" or row.load is not None or not isinstance(row.batch, int) or estimate_.batch < 2:
        return predicted
    if row.decoding == "diffusion":  # masked diffusion: the prompt rides in every step, no prefill of its own
        return predicted
    per_replica = math.ceil(estimate_.batch / max(estimate_.replicas, 1.0))  # what memory admitted of the batch
    return predicted + together_extra_s(estimate_, per_replica)


@dataclass(frozen=True, kw_only=True)
class MeasuredRow:
    id: str
    model: str
    chip: str
    chip_count: int
    tensor_parallel: int | None
    weight_dtype: str
    kv_dtype: str | None
    batch: int | str  # an int, or "max" for a max-throughput measurement
    prompt_tokens: int
    output_tokens: int
    decoding: str
    decoding_params: Mapping = field(default_factory=dict)
    metric: str = ""
    value: float = 0.0
    engine: str = ""
    source: str = ""
    notes: str = ""
    weight_format: str | None = None  # the optional column: the weights' stored format (Deployment.weight_format)
    serving_engine: str | None = None  # the optional column: the catalog serving engine the row ran on (its slug, name or alias)
    # The optional columns of a serving benchmark: `load` "closed_loop" reads `batch` as the clients of a closed loop (each
    # sends its next request when its last one ends, as a benchmark run at a maximum concurrency does), whose TTFT
    # includes the wait behind the prompts sent with it; empty, a static batch. `requests`: the prompts the run sent in
    # all, where its source states them (a closed loop's rounds: the share of them sent in step, serving.py).
    load: str | None = None
    requests: int | None = None
    # The optional server-settings columns (`max_sequences`, `token_budget`, `memory_fraction`, `prefill_alone`, read by
    # server_settings): what the run's server command set, over its engine's defaults (SchedulerOptions.configured).
    server: SchedulerOptions = field(default_factory=SchedulerOptions)

    def __post_init__(self) -> None:
        if self.load not in LOADS:
            raise ValueError(f"load {self.load!r} is not one of {', '.join(repr(v) for v in LOADS if v)} or empty")
        if self.load == CLOSED_LOOP and not isinstance(self.batch, int):
            raise ValueError(f"a closed loop needs its clients in `batch`, not {self.batch!r}")
        if self.requests is not None and (self.load != CLOSED_LOOP or self.requests < 1):
            raise ValueError("`requests` is a closed loop's count of prompts, at least 1")

    @property
    def in_step_share(self) -> float | None:
        """A closed loop's share of requests sent in step (its first round: clients / requests), where stated."""
        return min(self.batch / self.requests, 1.0) if self.requests else None  # __post_init__: an int batch


def read_measurements(lines: Iterable[str]) -> list[MeasuredRow]:
    """Parse the measurements CSV (header first; extra columns ignored); a value it cannot read is a ValueError
    naming its row."""
    rows = []
    for r in csv.DictReader(lines):
        try:
            rows.append(_measured_row(r))
        except ValueError as exc:
            raise ValueError(f"row {r.get('id') or '?'}: {exc}") from exc
    return rows


def _measured_row(r: Mapping[str, str]) -> MeasuredRow:
    batch = r["batch"].strip()
    return MeasuredRow(
        id=r["id"], model=r["model"], chip=r["chip"], chip_count=int(r["chip_count"]),
        tensor_parallel=int(r["tensor_parallel"]) if r["tensor_parallel"].strip() else None,
        weight_dtype=r["weight_dtype"], kv_dtype=r["kv_dtype"].strip() or None,
        batch="max" if batch == "max" else int(batch), prompt_tokens=int(r["prompt_tokens"]),
        output_tokens=int(r["output_tokens"]), decoding=r["decoding"],
        decoding_params=json.loads(r["decoding_params"]) if r["decoding_params"].strip() else {},
        metric=r["metric"], value=float(r["value"]), engine=r.get("engine", ""), source=r.get("source", ""),
        notes=r.get("notes", ""), weight_format=(r.get("weight_format") or "").strip() or None,
        serving_engine=(r.get("serving_engine") or "").strip() or None,
        load=(r.get("load") or "").strip() or None,
        requests=int(r["requests"]) if (r.get("requests") or "").strip() else None, server=server_settings(r),
    )  # fmt: skip


PREFILL_ALONE = {"": None, "true": True, "false": False}  # the column's values, case aside


def server_settings(r: Mapping[str, str]) -> SchedulerOptions:
    """The scheduler knobs a row's server command set (the optional columns max_sequences, token_budget,
    memory_fraction and prefill_alone; each empty or absent leaves the engine's default): SGLang's
    --max-running-requests, vLLM's --max-num-seqs and TensorRT-LLM's --max_batch_size as `max_sequences`, the prompt
    tokens a step may take as `token_budget`, the engine's memory knob under its own rule as `memory_fraction`,
    `prefill_alone` true or false; and what its build multiplies on a CPU's matrix units, `cpu_matrix_dtypes`
    (benchmarks/measurements/README.md)."""

    def text(name: str) -> str:
        return (r.get(name) or "").strip()

    def number(name: str) -> float | None:
        if not (value := text(name)):
            return None
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"{name} {value!r} is not a number") from None

    def whole(name: str) -> int | None:
        if (value := number(name)) is None:
            return None
        if not (math.isfinite(value) and value == int(value)):
            raise ValueError(f"{name} {text(name)!r} is not a whole number")
        return int(value)

    alone = text("prefill_alone")
    if alone.lower() not in PREFILL_ALONE:
        raise ValueError(f"prefill_alone {alone!r} is not true or false")
    return SchedulerOptions(max_sequences=whole("max_sequences"), token_budget=whole("token_budget"),
                            memory_fraction=number("memory_fraction"), prefill_alone=PREFILL_ALONE[alone.lower()],
                            cpu_matrix_dtypes=cpu_matrix_dtypes(text("cpu_matrix_dtypes")))  # fmt: skip


def cpu_matrix_dtypes(text: str) -> tuple[str, ...] | None:
    """The column `cpu_matrix_dtypes`: the weight dtypes the run's build multiplies on a CPU's matrix units, separated by
    spaces; `none` for a build without matrix-unit kernels; empty, the engine's default (specs.Scheduler)."""
    if not text:
        return None
    if text.lower() == "none":
        return ()
    named = tuple(text.split())
    if unknown := [d for d in named if d not in DTYPES]:
        raise ValueError(f"cpu_matrix_dtypes {text!r}: {', '.join(unknown)} is not a weight dtype ({', '.join(DTYPES)}) or none")
    return named


def decoding_from_params(kind: str, params: Mapping, draft: ModelSpec | None = None) -> Decoding:
    """A Decoding from the CSV's decoding + decoding_params columns (decoding/registry.py)."""
    return _method_from_params(kind, params, Resolvers(resolve_model=(lambda _slug: draft) if draft is not None else None))


def choose_layout(row: MeasuredRow, model: ModelSpec, chip: ChipSpec) -> tuple[int, int]:
    """(tp, pp) for a row: the stated TP; else llama.cpp's default layer split
    (`--split-mode layer`: one pipeline stage per GPU); else the largest TP that
    fits a node and divides the heads, with pipeline stages for the rest."""
    count = row.chip_count
    if row.tensor_parallel:
        return row.tensor_parallel, 1
    if "llama.cpp" in row.engine.lower():
        return 1, count
    tp = largest_tensor_parallel(model, chip, count)
    return tp, count // tp


def predict_row(
    row: MeasuredRow,
    model: ModelSpec,
    chip: ChipSpec,
    *,
    draft: ModelSpec | None = None,
    efficiency: Override | None = None,
    calibration: Calibration | None = None,
) -> Estimate:
    """Estimate the configuration a measured row describes, under what its server command set (row.server) over the
    scheduler `chip` carries (its serving engine's defaults, where the row names one)."""
    if refusal := row.server.refusal(chip.kind, chip.slug):
        raise ValueError(refusal)
    chip = row.server.configured(chip)
    tp, pp = choose_layout(row, model, chip)
    deployment = Deployment(
        chip=chip, chip_count=row.chip_count, tensor_parallel=tp, pipeline_parallel=pp, weight_dtype=row.weight_dtype,
        weight_format=row.weight_format, kv_dtype=row.kv_dtype or default_kv_dtype(row.weight_dtype, chip),
        decoding=decoding_from_params(row.decoding, row.decoding_params, draft),
    )  # fmt: skip
    loop = {"concurrency": row.batch, "closed_loop": True} if row.load == CLOSED_LOOP else {}
    share = {"in_step_share": row.in_step_share} if row.in_step_share is not None else {}
    workload = Workload(prompt_tokens=row.prompt_tokens, output_tokens=row.output_tokens, **loop, **share)
    # A measured run past the model's context (the Neuron benchmarks run Llama-2 over 8,192 positions of its
    # 4,096) is predicted as it ran: the limit guards answer quality, which a speed measurement does not judge.
    past = workload.context_tokens > model.max_context_tokens
    if past:
        note = (f"the measured run used {workload.context_tokens} positions, past {model.slug}'s context of "
                f"{model.max_context_tokens}: predicted as it ran")  # fmt: skip
        model = dataclasses.replace(model, max_context_tokens=workload.context_tokens)
    if isinstance(row.batch, int):  # a batch the KV cache cannot hold runs what it holds (estimate_admitting)
        result = estimate_admitting(model, deployment, workload, batch=row.batch, efficiency=efficiency, calibration=calibration)
    else:
        result = estimate(model, deployment, workload, batch=row.batch, efficiency=efficiency, calibration=calibration)
    return dataclasses.replace(result, warnings=(*result.warnings, note)) if past else result
