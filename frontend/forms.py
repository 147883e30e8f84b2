"""The plan form: flat HTML field names <-> PlanInputSerializer's nested input and errors.

Validation is the serializer's (the same one the REST API uses); this module only moves
values and messages between the form's flat names and the serializer's nested shape.
"""
from __future__ import annotations

import json

import re
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

from hwcatalog.importers.config_file import ConfigFileError, read_config_file
from planner.simulation_services import row_max_sequences

# Workload presets: starting points a person edits. Latency targets follow common practice for
# interactive serving (first token within ~0.5 s, >= 20 tokens/s per reader); offline batch
# work has no latency target and is sized by its arrival rate.
PRESETS: dict[str, dict[str, Any]] = {
    "chat": {
        "label": "Chat assistant",
        "prompt_tokens": 1000, "output_tokens": 300, "load_kind": "concurrency", "concurrency": 64,
        "request_rate_per_s": "", "ttft_slo_s": 0.5, "tpot_slo_s": 0.05,
    },
    "rag": {
        "label": "Long-prompt RAG",
        "prompt_tokens": 16000, "output_tokens": 400, "load_kind": "concurrency", "concurrency": 16,
        "request_rate_per_s": "", "ttft_slo_s": 2.0, "tpot_slo_s": 0.05,
    },
    "code": {
        "label": "Code completion",
        "prompt_tokens": 2000, "output_tokens": 64, "load_kind": "concurrency", "concurrency": 32,
        "request_rate_per_s": "", "ttft_slo_s": 0.2, "tpot_slo_s": 0.02,
    },
    "batch": {
        "label": "Offline batch summarisation",
        "prompt_tokens": 4000, "output_tokens": 500, "load_kind": "request_rate", "concurrency": "",
        "request_rate_per_s": 5, "ttft_slo_s": "", "tpot_slo_s": "",
    },
}  # fmt: skip
DEFAULT_PRESET = "chat"
DEFAULT_MODEL = "llama-3.1-70b"

WORKLOAD_FIELDS = ("prompt_tokens", "output_tokens", "ttft_slo_s", "tpot_slo_s")
HARDWARE_LISTS = ("kinds", "vendors", "pricing_models", "weight_dtypes")
DECODING_FIELDS = {
    "speculative": ("draft_model", "draft_tokens", "acceptance_rate"),
    "diffusion": ("steps", "window_tokens"),
    "block_diffusion": ("block_size", "steps_per_block"),
}
# Serializer field name -> form field name, where they differ.
ALIASES = {"method": "decoding_method", "budget_usd_per_million_output_tokens": "budget", "closed_loop": "concurrency",
           "scheduler": "serving_engine"}  # a scheduler without its engine: the error belongs beside the engine's select
# The named serving engine's command line over its defaults (PlanInputSerializer.scheduler), as the form spells it;
# cpu_matrix_dtypes (a CPU build's matrix-unit dtypes) is typed as text (matrix_dtypes_payload).
SERVER_SETTINGS = ("max_sequences", "token_budget", "memory_fraction", "cpu_matrix_dtypes")
# What a person types for a build without the matrix-unit kernels (the API's []).
NO_MATRIX_KERNELS = "none"
# Errors on a whole group are shown at the top of its fieldset.
GROUPS = ("workload", "hardware", "decodings")
# Percentile SLOs (PlanInputSerializer.slo_percentiles: {"ttft": {"p", "s"}, "tpot": ...}) as flat fields, and the
# simulation stage's size (simulation.top_n, simulation.requests); absent, the plan has no simulation stage.
PERCENTILE_SLO_FIELDS = ("slo_ttft_p", "slo_ttft_s", "slo_tpot_p", "slo_tpot_s")
PLAN_STAGE_FIELDS = ("sim_top_n", "sim_requests")
DEFAULT_PERCENTILE = 95
FORM_FIELDS = {
    "model", "config_file", "import_name", "prompt_tokens", "output_tokens", "concurrency", "request_rate_per_s",
    "ttft_slo_s", "tpot_slo_s", "max_chips", "ownership", "decoding_method", "budget", "disaggregated", "pinned", "serving_engine",
    "adaptive_window", "name", "tags", "rank_by", *HARDWARE_LISTS, *(f for fields in DECODING_FIELDS.values() for f in fields),
    *SERVER_SETTINGS, *PERCENTILE_SLO_FIELDS, *PLAN_STAGE_FIELDS,
}  # fmt: skip


def initial_values(*, model_slug: str | None = None) -> dict[str, Any]:
    preset = PRESETS[DEFAULT_PRESET]
    values: dict[str, Any] = {k: v for k, v in preset.items() if k != "label"}
    values.update(
        preset=DEFAULT_PRESET, model=model_slug or DEFAULT_MODEL, max_chips=64, ownership="any", decoding_method="ar",
        draft_tokens=4, acceptance_rate=0.7, kinds=[], vendors=[], pricing_models=[], weight_dtypes=[], rank_by="expected",
        slo_ttft_p=DEFAULT_PERCENTILE, slo_tpot_p=DEFAULT_PERCENTILE,
    )  # fmt: skip
    return values


