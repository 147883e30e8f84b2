"""Turn a Hugging Face config.json into ModelArch fields.

Styles understood: Llama, Mistral, Qwen2/Qwen3 (the Llama key set), Mixtral (num_local_experts),
Qwen3-MoE (num_experts, moe_intermediate_size), gpt-oss (experts, alternating sliding-window layers),
DeepSeek-V3 (MLA + routed/shared experts), GPT-J (n_embd/n_layer/n_head). The checkpoint's weight format
comes from `quantization_config` (config.json) or `hf_quant_config.json` (NVIDIA ModelOpt). Every problem
is reported against the config key it came from, so an API client sees which field is wrong.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hwcatalog import architecture
from hwcatalog.validation import MAX_CONTEXT_TOKENS, MAX_DIM, MAX_LAYERS

LLAMA_STYLE = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"}
STYLE_BY_MODEL_TYPE = {
    "llama": "llama", "mistral": "llama", "qwen2": "llama", "qwen3": "llama",
    "mixtral": "mixtral", "deepseek_v3": "deepseek_v3", "deepseek_v2": "deepseek_v3", "gptj": "gptj",
    "qwen3_moe": "qwen3_moe", "gpt_oss": "gpt_oss",
}


class ConfigError(ValueError):
    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class ImportedArch:
    fields: dict[str, Any]
    style: str


def detect_style(config: dict[str, Any]) -> str:
    model_type = config.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise ConfigError({"model_type": f"Must be a string, got {type(model_type).__name__}."})
    if model_type in STYLE_BY_MODEL_TYPE:
        return STYLE_BY_MODEL_TYPE[model_type]
    architectures = config.get("architectures")
    if architectures is not None and not (isinstance(architectures, list) and all(isinstance(a, str) for a in architectures)):
        raise ConfigError({"architectures": "Must be a list of class names (strings)."})
    if architectures:
        names = set(architectures)
        if names & LLAMA_STYLE:
            return "llama"
        if "MixtralForCausalLM" in names:
            return "mixtral"
        if names & {"DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"}:
            return "deepseek_v3"
        if "GPTJForCausalLM" in names:
            return "gptj"
        if "Qwen3MoeForCausalLM" in names:
            return "qwen3_moe"
        if "GptOssForCausalLM" in names:
            return "gpt_oss"
    raise ConfigError({"model_type": f"Unsupported model_type {model_type!r}; supported: {', '.join(sorted(STYLE_BY_MODEL_TYPE))}."})


class _Reader:
    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.errors: dict[str, str] = {}

    def integer(
        self, key: str, *, default: int | None = None, required: bool = True, minimum: int = 1, maximum: int = MAX_DIM
    ) -> int | None:
        """An integer in [minimum, maximum] (a width, a count of heads or experts: MAX_DIM unless said)."""
        value = self.config.get(key, default)
        if value is None:
            if required:
                self.errors[key] = "Missing from config.json."
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.errors[key] = f"Must be an integer, got {type(value).__name__}."
            return None
        if value < minimum:
            self.errors[key] = "Must be greater than zero." if minimum == 1 else f"Must be at least {minimum}."
            return None
        if value > maximum:
            self.errors[key] = f"Must be at most {maximum:,}."
            return None
        return value

    def layers(self, key: str) -> int | None:
        return self.integer(key, maximum=MAX_LAYERS)

    def context(self, key: str) -> int | None:
        return self.integer(key, maximum=MAX_CONTEXT_TOKENS)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.config.get(key, default)
        if not isinstance(value, bool):
            self.errors[key] = "Must be true or false."
            return default
        return value


def _attention_kind(heads: int | None, kv_heads: int | None) -> str:
    if heads and kv_heads == heads:
        return "mha"
    if kv_heads == 1:
        return "mqa"
    return "gqa"


def fields_from_hf_config(config: dict[str, Any], quant_config: dict[str, Any] | None = None) -> ImportedArch:
    """`quant_config`: the checkpoint's hf_quant_config.json, where it ships one."""
    if not isinstance(config, dict):
        raise ConfigError({"config": "A config.json must be a JSON object."})
    if quant_config is not None and not isinstance(quant_config, dict):
        raise ConfigError({"quant_config": "An hf_quant_config.json must be a JSON object."})
    style = detect_style(config)
    r = _Reader(config)
    if style == "gptj":
        hidden = r.integer("n_embd")
        heads = r.integer("n_head")
        fields = {
            "num_layers": r.layers("n_layer"),
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "num_kv_heads": heads,
            "head_dim": hidden // heads if hidden and heads else None,
            "intermediate_size": r.integer("n_inner", required=False) or (4 * hidden if hidden else None),
            "vocab_size": r.integer("vocab_size"),
            "tie_word_embeddings": r.boolean("tie_word_embeddings", False),
            "ffn_kind": "plain",
            "attention_kind": "mha",
            "max_context_tokens": r.context("n_positions"),
        }
    else:
        hidden = r.integer("hidden_size")
        heads = r.integer("num_attention_heads")
        kv_heads = r.integer("num_key_value_heads", default=heads)
        fields = {
            "num_layers": r.layers("num_hidden_layers"),
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "num_kv_heads": kv_heads,
            "head_dim": r.integer("head_dim", required=False) or (hidden // heads if hidden and heads else None),
            "intermediate_size": r.integer("intermediate_size"),
            "vocab_size": r.integer("vocab_size"),
            "tie_word_embeddings": r.boolean("tie_word_embeddings", False),
            "ffn_kind": "gated",
            "attention_kind": _attention_kind(heads, kv_heads),
            "max_context_tokens": r.context("max_position_embeddings"),
        }
        if style in ("mixtral", "gpt_oss"):
            fields.update(
                num_experts=r.integer("num_local_experts"),
                experts_per_token=r.integer("num_experts_per_tok"),
                num_shared_experts=0,
                moe_layer_count=fields["num_layers"],
                moe_intermediate_size=fields["intermediate_size"],
            )
            if style == "gpt_oss":
                fields.update(_gpt_oss_windows(config, r, fields["num_layers"] or 0))
        elif style == "qwen3_moe":
            layers = fields["num_layers"] or 0
            dense_only = config.get("mlp_only_layers", [])
            if not isinstance(dense_only, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in dense_only):
                r.errors["mlp_only_layers"] = "Must be a list of layer indices."
                dense_only = []
            step = r.integer("decoder_sparse_step", default=1, maximum=MAX_LAYERS)
            if step and step != 1:
                r.errors["decoder_sparse_step"] = "Only every-layer MoE (1) is supported."
            fields.update(
                num_experts=r.integer("num_experts"),
                experts_per_token=r.integer("num_experts_per_tok"),
                num_shared_experts=0,
                moe_layer_count=layers - len(set(dense_only)),
                moe_intermediate_size=r.integer("moe_intermediate_size"),
            )
        if style == "llama" and config.get("model_type") == "mistral" and config.get("sliding_window") is not None:
            fields["sliding_window"] = r.context("sliding_window")
        elif style == "deepseek_v3":
            layers = fields["num_layers"] or 0
            first_dense = config.get("first_k_dense_replace", 0)
            if isinstance(first_dense, bool) or not isinstance(first_dense, int) or not 0 <= first_dense <= layers:
                r.errors["first_k_dense_replace"] = "Must be an integer between 0 and num_hidden_layers."
                first_dense = 0
            fields.update(
                attention_kind="mla",
                q_lora_rank=r.integer("q_lora_rank", required=False),
                kv_lora_rank=r.integer("kv_lora_rank"),
                qk_nope_head_dim=r.integer("qk_nope_head_dim"),
                qk_rope_head_dim=r.integer("qk_rope_head_dim"),
                v_head_dim=r.integer("v_head_dim"),
                num_experts=r.integer("n_routed_experts"),
                experts_per_token=r.integer("num_experts_per_tok"),
                num_shared_experts=r.integer("n_shared_experts", required=False, minimum=0) or 0,  # null: none
                moe_layer_count=layers - first_dense,
                moe_intermediate_size=r.integer("moe_intermediate_size"),
            )
            if fields["qk_nope_head_dim"] and fields["qk_rope_head_dim"]:
                fields["head_dim"] = fields["qk_nope_head_dim"] + fields["qk_rope_head_dim"]
    fields["checkpoint_format"] = checkpoint_format(config.get("quantization_config"), quant_config, r)
    if r.errors:
        raise ConfigError(r.errors)
    shape = architecture.ArchShape(**{k: fields.get(k) for k in architecture.ArchShape.__dataclass_fields__ if k in fields})
    fields["total_params"] = architecture.parameter_count(shape)
    fields["active_params"] = architecture.active_parameter_count(shape)
    return ImportedArch(fields=fields, style=style)


def _gpt_oss_windows(config: dict[str, Any], r: _Reader, layers: int) -> dict[str, Any]:
    """gpt-oss alternates banded (sliding-window) and full layers: `layer_types` names each."""
    types = config.get("layer_types")
    if types is None:
        return {}
    if not isinstance(types, list) or len(types) != layers or not all(t in ("sliding_attention", "full_attention") for t in types):
        r.errors["layer_types"] = "Must list sliding_attention or full_attention for each of num_hidden_layers."
        return {}
    windowed = types.count("sliding_attention")
    if not windowed:
        return {}
    return {"sliding_window": r.context("sliding_window"), "sliding_window_layers": windowed}


# quant_method / quant_algo -> the catalog's checkpoint_format.
_FORMATS = {"fp8": "fp8", "mxfp4": "mxfp4", "nvfp4": "nvfp4", "fp8_pb_wo": "fp8_block", "w4a16_awq": "int4", "int4_awq": "int4"}


def checkpoint_format(quantization_config: Any, quant_config: dict[str, Any] | None, r: _Reader) -> str:
    """The checkpoint's weight format: ModelOpt's hf_quant_config.json (`quantization.quant_algo`),
    else config.json's `quantization_config` (`quant_method`, block-scaled FP8 when it gives
    `weight_block_size`, `bits` for AWQ/GPTQ); "" when neither says."""
    if quant_config is not None:
        algo = (quant_config.get("quantization") or {}).get("quant_algo") if isinstance(quant_config.get("quantization"), dict) else None
        if not isinstance(algo, str) or algo.lower() not in _FORMATS:
            r.errors["quant_config"] = f"quantization.quant_algo {algo!r} is not one of {', '.join(sorted(_FORMATS))}."
            return ""
        return _FORMATS[algo.lower()]
    if quantization_config is None:
        return ""
    if not isinstance(quantization_config, dict):
        r.errors["quantization_config"] = "Must be a JSON object."
        return ""
    method = quantization_config.get("quant_method")
    if method in ("awq", "gptq"):
        bits = quantization_config.get("bits")
        if bits not in (4, 8):
            r.errors["quantization_config"] = "bits must be 4 or 8."
            return ""
        return "int4" if bits == 4 else "int8"
    if method == "fp8":
        block = quantization_config.get("weight_block_size")
        if block is None:
            return "fp8"
        if not (isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and not isinstance(b, bool) and 0 < b <= MAX_DIM for b in block)):
            r.errors["quantization_config"] = "weight_block_size must be two positive integers, [rows, columns]."
            return ""
        return "fp8_block"
    if isinstance(method, str) and method.lower() in _FORMATS:
        return _FORMATS[method.lower()]
    r.errors["quantization_config"] = f"quant_method {method!r} is not supported (fp8, mxfp4, nvfp4, awq, gptq)."
    return ""
