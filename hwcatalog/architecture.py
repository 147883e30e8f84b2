"""Shape arithmetic of transformer architectures: parameter counts and KV-cache size.

The one description of a model's shape (ArchShape) and the one table of bytes per
element, at the ground floor of the project. Pure Python (no Django): the ModelArch
model calls it for its derived values, the HF importer to count the parameters of an
uploaded config, the planner's engine holds an ArchShape in every ModelSpec, and the
trials are built from a dict of the same fields (jobs/runner.py).
"""
from __future__ import annotations

from dataclasses import dataclass

# Bytes per element. int4/fp4 pack two elements per byte. The engine's dtype codes
# (planner/engine/units.py) index this same table.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
}


def bytes_per_element(dtype: str) -> float:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_BYTES)}") from None


@dataclass(frozen=True, kw_only=True)
class ArchShape:
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    ffn_kind: str = "gated"  # gated: SwiGLU/GeGLU, 3 matrices; plain: 2 matrices (GPT-J, OPT)
    attention_kind: str = "gqa"
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None
    v_head_dim: int | None = None
    num_experts: int | None = None
    experts_per_token: int | None = None
    num_shared_experts: int | None = None
    moe_layer_count: int | None = None
    moe_intermediate_size: int | None = None
    sliding_window: int | None = None  # tokens a windowed layer attends to
    sliding_window_layers: int | None = None  # layers with the window (None with a window: all)

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts)

    @property
    def is_mla(self) -> bool:
        return self.attention_kind == "mla"


def attention_params_per_layer(shape: ArchShape) -> int:
    d = shape.hidden_size
    if shape.is_mla:
        # DeepSeek-V2 paper §2.1: low-rank joint KV compression and low-rank queries.
        heads = shape.num_attention_heads
        qk_dim = (shape.qk_nope_head_dim or 0) + (shape.qk_rope_head_dim or 0)
        if shape.q_lora_rank:
            q = d * shape.q_lora_rank + shape.q_lora_rank * heads * qk_dim
        else:
            q = d * heads * qk_dim
        kv_a = d * ((shape.kv_lora_rank or 0) + (shape.qk_rope_head_dim or 0))
        kv_b = (shape.kv_lora_rank or 0) * heads * ((shape.qk_nope_head_dim or 0) + (shape.v_head_dim or 0))
        out = heads * (shape.v_head_dim or 0) * d
        return q + kv_a + kv_b + out
    q = d * shape.num_attention_heads * shape.head_dim
    kv = 2 * d * shape.num_kv_heads * shape.head_dim
    out = shape.num_attention_heads * shape.head_dim * d
    return q + kv + out


def ffn_params(hidden_size: int, intermediate_size: int, ffn_kind: str) -> int:
    matrices = 3 if ffn_kind == "gated" else 2
    return matrices * hidden_size * intermediate_size


def params_per_expert(shape: ArchShape) -> int:
    """Parameters of one routed expert in one MoE layer (0 for a dense model)."""
    if not shape.is_moe:
        return 0
    return ffn_params(shape.hidden_size, shape.moe_intermediate_size or shape.intermediate_size, shape.ffn_kind)


def experts_touched(num_experts, experts_per_token, tokens):
    """Distinct experts one MoE layer reads for `tokens` routed tokens under uniform routing:
    E*(1 - (1 - k/E)^tokens) (each expert is missed by a token w.p. 1 - k/E). Floats or NumPy
    arrays alike (the engine passes arrays, the trials floats)."""
    return num_experts * (1.0 - (1.0 - experts_per_token / num_experts) ** tokens)


def _moe_layers(shape: ArchShape) -> int:
    if not shape.is_moe:
        return 0
    return shape.num_layers if shape.moe_layer_count is None else shape.moe_layer_count


def embedding_params(shape: ArchShape) -> int:
    """Input embedding matrix (vocab x d)."""
    return shape.vocab_size * shape.hidden_size


def lm_head_params(shape: ArchShape) -> int:
    """The output projection; with tied embeddings it is the same matrix, read at every step."""
    return shape.vocab_size * shape.hidden_size


def stored_embedding_params(shape: ArchShape) -> int:
    """The embedding table and the output head as stored: one matrix when tied."""
    return embedding_params(shape) * (1 if shape.tie_word_embeddings else 2)


def _layer_params(shape: ArchShape, experts_counted: int) -> int:
    moe_layers = _moe_layers(shape)
    dense_layers = shape.num_layers - moe_layers
    attention = shape.num_layers * attention_params_per_layer(shape)
    dense_ffn = dense_layers * ffn_params(shape.hidden_size, shape.intermediate_size, shape.ffn_kind)
    moe_ffn = 0
    if moe_layers:
        shared = shape.num_shared_experts or 0
        router = shape.hidden_size * (shape.num_experts or 0)
        moe_ffn = moe_layers * ((experts_counted + shared) * params_per_expert(shape) + router)
    return attention + dense_ffn + moe_ffn


def parameter_count(shape: ArchShape) -> int:
    """Total parameters from the shapes (norms and biases left out: < 0.1% here)."""
    return _layer_params(shape, shape.num_experts or 0) + stored_embedding_params(shape)


def active_parameter_count(shape: ArchShape) -> int:
    """Parameters a token passes through: MoE layers count only the routed top-k experts."""
    return _layer_params(shape, shape.experts_per_token or 0) + stored_embedding_params(shape)


def kv_cache_elements_per_token(shape: ArchShape) -> int:
    """Elements cached per token over all layers.

    Standard attention: K and V, 2 * L * H_kv * d_h (vLLM paper §3: OPT-13B 800 KB/token at fp16).
    MLA caches the compressed latent plus the decoupled RoPE key, L * (kv_lora_rank + rope_dim)
    (DeepSeek-V2 paper, Table 1: 576 elements per layer for V3's sizes).
    """
    if shape.is_mla:
        return shape.num_layers * ((shape.kv_lora_rank or 0) + (shape.qk_rope_head_dim or 0))
    return 2 * shape.num_layers * shape.num_kv_heads * shape.head_dim


def kv_cache_bytes_per_token(shape: ArchShape, dtype: str) -> float:
    return kv_cache_elements_per_token(shape) * bytes_per_element(dtype)


def weight_bytes(shape: ArchShape, dtype: str) -> float:
    return parameter_count(shape) * bytes_per_element(dtype)