def submitted_values(post) -> dict[str, Any]:
    """The form's values as submitted, for redisplay (lists for the checkbox groups)."""
    values: dict[str, Any] = {name: post.get(name, "") for name in FORM_FIELDS if name not in HARDWARE_LISTS}
    values.update({name: post.getlist(name) for name in HARDWARE_LISTS})
    values["preset"] = post.get("preset", "")
    values["load_kind"] = post.get("load_kind", "concurrency")
    return values


def _given(value: Any) -> bool:
    return value not in (None, "")


def matrix_dtypes_payload(text: str) -> list[str]:
    """A CPU build's matrix-unit dtypes as typed ("int4 int8", "int4, int8", or "none" for a build without the kernels)
    -> the API's list ([] for none); the serializer checks each name."""
    text = text.strip()
    if text.lower() in (NO_MATRIX_KERNELS, "[]"):
        return []
    return [part for part in re.split(r"[\s,]+", text) if part]


def matrix_dtypes_text(value: Any) -> str:
    """The API's list as the form shows it: "" when absent (the engine's list), "none" for [], else the dtypes."""
    if value is None:
        return ""
    return " ".join(value) if value else NO_MATRIX_KERNELS


def _server_settings(post, names) -> dict[str, Any]:
    """The scheduler's settings a form gives (strings as typed: the serializer reads them); the build's dtypes as a list."""
    settings = {name: post.get(name, "").strip() for name in names if _given(post.get(name, "").strip())}
    if "cpu_matrix_dtypes" in settings:
        settings["cpu_matrix_dtypes"] = matrix_dtypes_payload(settings["cpu_matrix_dtypes"])
    return settings


def plan_payload(post, *, model_slug: str | None = None) -> dict[str, Any]:
    """PlanInputSerializer input from the form's POST data. Strings are passed through
    unchanged so the serializer reports "A valid integer is required." etc. itself."""
    workload = {name: post.get(name) for name in WORKLOAD_FIELDS if _given(post.get(name))}
    load = "request_rate_per_s" if post.get("load_kind") == "request_rate" else "concurrency"
    if _given(post.get(load)):
        workload[load] = post.get(load)
    elif post.get("load_kind") == "request_rate":  # the kind chosen names its field: left empty, the serializer says so
        workload[load] = None
    if post.get("load_kind") == "closed_loop":  # clients that send again when answered; those memory cannot hold queue
        workload["closed_loop"] = True
    hardware: dict[str, Any] = {name: post.getlist(name) for name in HARDWARE_LISTS if post.getlist(name)}
    for name in ("max_chips", "ownership"):
        if _given(post.get(name)):
            hardware[name] = post.get(name)
    method = post.get("decoding_method") or "ar"
    decoding: dict[str, Any] = {"method": method}
    for name in DECODING_FIELDS.get(method, ()):
        if _given(post.get(name)):
            decoding[name] = post.get(name)
    if method == "diffusion":
        decoding["adaptive_window"] = post.get("adaptive_window") == "on"
    payload: dict[str, Any] = {
        "model": model_slug or post.get("model", ""),
        "workload": workload,
        "hardware": hardware,
        "disaggregated": post.get("disaggregated") == "on",
        "pinned": post.get("pinned") == "on",
    }
    if post.get("decoding_method"):
        payload["decodings"] = [decoding]
    if _given(post.get("budget")):
        payload["budget_usd_per_million_output_tokens"] = post.get("budget")
    if _given(post.get("serving_engine")):  # empty: search every engine
        payload["serving_engine"] = post.get("serving_engine")
    scheduler = _server_settings(post, SERVER_SETTINGS)
    if scheduler:  # without an engine the serializer refuses it, beside the engine's select
        payload["scheduler"] = scheduler
    if _given(post.get("rank_by")):
        payload["rank_by"] = post.get("rank_by")
    payload.update(percentile_slos_payload(post))
    payload.update(labels_payload(post))
    return payload


def percentile_slos_payload(post) -> dict[str, Any]:
    """The form's percentile SLOs and simulation stage, as PlanInputSerializer takes them: a metric's SLO where its bound
    is typed (its percentile as typed, 95 when left empty), the stage's size where typed; strings for the serializer to read."""
    slos = {
        metric: {"p": post.get(f"slo_{metric}_p") if _given(post.get(f"slo_{metric}_p")) else DEFAULT_PERCENTILE, "s": post.get(f"slo_{metric}_s")}
        for metric in ("ttft", "tpot") if _given(post.get(f"slo_{metric}_s"))
    }  # fmt: skip
    stage = {name.removeprefix("sim_"): post.get(name) for name in PLAN_STAGE_FIELDS if _given(post.get(name))}
    return {"slo_percentiles": slos, **({"simulation": stage} if stage else {})} if slos else {}  # the stage's size serves a bound


def labels_payload(post) -> dict[str, Any]:
    """A plan's name and tags from a form: the tags typed comma-separated ("chat, Q3" -> ["chat", "Q3"];
    the serializer lower-cases and checks each)."""
    labels: dict[str, Any] = {}
    if "name" in post:
        labels["name"] = post.get("name", "")
    if "tags" in post:
        labels["tags"] = [tag.strip() for tag in post.get("tags", "").split(",") if tag.strip()]
    return labels


