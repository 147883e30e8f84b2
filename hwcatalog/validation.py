"""Rules that reject nonsense catalog values, shared by Model.clean(), the serializers
and the HF importer, so every way in says the same thing about the same field."""
from __future__ import annotations

import re

from collections.abc import Mapping
from typing import Any

from hwcatalog import architecture

# Upper bounds that no real part or model reaches; they stop absurd sizes early.
MAX_PARAMS = 100e12
MAX_DIM = 1_000_000
MAX_LAYERS = 10_000
MAX_CONTEXT_TOKENS = 100_000_000
MAX_BYTES = 1e16
MAX_FLOPS = 1e19
MAX_BANDWIDTH = 1e17  # a wafer-scale chip's SRAM streams ~2e16 B/s (Cerebras WSE-3: 21 PB/s)
# Lower bounds no real part goes near (the catalog's least: 230 MB of memory, 54 GB/s, 2.6 TFLOP/s, a 16 GB/s
# link): a positive but vanishing value would divide into infinities (a ridge point, a step time) that JSON cannot carry.
MIN_BYTES = 1e6
MIN_BANDWIDTH = 1e8
MIN_FLOPS = 1e9

Errors = dict[str, str]

# Catalog slugs: lower-case, digits, dots and dashes ("llama-3.1-8b"); Django's SlugField refuses dots.
SLUG_PATTERN = r"^[a-z0-9][a-z0-9.\-]*$"


def _positive(errors: Errors, data: Mapping[str, Any], field: str, *, maximum: float, required: bool, minimum: float = 0.0) -> None:
    value = data.get(field)
    if value is None:
        if required:
            errors[field] = "This field is required."
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        errors[field] = "Must be a number."
    elif not value > 0:
        errors[field] = "Must be greater than zero."
    elif value < minimum:
        errors[field] = f"Must be at least {minimum:g}."
    elif value > maximum:
        errors[field] = f"Must be at most {maximum:g}."


ARCH_REQUIRED_DIMS = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "intermediate_size", "vocab_size")
ARCH_OPTIONAL_DIMS = (
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
    "num_experts", "experts_per_token", "moe_layer_count", "moe_intermediate_size", "default_block_size",
    "linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads", "linear_value_head_dim",
    "linear_conv_kernel_dim", "shared_expert_intermediate_size", "sparse_attention_topk", "indexer_num_heads",
    "indexer_head_dim", "o_lora_rank", "o_groups", "csa_compress_ratio", "hca_compress_ratio", "moe_latent_size",
)
ARCH_LAYER_COUNTS = ("linear_attention_layers", "attention_layers", "ffn_layers", "csa_layers", "hca_layers", "sliding_window_layers")
LINEAR_ATTENTION_KINDS = ("gated_deltanet", "mamba2")
LINEAR_SHAPE_FIELDS = ("linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads", "linear_value_head_dim", "linear_conv_kernel_dim")
SPARSE_FIELDS = ("sparse_attention_topk", "indexer_num_heads", "indexer_head_dim")


