"""A compact decoder-only transformer built from a catalog model description.

gpt-fast style: one dataclass config, small modules, a static KV cache that never changes shape (what lets
torch.compile + CUDA graphs capture the decode step). The shapes follow the catalog's ModelArch fields; the weights
are random from a fixed seed unless a local checkpoint is given (see weights.py). Nothing here knows Django.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
    "fp32": torch.float32,
    "float32": torch.float32,
}

ATTENTION_MODES = ("causal", "block", "bidirectional")


@dataclass
class ModelConfig:
    """The catalog's ModelArch fields (docs/catalog_format.md) plus the few knobs a runnable model needs."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    intermediate_size: int
    vocab_size: int
    num_kv_heads: int | None = None
    head_dim: int | None = None
    tie_word_embeddings: bool = False
    ffn_kind: str = "gated"
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
    generation_kind: str = "autoregressive"
    default_block_size: int | None = None
    max_context_tokens: int = 4096
    slug: str | None = None
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    # Derived in __post_init__: the attention actually built and what was approximated to build it.
    attn_heads: int = field(init=False)
    attn_kv_heads: int = field(init=False)
    attn_head_dim: int = field(init=False)
    approximations: list[str] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.approximations = []
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_kv_heads is None:
            self.num_kv_heads = 1 if self.attention_kind == "mqa" else self.num_attention_heads
        self.attn_heads = self.num_attention_heads
        self.attn_kv_heads = self.num_kv_heads
        self.attn_head_dim = self.head_dim
        if self.attention_kind == "mla" and self.kv_lora_rank:
            # MLA caches one latent of kv_lora_rank + qk_rope_head_dim elements per token and layer (DeepSeek-V2, Table 1).
            # We build MQA (one KV head) whose K+V hold exactly that many elements, so KV bytes and attention reads
            # match; the projection weights differ from the real low-rank + absorbed layout.
            latent = self.kv_lora_rank + (self.qk_rope_head_dim or 0)
            self.attn_kv_heads = 1
            self.attn_head_dim = max(2, (latent + 1) // 2 // 2 * 2)  # RoPE needs an even width
            self.approximations.append(
                f"MLA approximated as MQA: {self.num_attention_heads} query heads, 1 KV head of dim {self.attn_head_dim} "
                f"(K+V = {2 * self.attn_head_dim} elements/token/layer vs the latent {latent}); query path low-rank via "
                f"q_lora_rank={self.q_lora_rank}; projection weights differ from real MLA"
            )
        if self.attn_heads % self.attn_kv_heads:
            raise ValueError(f"{self.attn_heads} query heads are not a multiple of {self.attn_kv_heads} KV heads")
        if self.num_experts and not self.experts_per_token:
            raise ValueError("num_experts is set but experts_per_token is not")
        if self.ffn_kind not in ("gated", "plain"):
            raise ValueError(f"ffn_kind must be 'gated' or 'plain', not {self.ffn_kind!r}")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], **overrides: Any) -> ModelConfig:
        """Build from a catalog row (extra keys such as sources/notes are ignored)."""
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        kwargs = {k: v for k, v in {**d, **overrides}.items() if k in names and v is not None}
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts)

    @property
    def moe_layers(self) -> int:
        if not self.is_moe:
            return 0
        return self.num_layers if self.moe_layer_count is None else min(self.moe_layer_count, self.num_layers)

    def is_moe_layer(self, i: int) -> bool:
        # DeepSeek/Qwen-MoE put their dense layers first (first_k_dense_replace); the MoE layers are the last ones.
        return i >= self.num_layers - self.moe_layers

    def with_layers(self, n: int) -> ModelConfig:
        """Same layer shapes, n layers; the MoE share of layers is kept (rounded, at least one if the model has any)."""
        moe = None
        if self.is_moe:
            moe = max(1, round(n * self.moe_layers / self.num_layers))
        return ModelConfig.from_dict(self.to_dict(), num_layers=n, moe_layer_count=moe)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        # Normalise in fp32: bf16 mean-of-squares loses too many bits.
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rope_tables(seq_len: int, head_dim: int, theta: float, device: torch.device | None = None) -> tuple[Tensor, Tensor]:
    """cos, sin: [S, D] in the Hugging Face 'rotate half' layout, so HF Llama checkpoints load without permuting q/k."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32), inv)  # [S, D/2]
    emb = torch.cat([freqs, freqs], dim=-1)  # [S, D]
    return emb.cos(), emb.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    # x: [B, H, T, D]; cos, sin: [T, D]
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return (x.float() * cos + rotated.float() * sin).type_as(x)


class KVCache(nn.Module):
    """Pre-allocated [B, H_kv, S_max, D] buffers; index_copy_ writes in place so no shape ever changes."""

    def __init__(self, batch: int, kv_heads: int, max_seq: int, head_dim: int, dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        shape = (batch, kv_heads, max_seq, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device), persistent=False)

    def update(self, input_pos: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        # input_pos: [T]; k, v: [B, H_kv, T, D]
        self.k_cache.index_copy_(2, input_pos, k)
        self.v_cache.index_copy_(2, input_pos, v)
        return self.k_cache, self.v_cache


def grouped_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """GQA without copying K/V: fold each group's query heads into the query length.

    q: [B, H, T, D]; k, v: [B, H_kv, S, D]; mask: [T, S] bool (True = may attend). Query head h uses KV head h // g,
    as in HF repeat_kv. Repeating the cache instead (gpt-fast's repeat_interleave) would read it g times per step.
    """
    B, H, T, D = q.shape
    g = H // k.shape[1]
    q = q.reshape(B, k.shape[1], g * T, D)  # [B, H_kv, g*T, D]
    m = mask.repeat(g, 1) if g > 1 else mask  # [g*T, S]
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=m[None, None])
    return y.reshape(B, H, T, D)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d, H, Hkv, D = cfg.hidden_size, cfg.attn_heads, cfg.attn_kv_heads, cfg.attn_head_dim
        self.n_heads, self.n_kv, self.head_dim = H, Hkv, D
        self.low_rank_q = bool(cfg.attention_kind == "mla" and cfg.q_lora_rank)
        if self.low_rank_q:
            self.wq_a = nn.Linear(d, cfg.q_lora_rank, bias=False)
            self.q_norm = RMSNorm(cfg.q_lora_rank, cfg.norm_eps)
            self.wq_b = nn.Linear(cfg.q_lora_rank, H * D, bias=False)
        else:
            self.wq = nn.Linear(d, H * D, bias=False)
        self.wk = nn.Linear(d, Hkv * D, bias=False)
        self.wv = nn.Linear(d, Hkv * D, bias=False)
        self.wo = nn.Linear(H * D, d, bias=False)
        self.kv_cache: KVCache | None = None

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor, input_pos: Tensor | None) -> Tensor:
        B, T, _ = x.shape
        q = self.wq_b(self.q_norm(self.wq_a(x))) if self.low_rank_q else self.wq(x)
        q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # q: [B, H, T, D]
        k = self.wk(x).view(B, T, self.n_kv, self.head_dim).transpose(1, 2)  # k: [B, H_kv, T, D]
        v = self.wv(x).view(B, T, self.n_kv, self.head_dim).transpose(1, 2)  # v: [B, H_kv, T, D]
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.kv_cache is not None and input_pos is not None:
            k, v = self.kv_cache.update(input_pos, k, v)  # k, v: [B, H_kv, S_max, D]
        y = grouped_attention(q, k, v, mask)  # y: [B, H, T, D]
        return self.wo(y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        if kind == "gated":
            self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        if self.kind == "gated":  # SwiGLU (Shazeer 2020)
            return self.w2(F.silu(self.w1(x)) * self.w3(x))
        return self.w2(F.gelu(self.w1(x)))


class MoEFeedForward(nn.Module):
    """Top-k routed experts (gated FFNs stacked as [E, I, d]) plus optional always-on shared experts."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.hidden_size
        E, inter = cfg.num_experts, cfg.moe_intermediate_size or cfg.intermediate_size
        self.top_k = cfg.experts_per_token
        self.gate = nn.Linear(d, E, bias=False)
        self.w1 = nn.Parameter(torch.empty(E, inter, d))
        self.w3 = nn.Parameter(torch.empty(E, inter, d))
        self.w2 = nn.Parameter(torch.empty(E, d, inter))
        n_shared = cfg.num_shared_experts or 0
        self.shared = FeedForward(d, inter * n_shared, "gated") if n_shared else None

    def forward(self, x: Tensor) -> Tensor:
        B, T, d = x.shape
        xf = x.reshape(-1, d)  # xf: [N, d]
        weights, idx = torch.topk(self.gate(xf).float().softmax(-1), self.top_k, dim=-1)  # [N, k]
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        N, E = xf.shape[0], self.w1.shape[0]
        if N * self.top_k <= E:
            # Few tokens (decode): gather just the chosen experts; static shapes, so it compiles and graphs.
            w1, w3, w2 = self.w1[idx], self.w3[idx], self.w2[idx]  # [N, k, I, d], [N, k, I, d], [N, k, d, I]
            h = F.silu(torch.einsum("nd,nkid->nki", xf, w1)) * torch.einsum("nd,nkid->nki", xf, w3)
            out = torch.einsum("nki,nkdi->nkd", h, w2)
            y = (out * weights[..., None]).sum(1)
        else:
            # Many tokens (prefill, large batch): loop over experts, each reading its weights once.
            y = torch.zeros_like(xf)
            for e in range(E):
                tok, slot = torch.where(idx == e)
                if tok.numel() == 0:
                    continue
                xe = xf[tok]
                he = F.silu(xe @ self.w1[e].t()) * (xe @ self.w3[e].t())
                y.index_add_(0, tok, (he @ self.w2[e].t()) * weights[tok, slot, None])
        if self.shared is not None:
            y = y + self.shared(xf)
        return y.view(B, T, d)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps)
        if cfg.is_moe and cfg.is_moe_layer(layer):
            self.feed_forward: nn.Module = MoEFeedForward(cfg)
        else:
            self.feed_forward = FeedForward(cfg.hidden_size, cfg.intermediate_size, cfg.ffn_kind)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor, input_pos: Tensor | None) -> Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin, mask, input_pos)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Block(cfg, i) for i in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.norm_eps)
        self.output = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.tie_weights()
        self.max_batch = -1
        self.max_seq_length = -1

    def tie_weights(self) -> None:
        if self.config.tie_word_embeddings:
            self.output.weight = self.tok_embeddings.weight

    def setup_caches(self, max_batch: int, max_seq_length: int) -> None:
        """Allocate the static KV cache and RoPE tables once; every later forward uses these shapes."""
        p = self.output.weight
        for layer in self.layers:
            attn = layer.attention
            attn.kv_cache = KVCache(max_batch, attn.n_kv, max_seq_length, attn.head_dim, p.dtype, p.device)
        self._set_rope(max_seq_length)
        self.max_batch, self.max_seq_length = max_batch, max_seq_length

    def _set_rope(self, n: int) -> None:
        p = self.output.weight
        cos, sin = rope_tables(n, self.config.attn_head_dim, self.config.rope_theta, p.device)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.register_buffer("key_pos", torch.arange(n, device=p.device), persistent=False)

    def drop_caches(self) -> None:
        for layer in self.layers:
            layer.attention.kv_cache = None
        self.max_batch = self.max_seq_length = -1

    def reset_caches(self) -> None:
        for layer in self.layers:
            if layer.attention.kv_cache is not None:
                layer.attention.kv_cache.k_cache.zero_()
                layer.attention.kv_cache.v_cache.zero_()

    def forward(self, idx: Tensor, input_pos: Tensor | None = None, mode: str = "causal", last_only: bool = False) -> Tensor:
        """idx: [B, T] token ids; input_pos: [T] positions in the static cache, or None for a cache-free forward.

        mode: 'causal' (autoregressive), 'block' (block diffusion: the T new tokens see each other and everything cached
        before them), 'bidirectional' (cache-free only: every token sees every token, plain masked diffusion).
        Returns logits [B, T, V] (or [B, 1, V] with last_only, which saves the [B, T, V] tensor at prefill).
        """
        if mode not in ATTENTION_MODES:
            raise ValueError(f"mode must be one of {ATTENTION_MODES}")
        T = idx.shape[1]
        if input_pos is None:
            # Cache-free (training, whole-window diffusion): attention over the T given tokens only; the cache and its
            # buffers are neither read nor resized.
            pos = torch.arange(T, device=idx.device)
            if self.max_seq_length >= T:
                cos, sin = self.rope_cos[:T], self.rope_sin[:T]
            else:
                cos, sin = rope_tables(T, self.config.attn_head_dim, self.config.rope_theta, idx.device)
            mask = pos[None, :] <= pos[:, None] if mode == "causal" else torch.ones(T, T, dtype=torch.bool, device=idx.device)
            layer_pos = None
        else:
            if self.max_seq_length < 0:
                raise RuntimeError("call setup_caches() before a cached forward")
            if mode == "bidirectional":
                raise ValueError("mode 'bidirectional' is cache-free: pass input_pos=None")
            pos, keys = input_pos, self.key_pos
            if mode == "causal":
                mask = keys[None, :] <= pos[:, None]  # [T, S_max]
            else:
                mask = (keys <= pos.max())[None, :].expand(T, -1)  # [T, S_max]: prefix + the whole current block
            layer_pos = input_pos
            cos, sin = self.rope_cos[pos], self.rope_sin[pos]  # [T, D]
        x = self.tok_embeddings(idx)  # x: [B, T, d]
        for layer in self.layers:
            x = layer(x, cos, sin, mask, layer_pos)
        if last_only:
            x = x[:, -1:]
        return self.output(self.norm(x))  # [B, T, V]


