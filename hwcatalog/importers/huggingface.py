"""Turn a Hugging Face config.json into ModelArch fields.

Styles understood: Llama, Mistral, Qwen2/Qwen3 (the Llama key set), Mixtral (num_local_experts),
Qwen3-MoE (num_experts, moe_intermediate_size), gpt-oss (experts, alternating sliding-window layers),
DeepSeek-V3 (MLA + routed/shared experts), GPT-J (n_embd/n_layer/n_head), Llama 4 (its text_config: routed
experts plus one shared expert, MoE on every `interleave_moe_layer_step`-th layer, chunked local attention on the
layers that use RoPE, held as a window of `attention_chunk_size` tokens), DeepSeek-V3.2 (MLA plus DeepSeek
Sparse Attention: `index_topk`, `index_n_heads`, `index_head_dim`), Kimi K2 / K2.5 (DeepSeek-V3 shapes, K2.5's
in its text_config), Qwen3-Next and Qwen3.5 (Gated DeltaNet linear-attention layers with a full-attention layer
every `full_attention_interval`-th or as `layer_types` lists them, gated attention output, dense or MoE with a
shared expert), Nemotron-H (`hybrid_override_pattern`: one Mamba-2, attention, MLP or MoE sublayer per block),
GLM-4.5/4.6/4.7 (glm4_moe: GQA, `first_k_dense_replace` dense layers, routed + shared experts), MiniMax-M2
(every layer MoE of `num_local_experts`), Gemma 3 (local sliding-window layers, 5 of every 6 by default, and
the text config's class defaults where the published config leaves keys out), Phi-3/Phi-4 (the Llama key set),
the diffusion LLMs Dream (Qwen2.5 shapes) and LLaDA (OLMo key names), and the block-diffusion SDAR (Qwen3 shapes,
its block size in `block_size`) and Fast-dLLM v2 (Qwen2.5 shapes, its block size in `bd_size`). The checkpoint's
weight format comes from `quantization_config` (config.json) or `hf_quant_config.json` (NVIDIA ModelOpt). Every
problem is reported against the config key it came from, so an API client sees which field is wrong.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hwcatalog import architecture
from hwcatalog.validation import MAX_CONTEXT_TOKENS, MAX_DIM, MAX_LAYERS

LLAMA_STYLE = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"}
STYLE_BY_MODEL_TYPE = {
    "llama": "llama", "mistral": "llama", "qwen2": "llama", "qwen3": "llama", "phi3": "llama",
    "mixtral": "mixtral", "deepseek_v3": "deepseek_v3", "deepseek_v2": "deepseek_v3", "gptj": "gptj",
    "deepseek_v32": "deepseek_v3", "kimi_k2": "deepseek_v3", "kimi_k25": "deepseek_v3",
    "qwen3_moe": "qwen3_moe", "gpt_oss": "gpt_oss", "llama4": "llama4", "llama4_text": "llama4",
    "qwen3_next": "qwen3_next", "qwen3_5": "qwen3_next", "qwen3_5_text": "qwen3_next", "qwen3_5_moe": "qwen3_next",
    "qwen3_5_moe_text": "qwen3_next", "nemotron_h": "nemotron_h", "glm4_moe": "glm4_moe", "minimax_m2": "minimax_m2",
    "gemma3": "gemma3", "gemma3_text": "gemma3", "Dream": "llama", "dream": "llama", "llada": "llada",
    "mistral3": "llama", "ministral3": "llama", "olmo3": "llama", "exaone4": "llama", "glm_moe_dsa": "deepseek_v3",
    "glm4_moe_lite": "deepseek_v3", "qwen3_vl": "llama", "qwen3_vl_moe": "qwen3_moe", "sdar": "llama",
    "Fast_dLLM_Qwen": "llama",
}
# Multimodal wrappers whose language model's shapes sit under text_config.
NESTED_TEXT_STYLES = {"llama4", "gemma3", "qwen3_next", "deepseek_v3", "llama", "qwen3_moe"}
# Model types that generate by masked diffusion rather than left to right.
DIFFUSION_MODEL_TYPES = {"Dream", "dream", "llada"}
# Model types that denoise one block of tokens at a time, blocks left to right, and the config key holding the
# block size (SDAR: Qwen3's weights, `block_size`; Fast-dLLM v2: Qwen2.5's weights, `bd_size`).
BLOCK_DIFFUSION_MODEL_TYPES = {"sdar": "block_size", "Fast_dLLM_Qwen": "bd_size"}
# transformers' Gemma3TextConfig defaults, which Gemma 3's published configs rely on for the keys they omit.
GEMMA3_DEFAULTS = {
    "vocab_size": 262_208, "head_dim": 256, "max_position_embeddings": 131_072, "sliding_window": 4096,
    "sliding_window_pattern": 6, "num_attention_heads": 8, "num_key_value_heads": 4, "tie_word_embeddings": True,
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
        if names & {"DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration", "GlmMoeDsaForCausalLM"}:
            return "deepseek_v3"
        if names & {"Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"}:
            return "qwen3_next"
        if "NemotronHForCausalLM" in names:
            return "nemotron_h"
        if "Glm4MoeLiteForCausalLM" in names:
            return "deepseek_v3"
        if "Qwen3VLMoeForConditionalGeneration" in names:
            return "qwen3_moe"
        if "Qwen3VLForConditionalGeneration" in names:
            return "llama"
        if "Glm4MoeForCausalLM" in names:
            return "glm4_moe"
        if "MiniMaxM2ForCausalLM" in names:
            return "minimax_m2"
        if names & {"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"}:
            return "gemma3"
        if names & {"Phi3ForCausalLM", "Mistral3ForConditionalGeneration", "Ministral3ForCausalLM", "Olmo3ForCausalLM", "Exaone4ForCausalLM"}:
            return "llama"
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
    if style in NESTED_TEXT_STYLES and "text_config" in config:
        shape_config, prefix = config["text_config"], "text_config."
        if not isinstance(shape_config, dict):
            raise ConfigError({"text_config": "Must be a JSON object."})
        # A wrapper keeps some of the language model's keys at its own level (Qwen3.5, Gemma 3: tie_word_embeddings).
        shape_config = {**{k: v for k, v in config.items() if k in ("tie_word_embeddings",)}, **shape_config}
    if style == "gemma3":
        shape_config = {**GEMMA3_DEFAULTS, **shape_config}
    if style == "nemotron_h" and "num_hidden_layers" not in shape_config:
        # A Nemotron-H config may leave the count to its block list (Nemotron 3 Ultra's names only
        # layers_block_type): one block a layer (_nemotron_h_layers checks each block's name).
        blocks = shape_config.get("hybrid_override_pattern", shape_config.get("layers_block_type"))
        if isinstance(blocks, (str, list)) and blocks:
            shape_config = {**shape_config, "num_hidden_layers": len(blocks)}
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
    elif style == "llada":
        fields = _llada_fields(r)
    else:
        hidden = r.integer("hidden_size")
        heads = r.integer("num_attention_heads")
        kv_heads = r.integer("num_key_value_heads", default=heads)
        head_dim = r.integer("head_dim", required=False)
        if style == "nemotron_h":  # Nemotron-H-56B names it attention_head_dim
            attention_head_dim = r.integer("attention_head_dim", required=False)
            head_dim = head_dim or attention_head_dim
        fields = {
            "num_layers": r.layers("num_hidden_layers"),
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "num_kv_heads": kv_heads,
            "head_dim": head_dim or (hidden // heads if hidden and heads else None),
            "intermediate_size": r.integer("intermediate_size", required=style not in ("qwen3_next",)),
            "vocab_size": r.integer("vocab_size"),
            "tie_word_embeddings": r.boolean("tie_word_embeddings", False),
            "ffn_kind": "gated",
            "attention_kind": _attention_kind(heads, kv_heads),
            "max_context_tokens": r.context("max_position_embeddings"),
        }
        if style in ("mixtral", "gpt_oss", "minimax_m2"):
            fields.update(
                num_experts=r.integer("num_local_experts"),
                experts_per_token=r.integer("num_experts_per_tok"),
                num_shared_experts=0,
                moe_layer_count=fields["num_layers"],
                moe_intermediate_size=fields["intermediate_size"],
            )
            if style == "gpt_oss":
                fields.update(_gpt_oss_windows(shape_config, r, fields["num_layers"] or 0))
            if style == "minimax_m2" and shape_config.get("shared_intermediate_size"):
                r.errors["shared_intermediate_size"] = "MiniMax-M2 shared experts are not supported (the published models have none: 0)."
        elif style == "qwen3_moe":
            fields.update(_qwen_experts(shape_config, r, fields["num_layers"] or 0))
        elif style == "llama4":
            fields.update(_llama4_experts_and_chunks(shape_config, r, fields))
        elif style == "qwen3_next":
            fields.update(_qwen3_next_layers(shape_config, r, fields))
        elif style == "nemotron_h":
            fields.update(_nemotron_h_layers(shape_config, r, fields))
        elif style == "glm4_moe":
            fields.update(_glm4_moe_experts(shape_config, r, fields["num_layers"] or 0))
        elif style == "gemma3":
            fields.update(_gemma3_windows(shape_config, r, fields["num_layers"] or 0))
        if style == "llama" and shape_config.get("layer_types") is not None:
            fields.update(_gpt_oss_windows(shape_config, r, fields["num_layers"] or 0))  # Olmo 3, EXAONE 4: 3 local : 1 global
        elif style == "llama" and shape_config.get("model_type") in ("mistral", "phi3") and shape_config.get("sliding_window") is not None:
            fields["sliding_window"] = r.context("sliding_window")
        elif style == "deepseek_v3":
            layers = fields["num_layers"] or 0
            first_dense = shape_config.get("first_k_dense_replace", 0)
            if isinstance(first_dense, bool) or not isinstance(first_dense, int) or not 0 <= first_dense <= layers:
                r.errors[r.prefix + "first_k_dense_replace"] = "Must be an integer between 0 and num_hidden_layers."
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
            if shape_config.get("index_topk") is not None or config.get("model_type") in ("deepseek_v32", "glm_moe_dsa"):
                fields.update(
                    sparse_attention_topk=r.context("index_topk"),
                    indexer_num_heads=r.integer("index_n_heads"),
                    indexer_head_dim=r.integer("index_head_dim"),
                )
    model_type = config.get("model_type")
    if model_type in DIFFUSION_MODEL_TYPES:
        fields["generation_kind"] = "diffusion"
    elif model_type in BLOCK_DIFFUSION_MODEL_TYPES:
        fields.update(generation_kind="block_diffusion", default_block_size=r.integer(BLOCK_DIFFUSION_MODEL_TYPES[model_type]))
    quantization = config.get("quantization_config", shape_config.get("quantization_config") if prefix else None)
    fields["checkpoint_format"] = checkpoint_format(quantization, quant_config, r)
    kept = sixteen_bit_modules(quantization, quant_config)
    if kept and fields["checkpoint_format"]:
        fields["sixteen_bit_modules"] = {fields["checkpoint_format"]: kept}
    if r.errors:
        raise ConfigError(r.errors)
    shape = architecture.ArchShape(**{k: fields.get(k) for k in architecture.ArchShape.__dataclass_fields__ if k in fields})
    fields["total_params"] = architecture.parameter_count(shape)
    fields["active_params"] = architecture.active_parameter_count(shape)
    return ImportedArch(fields=fields, style=style)


def _layer_indices(cfg: dict[str, Any], r: _Reader, key: str, layers: int) -> list[int]:
    value = cfg.get(key, [])
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in value):
        r.errors[r.prefix + key] = "Must be a list of layer indices."
        return []
    return value


def _qwen_experts(cfg: dict[str, Any], r: _Reader, layers: int) -> dict[str, Any]:
    """Qwen3-MoE / Qwen3-Next / Qwen3.5-MoE experts: every layer but `mlp_only_layers` is MoE."""
    dense_only = _layer_indices(cfg, r, "mlp_only_layers", layers)
    step = r.integer("decoder_sparse_step", default=1, maximum=MAX_LAYERS)
    if step and step != 1:
        r.errors[r.prefix + "decoder_sparse_step"] = "Only every-layer MoE (1) is supported."
    out = {
        "num_experts": r.integer("num_experts"),
        "experts_per_token": r.integer("num_experts_per_tok"),
        "num_shared_experts": 0,
        "moe_layer_count": layers - len(set(dense_only)),
        "moe_intermediate_size": r.integer("moe_intermediate_size"),
    }
    shared = r.integer("shared_expert_intermediate_size", required=False, minimum=0)
    if shared:
        out.update(num_shared_experts=1, shared_expert_intermediate_size=shared)
    return out


def _qwen3_next_layers(cfg: dict[str, Any], r: _Reader, fields: dict[str, Any]) -> dict[str, Any]:
    """Qwen3-Next / Qwen3.5 (transformers Qwen3NextConfig, Qwen3_5TextConfig): `layer_types` names each layer
    linear_attention (Gated DeltaNet) or full_attention; without it every `full_attention_interval`-th layer is
    full. The full layers gate their output (q_proj is twice as wide; Qwen3.5 says so in `attn_output_gate`).
    MoE when `num_experts` is given (one shared expert of `shared_expert_intermediate_size`), else dense."""
    layers = fields["num_layers"] or 0
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or not all(t in ("linear_attention", "full_attention") for t in types):
            r.errors[r.prefix + "layer_types"] = "Must list linear_attention or full_attention for each of num_hidden_layers."
            types = []
        linear = types.count("linear_attention")
    else:
        interval = r.integer("full_attention_interval", default=4, maximum=MAX_LAYERS) or 4
        linear = sum(1 for i in range(layers) if (i + 1) % interval != 0)
    out: dict[str, Any] = {
        "attention_output_gate": r.boolean("attn_output_gate", True),
        "linear_attention_kind": "gated_deltanet",
        "linear_attention_layers": linear,
        "attention_layers": layers - linear,
        "linear_num_key_heads": r.integer("linear_num_key_heads"),
        "linear_key_head_dim": r.integer("linear_key_head_dim"),
        "linear_num_value_heads": r.integer("linear_num_value_heads"),
        "linear_value_head_dim": r.integer("linear_value_head_dim"),
        "linear_conv_kernel_dim": r.integer("linear_conv_kernel_dim"),
    }
    if cfg.get("num_experts") is not None:
        out.update(_qwen_experts(cfg, r, layers))
    elif fields.get("intermediate_size") is None:
        r.errors[r.prefix + "intermediate_size"] = "Missing from config.json (a dense model needs its FFN width)."
    if fields.get("intermediate_size") is None:
        out["intermediate_size"] = out.get("moe_intermediate_size")
    return out


NEMOTRON_BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}


def _nemotron_h_layers(cfg: dict[str, Any], r: _Reader, fields: dict[str, Any]) -> dict[str, Any]:
    """Nemotron-H (transformers NemotronHConfig): each block holds one sublayer, named by a character of
    `hybrid_override_pattern` (M Mamba-2, * attention, - MLP, E MoE) or a word of `layers_block_type`. Its MLPs
    and experts are squared-ReLU up/down projections (2 matrices). The Mamba-2 widths map onto the catalog's
    linear-attention fields: n_groups x ssm_state_size (B, C) and mamba_num_heads x mamba_head_dim (x). A LatentMoE's
    experts run at `moe_latent_size`."""
    layers = fields["num_layers"] or 0
    pattern, key = cfg.get("hybrid_override_pattern"), "hybrid_override_pattern"
    if pattern is None and cfg.get("layers_block_type") is not None:  # Nemotron 3.5 spells it as a list of words
        key, words = "layers_block_type", cfg["layers_block_type"]
        by_name = {v: k for k, v in NEMOTRON_BLOCKS.items()}
        pattern = "".join(by_name.get(w, "?") for w in words) if isinstance(words, list) and all(isinstance(w, str) for w in words) else None
    if not isinstance(pattern, str) or len(pattern) != layers or set(pattern) - set(NEMOTRON_BLOCKS):
        blocks = "mamba, attention, mlp or moe" if key == "layers_block_type" else "M, *, - or E"
        r.errors[r.prefix + key] = f"Must name one block ({blocks}) for each of num_hidden_layers."
        pattern = ""
    # LatentMoE (Nemotron 3 Super and Ultra): the routed experts work at moe_latent_size between a d -> latent and
    # a latent -> d projection per MoE layer; the router and the shared expert stay at d.
    latent = r.integer("moe_latent_size", required=False, maximum=fields.get("hidden_size") or MAX_DIM)
    out: dict[str, Any] = {
        "ffn_kind": "plain",
        "linear_attention_kind": "mamba2",
        "linear_attention_layers": pattern.count("M"),
        "attention_layers": pattern.count("*"),
        "ffn_layers": pattern.count("-") + pattern.count("E"),
        "linear_num_key_heads": r.integer("n_groups"),
        "linear_key_head_dim": r.integer("ssm_state_size"),
        "linear_num_value_heads": r.integer("mamba_num_heads"),
        "linear_value_head_dim": r.integer("mamba_head_dim"),
        "linear_conv_kernel_dim": r.integer("conv_kernel"),
    }
    if "E" in pattern:
        out.update(
            num_experts=r.integer("n_routed_experts"),
            experts_per_token=r.integer("num_experts_per_tok"),
            num_shared_experts=r.integer("n_shared_experts", required=False, minimum=0) or 0,
            moe_layer_count=pattern.count("E"),
            moe_intermediate_size=r.integer("moe_intermediate_size"),
        )
        shared = r.integer("moe_shared_expert_intermediate_size", required=False)
        if out["num_shared_experts"] and shared:
            out["shared_expert_intermediate_size"] = shared
        if latent:
            out["moe_latent_size"] = latent
    return out


def _glm4_moe_experts(cfg: dict[str, Any], r: _Reader, layers: int) -> dict[str, Any]:
    """GLM-4.5/4.6/4.7 (transformers Glm4MoeConfig): the first `first_k_dense_replace` layers are dense
    (`intermediate_size`), the rest MoE with `n_routed_experts` routed and `n_shared_experts` shared experts of
    `moe_intermediate_size`. The MTP layers (`num_nextn_predict_layers`) are left out, as for DeepSeek-V3."""
    first_dense = cfg.get("first_k_dense_replace", 1)
    if isinstance(first_dense, bool) or not isinstance(first_dense, int) or not 0 <= first_dense <= layers:
        r.errors[r.prefix + "first_k_dense_replace"] = "Must be an integer between 0 and num_hidden_layers."
        first_dense = 0
    return {
        "num_experts": r.integer("n_routed_experts"),
        "experts_per_token": r.integer("num_experts_per_tok"),
        "num_shared_experts": r.integer("n_shared_experts", required=False, minimum=0) or 0,
        "moe_layer_count": layers - first_dense,
        "moe_intermediate_size": r.integer("moe_intermediate_size"),
    }


def _gemma3_windows(cfg: dict[str, Any], r: _Reader, layers: int) -> dict[str, Any]:
    """Gemma 3 (transformers Gemma3TextConfig): local layers attend within `sliding_window` tokens; `layer_types`
    names them, else every layer but each `sliding_window_pattern`-th is local (5 local : 1 global)."""
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or not all(t in ("sliding_attention", "full_attention") for t in types):
            r.errors[r.prefix + "layer_types"] = "Must list sliding_attention or full_attention for each of num_hidden_layers."
            return {}
        windowed = types.count("sliding_attention")
    else:
        pattern = r.integer("sliding_window_pattern", maximum=MAX_LAYERS) or 6
        windowed = sum(1 for i in range(layers) if (i + 1) % pattern != 0)
    if not windowed:
        return {}
    return {"sliding_window": r.context("sliding_window"), "sliding_window_layers": windowed}


def _llada_fields(r: _Reader) -> dict[str, Any]:
    """LLaDA (GSAI-ML's OLMo-derived config): d_model, n_layers, n_heads, n_kv_heads, mlp_hidden_size (SwiGLU
    with block_type llama), embedding_size (the padded vocabulary), weight_tying, max_sequence_length."""
    hidden = r.integer("d_model")
    heads = r.integer("n_heads")
    kv_heads = r.integer("n_kv_heads", default=heads)
    return {
        "num_layers": r.layers("n_layers"),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": hidden // heads if hidden and heads else None,
        "intermediate_size": r.integer("mlp_hidden_size"),
        "vocab_size": r.integer("embedding_size", required=False) or r.integer("vocab_size"),
        "tie_word_embeddings": r.boolean("weight_tying", False),
        "ffn_kind": "gated",
        "attention_kind": _attention_kind(heads, kv_heads),
        "max_context_tokens": r.context("max_sequence_length"),
    }


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
    """gpt-oss alternates banded (sliding-window) and full layers, Olmo 3 and EXAONE 4 have three local layers
    to each global one: `layer_types` names each."""
    types = config.get("layer_types")
    if types is None:
        return {}
    if not isinstance(types, list) or len(types) != layers or not all(t in ("sliding_attention", "full_attention") for t in types):
        r.errors[r.prefix + "layer_types"] = "Must list sliding_attention or full_attention for each of num_hidden_layers."
        return {}
    windowed = types.count("sliding_attention")
    if not windowed:
        return {}
    return {"sliding_window": r.context("sliding_window"), "sliding_window_layers": windowed}


# quant_method / quant_algo -> the catalog's checkpoint_format.
_FORMATS = {
    "fp8": "fp8", "mxfp4": "mxfp4", "nvfp4": "nvfp4", "fp8_pb_wo": "fp8_block", "w4a16_awq": "int4", "int4_awq": "int4",
    "w4a16_nvfp4": "nvfp4",
}


def _mixed_precision_algo(layers: Any) -> str | None:
    """ModelOpt's MIXED_PRECISION names a quant_algo per layer: the checkpoint is named by the format of its
    MLP / expert layers, which hold most of its weights (Qwen3.6-27B-NVFP4: NVFP4 MLPs, FP8 attention)."""
    if not isinstance(layers, dict) or not all(isinstance(v, dict) for v in layers.values()):
        return None
    ffn = [v.get("quant_algo") for k, v in layers.items() if "mlp" in k or "experts" in k]
    algos = ffn or [v.get("quant_algo") for v in layers.values()]
    algos = [a for a in algos if isinstance(a, str)]
    return max(set(algos), key=algos.count) if algos else None


def checkpoint_format(quantization_config: Any, quant_config: dict[str, Any] | None, r: _Reader) -> str:
    """The checkpoint's weight format: ModelOpt's hf_quant_config.json (`quantization.quant_algo`),
    else config.json's `quantization_config` (`quant_method`, block-scaled FP8 when it gives
    `weight_block_size`, `bits` for AWQ/GPTQ); "" when neither says."""
    if quant_config is not None:
        algo = (quant_config.get("quantization") or {}).get("quant_algo") if isinstance(quant_config.get("quantization"), dict) else None
        if algo == "MIXED_PRECISION":
            algo = _mixed_precision_algo(quant_config["quantization"].get("quantized_layers"))
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
    if method == "compressed-tensors":
        return _compressed_tensors_format(quantization_config, r)
    if method == "modelopt":  # ModelOpt's export into config.json (Kimi-K2.6-NVFP4): its quant_algo, as in hf_quant_config.json
        algo = quantization_config.get("quant_algo")
        if algo == "MIXED_PRECISION":
            algo = _mixed_precision_algo(quantization_config.get("quantized_layers"))
        if isinstance(algo, str) and algo.lower() in _FORMATS:
            return _FORMATS[algo.lower()]
        r.errors["quantization_config"] = f"modelopt quant_algo {algo!r} is not one of {', '.join(sorted(_FORMATS))}."
        return ""
    r.errors["quantization_config"] = f"quant_method {method!r} is not supported (fp8, mxfp4, nvfp4, awq, gptq, compressed-tensors, modelopt)."
    return ""


def _excluded_patterns(quantization_config: Any, quant_config: dict[str, Any] | None) -> list[str]:
    """The module patterns a checkpoint leaves unquantised: ModelOpt's exclude_modules, transformers'
    modules_to_not_convert, compressed-tensors' ignore."""
    if quant_config is not None and isinstance(quant_config.get("quantization"), dict):
        listed = quant_config["quantization"].get("exclude_modules")
    elif isinstance(quantization_config, dict):
        listed = next((quantization_config[k] for k in ("exclude_modules", "modules_to_not_convert", "ignore") if k in quantization_config), None)
    else:
        listed = None
    return [p for p in listed if isinstance(p, str)] if isinstance(listed, list) else []