def validate_arch(data: Mapping[str, Any]) -> Errors:
    errors: Errors = {}
    for field in ARCH_REQUIRED_DIMS:
        _positive(errors, data, field, maximum=MAX_LAYERS if field == "num_layers" else MAX_DIM, required=True)
    for field in ARCH_OPTIONAL_DIMS:
        _positive(errors, data, field, maximum=MAX_DIM, required=False)
    _positive(errors, data, "max_context_tokens", maximum=MAX_CONTEXT_TOKENS, required=True)
    for field in ("total_params", "active_params"):
        _positive(errors, data, field, maximum=MAX_PARAMS, required=field == "total_params")
    shared = data.get("num_shared_experts")
    if shared is not None and (isinstance(shared, bool) or not isinstance(shared, int) or shared < 0):
        errors["num_shared_experts"] = "Must be zero or a positive integer."
    for field in ARCH_LAYER_COUNTS:
        value = data.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_LAYERS):
            errors[field] = f"Must be an integer between 0 and {MAX_LAYERS}."
    _positive(errors, data, "sliding_window", maximum=MAX_CONTEXT_TOKENS, required=False)
    if errors:
        return errors

    heads, kv_heads = data["num_attention_heads"], data["num_kv_heads"]
    if kv_heads > heads or heads % kv_heads:
        errors["num_kv_heads"] = f"KV heads ({kv_heads}) must divide the attention heads ({heads})."
    attention = data.get("attention_kind")
    if attention == "mla":
        for field in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            if not data.get(field):
                errors[field] = "Required for MLA attention."
    elif attention == "mha" and kv_heads != heads:
        errors["attention_kind"] = "mha needs as many KV heads as attention heads; use gqa."
    elif attention == "mqa" and kv_heads != 1:
        errors["attention_kind"] = "mqa needs exactly one KV head; use gqa."
    experts, per_token = data.get("num_experts"), data.get("experts_per_token")
    if experts or per_token:
        if not (experts and per_token):
            errors["experts_per_token" if experts else "num_experts"] = "MoE needs both num_experts and experts_per_token."
        elif per_token > experts:
            errors["experts_per_token"] = f"experts_per_token ({per_token}) cannot exceed num_experts ({experts})."
        moe_layers = data.get("moe_layer_count")
        if moe_layers is not None and moe_layers > data["num_layers"]:
            errors["moe_layer_count"] = "Cannot exceed num_layers."
    active, total = data.get("active_params"), data.get("total_params")
    if active is not None and active > total:
        errors["active_params"] = "Cannot exceed total_params."
    if data.get("generation_kind") == "block_diffusion" and not data.get("default_block_size"):
        errors["default_block_size"] = "Required for block_diffusion models."
    if data.get("sliding_window_layers") and not data.get("sliding_window"):
        errors["sliding_window_layers"] = "Needs a sliding_window."
    elif (data.get("sliding_window_layers") or 0) > data["num_layers"]:
        errors["sliding_window_layers"] = "Cannot exceed num_layers."
    errors.update(_layer_kind_errors(data))
    hf_id = data.get("hf_id")
    if hf_id and (not isinstance(hf_id, str) or not HF_ID.fullmatch(hf_id)):
        errors["hf_id"] = "A Hugging Face repository id: ORG/NAME (letters, digits, '.', '_', '-')."
    message = validate_names(data.get("hf_aliases", []), pattern=HF_ID, what="Hugging Face repository ids (ORG/NAME)")
    if message:
        errors["hf_aliases"] = message
    message = sixteen_bit_modules_error(data.get("sixteen_bit_modules"))
    if message:
        errors["sixteen_bit_modules"] = message
    return errors


def sixteen_bit_modules_error(value: Any) -> str | None:
    """What is wrong with a {format: [module, ...]} map of the modules a quantised checkpoint keeps in 16 bits."""
    if value in (None, {}):
        return None
    formats = sorted(name for name, bits in architecture.WEIGHT_FORMAT_BITS.items() if bits < 16)
    modules = architecture.SIXTEEN_BIT_MODULES
    if not isinstance(value, dict):
        return f"An object mapping a weight format ({', '.join(formats)}) to a list of modules ({', '.join(modules)})."
    for name, listed in value.items():
        if name not in formats:
            return f"{name!r} is not a weight format below 16 bits: one of {', '.join(formats)}."
        if not isinstance(listed, list) or not listed or not all(isinstance(m, str) and m in modules for m in listed) or len(set(listed)) != len(listed):
            return f"{name}: a list of distinct modules among {', '.join(modules)}."
        if {"attention", "attention_inputs"} <= set(listed):
            return f"{name}: attention already holds attention_inputs; give one of them."
    return None


