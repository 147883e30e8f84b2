"""The serving simulator against published latency percentiles (issue 15, item 6; docs/accuracy.md, "Latency
percentiles"): `manage.py simaccuracy FILE` simulates every row of a CSV of published serving benchmarks
(tests/fixtures/serving_percentiles.csv; its columns: tests/fixtures/serving_percentiles.md) and compares each
published percentile of TTFT and TPOT with the simulated one.

Each row becomes one simulation as POST /api/v1/simulations/ would run it: the catalog's model (by Hugging Face
id) and chip (by slug, alias, or the words of its name), the row's chip count and tensor parallel degree, its
serving engine's fitted profile where the planner has one for that chip, and its load: Poisson at `rate_per_s`,
a closed loop of `concurrency` clients, or a burst (every request sent at once, vLLM's `--request-rate inf`:
a closed loop as wide as the requests, or as `concurrency` when the benchmark capped it). Lengths are fixed
when their std is 0, log-normal with the stated mean and std otherwise. A row the simulator cannot run, or
whose inputs the source does not state, is listed with the reason and counted apart.

The engine runs as the benchmark configured it: a row's `kv_dtype`, `max_sequences`, `token_budget`,
`memory_fraction` and `prefill_alone` (read off its server command, or off its engine version's documented
behaviour) are the simulation's, as a request giving them would set them (SchedulerOptions), and so, on a CPU, is
its build's `cpu_matrix_dtypes` (benchmarks/measurements/README.md); left empty, the catalog engine's defaults
apply.
"""

from __future__ import annotations

import csv
import re
import statistics
from pathlib import Path
from typing import Any

from hwcatalog.models import Chip, ModelArch
from planner.accuracy import _by_name
from planner.accuracy_tables import stats_cell
from planner.engine import absolute_percentage_error, ratio_stats
from planner.engine.accuracy import server_settings
from planner import catalog_specs
from planner.engine_profiles import profiled
from planner.engine.silicon import attention_layout, is_silicon_layout, read_silicon
from planner.engine.simulation import Arrivals, Lengths, SchedulerOptions, SimulationWorkload, Slos
from planner.engine.units import DTYPES
from planner.model_configs import SILICON_ONLY, ConfigModels, configs_folder, report_lines, unknown_model_reason, with_config_models
from planner.simulation_services import SimulationRefused, simulate_setup, simulation_setup

PERCENTILES = ("p50", "p90", "p99", "mean")
METRICS = ("ttft", "tpot")
DEFAULT_REQUESTS = 1000
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


# A slug's memory-size word ("80gb" in nvidia-a100-sxm-80gb): a name without it may mean either size.
_MEMORY_SIZE = re.compile(r"\d+gb")
# Words that name a form factor; a name without one ("H100 80GB", "H200") is the SXM part, the 8-GPU HGX board
# the clouds and benchmark labs run (said in the row's notes).
FORM_FACTORS = frozenset({"sxm", "sxm2", "sxm4", "sxm5", "pcie", "nvl", "oam"})


def resolve_chip(name: str, chips: list[Chip]) -> tuple[Chip | None, str | None]:
    """The catalog chip a published name means: its slug or an alias, else the one chip whose slug's words
    (without the vendor) all appear in the name, the most specific winning, a name without a form factor read
    as the SXM part; (chip, how it was read) or (None, why) when none or several match."""
    chip, why, _ = _match_chip(name, chips)
    if chip is None and not (_words(name) & FORM_FACTORS):
        sxm, _, sizes = _match_chip(f"{name} sxm", chips)
        if sxm is not None:
            return sxm, f"{name!r} names no form factor: read as the SXM part, {sxm.slug}"
        if sizes:
            return None, f"{name!r} names no form factor (read as SXM) and no memory size: it could be any of {', '.join(sizes)}"
    return chip, why