_ATTENTION_INPUTS = ("q_proj", "k_proj", "v_proj", "qkv_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj")


def _pattern_tail(pattern: str) -> str:
    """A module pattern without its regex marker and trailing wildcards: 're:.*self_attn.*' -> '.*self_attn'."""
    text = pattern.removeprefix("re:")
    while text.endswith(("*", ".")):
        text = text[:-1]
    return text


def sixteen_bit_modules(quantization_config: Any, quant_config: dict[str, Any] | None) -> list[str]:
    """The modules (architecture.SIXTEEN_BIT_MODULES) a quantised checkpoint keeps in 16 bits, read off
    its exclusion list: every attention projection or only its inputs, the MoE router, the shared
    experts, the dense layers' FFNs (a whole first layer excluded, as Kimi-K2.6-NVFP4's, is its dense
    FFN). The embeddings and LM head count as 16-bit under every quantised format already; patterns
    for parts the planner does not model (a vision tower, MTP layers) are passed over."""
    attention, projections, kept = False, set(), set()
    for pattern in _excluded_patterns(quantization_config, quant_config):
        text = _pattern_tail(pattern)
        last = text.rsplit(".", 1)[-1]
        if "self_attn" in text:
            if text.endswith("self_attn"):
                attention = True
            elif last in _ATTENTION_INPUTS or last == "o_proj":
                projections.add(last)
        if last == "router" or text.endswith("mlp.gate"):
            kept.add("router")
        if "shared_expert" in text:
            kept.add("shared_experts")
        dense = "mlp" in text and "expert" not in text and any(name in text for name in ("gate_proj", "up_proj", "down_proj", "(gate|up"))
        if dense or (text.endswith("model.layers.0") and "mtp" not in text):
            kept.add("dense_ffn")
    if attention or "o_proj" in projections:
        kept.add("attention")
    elif projections:
        kept.add("attention_inputs")
    return [name for name in architecture.SIXTEEN_BIT_MODULES if name in kept]