def _layer_kind_errors(data: Mapping[str, Any]) -> Errors:
    """Hybrid layers (linear attention / Mamba-2 beside attention layers, FFN-less blocks) and sparse top-k
    attention: each needs its whole shape, and the layer counts must fit in num_layers."""
    errors: Errors = {}
    layers = data["num_layers"]
    kind = data.get("linear_attention_kind") or ""
    linear = data.get("linear_attention_layers")
    if kind and kind not in LINEAR_ATTENTION_KINDS:
        errors["linear_attention_kind"] = f"Must be one of {', '.join(LINEAR_ATTENTION_KINDS)} (or empty)."
    elif kind:
        if not linear:
            errors["linear_attention_layers"] = f"Required for {kind} layers."
        for field in LINEAR_SHAPE_FIELDS:
            if not data.get(field):
                errors[field] = f"Required for {kind} layers."
        if not errors.get("linear_num_key_heads") and not errors.get("linear_num_value_heads"):
            if data["linear_num_value_heads"] % data["linear_num_key_heads"]:
                errors["linear_num_value_heads"] = "Must be a multiple of linear_num_key_heads (heads share a key head or group)."
    else:
        for field in ("linear_attention_layers", *LINEAR_SHAPE_FIELDS):
            if data.get(field):
                errors[field] = "Needs a linear_attention_kind."
    attention = data.get("attention_layers")
    linear_count = linear if kind and linear else 0
    if linear_count > layers:
        errors["linear_attention_layers"] = "Cannot exceed num_layers."
    elif attention is not None and attention + linear_count > layers:
        errors["attention_layers"] = "attention_layers + linear_attention_layers cannot exceed num_layers."
    full = attention if attention is not None else layers - linear_count
    if (data.get("sliding_window_layers") or 0) > full and not errors:
        errors["sliding_window_layers"] = "Cannot exceed the attention layers."
    ffn = data.get("ffn_layers")
    if ffn is not None and ffn > layers:
        errors["ffn_layers"] = "Cannot exceed num_layers."
    elif data.get("num_experts") and data.get("moe_layer_count") is not None and data["moe_layer_count"] > (layers if ffn is None else ffn):
        errors["moe_layer_count"] = "Cannot exceed the layers with an FFN (ffn_layers)."
    if data.get("shared_expert_intermediate_size") and not data.get("num_shared_experts"):
        errors["shared_expert_intermediate_size"] = "Needs num_shared_experts."
    given = [f for f in SPARSE_FIELDS if data.get(f)]
    if given and len(given) < len(SPARSE_FIELDS):
        for field in SPARSE_FIELDS:
            if not data.get(field):
                errors[field] = "Sparse top-k attention needs sparse_attention_topk, indexer_num_heads and indexer_head_dim."
    if given and full == 0:
        errors["sparse_attention_topk"] = "Sparse attention needs attention layers."
    errors.update(_compressed_errors(data, full, sparse=bool(given)))
    if data.get("moe_latent_size") and not data.get("num_experts"):
        errors["moe_latent_size"] = "A latent MoE needs num_experts."
    return errors


def _compressed_errors(data: Mapping[str, Any], attention_layers: int, *, sparse: bool) -> Errors:
    """DeepSeek-V4's compressed attention (architecture.ArchShape): shared key-value MQA with a query rank, a
    window on every attention layer and a grouped low-rank output; CSA layers with their ratio and the indexer
    (the sparse-attention fields), HCA layers with theirs, both counts within the attention layers."""
    errors: Errors = {}
    csa, hca = data.get("csa_layers") or 0, data.get("hca_layers") or 0
    for layers, ratio in (("csa_layers", "csa_compress_ratio"), ("hca_layers", "hca_compress_ratio")):
        if bool(data.get(layers)) != bool(data.get(ratio)):
            errors[ratio if data.get(layers) else layers] = f"{layers} and {ratio} go together."
    if not (csa or hca):
        for field in ("o_lora_rank", "o_groups"):
            if data.get(field):
                errors[field] = "DeepSeek-V4's grouped output projection goes with its compressed attention (csa_layers, hca_layers)."
        return errors
    if data.get("attention_kind") != "mqa":
        errors["attention_kind"] = "Compressed attention caches one shared key-value vector a token: mqa."
    for field, why in (("q_lora_rank", "its queries"), ("o_lora_rank", "its grouped output"), ("o_groups", "its grouped output"),
                       ("sliding_window", "the window every layer keeps")):  # fmt: skip
        if not data.get(field):
            errors[field] = f"Required for compressed attention ({why})."
    if data.get("sliding_window_layers") not in (None, attention_layers):
        errors["sliding_window_layers"] = "Compressed attention keeps the window on every attention layer: leave it empty."
    groups = data.get("o_groups")
    if groups and data["num_attention_heads"] % groups:
        errors["o_groups"] = f"Must divide the attention heads ({data['num_attention_heads']})."
    if csa + hca > attention_layers:
        errors["csa_layers"] = "csa_layers + hca_layers cannot exceed the attention layers."
    if bool(csa) != sparse:
        errors["sparse_attention_topk"] = "CSA layers read the top-k entries of their indexer: the sparse-attention fields go with csa_layers."
    return errors