def _match_chip(name: str, chips: list[Chip]) -> tuple[Chip | None, str | None, list[str]]:
    """(chip, None, []) for one match; (None, why, slugs) otherwise, slugs naming the chips the name would
    match with a memory size added (empty when no memory size would settle it)."""
    key = name.strip().lower()
    for chip in chips:
        if key == chip.slug or key in [a.lower() for a in (chip.aliases or [])]:
            return chip, None, []
    words = _words(name)
    matches = []
    for chip in chips:
        needed = _words(chip.slug) - {chip.slug.split("-")[0]}
        if needed and needed <= words:
            matches.append((len(needed), chip))
    if not matches:
        sized = sorted(c.slug for c in chips if (needed := _words(c.slug) - {c.slug.split("-")[0]}) and needed - words
                       and all(_MEMORY_SIZE.fullmatch(w) for w in needed - words))  # fmt: skip
        if sized:
            return None, f"{name!r} states no memory size: it could be any of {', '.join(sized)}", sized
        return None, f"no catalog chip matches {name!r}", []
    best = max(n for n, _ in matches)
    top = [c for n, c in matches if n == best]
    if len(top) > 1:
        return None, f"{name!r} could be any of {', '.join(c.slug for c in top)}", []
    return top[0], None, []


def _float(value: str) -> float | None:
    value = (value or "").strip()
    return float(value) if value else None


def _lengths(row: dict[str, str], part: str) -> Lengths:
    if row.get(f"{part}_range"):  # uniform in [low, high] (silicon_rows)
        low, high = (float(x) for x in row[f"{part}_range"].split(","))
        return Lengths.histogram((low, high), (1.0,), min_tokens=max(int(low), 1), max_tokens=int(high))
    mean, std = _float(row[f"{part}_tokens_mean"]), _float(row[f"{part}_tokens_std"])
    if mean is None:
        raise ValueError(f"{part} lengths not stated ({row.get('length_note') or 'no mean given'})")
    if not std:
        return Lengths.fixed(int(round(mean)))
    return Lengths.lognormal(mean, std)


def row_workload(row: dict[str, str]) -> tuple[SimulationWorkload, list[str]]:
    """The row's load as the simulator draws it, and what was assumed."""
    notes = []
    requests = int(_float(row["requests"]) or 0)
    if not requests:
        requests, notes = DEFAULT_REQUESTS, [f"requests not stated: {DEFAULT_REQUESTS} simulated"]
    kind = (row["arrival"] or "").strip()
    concurrency = _float(row["concurrency"])
    if kind == "poisson":
        rate = _float(row["rate_per_s"])
        if not rate:
            raise ValueError("poisson arrivals without a rate")
        arrivals = Arrivals.poisson(rate)
    elif kind == "closed_loop":
        if not concurrency:
            raise ValueError("a closed loop without its concurrency")
        arrivals = Arrivals.closed_loop(concurrency=int(concurrency))
    elif kind == "burst":  # every request sent at once: as many clients as requests, or the benchmark's cap
        arrivals = Arrivals.closed_loop(concurrency=int(concurrency or requests))
    else:
        raise ValueError(f"arrival {kind!r} is not poisson, closed_loop or burst")
    return SimulationWorkload(requests=requests, arrivals=arrivals, prompt=_lengths(row, "prompt"), output=_lengths(row, "output"), seed=0), notes


# Published weight formats -> the engine's weight dtypes (planner/engine/units.py), as the silicon reader maps them.
WEIGHT_FORMATS = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "fp8_block": "fp8", "fp4": "fp4", "nvfp4": "fp4", "mxfp4": "fp4",
                  "int8": "int8", "int4": "int4", "w4a16": "int4", "awq": "int4", "gptq": "int4"}  # fmt: skip


def _dtype(published: str) -> str:
    key = (published or "bf16").strip().lower()
    if key not in WEIGHT_FORMATS:
        raise ValueError(f"weight format {published!r} is not one of {', '.join(WEIGHT_FORMATS)}")
    return WEIGHT_FORMATS[key]


def row_scheduler(row: dict[str, str]) -> SchedulerOptions:
    """The scheduler knobs the row's benchmark set; the engine's defaults where the row leaves a column empty (the
    measurement format's server settings, read as they are there)."""
    return server_settings(row)