def _flatten(errors: Any, path: tuple = ()) -> list[tuple[tuple, str]]:
    if isinstance(errors, Mapping):
        return [item for key, value in errors.items() for item in _flatten(value, path + (key,))]
    if isinstance(errors, (list, tuple)):
        if all(isinstance(e, str) for e in errors):
            return [(path, str(e)) for e in errors]
        return [item for i, value in enumerate(errors) for item in _flatten(value, path + (i,))]
    return [(path, str(errors))] if errors else []


def field_for(path: tuple) -> str:
    """The form field that shows an error at a serializer path: ("workload", "prompt_tokens")
    -> "prompt_tokens"; ("decodings", 0, "method") -> "decoding_method"; ("hardware", "kinds", 0)
    -> "kinds"; a group-level error -> the group; anything else -> "form"."""
    names = [str(p) for p in path if not isinstance(p, int) and p != "non_field_errors"]
    if not names:
        return "form"
    if names[0] == "slo_percentiles" and len(names) == 3:  # ("slo_percentiles", "ttft", "s") -> "slo_ttft_s"
        return f"slo_{names[1]}_{names[2]}"
    if names[0] == "simulation" and len(names) == 2 and f"sim_{names[1]}" in FORM_FIELDS:
        return f"sim_{names[1]}"
    if names[0] in ("slo_percentiles", "simulation"):
        return "slo_percentiles"
    name = ALIASES.get(names[-1], names[-1])
    if name in FORM_FIELDS:
        return name
    for group in reversed(names):
        if group in GROUPS:
            return group
    return "form"


def form_errors(serializer_errors: Any) -> dict[str, list[str]]:
    """Serializer errors (nested dicts and lists) -> {form field: [messages]}."""
    out: dict[str, list[str]] = {}
    for path, message in _flatten(serializer_errors):
        out.setdefault(field_for(path), []).append(message)
    return out


def catalog_slug(text: str) -> str:
    """'Meta-Llama-3.1-8B' -> 'meta-llama-3.1-8b' (the catalog's slug alphabet keeps dots)."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.")[:70].strip("-.")


@dataclass
class UploadedConfig:
    config: dict[str, Any] | None
    slug: str
    explicit_slug: bool
    error: str | None = None


def read_config_upload(upload, *, name: str = "") -> UploadedConfig:
    """Parse an uploaded config.json; the slug comes from the given name, else from the
    config's _name_or_path, else from the file name."""
    explicit = bool(name.strip())
    config: dict[str, Any] | None = None
    error = None
    try:
        config = read_config_file(upload)
    except ConfigFileError as exc:
        error = str(exc)
    stem = upload.name.rsplit("/", 1)[-1].removesuffix(".json")
    candidates = [name] if explicit else [str((config or {}).get("_name_or_path") or "").rsplit("/", 1)[-1], stem,
                                          str((config or {}).get("model_type") or ""), "uploaded-model"]  # fmt: skip
    slug = next((s for s in (catalog_slug(c) for c in candidates) if s and s != "config"), "uploaded-model")
    return UploadedConfig(config=config, slug=slug, explicit_slug=explicit, error=error)


# --- the fleet form ---------------------------------------------------------------------------
# FleetInputSerializer's input from flat fields: the request classes are rows of fields named
# "class-<row>-<field>"; a row with nothing typed in it is left out. As for plans, the serializer
# validates everything and its errors are moved back onto the fields that caused them.
FLEET_CLASS_ROWS = 5
FLEET_CLASS_FIELDS = ("name", "prompt_tokens", "output_tokens", "requests_per_s", "ttft_slo_s", "tpot_slo_s")
FLEET_HARDWARE_LISTS = ("kinds", "vendors", "chips")
FLEET_LIMIT_FIELDS = ("wall_kw_max", "racks_max", "rack_kw_max", "systems_per_rack")
FLEET_HORIZON_FIELDS = ("months", "monthly_growth")
FLEET_DEFAULT_MODEL = "llama-3.1-8b"
# Starting rows a person edits: interactive chat with latency targets beside batch work that may run on spot capacity.
FLEET_STARTING_CLASSES = (
    {"name": "chat", "prompt_tokens": 1000, "output_tokens": 300, "requests_per_s": 5, "ttft_slo_s": 0.5, "tpot_slo_s": 0.05, "interruptible": ""},
    {"name": "batch", "prompt_tokens": 4000, "output_tokens": 500, "requests_per_s": 2, "ttft_slo_s": "", "tpot_slo_s": "", "interruptible": "on"},
)  # fmt: skip
# The form's fields under each group of the serializer's input, and those at its top level. Errors on a
# whole group (or on a part the form does not set, such as a chip's supply limit) show at the top of its fieldset.
FLEET_GROUP_FIELDS = {
    "hardware": (*FLEET_HARDWARE_LISTS, "max_chips", "ownership"),
    "limits": (*FLEET_LIMIT_FIELDS, "apply_to"),
    "horizon": (*FLEET_HORIZON_FIELDS, "hourly_shape"),
}
FLEET_TOP_FIELDS = ("name", "model", "target_utilisation")
FLEET_FIELDS = {*FLEET_TOP_FIELDS, *(name for fields in FLEET_GROUP_FIELDS.values() for name in fields)}
FLEET_GROUPS = ("classes", *FLEET_GROUP_FIELDS)


def class_field(row: int, name: str) -> str:
    return f"class-{row}-{name}"