HF_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
ALIAS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def validate_names(names: Any, *, pattern: re.Pattern, what: str) -> str | None:
    """A list of at most 20 distinct names matching `pattern`."""
    if names in (None, ""):
        return None
    if not isinstance(names, list) or len(names) > 20 or not all(isinstance(n, str) and pattern.fullmatch(n) for n in names):
        return f"A list of at most 20 {what}."
    if len(set(names)) != len(names):
        return "Each name at most once."
    return None


CHIP_PEAK_FIELDS = (
    "peak_fp32_flops_per_s", "peak_bf16_flops_per_s", "peak_fp16_flops_per_s", "peak_fp8_flops_per_s",
    "peak_int8_flops_per_s", "peak_int4_flops_per_s", "peak_fp4_flops_per_s",
)
# Other peaks a chip may give, none of them a math path of its own (hwcatalog.models.Chip.peak_fp16_acc16_flops_per_s).
CHIP_OTHER_PEAK_FIELDS = ("peak_fp16_acc16_flops_per_s",)


def validate_chip(data: Mapping[str, Any]) -> Errors:
    errors: Errors = {}
    _positive(errors, data, "memory_capacity_bytes", maximum=MAX_BYTES, required=True, minimum=MIN_BYTES)
    _positive(errors, data, "memory_bandwidth_bytes_per_s", maximum=MAX_BANDWIDTH, required=True, minimum=MIN_BANDWIDTH)
    for field in (*CHIP_PEAK_FIELDS, *CHIP_OTHER_PEAK_FIELDS):
        _positive(errors, data, field, maximum=MAX_FLOPS, required=False, minimum=MIN_FLOPS)
    acc16, fp16 = data.get("peak_fp16_acc16_flops_per_s"), data.get("peak_fp16_flops_per_s")
    if acc16 and "peak_fp16_acc16_flops_per_s" not in errors and not (isinstance(fp16, (int, float)) and 0 < fp16 <= acc16):
        errors["peak_fp16_acc16_flops_per_s"] = ["The FP16-accumulate peak needs the chip's fp16 peak, and is at least that."]
    _positive(errors, data, "on_chip_sram_bytes", maximum=MAX_BYTES, required=False)
    _positive(errors, data, "link_bandwidth_bytes_per_s", maximum=MAX_BANDWIDTH, required=False, minimum=MIN_BANDWIDTH)
    _positive(errors, data, "link_latency_s", maximum=1.0, required=False)
    _positive(errors, data, "chips_per_node", maximum=100_000, required=False)
    _positive(errors, data, "cores", maximum=100_000, required=False)
    _positive(errors, data, "tdp_watts", maximum=1e6, required=False)
    if not errors and not any(data.get(f) for f in CHIP_PEAK_FIELDS):
        errors["peak_bf16_flops_per_s"] = "A chip needs at least one peak FLOP/s figure."
    message = validate_names(data.get("aliases", []), pattern=ALIAS, what="names (letters, digits, '.', '_', '-')")
    if message:
        errors["aliases"] = message
    return errors


