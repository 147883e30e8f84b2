"""Inputs of the engine: frozen descriptions of chips, models, workloads, prices
and decoding methods. Plain data; the Django side builds them from the catalog.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Union

from .units import CHIP_KINDS, DTYPES

GENERATION_KINDS = ("autoregressive", "diffusion", "block_diffusion")
ATTENTION_KINDS = ("mha", "gqa", "mqa", "mla")
PRICING_MODELS = ("on_demand", "reserved", "spot", "purchase")


@dataclass(frozen=True)
class ChipSpec:
    """One accelerator (a GPU, TPU or LPU chip, or one CPU socket)."""

    slug: str
    kind: str
    vendor: str
    memory_capacity_bytes: float
    memory_bandwidth_bytes_per_s: float
    # dtype -> DENSE peak FLOP/s; a missing key means no such math path.
    peak_flops_per_s: Mapping[str, float]
    on_chip_sram_bytes: float | None = None
    link_bandwidth_bytes_per_s: float | None = None  # per chip, one direction
    link_latency_s: float | None = None
    chips_per_node: int | None = None
    tdp_watts: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in CHIP_KINDS:
            raise ValueError(f"{self.slug}: kind {self.kind!r} not in {CHIP_KINDS}")
        unknown = set(self.peak_flops_per_s) - set(DTYPES)
        if unknown:
            raise ValueError(f"{self.slug}: unknown dtypes in peak_flops_per_s: {sorted(unknown)}")
        peaks = {k: float(v) for k, v in self.peak_flops_per_s.items() if v}
        object.__setattr__(self, "peak_flops_per_s", MappingProxyType(peaks))

    def has_math(self, dtype: str) -> bool:
        return self.peak_flops_per_s.get(dtype, 0.0) > 0.0

    @property
    def node_size(self) -> int:
        return max(int(self.chips_per_node or 1), 1)


@dataclass(frozen=True)
class ModelSpec:
    """A transformer's shape. Parameter counts are plain counts, not bytes.

    embedding_params: the input embedding matrix (vocab x d). Decoding only
        gathers b rows of it, so it is never read in full and costs no FLOPs.
    lm_head_params: the output projection (vocab x d), read in full at every
        forward. When tie_word_embeddings is True it is the same matrix as the
        input embedding: total_params counts it once, and it is read in full
        (as the head) but never stored twice.
    kv_cache_elements_per_token: elements per token over all layers, computed
        by the caller: 2*L*H_kv*d_h, or L*(kv_lora_rank + qk_rope_head_dim)
        for MLA (DeepSeek-V2, Table 1).
    params_per_expert: one routed expert in one MoE layer.
    """

    slug: str
    total_params: float
    active_params: float
    embedding_params: float
    lm_head_params: float
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    kv_cache_elements_per_token: float
    attention_kind: str = "gqa"
    tie_word_embeddings: bool = False
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    num_experts: int | None = None
    experts_per_token: int | None = None
    moe_layer_count: int | None = None
    params_per_expert: float | None = None
    generation_kind: str = "autoregressive"
    default_block_size: int | None = None
    max_context_tokens: int = 4096

    def __post_init__(self) -> None:
        if self.generation_kind not in GENERATION_KINDS:
            raise ValueError(f"{self.slug}: generation_kind must be one of {GENERATION_KINDS}")
        if self.attention_kind not in ATTENTION_KINDS:
            raise ValueError(f"{self.slug}: attention_kind must be one of {ATTENTION_KINDS}")
        if self.attention_kind == "mla" and (self.kv_lora_rank is None or self.qk_rope_head_dim is None):
            raise ValueError(f"{self.slug}: MLA needs kv_lora_rank and qk_rope_head_dim")

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts and self.experts_per_token and self.moe_layer_count and self.params_per_expert)

    @property
    def gathered_params(self) -> float:
        """Parameters only gathered (never read in full): an untied input embedding."""
        return 0.0 if self.tie_word_embeddings else float(self.embedding_params)

    @property
    def matmul_params(self) -> float:
        """Active parameters that take part in matmuls: 2 FLOPs each per token."""
        return float(self.active_params) - self.gathered_params

    @property
    def routed_expert_params(self) -> float:
        if not self.is_moe:
            return 0.0
        return float(self.moe_layer_count * self.num_experts * self.params_per_expert)

    @property
    def attention_flops_per_position(self) -> float:
        """Decode attention FLOPs per new token per context position, all layers.

        4*L*H*d_h: QK^T and AV, 2 FLOPs per multiply-add each (LLM-Viewer
        `model_analyzer.py`). MLA with the up-projections absorbed works in the
        latent space: 2*L*H*(2*kv_lora_rank + qk_rope_head_dim) (DeepSeek-V2,
        sec. 2.1.2 and appendix B).
        """
        layers_heads = self.num_layers * self.num_attention_heads
        if self.attention_kind == "mla":
            return 2.0 * layers_heads * (2 * self.kv_lora_rank + self.qk_rope_head_dim)
        return 4.0 * layers_heads * self.head_dim

    @property
    def prefill_attention_flops_per_pair(self) -> float:
        """Prefill runs MLA un-absorbed, so every kind uses 4*L*H*d_h per pair."""
        return 4.0 * self.num_layers * self.num_attention_heads * self.head_dim

    @property
    def vocab_size(self) -> int:
        return int(round(self.lm_head_params / self.hidden_size)) if self.hidden_size else 0


@dataclass(frozen=True)
class Workload:
    prompt_tokens: int
    output_tokens: int
    concurrency: int | None = None
    request_rate_per_s: float | None = None
    ttft_slo_s: float | None = None
    tpot_slo_s: float | None = None

    @property
    def context_tokens(self) -> int:
        """Tokens that must fit the model's context: the last generated token is never fed
        back, so P + G - 1 (TensorRT-LLM runs GPT-J at 2048 in + 1 out in a 2048 context)."""
        return self.prompt_tokens + self.output_tokens - 1

    @property
    def mean_decode_context_tokens(self) -> float:
        """Average context over the generation: T = P + G/2 (PLANNER_MATH.md)."""
        return self.prompt_tokens + self.output_tokens / 2.0


@dataclass(frozen=True)
class OfferingSpec:
    slug: str
    pricing_model: str
    usd_per_chip_hour: float | None = None
    purchase_usd_per_chip: float | None = None
    amortisation_years: float | None = None
    power_usd_per_kwh: float | None = None
    pue: float | None = None

    def __post_init__(self) -> None:
        if self.pricing_model not in PRICING_MODELS:
            raise ValueError(f"{self.slug}: pricing_model must be one of {PRICING_MODELS}")
        if self.usd_per_chip_hour is None and not (self.purchase_usd_per_chip and self.amortisation_years):
            raise ValueError(f"{self.slug}: needs usd_per_chip_hour, or a purchase price and amortisation_years")


@dataclass(frozen=True)
class Autoregressive:
    @property
    def label(self) -> str:
        return "ar"


@dataclass(frozen=True)
class Speculative:
    """Draft-model speculative decoding (Leviathan, Kalman, Matias, ICML 2023)."""

    draft: ModelSpec
    draft_tokens: int
    acceptance_rate: float | None = None
    mean_accepted_tokens: float | None = None  # tau, incl. the bonus token (EAGLE/Medusa)
    draft_weight_dtype: str | None = None  # None: same as the target's weights

    def __post_init__(self) -> None:
        if self.draft_tokens < 1:
            raise ValueError("draft_tokens must be >= 1")
        if self.mean_accepted_tokens is not None and not 1.0 <= self.mean_accepted_tokens <= self.draft_tokens + 1:
            raise ValueError("mean_accepted_tokens must lie in [1, draft_tokens + 1]")

    @property
    def label(self) -> str:
        return f"speculative(k={self.draft_tokens})"


@dataclass(frozen=True)
class Diffusion:
    """Masked diffusion (LLaDA, MDLM): S forwards over prompt + window, no KV cache."""

    steps: int
    window_tokens: int | None = None  # None: the workload's output tokens
    adaptive_window: bool = False  # start at 64 tokens, double as needed

    @property
    def label(self) -> str:
        return f"diffusion(S={self.steps}{', adaptive' if self.adaptive_window else ''})"


@dataclass(frozen=True)
class BlockDiffusion:
    """Block diffusion (BD3-LM, Fast-dLLM): blocks of B tokens over a KV cache."""

    block_size: int
    steps_per_block: int | None = None
    tokens_per_forward: float | None = None  # confidence-threshold decoding
    expected_answer_tokens: int | None = None  # None: the workload's output tokens
    focus_fraction: float = 1.0  # FOCUS: share of block positions kept after layer 2

    def __post_init__(self) -> None:
        if (self.steps_per_block is None) == (self.tokens_per_forward is None):
            raise ValueError("give exactly one of steps_per_block and tokens_per_forward")
        if not 0.0 < self.focus_fraction <= 1.0:
            raise ValueError("focus_fraction must lie in (0, 1]")

    @property
    def effective_steps(self) -> float:
        """S_eff = S, or B / tau with confidence-threshold decoding."""
        if self.steps_per_block is not None:
            return float(self.steps_per_block)
        return max(self.block_size / self.tokens_per_forward, 1.0)

    @property
    def label(self) -> str:
        return f"block_diffusion(B={self.block_size}, S_eff={self.effective_steps:g})"


Decoding = Union[Autoregressive, Speculative, Diffusion, BlockDiffusion]


@dataclass(frozen=True)
class Deployment:
    """One configuration: what `estimate` evaluates."""

    chip: ChipSpec
    chip_count: int = 1
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str | None = None  # None: default_kv_dtype()
    decoding: Decoding = field(default_factory=Autoregressive)

    @property
    def replicas(self) -> int:
        return max(self.chip_count // (self.tensor_parallel * self.pipeline_parallel), 1)