def fleet_initial_values(*, model_slug: str | None = None) -> dict[str, Any]:
    values: dict[str, Any] = {
        "name": "", "model": model_slug or FLEET_DEFAULT_MODEL, "max_chips": 8, "ownership": "any", "kinds": [], "vendors": [], "chips": [],
        "wall_kw_max": "", "racks_max": "", "rack_kw_max": "", "systems_per_rack": "", "apply_to": "owned",
        "months": 1, "monthly_growth": 0, "hourly_shape": "", "target_utilisation": "",
    }  # fmt: skip
    for row in range(FLEET_CLASS_ROWS):
        start = FLEET_STARTING_CLASSES[row] if row < len(FLEET_STARTING_CLASSES) else {}
        for name in (*FLEET_CLASS_FIELDS, "interruptible"):
            values[class_field(row, name)] = start.get(name, "")
    return values


def fleet_submitted_values(post) -> dict[str, Any]:
    """The fleet form's values as submitted, for redisplay."""
    values: dict[str, Any] = {name: post.get(name, "") for name in FLEET_FIELDS if name not in FLEET_HARDWARE_LISTS}
    values.update({name: post.getlist(name) for name in FLEET_HARDWARE_LISTS})
    for row in range(FLEET_CLASS_ROWS):
        for name in (*FLEET_CLASS_FIELDS, "interruptible"):
            values[class_field(row, name)] = post.get(class_field(row, name), "")
    return values


def fleet_payload(post) -> tuple[dict[str, Any], list[int]]:
    """FleetInputSerializer input from the form's POST data, and for each class it sends, the form
    row it came from (so an error on classes[1] reaches the row the person typed it in). Strings
    pass through unchanged: the serializer says what is wrong with them."""
    classes, rows = [], []
    for row in range(FLEET_CLASS_ROWS):
        typed = {name: post.get(class_field(row, name), "").strip() for name in FLEET_CLASS_FIELDS}
        if not any(typed.values()):
            continue
        entry: dict[str, Any] = {name: value for name, value in typed.items() if value or name == "name"}
        entry["interruptible"] = post.get(class_field(row, "interruptible")) == "on"
        classes.append(entry)
        rows.append(row)
    hardware: dict[str, Any] = {name: post.getlist(name) for name in FLEET_HARDWARE_LISTS if post.getlist(name)}
    for name in ("max_chips", "ownership"):
        if _given(post.get(name)):
            hardware[name] = post.get(name)
    limits: dict[str, Any] = {name: post.get(name) for name in FLEET_LIMIT_FIELDS if _given(post.get(name))}
    limits["apply_to"] = post.get("apply_to") or "owned"
    horizon: dict[str, Any] = {name: post.get(name) for name in FLEET_HORIZON_FIELDS if _given(post.get(name))}
    shape = post.get("hourly_shape", "").strip()
    if shape:
        horizon["hourly_shape"] = [part.strip() for part in shape.split(",")]
    payload: dict[str, Any] = {"model": post.get("model", ""), "classes": classes, "hardware": hardware, "limits": limits, "horizon": horizon}
    for name in ("name", "target_utilisation"):
        if _given(post.get(name, "").strip()):
            payload[name] = post.get(name).strip()
    return payload, rows


def fleet_field_for(path: tuple, rows: list[int]) -> str:
    """The fleet form field that shows an error at a serializer path: ("classes", 1, "prompt_tokens")
    -> "class-<row of classes[1]>-prompt_tokens"; ("limits", "wall_kw_max") -> "wall_kw_max";
    ("horizon", "hourly_shape", 3) -> "hourly_shape"; a group-level error -> the group."""
    keys = [p for p in path if p != "non_field_errors"]
    if len(keys) >= 3 and keys[0] == "classes" and isinstance(keys[1], int) and 0 <= keys[1] < len(rows):
        if keys[2] in (*FLEET_CLASS_FIELDS, "interruptible"):
            return class_field(rows[keys[1]], keys[2])
    names = [str(k) for k in keys if not isinstance(k, int)]
    if not names:
        return "form"
    if names[0] in FLEET_GROUP_FIELDS:
        return names[1] if len(names) > 1 and names[1] in FLEET_GROUP_FIELDS[names[0]] else names[0]
    if names[0] == "classes" or names[0] in FLEET_TOP_FIELDS:
        return names[0]
    return "form"


def fleet_form_errors(serializer_errors: Any, rows: list[int]) -> dict[str, list[str]]:
    """Serializer errors (nested dicts and lists) -> {fleet form field: [messages]}."""
    out: dict[str, list[str]] = {}
    for path, message in _flatten(serializer_errors):
        out.setdefault(fleet_field_for(path, rows), []).append(message)
    return out


def fleet_refused_field(field: str) -> str:
    """The form field a FleetRefused names: a group, or a limit's own field where the form has one
    ("chips" there is limits.chips, a chip's supply, which this form does not set)."""
    return field if field in FLEET_GROUPS or field in FLEET_GROUP_FIELDS["limits"] else "limits"


def fleet_class_rows(values: Mapping[str, Any], errors: Mapping[str, list[str]]) -> list[dict[str, Any]]:
    """The class rows for the template: each row's values and errors by field name."""
    names = (*FLEET_CLASS_FIELDS, "interruptible")
    return [{
        "n": row, "number": row + 1, "prefix": class_field(row, ""),
        "values": {name: values.get(class_field(row, name), "") for name in names},
        "errors": {name: errors.get(class_field(row, name), []) for name in names if errors.get(class_field(row, name))},
    } for row in range(FLEET_CLASS_ROWS)]  # fmt: skip


