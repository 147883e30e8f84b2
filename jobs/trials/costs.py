"""Parameter, byte and FLOP counts of the model that model.py BUILDS (so a trial's MBU/MFU refer to what ran).

Formulas: docs/planner_math.md#forward-cost (LLM-Viewer model_analyzer.py, llm-analysis analysis.py).
A matmul of an [n, a] activation with an [a, b] weight costs 2·n·a·b FLOPs; attention of one query against C keys
costs 2·C·(d_qk + d_v) per head. Elementwise ops, norms and softmax are left out (under 1% at these sizes).
"""
from __future__ import annotations

from dataclasses import dataclass

from jobs.trials.model import ModelConfig


@dataclass(frozen=True)
class ParamCounts:
    embedding: int  # input table, read one row per token
    head: int  # output projection (0 extra params when tied, but its matmul still reads the table)
    attention_per_layer: int
    dense_ffn_per_layer: int
    expert: int  # one routed expert
    router: int
    shared_experts: int
    dense_layers: int
    moe_layers: int
    n_experts: int
    final_norm: int

    @property
    def total(self) -> int:
        layers = self.dense_layers * (self.attention_per_layer + self.dense_ffn_per_layer)
        moe = self.moe_layers * (self.attention_per_layer + self.router + self.shared_experts)
        return self.embedding + self.head + self.final_norm + layers + moe + self.moe_layers * self.n_experts * self.expert


def param_counts(cfg: ModelConfig) -> ParamCounts:
    d, H, Hkv, D = cfg.hidden_size, cfg.attn_heads, cfg.attn_kv_heads, cfg.attn_head_dim
    if cfg.attention_kind == "mla" and cfg.q_lora_rank:
        q = d * cfg.q_lora_rank + cfg.q_lora_rank + cfg.q_lora_rank * H * D
    else:
        q = d * H * D
    attention = q + 2 * d * Hkv * D + H * D * d + 2 * d  # + the two RMSNorm vectors of the block
    dense_ffn = (3 if cfg.ffn_kind == "gated" else 2) * d * cfg.intermediate_size
    inter = cfg.moe_intermediate_size or cfg.intermediate_size
    expert = 3 * d * inter if cfg.is_moe else 0
    return ParamCounts(
        embedding=cfg.vocab_size * d,
        head=0 if cfg.tie_word_embeddings else cfg.vocab_size * d,
        attention_per_layer=attention,
        dense_ffn_per_layer=dense_ffn,
        expert=expert,
        router=d * cfg.num_experts if cfg.is_moe else 0,
        shared_experts=(cfg.num_shared_experts or 0) * expert,
        dense_layers=cfg.num_layers - cfg.moe_layers,
        moe_layers=cfg.moe_layers,
        n_experts=cfg.num_experts or 0,
        final_norm=d,
    )


def experts_touched(cfg: ModelConfig, tokens: int) -> float:
    """Expected distinct experts per MoE layer for `tokens` routed tokens under uniform routing: E·(1 − (1 − k/E)^n)."""
    if not cfg.is_moe:
        return 0.0
    E, k = cfg.num_experts, cfg.experts_per_token
    return E * (1.0 - (1.0 - k / E) ** tokens)


def matmul_params_active(cfg: ModelConfig) -> int:
    """Weights each token multiplies through (N_act without the embedding lookup, with the output head)."""
    c = param_counts(cfg)
    per_moe = c.attention_per_layer + c.router + c.shared_experts + (cfg.experts_per_token or 0) * c.expert
    return c.dense_layers * (c.attention_per_layer + c.dense_ffn_per_layer) + c.moe_layers * per_moe + cfg.vocab_size * cfg.hidden_size


def weight_bytes_touched(cfg: ModelConfig, tokens: int, bytes_per_el: float) -> float:
    """Weight bytes one forward over `tokens` tokens reads: every dense weight once, the output head once, the
    embedding rows it looks up, and for MoE only the experts its tokens are routed to (expected, uniform routing)."""
    c = param_counts(cfg)
    d = cfg.hidden_size
    dense = c.dense_layers * (c.attention_per_layer + c.dense_ffn_per_layer)
    moe = c.moe_layers * (c.attention_per_layer + c.router + c.shared_experts + experts_touched(cfg, tokens) * c.expert)
    head = cfg.vocab_size * d
    embedding_rows = min(tokens, cfg.vocab_size) * d
    return (dense + moe + head + embedding_rows) * bytes_per_el


def kv_elements_per_token(cfg: ModelConfig) -> int:
    """K and V elements one token adds to the cache, all layers: 2·L·H_kv·d_h (vLLM §3)."""
    return 2 * cfg.num_layers * cfg.attn_kv_heads * cfg.attn_head_dim


def resident_bytes(cfg: ModelConfig, *, batch: int, max_seq: int, bytes_per_el: float) -> float:
    """Weights + the static KV cache, the memory a trial must hold."""
    return param_counts(cfg).total * bytes_per_el + batch * max_seq * kv_elements_per_token(cfg) * bytes_per_el


def forward_flops(cfg: ModelConfig, *, batch: int, new_tokens: int, keys_per_token: float) -> float:
    """FLOPs of one forward: b·(2·N_act·T + 2·L·H·(d_qk + d_v)·T·keys). `keys_per_token` is the mean number of keys a
    new token attends to: T_ctx for a decode step, (P + 1) / 2 for a causal prefill (causal halving, unlike
    LLM-Viewer's full P²), C + B for a block-diffusion step."""
    attn = 2 * cfg.num_layers * cfg.attn_heads * 2 * cfg.attn_head_dim * new_tokens * keys_per_token
    return batch * (2 * matmul_params_active(cfg) * new_tokens + attn)


def decode_step_bytes(cfg: ModelConfig, *, batch: int, context: float, bytes_per_el: float) -> dict[str, float]:
    """Bytes one decode step at batch b and context T moves: weights touched + b·T·KV read + b·KV written."""
    kvpt = kv_elements_per_token(cfg) * bytes_per_el
    parts = {
        "weights": weight_bytes_touched(cfg, batch, bytes_per_el),
        "kv_read": batch * context * kvpt,
        "kv_write": batch * kvpt,
    }
    parts["total"] = sum(parts.values())
    return parts