def _compressed_tensors_format(quantization_config: dict[str, Any], r: _Reader) -> str:
    """llm-compressor's `compressed-tensors` (Kimi K2.5's INT4 experts): the weights of its config groups. A
    checkpoint that quantises only some layers (Kimi K2.5 keeps attention and shared experts in bf16) is
    named by its quantised weights, which are most of its bytes."""
    groups = quantization_config.get("config_groups")
    weights = [g.get("weights") for g in groups.values()] if isinstance(groups, dict) and all(isinstance(g, dict) for g in groups.values()) else []
    kinds = {(w.get("num_bits"), w.get("type")) for w in weights if isinstance(w, dict)}
    if len(kinds) != 1:
        r.errors["quantization_config"] = "compressed-tensors: config_groups must give one weight format (num_bits, type)."
        return ""
    bits, kind = kinds.pop()
    formats = {(4, "int"): "int4", (8, "int"): "int8", (8, "float"): "fp8", (4, "float"): "nvfp4"}
    if (bits, kind) not in formats:
        r.errors["quantization_config"] = f"compressed-tensors weights of {bits} bits, type {kind!r}, are not supported."
        return ""
    groups = {w.get("group_size") for w in weights if isinstance(w, dict)}
    if (bits, kind) == (4, "int") and groups == {32}:  # a 16-bit scale per 32 weights: 4.5 bits (architecture.WEIGHT_FORMAT_BITS)
        return "int4_g32"
    return formats[(bits, kind)]