# --- the simulation form ----------------------------------------------------------------------
# SimulationInputSerializer's input (POST /api/v1/simulations/) from flat fields. As for plans and fleets,
# the serializer validates everything and its errors are moved back onto the fields that caused them.
SIMULATION_DEFAULT_MODEL = "llama-3.1-8b"
SIMULATION_DEFAULT_CHIP = "nvidia-h100-sxm"
SIMULATION_DEFAULT_REQUESTS = 1000
SIMULATION_DEFAULT_PERCENTILE = 95
ARRIVAL_CHOICES = (("poisson", "Poisson at a rate"), ("gamma", "Bursty (gamma gaps with a CV)"), ("closed_loop", "Closed loop of clients"),
                   ("trace", "A recorded trace (upload)"))  # fmt: skip
LENGTH_CHOICES = (("fixed", "Fixed"), ("lognormal", "Log-normal (mean, std)"))
SIMULATION_CONFIG_FIELDS = ("model", "chip", "chip_count", "tensor_parallel", "weight_dtype", "kv_dtype", "serving_engine", "offering")
SIMULATION_FIELDS = (
    *SIMULATION_CONFIG_FIELDS, "requests", "arrivals", "rate_per_s", "cv", "concurrency", "think_time_s",
    "prompt_kind", "prompt_tokens", "prompt_std_tokens", "output_kind", "output_tokens", "output_std_tokens", "seed",
    "ttft_p", "ttft_s", "tpot_p", "tpot_s", "prefill_replicas", "sweep_rates", "max_sequences", "memory_fraction", "prefill_alone",
    "cpu_matrix_dtypes", "plan", "rank", "decoding",
)  # fmt: skip
# The scheduler's prefill mode: the engine's default, or either way set as a command line would set it.
PREFILL_MODE_CHOICES = (("", "The engine's default"), ("true", "Prefills run alone (SGLang; vLLM V0 without chunked prefill)"),
                        ("false", "Prefill chunks share steps with decodes (vLLM V1, TensorRT-LLM)"))  # fmt: skip
SCHEDULER_FORM_FIELDS = ("max_sequences", "memory_fraction", "prefill_alone", "cpu_matrix_dtypes")
# Serializer paths -> the form field that shows their errors (the longest matching prefix wins); a group's
# own errors show at the top of its fieldset ("workload", "slos").
SIMULATION_ERROR_FIELDS: dict[tuple[str, ...], str] = {
    ("workload",): "workload", ("workload", "requests"): "requests", ("workload", "seed"): "seed",
    ("workload", "arrivals"): "arrivals", ("workload", "arrivals", "rate_per_s"): "rate_per_s", ("workload", "arrivals", "cv"): "cv",
    ("workload", "arrivals", "concurrency"): "concurrency", ("workload", "arrivals", "think_time_s"): "think_time_s",
    **{path: field for part in ("prompt", "output") for path, field in (
        (("workload", part), f"{part}_tokens"), (("workload", part, "kind"), f"{part}_kind"),
        (("workload", part, "std_tokens"), f"{part}_std_tokens"),
    )},
    **{path: field for metric in ("ttft", "tpot") for path, field in (
        (("slo_percentiles", metric), f"{metric}_s"), (("slo_percentiles", metric, "p"), f"{metric}_p"),
    )},
    ("slo_percentiles",): "slos", ("disaggregated",): "prefill_replicas", ("sweep",): "sweep_rates", ("scheduler",): "max_sequences",
    **{("scheduler", name): name for name in SCHEDULER_FORM_FIELDS},
    ("decoding",): "form", ("trace_file",): "trace_file", ("trace",): "trace_file", ("trace_format",): "trace_file",
    **{(name,): name for name in SIMULATION_CONFIG_FIELDS},
}  # fmt: skip
# Chip kinds whose prompts are padded to buckets: the simulator's step cost has no padding (docs/simulation.md).
PADDED_CHIP_KINDS = frozenset({"tpu"})


def simulation_initial_values() -> dict[str, Any]:
    """An empty form: a small chat workload on one chip, the simulator's own defaults elsewhere."""
    return {
        "model": SIMULATION_DEFAULT_MODEL, "chip": SIMULATION_DEFAULT_CHIP, "chip_count": 1, "tensor_parallel": "auto", "weight_dtype": "bf16",
        "kv_dtype": "", "serving_engine": "", "offering": "", "requests": SIMULATION_DEFAULT_REQUESTS, "arrivals": "poisson", "rate_per_s": 5,
        "cv": 2, "concurrency": 32, "think_time_s": "", "prompt_kind": "fixed", "prompt_tokens": 1000, "prompt_std_tokens": "",
        "output_kind": "fixed", "output_tokens": 200, "output_std_tokens": "", "seed": 0, "ttft_p": SIMULATION_DEFAULT_PERCENTILE,
        "ttft_s": 0.5, "tpot_p": SIMULATION_DEFAULT_PERCENTILE, "tpot_s": 0.05, "prefill_replicas": "", "sweep_rates": "",
        "max_sequences": "", "memory_fraction": "", "prefill_alone": "", "cpu_matrix_dtypes": "", "plan": "", "rank": "", "decoding": "",
    }  # fmt: skip


