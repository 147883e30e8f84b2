"""The plan form: flat HTML field names <-> PlanInputSerializer's nested input and errors.

Validation is the serializer's (the same one the REST API uses); this module only moves
values and messages between the form's flat names and the serializer's nested shape.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from hwcatalog.importers.config_file import ConfigFileError, read_config_file

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
ALIASES = {"method": "decoding_method", "budget_usd_per_million_output_tokens": "budget"}
# Errors on a whole group are shown at the top of its fieldset.
GROUPS = ("workload", "hardware", "decodings")
FORM_FIELDS = {
    "model", "config_file", "import_name", "prompt_tokens", "output_tokens", "concurrency", "request_rate_per_s",
    "ttft_slo_s", "tpot_slo_s", "max_chips", "ownership", "decoding_method", "budget", "disaggregated", "pinned", "serving_engine",
    "adaptive_window", *HARDWARE_LISTS, *(f for fields in DECODING_FIELDS.values() for f in fields),
}  # fmt: skip


def initial_values(*, model_slug: str | None = None) -> dict[str, Any]:
    preset = PRESETS[DEFAULT_PRESET]
    values: dict[str, Any] = {k: v for k, v in preset.items() if k != "label"}
    values.update(
        preset=DEFAULT_PRESET, model=model_slug or DEFAULT_MODEL, max_chips=64, ownership="any", decoding_method="ar",
        draft_tokens=4, acceptance_rate=0.7, kinds=[], vendors=[], pricing_models=[], weight_dtypes=[],
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


def plan_payload(post, *, model_slug: str | None = None) -> dict[str, Any]:
    """PlanInputSerializer input from the form's POST data. Strings are passed through
    unchanged so the serializer reports "A valid integer is required." etc. itself."""
    workload = {name: post.get(name) for name in WORKLOAD_FIELDS if _given(post.get(name))}
    load = "request_rate_per_s" if post.get("load_kind") == "request_rate" else "concurrency"
    if _given(post.get(load)):
        workload[load] = post.get(load)
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
    return payload


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