def init_weights(model: Transformer, seed: int = 0, std: float = 0.02) -> None:
    """Random N(0, std) weights from a fixed seed; output projections scaled by 1/sqrt(2L) (GPT-2) so deep random
    models keep sane activations in bf16; norms at 1."""
    dev = model.output.weight.device
    gen = torch.Generator(device=dev).manual_seed(seed)
    scaled = std / (2 * max(1, model.config.num_layers)) ** 0.5
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.fill_(1.0)
            elif name.endswith(("wo.weight", "w2.weight")) or name.endswith(".w2"):
                p.normal_(0.0, scaled, generator=gen)
            else:
                p.normal_(0.0, std, generator=gen)


def build_model(cfg: ModelConfig, *, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32, seed: int = 0) -> Transformer:
    """Build on the meta device, then allocate directly on the target device in the target dtype (no fp32 copy of an
    8B model in host memory), then fill from the seed."""
    with torch.device("meta"):
        model = Transformer(cfg)
    model = model.to(dtype=dtype).to_empty(device=torch.device(device))
    model.tie_weights()  # to_empty gives each module its own tensor; re-tie
    init_weights(model, seed)
    return model.eval().requires_grad_(False)


def argmax_token(logits: Tensor) -> Tensor:
    """Greedy next token from the last position. logits: [B, T, V] -> [B, 1]."""
    return torch.argmax(logits[:, -1], dim=-1, keepdim=True)