# Decoding labels (planner/engine/decoding/) the simulator steps: autoregressive, speculative rounds, diffusion blocks.
SIMULATED_DECODING_PREFIXES = ("ar", "speculative(", "mtp(", "eagle(", "medusa(", "block_diffusion(")


def simulation_refusal(row: Mapping[str, Any]) -> str | None:
    """Why the simulation form cannot run a plan's ranked row (None: it can): the layouts and decodings the
    simulator refuses (planner/simulation_serializers.py, engine/simulation/step_cost.py). The row's decoding
    travels with the form as the plan's own options (simulation_values_from_plan)."""
    if (row.get("pipeline_parallel") or 1) != 1:
        return f"Pipeline parallel {row['pipeline_parallel']}: the simulator models one pipeline stage."
    if (row.get("attention_data_parallel") or 1) != 1:
        return f"Attention data parallel {row['attention_data_parallel']}: the simulator models one KV cache per replica."
    decoding = row.get("decoding") or "ar"
    if not (decoding == "ar" or decoding.startswith(SIMULATED_DECODING_PREFIXES[1:])):
        return f"Decoding {decoding}: the simulator steps autoregressive, speculative and block-diffusion decoding only."
    if row.get("chip_kind") in PADDED_CHIP_KINDS:
        return f"{row.get('chip_slug')} pads prompts to buckets, which the simulator does not model."
    return None


def _prefill_replicas(plan_inputs: Mapping[str, Any], row: Mapping[str, Any]) -> int | str:
    """A disaggregated plan row's prefill pool in replicas of the row's shape, as a plan's simulation stage counts it."""
    if not plan_inputs.get("disaggregated"):
        return ""
    per_replica = (row.get("tensor_parallel") or 1) * (row.get("pipeline_parallel") or 1) * (row.get("attention_data_parallel") or 1)
    pool = float(row.get("total_chips") or row.get("chip_count") or 0) - float(row.get("chip_count") or 0)
    return max(int(round(pool / per_replica)), 1)