def _kv_dtype(row: dict[str, str]) -> str | None:
    published = (row.get("kv_dtype") or "").strip().lower()
    if published and published not in DTYPES:
        raise ValueError(f"kv_dtype {published!r} is not one of {', '.join(DTYPES)}")
    return published or None


def _configuration(row: dict[str, str], models: dict[str, Any], chips: list[Chip], from_configs: ConfigModels | None = None) -> dict[str, Any]:
    model = models.get(row["model_hf_id"].strip())
    if model is None:
        raise ValueError(unknown_model_reason(row["model_hf_id"].strip(), from_configs))
    chip, why = resolve_chip(row["chip"], chips)
    if chip is None:
        raise ValueError(why)
    count = int(_float(row["chip_count"]) or 1)
    read_as = [why] if why else []
    named = row["engine"].strip()
    catalog_engine = catalog_specs.serving_engine_named(named) if named else None  # by slug, name or alias (trtllm)
    return {
        "model": model, "chip": chip, "chip_count": count, "tensor_parallel": int(_float(row["tensor_parallel"]) or count),
        "weight_dtype": _dtype(row["weight_dtype"]), "kv_dtype": _kv_dtype(row), "decoding": {"method": "ar"},
        "efficiency": None, "offering": None,
        # The row's engine wherever the catalog's runs on the chip, as a request naming it is served (its scheduler defaults;
        # its fitted profile on NVIDIA GPUs only).
        "serving_engine": catalog_engine.name if catalog_engine and catalog_specs.engine_refusal(catalog_engine, chip) is None else None,
        "read_as": read_as,
    }  # fmt: skip


def simulation_accuracy_report(*, csv_path: Path, range_ratio: float | None = None, configs_dir: Path | None = None) -> dict[str, Any]:
    """Every published percentile of every row against its simulation, and MdAPE by percentile and metric. A file
    in AIConfigurator's silicon layout (detected by its header) is read as closed-loop means (silicon_rows), a
    checkpoint the catalog lacks read from its config in `configs_dir` (default: the configs/ folder beside the
    CSV; planner/model_configs.py), as `manage.py accuracy` reads it."""
    models = _by_name(ModelArch.objects.all(), "hf_id", "hf_aliases")
    chips = list(Chip.objects.filter(measured=False))
    from_configs = None
    with csv_path.open(newline="") as handle:
        if is_silicon_layout(csv.DictReader(handle).fieldnames):
            handle.seek(0)
            rows = silicon_rows(read_silicon(handle), range_ratio=range_ratio)
            models, from_configs = with_config_models(models, (row["model_hf_id"].strip() for row in rows), configs_folder(csv_path, configs_dir))
        else:
            if range_ratio is not None:
                raise ValueError("--range-ratio reads a silicon file's lengths; this file states its own")
            if configs_dir is not None:
                raise ValueError(SILICON_ONLY)
            handle.seek(0)
            rows = list(csv.DictReader(handle))
    values, unpredicted, first_rounds = [], [], []
    for row in rows:
        try:
            if row.get("refused"):
                raise ValueError(row["refused"])
            data = _configuration(row, models, chips, from_configs)
            workload, notes = row_workload(row)
            notes = data.pop("read_as") + notes + (_silicon_layout(row, data) if row.get("layout") else [])
            setup = simulation_setup(data=data, workload=workload)
            result, _ = simulate_setup(setup, workload, slos=Slos(), options=row_scheduler(row))
        except (ValueError, SimulationRefused) as exc:
            unpredicted.append({"id": row["id"], "reason": str(exc), "source": row["source"]})
            continue
        simulated = {"ttft": result.ttft, "tpot": result.tpot}
        first = first_round(row, mean_s=float(result.ttft.mean), p50_s=float(result.ttft.p50))
        if first is not None:
            first_rounds.append({"id": row["id"], "engine": row["engine"], "chip": data["chip"].slug, **first})
        for metric in METRICS:
            for p in PERCENTILES:
                measured_ms = _float(row.get(f"{metric}_{p}_ms", ""))
                if measured_ms is None:
                    continue
                predicted = float(getattr(simulated[metric], p))
                values.append({
                    "id": row["id"], "metric": metric, "percentile": p, "measured_s": measured_ms / 1e3, "predicted_s": predicted,
                    "ape": absolute_percentage_error(predicted, measured_ms / 1e3), "engine": row["engine"], "chip": data["chip"].slug,
                    "model": data["model"].slug, "tpot_kind": row.get("tpot_kind", ""), "overloaded": result.overloaded,
                    "serving_engine": data["serving_engine"],
                    "serving_engine_profile": data["serving_engine"] if profiled(data["serving_engine"], data["chip"]) else None,
                    "notes": notes, "source": row["source"],
                })  # fmt: skip
    report = {"values": values, "unpredicted": unpredicted, "rows": len(rows), "summary": _summary(values), "first_rounds": first_rounds}
    if from_configs is not None:
        report["models_from_configs"] = from_configs.report()
    return report


