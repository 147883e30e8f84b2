"""Turn a Hugging Face config.json into ModelArch fields.

Styles understood: Llama, Mistral, Qwen2 (the Llama key set), Mixtral (num_local_experts),
DeepSeek-V3 (MLA + routed/shared experts), GPT-J (n_embd/n_layer/n_head). Every problem is
reported against the config key it came from, so an API client sees which field is wrong.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hwcatalog import architecture

LLAMA_STYLE = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"}
STYLE_BY_MODEL_TYPE = {
    "llama": "llama", "mistral": "llama", "qwen2": "llama", "qwen3": "llama",
    "mixtral": "mixtral", "deepseek_v3": "deepseek_v3", "deepseek_v2": "deepseek_v3", "gptj": "gptj",
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
    if isinstance(model_type, str) and model_type in STYLE_BY_MODEL_TYPE:
        return STYLE_BY_MODEL_TYPE[model_type]
    architectures = config.get("architectures")
    if isinstance(architectures, list):
        names = set(a for a in architectures if isinstance(a, str))
        if names & LLAMA_STYLE:
            return "llama"
        if "MixtralForCausalLM" in names:
            return "mixtral"
        if names & {"DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"}:
            return "deepseek_v3"
        if "GPTJForCausalLM" in names:
            return "gptj"
    raise ConfigError({"model_type": f"Unsupported model_type {model_type!r}; supported: {', '.join(sorted(STYLE_BY_MODEL_TYPE))}."})


class _Reader:
    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.errors: dict[str, str] = {}

    def integer(self, key: str, *, default: int | None = None, required: bool = True) -> int | None:
        value = self.config.get(key, default)
        if value is None:
            if required:
                self.errors[key] = "Missing from config.json."
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.errors[key] = f"Must be an integer, got {type(value).__name__}."
            return None
        if value <= 0:
            self.errors[key] = "Must be greater than zero."
            return None
        return value

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


def fields_from_hf_config(config: dict[str, Any]) -> ImportedArch:
    if not isinstance(config, dict):
        raise ConfigError({"config": "A config.json must be a JSON object."})
    style = detect_style(config)
    r = _Reader(config)
    if style == "gptj":
        hidden = r.integer("n_embd")
        heads = r.integer("n_head")
        fields = {
            "num_layers": r.integer("n_layer"),
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "num_kv_heads": heads,
            "head_dim": hidden // heads if hidden and heads else None,
            "intermediate_size": r.integer("n_inner", required=False) or (4 * hidden if hidden else None),
            "vocab_size": r.integer("vocab_size"),
            "tie_word_embeddings": r.boolean("tie_word_embeddings", False),
            "ffn_kind": "plain",
            "attention_kind": "mha",
            "max_context_tokens": r.integer("n_positions"),
        }
    else:
        hidden = r.integer("hidden_size")
        heads = r.integer("num_attention_heads")
        kv_heads = r.integer("num_key_value_heads", default=heads)
        fields = {
            "num_layers": r.integer("num_hidden_layers"),
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "num_kv_heads": kv_heads,
            "head_dim": r.integer("head_dim", required=False) or (hidden // heads if hidden and heads else None),
            "intermediate_size": r.integer("intermediate_size"),
            "vocab_size": r.integer("vocab_size"),
            "tie_word_embeddings": r.boolean("tie_word_embeddings", False),
            "ffn_kind": "gated",
            "attention_kind": _attention_kind(heads, kv_heads),
            "max_context_tokens": r.integer("max_position_embeddings"),
        }
        if style == "mixtral":
            fields.update(
                num_experts=r.integer("num_local_experts"),
                experts_per_token=r.integer("num_experts_per_tok"),
                num_shared_experts=0,
                moe_layer_count=fields["num_layers"],
                moe_intermediate_size=fields["intermediate_size"],
            )
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
                num_shared_experts=config.get("n_shared_experts") or 0,
                moe_layer_count=layers - first_dense,
                moe_intermediate_size=r.integer("moe_intermediate_size"),
            )
            if fields["qk_nope_head_dim"] and fields["qk_rope_head_dim"]:
                fields["head_dim"] = fields["qk_nope_head_dim"] + fields["qk_rope_head_dim"]
    if r.errors:
        raise ConfigError(r.errors)
    shape = architecture.ArchShape(**{k: fields.get(k) for k in architecture.ArchShape.__dataclass_fields__ if k in fields})
    fields["total_params"] = architecture.parameter_count(shape)
    fields["active_params"] = architecture.active_parameter_count(shape)
    return ImportedArch(fields=fields, style=style)