def simulation_values_from_plan(plan_inputs: Mapping[str, Any], row: Mapping[str, Any], *, plan_id: Any, rank: int,
                                 decoding: Mapping[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """The form prefilled with a plan's ranked row (its configuration, its batch per replica as max_num_seqs, the scheduler
    knobs of the plan's simulation stage, as the stage runs it, and the plan's CPU build) and the plan's workload: fixed
    prompt and output lengths, Poisson at its request rate, and its latency targets as p95 SLOs (or the plan's own
    percentile SLOs). A colocated plan sized by concurrency runs as a closed loop of that many clients with no think
    time: its batch held steady is what such clients keep in flight (plan_holds_a_steady_batch). A disaggregated one
    has no rate to give (the simulator loops colocated replicas only): the person gives it."""
    workload = plan_inputs.get("workload") or {}
    percentiles = plan_inputs.get("slo_percentiles") or {}
    scheduler = (plan_inputs.get("simulation") or {}).get("scheduler") or {}  # the stage's knobs, as it ran the row
    server = plan_inputs.get("scheduler") or {}  # the plan's server settings, which its candidates (and so the stage) ran under
    alone = scheduler.get("prefill_alone")
    values = simulation_initial_values()
    values.update(
        model=row.get("model_slug") or plan_inputs.get("model", ""), chip=row.get("chip_slug", ""), chip_count=row.get("chip_count", 1),
        tensor_parallel=row.get("tensor_parallel", "auto"), weight_dtype=row.get("weight_dtype", "bf16"), kv_dtype=row.get("kv_dtype") or "",
        serving_engine=row.get("serving_engine") or "", offering=row.get("offering") or "",
        rate_per_s=workload.get("request_rate_per_s") or "", concurrency=workload.get("concurrency") or values["concurrency"],
        prompt_tokens=workload.get("prompt_tokens", values["prompt_tokens"]), output_tokens=workload.get("output_tokens", values["output_tokens"]),
        max_sequences=scheduler.get("max_sequences") or (row_max_sequences(row) if row.get("batch") else ""),
        memory_fraction=scheduler.get("memory_fraction", server.get("memory_fraction", "")),
        cpu_matrix_dtypes=matrix_dtypes_text(server.get("cpu_matrix_dtypes")),  # the plan's build (its simulation stage takes none of its own)
        prefill_alone="" if alone is None else str(bool(alone)).lower(), prefill_replicas=_prefill_replicas(plan_inputs, row), plan=str(plan_id), rank=rank,
        decoding=json.dumps(dict(decoding), sort_keys=True) if decoding and decoding.get("method", "ar") != "ar" else "",
    )  # fmt: skip
    if (workload.get("closed_loop") or plan_holds_a_steady_batch(plan_inputs)) and not plan_inputs.get("disaggregated"):
        values["arrivals"] = "closed_loop"  # the simulator loops colocated replicas only
    values.update(_stage_workload_values(plan_inputs.get("simulation") or {}))
    for metric in ("ttft", "tpot"):
        asked = percentiles.get(metric)
        values[f"{metric}_p"] = asked["p"] if asked else SIMULATION_DEFAULT_PERCENTILE
        values[f"{metric}_s"] = asked["s"] if asked else (workload.get(f"{metric}_slo_s") or "")
    return values


def _stage_workload_values(stage: Mapping[str, Any]) -> dict[str, Any]:
    """The form's workload fields as the plan's simulation stage ran its rows (its arrivals, requests, seed and the
    lengths the form can say: fixed or log-normal), so a row's simulation repeats the stage's; {} without a stage."""
    values: dict[str, Any] = {}
    arrivals = stage.get("arrivals") or {}
    if arrivals.get("kind") in ("poisson", "gamma", "closed_loop"):
        values["arrivals"] = arrivals["kind"]
        values.update({name: arrivals[name] for name in ("rate_per_s", "cv", "concurrency", "think_time_s")
                       if arrivals.get(name) is not None})  # fmt: skip
    values.update({name: stage[name] for name in ("requests", "seed") if stage.get(name) is not None})
    for part in ("prompt", "output"):
        lengths = stage.get(part) or {}
        if lengths.get("kind") == "fixed" and lengths.get("tokens"):
            values.update({f"{part}_kind": "fixed", f"{part}_tokens": lengths["tokens"]})
        elif lengths.get("kind") == "lognormal" and lengths.get("mean_tokens"):
            values.update({f"{part}_kind": "lognormal", f"{part}_tokens": lengths["mean_tokens"],
                           f"{part}_std_tokens": lengths.get("std_tokens", "")})  # fmt: skip
    return values


def stage_left_out(stage: Mapping[str, Any]) -> list[str]:
    """What the plan's simulation stage drew that the form cannot say (_stage_workload_values leaves it out)."""
    out: list[str] = []
    for part in ("prompt", "output"):
        lengths = stage.get(part) or {}
        if lengths.get("kind") not in (None, "fixed", "lognormal"):
            out.append(f"{part} lengths {lengths['kind']}")
        if lengths.get("max_tokens") is not None:
            out.append(f"{part} lengths at most {lengths['max_tokens']} tokens")
        if lengths.get("min_tokens", 1) not in (None, 1):
            out.append(f"{part} lengths at least {lengths['min_tokens']} tokens")
    if stage.get("shared_prefix_fraction"):
        share = stage["shared_prefix_fraction"]
        out.append(f"a shared prefix of {stage.get('shared_prefix_tokens', 0)} tokens on {share:.0%} of the requests")
    return out


def plan_holds_a_steady_batch(plan_inputs: Mapping[str, Any]) -> bool:
    """The plan's workload is a concurrency held steady (no request rate, not a closed loop of clients)."""
    workload = plan_inputs.get("workload") or {}
    return bool(workload.get("concurrency")) and not workload.get("request_rate_per_s") and not workload.get("closed_loop")


def simulation_submitted_values(post) -> dict[str, Any]:
    """The simulation form's values as submitted, for redisplay (the plan it came from only if that is a plan id:
    the page links to it)."""
    values = {name: post.get(name, "") for name in SIMULATION_FIELDS}
    try:
        values["plan"] = str(uuid.UUID(values["plan"])) if values["plan"] else ""
    except ValueError:
        values["plan"] = values["rank"] = ""
    return values


def _lengths(post, part: str) -> dict[str, Any]:
    tokens = post.get(f"{part}_tokens", "").strip()
    if post.get(f"{part}_kind") == "lognormal":
        lengths: dict[str, Any] = {"kind": "lognormal"}
        if tokens:
            lengths["mean_tokens"] = tokens
        if post.get(f"{part}_std_tokens", "").strip():
            lengths["std_tokens"] = post.get(f"{part}_std_tokens").strip()
        return lengths
    return {"kind": "fixed", "tokens": tokens} if tokens else {"kind": "fixed"}


def _arrivals(post) -> dict[str, Any]:
    kind = post.get("arrivals") or "poisson"
    names = {"poisson": ("rate_per_s",), "gamma": ("rate_per_s", "cv"), "closed_loop": ("concurrency", "think_time_s")}.get(kind, ())
    return {"kind": kind, **{name: post.get(name).strip() for name in names if _given(post.get(name, "").strip())}}


def simulation_payload(post, files=None) -> dict[str, Any]:
    """SimulationInputSerializer input from the form's POST data (and its uploaded trace, `files`): the shape POST
    /api/v1/simulations/ takes. Strings pass through unchanged, so the serializer says what is wrong with them; only
    the fields of the chosen arrival process and length distributions are sent, and with a trace, the file and the seed
    alone of the workload (a trace fixes the requests, their arrivals and lengths)."""
    payload: dict[str, Any] = {name: post.get(name, "").strip() for name in ("model", "chip", "chip_count", "weight_dtype")}
    payload["tensor_parallel"] = post.get("tensor_parallel", "").strip() or "auto"
    for name in ("kv_dtype", "serving_engine", "offering"):  # empty: the weights' dtype, the chip's default engine, the cheapest offering
        if _given(post.get(name, "").strip()):
            payload[name] = post.get(name).strip()
    traced = post.get("arrivals") == "trace"
    workload: dict[str, Any] = {} if traced else {
        "arrivals": _arrivals(post), "prompt": _lengths(post, "prompt"), "output": _lengths(post, "output")}
    for name in ("seed",) if traced else ("requests", "seed"):
        if _given(post.get(name, "").strip()):
            workload[name] = post.get(name).strip()
    if workload:
        payload["workload"] = workload
    if traced and files is not None and files.get("trace_file") is not None:
        payload["trace_file"] = files["trace_file"]
    slos = {metric: {"p": post.get(f"{metric}_p", "").strip() or SIMULATION_DEFAULT_PERCENTILE, "s": post.get(f"{metric}_s").strip()}
            for metric in ("ttft", "tpot") if _given(post.get(f"{metric}_s", "").strip())}  # fmt: skip
    if slos:
        payload["slo_percentiles"] = slos
    if _given(post.get("prefill_replicas", "").strip()):
        payload["disaggregated"] = {"prefill_replicas": post.get("prefill_replicas").strip()}
    rates = [part.strip() for part in post.get("sweep_rates", "").replace(";", ",").split(",") if part.strip()]
    if rates:
        payload["sweep"] = {"rates_per_s": rates}
    scheduler = _server_settings(post, SCHEDULER_FORM_FIELDS)
    if scheduler:
        payload["scheduler"] = scheduler
    plan, rank = post.get("plan", "").strip(), post.get("rank", "").strip()
    if plan and rank:  # the plan row the form was prefilled from: the run links back to it
        payload["from_plan"] = {"plan": plan, "rank": rank}
    if post.get("decoding", "").strip():  # a plan row's decoding, as the plan took it (the serializer checks it)
        try:
            payload["decoding"] = json.loads(post.get("decoding"))
        except ValueError:
            payload["decoding"] = post.get("decoding")
    return payload


def simulation_trace_errors(post, files) -> dict[str, list[str]]:
    """The form's errors about its trace file: a trace chosen with no file (the API would only say to give a workload
    or a trace), or a file chosen under drawn arrivals (without scripts every field shows; the file would be ignored)."""
    uploaded = files is not None and files.get("trace_file") is not None
    if post.get("arrivals") == "trace" and not uploaded:
        return {"trace_file": ["Choose a trace file: CSV with a header, or JSONL; one request per line: arrival_s, prompt_tokens, "
                               "output_tokens."]}
    if post.get("arrivals") != "trace" and uploaded:
        return {"trace_file": ["A trace file was chosen under drawn arrivals: choose “A recorded trace” to simulate it, "
                               "or remove the file."]}
    return {}


# Under a trace, the drawn workload's fields are hidden: a trace's own limits (requests, tokens) are said at its file.
TRACED_FIELDS = frozenset({"requests", "prompt_tokens", "output_tokens", "prompt_kind", "output_kind", "prompt_std_tokens",
                           "output_std_tokens", "arrivals", "rate_per_s", "cv", "concurrency", "think_time_s", "workload"})  # fmt: skip


def simulation_field_for(path: tuple, *, traced: bool = False) -> str:
    """The simulation form field that shows an error at a serializer path: ("workload", "arrivals", "rate_per_s")
    -> "rate_per_s"; ("workload", "prompt", "mean_tokens") -> "prompt_tokens"; ("sweep", "rates_per_s", 2) ->
    "sweep_rates"; ("disaggregated",) -> "prefill_replicas"; anything the form does not set -> "form". Under a trace
    (`traced`), a drawn workload field's error (a trace over the request or token limit) -> "trace_file"."""
    field = _simulation_field(path)
    return "trace_file" if traced and field in TRACED_FIELDS else field


def _simulation_field(path: tuple) -> str:
    keys = tuple(str(p) for p in path if not isinstance(p, int) and p != "non_field_errors")
    for n in range(len(keys), 0, -1):
        if keys[:n] in SIMULATION_ERROR_FIELDS:
            return SIMULATION_ERROR_FIELDS[keys[:n]]
    return "form"


def simulation_form_errors(serializer_errors: Any, *, traced: bool = False) -> dict[str, list[str]]:
    """Serializer errors (nested dicts and lists) -> {simulation form field: [messages]}; an error on one of
    the swept rates says which (`traced`: simulation_field_for's)."""
    out: dict[str, list[str]] = {}
    for path, message in _flatten(serializer_errors):
        if path[:2] == ("sweep", "rates_per_s") and len(path) > 2 and isinstance(path[2], int):
            message = f"rate {path[2] + 1}: {message}"
        out.setdefault(simulation_field_for(path, traced=traced), []).append(message)
    return out


# --- validation form: the trial parameters a user may set (jobs.services._clean_params checks them) ---
VALIDATION_INT_PARAMS = ("batch", "prompt_tokens", "decode_steps", "max_layers", "repetitions")


def validation_payload(post) -> tuple[dict[str, Any], dict[str, str]]:
    """The validate form as the service's arguments (trial, queue, params): a blank field takes the queue's
    default; a number that is not one is an error naming the field, as the API's 400 would."""
    params: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name in VALIDATION_INT_PARAMS:
        text = (post.get(name) or "").strip()
        if not text:
            continue
        try:
            params[name] = int(text)
        except ValueError:
            errors[name] = f"{name} must be a whole number (got {text[:20]!r})."
    if (post.get("dtype") or "").strip():
        params["dtype"] = post.get("dtype").strip()
    payload = {"trial": (post.get("trial") or "decode").strip(), "queue": (post.get("queue") or "").strip() or None, "params": params or None}
    return payload, errors