def first_round(row: dict[str, str], *, mean_s: float, p50_s: float) -> dict[str, float] | None:
    """A closed loop's first round read off its mean and median TTFT: its clients start together, so the first of its
    R = requests / clients rounds is a wave, and if every later request sat at the median, each first-round request
    waited (mean - p50) x R beyond it. The same of the simulated loop (`mean_s`, `p50_s`) says how much of that the
    simulated wave holds; None for a row that is not a closed loop of several rounds with a published mean and median."""
    mean, p50 = _float(row.get("ttft_mean_ms", "")), _float(row.get("ttft_p50_ms", ""))
    clients, requests = _float(row.get("concurrency", "")), _float(row.get("requests", ""))
    if (row.get("arrival") or "").strip() != "closed_loop" or None in (mean, p50, clients, requests) or not 0 < clients < requests:
        return None
    rounds = requests / clients
    return {"clients": clients, "rounds": rounds, "published_excess_s": (mean - p50) / 1e3 * rounds,
            "simulated_excess_s": (mean_s - p50_s) * rounds}


# A silicon row's closed loop runs this many requests per client: the harness behind published closed-loop
# sweeps of these engines sends 10 x concurrency (SemiAnalysis InferenceX's benchmark scripts, "requests = 10 x
# concurrency and 2 x concurrency warmups": tests/fixtures/serving_percentiles.csv, the InferenceX rows' notes).
# The silicon layout does not record it.
SILICON_ROUNDS = 10


def silicon_rows(measured, *, range_ratio: float | None = None) -> list[dict[str, str]]:
    """AIConfigurator's silicon rows as this module's rows: each agg row one closed loop of its concurrency,
    SILICON_ROUNDS requests a client, its mean TTFT and TPOT the published values to compare. Lengths are fixed, as
    the layout's README states, or with `range_ratio` R drawn uniformly in [R x L, L] (the InferenceX harness's
    --random-range-ratio; its sweeps use 0.8), the reading under which a closed loop's clients drift out of step.
    A row the simulation request cannot express (disaggregated, attention DP or pipeline parallel workers, as
    silicon.attention_layout reads the published fields: a simulation runs replicas of one tensor-parallel
    group) is kept with the reason it is refused."""
    if range_ratio is not None and not 0.0 < range_ratio <= 1.0:
        raise ValueError(f"range_ratio must be in (0, 1], got {range_ratio}")
    rows = []
    for r in measured:
        row = {"id": r.id, "source": r.source, "engine": r.engine, "model_hf_id": r.model_path, "chip": r.system,
               "weight_dtype": r.precision or "bf16", "arrival": "closed_loop", "concurrency": str(r.concurrency),
               "requests": str(SILICON_ROUNDS * r.concurrency), "ttft_mean_ms": f"{r.ttft_s * 1e3!r}", "tpot_mean_ms": f"{r.tpot_s * 1e3!r}",
               "tpot_kind": "tpot", "length_note": ""}  # fmt: skip
        layout = r.agg
        if layout is None:
            row["refused"] = "disaggregated: not simulated from this layout (many rows publish no worker counts); manage.py accuracy predicts it"
        elif layout.pipeline_parallel > 1 or layout.tensor_parallel < 1:
            row["refused"] = f"tp {layout.tensor_parallel} x PP {layout.pipeline_parallel}: a simulation runs replicas of one tensor-parallel group"
        else:
            # Read as the closed form reads it once the model and chip are known (_silicon_layout).
            row.update(layout=layout, chip_count=str(layout.gpus), tensor_parallel=str(layout.tensor_parallel))
        for part, tokens in (("prompt", r.prompt_tokens), ("output", r.output_tokens)):
            row[f"{part}_tokens_mean"], row[f"{part}_tokens_std"] = str(tokens), ""
            if range_ratio is not None and range_ratio < 1.0:
                row[f"{part}_range"] = f"{range_ratio * tokens!r},{float(tokens)!r}"
        rows.append(row)
    return rows