def validate_offering(data: Mapping[str, Any]) -> Errors:
    errors: Errors = {}
    _positive(errors, data, "usd_per_chip_hour", maximum=1e6, required=False)
    _positive(errors, data, "purchase_usd_per_chip", maximum=1e9, required=False)
    _positive(errors, data, "amortisation_years", maximum=50, required=False)
    _positive(errors, data, "power_usd_per_kwh", maximum=100, required=False)
    _positive(errors, data, "pue", maximum=5, required=False)
    _positive(errors, data, "chips_per_unit", maximum=100_000, required=False)
    _positive(errors, data, "host_watts_per_unit", maximum=1e7, required=False)
    _positive(errors, data, "datacentre_usd_per_kw_month", maximum=10_000, required=False)
    _positive(errors, data, "utilisation", maximum=1.0, required=False)
    parts_error = validate_system_parts(data.get("system_parts") or [])
    if parts_error:
        errors["system_parts"] = parts_error
    if errors:
        return errors
    if data.get("pricing_model") == "purchase":
        errors.update(_purchase_errors(data))
    else:
        if not data.get("usd_per_chip_hour"):
            errors["usd_per_chip_hour"] = "Required for a rented offering (on_demand, reserved, spot)."
        for key in ("system_parts", "host_watts_per_unit", "datacentre_usd_per_kw_month", "utilisation"):
            if data.get(key):
                errors[key] = "Only a purchase offering has system parts, host power, a datacentre cost or a utilisation (a rent includes them)."
    return errors


SYSTEM_PART_KINDS = ("system", "host", "network", "rack")
SYSTEM_PART_KEYS = {"kind", "description", "usd", "source"}


def validate_system_parts(parts: Any) -> str | None:
    """The parts of one owned unit beside its accelerators: a complete system (accelerators and host, as a
    vendor sells it), a host server, networking, a rack share. Each has a price and its own source."""
    if not isinstance(parts, list) or len(parts) > 20:
        return "A list of at most 20 parts."
    for i, part in enumerate(parts):
        if not isinstance(part, dict) or set(part) != SYSTEM_PART_KEYS:
            return f"Part {i} must have exactly the keys {', '.join(sorted(SYSTEM_PART_KEYS))}."
        if part["kind"] not in SYSTEM_PART_KINDS:
            return f"Part {i}: kind must be one of {', '.join(SYSTEM_PART_KINDS)}."
        usd = part["usd"]
        if isinstance(usd, bool) or not isinstance(usd, (int, float)) or not 0 <= usd <= 1e9:
            return f"Part {i}: usd must be a price between 0 and 1e9."
        for key in ("description", "source"):
            if not isinstance(part[key], str) or not part[key].strip() or len(part[key]) > 1000 or "\x00" in part[key]:
                return f"Part {i}: {key} must be a non-empty text of at most 1000 characters."
    return None


def _purchase_errors(data: Mapping[str, Any]) -> Errors:
    """A purchase is priced as a whole system: its accelerators (a price per chip, or a complete system),
    a host (or a complete system) and networking (a standalone one-chip machine has its own)."""
    errors: Errors = {}
    kinds = {p["kind"] for p in data.get("system_parts") or []}
    if not data.get("purchase_usd_per_chip") and "system" not in kinds:
        errors["purchase_usd_per_chip"] = "Required for a purchase offering, unless a system part prices the accelerators with their host."
    if not kinds & {"host", "system"}:
        errors["system_parts"] = "A purchase must price its host server (a host part, or a complete system)."
    elif "network" not in kinds and not ("system" in kinds and (data.get("chips_per_unit") or 1) == 1):
        errors["system_parts"] = "A purchase must price its networking (a network part); only a standalone one-chip machine may omit it."
    if not data.get("amortisation_years"):
        errors["amortisation_years"] = "Required for a purchase offering."
    if not data.get("power_usd_per_kwh"):
        errors["power_usd_per_kwh"] = "Required for a purchase offering: an owned system pays for its power."
    if data.get("pue") is not None and data["pue"] < 1:
        errors["pue"] = "PUE is at least 1.0."
    return errors


def validate_sources(sources: Any) -> str | None:
    if not isinstance(sources, list) or not sources or not all(isinstance(s, str) and s.strip() for s in sources):
        return "At least one source (a URL or document reference) is required."
    if len(sources) > 50 or any(len(s) > 1000 for s in sources):
        return "At most 50 sources of at most 1000 characters each."
    if any("\x00" in s for s in sources):
        return "A source cannot contain a NUL character."
    return None
