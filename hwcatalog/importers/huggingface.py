"""Turn a Hugging Face config.json into ModelArch fields.

Styles understood: Llama, Mistral, Qwen2/Qwen3 (the Llama key set), Mixtral (num_local_experts),
Qwen3-MoE (num_experts, moe_intermediate_size), gpt-oss (experts, alternating sliding-window layers),
DeepSeek-V3 (MLA + routed/shared experts), GPT-J (n_embd/n_layer/n_head), Llama 4 (its text_config: routed
experts plus one shared expert, MoE on every `interleave_moe_layer_step`-th layer, chunked local attention on the
layers that use RoPE, held as a window of `attention_chunk_size` tokens). The checkpoint's weight format
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
    "qwen3_moe": "qwen3_moe", "gpt_oss": "gpt_oss", "llama4": "llama4", "llama4_text": "llama4",
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
        if names & {"Llama4ForConditionalGeneration", "Llama4ForCausalLM"}:
            return "llama4"
    raise ConfigError({"model_type": f"Unsupported model_type {model_type!r}; supported: {', '.join(sorted(STYLE_BY_MODEL_TYPE))}."})


class _Reader:
    def __init__(self, config: dict[str, Any], prefix: str = ""):
        self.config = config
        self.prefix = prefix  # "text_config." when the shapes are nested (Llama 4)
        self.errors: dict[str, str] = {}

    def integer(
        self, key: str, *, default: int | None = None, required: bool = True, minimum: int = 1, maximum: int = MAX_DIM
    ) -> int | None:
        """An integer in [minimum, maximum] (a width, a count of heads or experts: MAX_DIM unless said)."""
        value = self.config.get(key, default)
        if value is None:
            if required:
                self.errors[self.prefix + key] = "Missing from config.json."
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.errors[self.prefix + key] = f"Must be an integer, got {type(value).__name__}."
            return None
        if value < minimum:
            self.errors[self.prefix + key] = "Must be greater than zero." if minimum == 1 else f"Must be at least {minimum}."
            return None
        if value > maximum:
            self.errors[self.prefix + key] = f"Must be at most {maximum:,}."
            return None
        return value

    def layers(self, key: str) -> int | None:
        return self.integer(key, maximum=MAX_LAYERS)

    def context(self, key: str) -> int | None:
        return self.integer(key, maximum=MAX_CONTEXT_TOKENS)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.config.get(key, default)
        if not isinstance(value, bool):
            self.errors[self.prefix + key] = "Must be true or false."
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
    shape_config, prefix = config, ""
    if style == "llama4" and "text_config" in config:
        shape_config, prefix = config["text_config"], "text_config."
        if not isinstance(shape_config, dict):
            raise ConfigError({"text_config": "Must be a JSON object."})
    r = _Reader(shape_config, prefix)
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
                fields.update(_gpt_oss_windows(shape_config, r, fields["num_layers"] or 0))
        elif style == "qwen3_moe":
            layers = fields["num_layers"] or 0
            dense_only = shape_config.get("mlp_only_layers", [])
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
        elif style == "llama4":
            fields.update(_llama4_experts_and_chunks(shape_config, r, fields))
        if style == "llama" and shape_config.get("model_type") == "mistral" and shape_config.get("sliding_window") is not None:
            fields["sliding_window"] = r.context("sliding_window")
        elif style == "deepseek_v3":
            layers = fields["num_layers"] or 0
            first_dense = shape_config.get("first_k_dense_replace", 0)
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


def _llama4_experts_and_chunks(cfg: dict[str, Any], r: _Reader, fields: dict[str, Any]) -> dict[str, Any]:
    """Llama 4 (transformers' Llama4TextConfig): every MoE layer has `num_local_experts` routed experts and one
    shared expert, all `intermediate_size` wide; MoE layers are every `interleave_moe_layer_step`-th
    (`moe_layers` when given), the rest dense with `intermediate_size_mlp`. Layers that use RoPE
    (`no_rope_layers` 1; default: all but every 4th) attend within chunks of `attention_chunk_size` tokens,
    so they never hold more than that many: the catalog keeps it as a window over those layers."""
    layers = fields["num_layers"] or 0
    expert_width = fields["intermediate_size"]
    step = r.integer("interleave_moe_layer_step", default=1, maximum=MAX_LAYERS)
    moe = cfg.get("moe_layers")
    if moe is not None:
        if not isinstance(moe, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in moe):
            r.errors[r.prefix + "moe_layers"] = "Must be a list of layer indices."
            moe = []
        moe_count = len(set(moe))
    else:
        moe_count = len(range(step - 1, layers, step)) if step else 0
    out = {
        "num_experts": r.integer("num_local_experts"),
        "experts_per_token": r.integer("num_experts_per_tok"),
        "num_shared_experts": 1,
        "moe_layer_count": moe_count,
        "moe_intermediate_size": expert_width,
        "intermediate_size": r.integer("intermediate_size_mlp", default=expert_width),
    }
    if cfg.get("attention_chunk_size") is None:
        return out
    chunk = r.context("attention_chunk_size")
    rope = cfg.get("no_rope_layers")
    if rope:  # transformers falls back to the default on a missing or empty list
        if not isinstance(rope, list) or len(rope) != layers or not all(v in (0, 1) and not isinstance(v, bool) for v in rope):
            r.errors[r.prefix + "no_rope_layers"] = "Must give 0 or 1 for each of num_hidden_layers."
            return out
        chunked = sum(rope)
    else:
        interval = r.integer("no_rope_layer_interval", default=4, maximum=MAX_LAYERS) or 4
        chunked = sum(1 for i in range(layers) if (i + 1) % interval != 0)
    if chunked:
        out.update(sliding_window=chunk, sliding_window_layers=chunked)
    return out


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