def _silicon_layout(row: dict[str, Any], data: dict[str, Any]) -> list[str]:
    """A silicon row's worker read as `manage.py accuracy` reads it (silicon.attention_layout: a squared expert
    layout as the node's GPUs, a TP that does not divide the heads as attention DP); set as the simulation's
    chips and tensor parallelism, or refused where it comes out attention-data-parallel. Returns what was read so."""
    layout, note = attention_layout(catalog_specs.model_spec(data["model"]), row["layout"], catalog_specs.chip_spec(data["chip"]).node_size)
    if layout.attention_data_parallel > 1:
        raise ValueError(f"tp {layout.tensor_parallel} x attention DP {layout.attention_data_parallel}"
                         f"{' (' + note + ')' if note else ''}: a simulation runs replicas of one tensor-parallel group")  # fmt: skip
    data.update(chip_count=layout.tensor_parallel, tensor_parallel=layout.tensor_parallel)
    notes = [note] if note else []
    if layout.moe_expert_parallel > 1:
        notes.append(f"experts published over moe_ep_size {layout.moe_expert_parallel}: simulated as the request's tensor-parallel "
                     f"group of {layout.tensor_parallel} splits them")  # fmt: skip
    return notes


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _summary(values: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in PERCENTILES:
        chosen = [v["ape"] for v in values if v["percentile"] == p]
        out[p] = {"mdape": _median(chosen), "count": len(chosen),
                  "by_metric": {m: {"mdape": _median([v["ape"] for v in values if v["percentile"] == p and v["metric"] == m]),
                                    "count": sum(1 for v in values if v["percentile"] == p and v["metric"] == m)} for m in METRICS}}  # fmt: skip
    return out


def format_simulation_accuracy(report: dict[str, Any]) -> str:
    lines = [f"{'id':40} {'metric':10} {'measured':>10} {'simulated':>10} {'APE %':>7}"]
    for v in sorted(report["values"], key=lambda v: -v["ape"]):
        lines.append(f"{v['id']:40} {v['metric'] + ' ' + v['percentile']:10} {v['measured_s']:>10.4g} {v['predicted_s']:>10.4g} {v['ape']:>7.1f}")
    for u in report["unpredicted"]:
        lines.append(f"{u['id']:40} NOT SIMULATED: {u['reason']}")
    lines.append("")
    simulated = len({v["id"] for v in report["values"]})
    lines.append(f"{simulated} of {report['rows']} rows simulated ({len(report['unpredicted'])} not), {len(report['values'])} published percentiles")
    lines += report_lines(report.get("models_from_configs"))
    for p, stats in report["summary"].items():
        if not stats["count"]:
            continue
        parts = "  ".join(f"{m} {s['mdape']:.1f}% (n={s['count']})" for m, s in stats["by_metric"].items() if s["count"])
        lines.append(f"  {p:5} MdAPE {stats['mdape']:5.1f}% over {stats['count']}: {parts}")
    return "\n".join(lines)


def _study(row_id: str) -> str:
    """The study a row belongs to: its id's first word (serving_percentiles.csv's ids: study-model-chip-...)."""
    return row_id.split("-")[0]


def _first_round_table(first_rounds: list[dict[str, Any]]) -> list[str]:
    """The closed loops' first rounds by study and chip (first_round): medians over the rows."""
    if not first_rounds:
        return []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for f in first_rounds:
        groups.setdefault((_study(f["id"]), f["chip"]), []).append(f)
    lines = ["", "The closed loops' first round (`first_round`): each first-round request's wait beyond the median TTFT, "
             "(mean - p50) x requests per client, if every later request sat at the median; published and simulated, "
             "medians over the rows of a study and chip (negative where the mean sits below the median: no first-round wait "
             "to read):", "",
             "| study | chip | rows | clients | published, s | simulated, s | published beyond simulated, s |", "|---|---|---:|---|---:|---:|---:|"]  # fmt: skip
    for (study, chip), rows in sorted(groups.items()):
        clients = sorted({int(f["clients"]) for f in rows})
        published = _median([f["published_excess_s"] for f in rows])
        simulated = _median([f["simulated_excess_s"] for f in rows])
        beyond = _median([f["published_excess_s"] - f["simulated_excess_s"] for f in rows])
        span = f"{clients[0]}" if clients[0] == clients[-1] else f"{clients[0]}-{clients[-1]}"
        cells = " | ".join(f"{round(x, 2) + 0.0:.2f}" for x in (published, simulated, beyond))  # + 0.0: no "-0.00"
        lines.append(f"| {study} | {chip} | {len(rows)} | {span} | {cells} |")
    return lines


def markdown_simulation_accuracy(report: dict[str, Any]) -> str:
    """docs/accuracy.md's tables: the summary, then every published percentile with its simulation, then the rows not simulated."""
    lines = ["| percentile | MdAPE | TTFT | TPOT |", "|---|---|---|---|"]
    for p, stats in report["summary"].items():
        if stats["count"]:
            m = stats["by_metric"]
            cell = lambda k: f"{m[k]['mdape']:.1f}% ({m[k]['count']})" if m[k]["count"] else "-"  # noqa: E731
            lines.append(f"| {p} | {stats['mdape']:.1f}% ({stats['count']}) | {cell('ttft')} | {cell('tpot')} |")
    lines += ["", "By study (the id's first word), each cell MdAPE (median simulated / published, values):", "",
              "| study | p50 TTFT | p50 TPOT | p99 TTFT | p99 TPOT |", "|---|---|---|---|---|"]
    studies: dict[str, dict[tuple[str, str], list[dict]]] = {}
    for v in report["values"]:
        studies.setdefault(_study(v["id"]), {}).setdefault((v["percentile"], v["metric"]), []).append(v)
    for study, by in sorted(studies.items()):
        if not any(p in ("p50", "p99") for p, _ in by):
            continue  # a study that publishes neither (NIM's unlabelled means)
        cells = [stats_cell(ratio_stats({"predicted": v["predicted_s"], "measured": v["measured_s"], "ape": v["ape"]} for v in by.get(key, [])))
                 for key in (("p50", "ttft"), ("p50", "tpot"), ("p99", "ttft"), ("p99", "tpot"))]  # fmt: skip
        lines.append(f"| {study} | " + " | ".join(cells) + " |")
    lines += ["", "| row | engine | chip | metric | published ms | simulated ms | APE % |", "|---|---|---|---|---:|---:|---:|"]
    for v in report["values"]:
        kind = f" ({v['tpot_kind']})" if v["metric"] == "tpot" and v["tpot_kind"] and v["tpot_kind"] != "tpot" else ""
        lines.append(f"| {v['id']} | {v['engine']} | {v['chip']} | {v['metric']}{kind} {v['percentile']} | {v['measured_s'] * 1e3:.1f} | "
                     f"{v['predicted_s'] * 1e3:.1f} | {v['ape']:.0f} |")  # fmt: skip
    lines += _first_round_table(report.get("first_rounds") or [])
    if report["unpredicted"]:
        lines += ["", "Not simulated:", ""]
        lines += [f"- {u['id']}: {u['reason']}" for u in report["unpredicted"]]
    configs = report_lines(report.get("models_from_configs"))
    return "\n".join(lines + ([""] + configs if configs else []))
