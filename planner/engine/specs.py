"""Inputs of the engine: frozen descriptions of chips, models, workloads and prices.
Plain data; the Django side builds them from the catalog. Decoding methods are in
decoding/, a whole configuration in deployment.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

import numpy as np

from hwcatalog import architecture
from hwcatalog.architecture import SIXTEEN_BIT_BYTES, ArchShape

from .attention import Attention, attention_for
from .units import CHIP_KINDS, DTYPES

GENERATION_KINDS = ("autoregressive", "diffusion", "block_diffusion")
PRICING_MODELS = ("on_demand", "reserved", "spot", "purchase")


# A CPU's vector units (AVX-512) against its fp32 FMA rate, per weight dtype, as llama.cpp's (ggml's) vector kernels multiply
# them: bf16 by AVX512_BF16's VDPBF16PS, two products a fp32 lane; f16 converted to fp32 (ggml-cpu/amx/mmq.cpp,
# tinygemm_kernel_avx); the quantised types (Q8_0, the 4-bit ones, MXFP4) as int8 dot products against int8-quantised
# activations, AVX512_VNNI's VPDPBUSD doing four a 32-bit lane (Intel's intrinsics guide; ggml-cpu's vec_dot_*_q8_0).
VECTOR_PEAK_OVER_FP32 = {"fp32": 1.0, "bf16": 2.0, "fp16": 1.0, "int8": 4.0, "int4": 4.0, "fp4": 4.0}


@dataclass(frozen=True, kw_only=True)
class Scheduler:
    """A serving engine's scheduler defaults, as the catalog records them (hwcatalog ServingEngine), each
    sourced there: what caps the batch a configuration may assume on it.

    kv_memory_fraction: of the chip's memory (kv_memory_of_free False: vLLM's gpu_memory_utilization, what
        weights, activations and the KV cache may take together) or of what the weights and activations
        leave (True: TensorRT-LLM's free_gpu_memory_fraction, the KV cache's share of the rest).
    max_batch_sequences: the most sequences one engine instance (an attention replica) runs at once.
    prefill_token_budget: the most prompt tokens one step prefills (vLLM's max_num_batched_tokens,
        TensorRT-LLM's max_num_tokens, SGLang's chunked_prefill_size).
    moe_dispatch: how tokens reach the experts across an attention-data-parallel group: "all_to_all"
        (each token to its experts' ranks; TensorRT-LLM) or "all_gather" (every rank gathers the group's
        tokens and reduce-scatters the result; vLLM's and SGLang's defaults).
    attention_dp_dense: under attention data parallelism, "replicated" (each attention replica keeps the
        dense layers whole) or "tensor_parallel" (SGLang: the dense FFN, shared experts and LM head stay
        tensor-parallel over the whole group, on the gathered tokens).
    prefill_runs_alone: whether a step that prefills runs without the decodes (SGLang's default: its
        --enable-mixed-chunk is off) or prefill chunks and decodes share steps (vLLM V1, TensorRT-LLM's
        in-flight batching). The serving simulator schedules by it (simulation/scheduler.py).
    cpu_matrix_dtypes: on a CPU, the weight dtypes whose GEMMs the engine runs on the chip's matrix units
        (Intel AMX); None: every dtype. The others run on its vector units (ChipSpec.math_peak_flops_per_s).
    cpu_matrix_experts: whether a MoE model's routed-expert GEMMs run on the matrix units too (llama.cpp's
        AMX kernels take plain matrix multiplies, not the experts' MUL_MAT_ID: False).
    weight_dtypes: the weight dtypes the engine serves (the catalog's list); a search builds no candidate of another
        on a chip under this engine (grid.py). None: every dtype.
    attention_dp_balance_timeout_steps: under attention data parallelism, the steps a new prompt is held, while every
        attention replica has decodes running, waiting for a prompt on every replica before any of them prefills
        (TensorRT-LLM's attention_dp_config with enable_balance: its timeout_iters); 0: no hold. serving.balance_hold_s.
    accumulates_in_16_bits: on a GPU, whether its 16-bit prompt GEMMs accumulate in 16 bits (llama.cpp's cuBLAS path,
        CUBLAS_COMPUTE_16F), at the chip's 16-bit-accumulate peak where it has one (ChipSpec.math_peak_flops_per_s).
    """

    engine: str
    kv_memory_fraction: float
    kv_memory_of_free: bool = False
    max_batch_sequences: int | None = None
    prefill_token_budget: int | None = None
    moe_dispatch: str = "all_to_all"
    attention_dp_dense: str = "replicated"
    prefill_runs_alone: bool = False
    cpu_matrix_dtypes: tuple[str, ...] | None = None
    cpu_matrix_experts: bool = True
    weight_dtypes: tuple[str, ...] | None = None
    attention_dp_balance_timeout_steps: int = 0
    accumulates_in_16_bits: bool = False

    def __post_init__(self) -> None:
        for name in ("cpu_matrix_dtypes", "weight_dtypes"):
            if (dtypes := getattr(self, name)) is not None and (unknown := sorted(set(dtypes) - set(DTYPES))):
                raise ValueError(f"{self.engine}: unknown dtypes in {name}: {unknown}")
            if dtypes is not None:
                object.__setattr__(self, name, tuple(dtypes))
        if not 0.0 < self.kv_memory_fraction <= 1.0:
            raise ValueError(f"{self.engine}: kv_memory_fraction must be in (0, 1]")
        if self.moe_dispatch not in ("all_to_all", "all_gather"):
            raise ValueError(f"{self.engine}: moe_dispatch must be all_to_all or all_gather")
        if self.attention_dp_dense not in ("replicated", "tensor_parallel"):
            raise ValueError(f"{self.engine}: attention_dp_dense must be replicated or tensor_parallel")
        for name in ("max_batch_sequences", "prefill_token_budget"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{self.engine}: {name} must be >= 1")
        if self.attention_dp_balance_timeout_steps < 0:
            raise ValueError(f"{self.engine}: attention_dp_balance_timeout_steps must be >= 0")


@dataclass(frozen=True, kw_only=True)
class ChipSpec:
    """One accelerator (a GPU, TPU or LPU chip, or one CPU socket); `scheduler`, when set, is the
    serving engine it runs under (its memory rule, batch cap and prefill budget replace the chip
    kind's defaults)."""

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
    scheduler: Scheduler | None = None
    # The dense FP16 tensor peak with FP16 accumulation where it exceeds peak_flops_per_s["fp16"] (the FP32-accumulate
    # rate): GeForce cards run 16-bit accumulation at twice their FP32-accumulate rate. An engine that accumulates in
    # 16 bits (Scheduler.accumulates_in_16_bits) reaches it; None: the same as the fp16 peak.
    peak_fp16_acc16_flops_per_s: float | None = None
    # CPU cores per socket; for an accelerator whose SDK runs each compute core as its own tensor-parallel
    # rank (AWS NeuronCores), those cores (the chip policy says which: chips/base.py head_ranks_per_chip).
    cores: int | None = None

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

    def math_peak_flops_per_s(self, compute_dtype: str, weight_dtype: str, *, experts: bool = False) -> float:
        """The dense peak of `compute_dtype` math for `weight_dtype` weights (`experts`: a MoE model's routed
        experts') under the chip's serving engine. On a CPU whose engine multiplies those weights on the vector
        units rather than the matrix units (Scheduler.cpu_matrix_dtypes, cpu_matrix_experts; llama.cpp keeps
        F16/BF16 weights and every expert off Intel AMX), the datasheet's peak (AMX: 1,024 bf16 FLOP a cycle a
        core, 16x the fp32 FMA rate) gives way to the vector rate, VECTOR_PEAK_OVER_FP32 of the fp32 peak, and
        never exceeds the datasheet's. On a GPU whose engine accumulates its 16-bit GEMMs in 16 bits (llama.cpp: F16 and
        quantised weights; its BF16 weights accumulate in 32 bits), the 16-bit math runs at the chip's
        16-bit-accumulate peak where the catalog gives one (GeForce: twice the FP32-accumulate rate). Any other chip, engine or dtype keeps the datasheet's peak."""
        peak = self.peak_flops_per_s.get(compute_dtype, 0.0)
        scheduler = self.scheduler
        if scheduler is None:
            return peak
        accumulates_in_16 = scheduler.accumulates_in_16_bits and weight_dtype not in ("bf16", "fp32")  # BF16 weights: CUBLAS_COMPUTE_32F
        if self.kind == "gpu" and accumulates_in_16 and compute_dtype in ("bf16", "fp16") and self.peak_fp16_acc16_flops_per_s:
            return max(peak, self.peak_fp16_acc16_flops_per_s)
        if self.kind != "cpu":
            return peak
        on_matrix_units = (scheduler.cpu_matrix_dtypes is None or weight_dtype in scheduler.cpu_matrix_dtypes) and (
            scheduler.cpu_matrix_experts or not experts)
        vector = self.peak_flops_per_s.get("fp32", 0.0) * VECTOR_PEAK_OVER_FP32.get(weight_dtype, 1.0)
        return peak if on_matrix_units or vector <= 0.0 else min(peak, vector)

    @property
    def node_size(self) -> int:
        return max(int(self.chips_per_node or 1), 1)


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A model as the engine sees it: its shape (the catalog's one description,
    hwcatalog.architecture.ArchShape), its parameter counts, and what it generates.

    total_params / active_params: the counts memory and FLOPs use (the catalog's
        published or derived numbers); the shape only says where they sit.
    embedding_params: the input embedding matrix (vocab x d). Decoding only
        gathers b rows of it, so it is never read in full and costs no FLOPs.
    lm_head_params: the output projection (vocab x d), read in full at every
        forward. When tie_word_embeddings is True it is the same matrix as the
        input embedding: total_params counts it once, and it is read in full
        (as the head) but never stored twice.
    params_per_expert: one routed expert in one MoE layer.
    The three default to the shape's counts (hwcatalog.architecture).
    attention: the attention type over all layers (attention/); by default the one
        the shape names (full MHA/GQA/MQA or MLA).
    """

    slug: str
    shape: ArchShape
    total_params: float
    active_params: float
    embedding_params: float | None = None
    lm_head_params: float | None = None
    params_per_expert: float | None = None
    attention: Attention | None = None
    generation_kind: str = "autoregressive"
    default_block_size: int | None = None
    max_context_tokens: int = 4096
    # The published checkpoint's weight format (architecture.WEIGHT_FORMAT_BITS) and, per format below
    # 16 bits, the modules its checkpoint keeps in 16 bits (ModelArch.sixteen_bit_modules).
    checkpoint_format: str = ""
    sixteen_bit_modules: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sixteen_bit_modules", MappingProxyType({k: tuple(v) for k, v in dict(self.sixteen_bit_modules).items()}))
        if self.generation_kind not in GENERATION_KINDS:
            raise ValueError(f"{self.slug}: generation_kind must be one of {GENERATION_KINDS}")
        try:
            derived = {
                "embedding_params": float(architecture.embedding_params(self.shape)),
                "lm_head_params": float(architecture.lm_head_params(self.shape)),
                "params_per_expert": float(architecture.params_per_expert(self.shape)) if self.shape.is_moe else None,
                "attention": attention_for(self.shape),
            }
        except ValueError as exc:
            raise ValueError(f"{self.slug}: {exc}") from None
        for name, value in derived.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)

    # The shape's fields the engine reads, by their usual names.
    @property
    def num_layers(self) -> int:
        return self.shape.num_layers

    @property
    def hidden_size(self) -> int:
        return self.shape.hidden_size

    @property
    def expert_token_width(self) -> int:
        """The width of a token as it travels to its experts and back: a LatentMoE's latent
        (Nemotron 3 `moe_latent_size`, Kimi K3 `routed_expert_hidden_size`: it projects down before the
        dispatch and up after the combine), else the hidden size."""
        return self.shape.moe_latent_size or self.shape.hidden_size

    @property
    def num_attention_heads(self) -> int:
        return self.shape.num_attention_heads

    @property
    def num_kv_heads(self) -> int:
        return self.shape.num_kv_heads

    @property
    def head_dim(self) -> int:
        return self.shape.head_dim

    @property
    def tie_word_embeddings(self) -> bool:
        return self.shape.tie_word_embeddings

    @property
    def num_experts(self) -> int | None:
        return self.shape.num_experts

    @property
    def experts_per_token(self) -> int | None:
        return self.shape.experts_per_token

    @property
    def moe_layer_count(self) -> int | None:
        """MoE layers: the shape's count, every layer when it gives none (None: dense)."""
        if not self.shape.is_moe:
            return None
        return self.shape.moe_layer_count or self.shape.num_layers

    @property
    def kv_cache_elements_per_token(self) -> float:
        """Elements cached per token over all layers (attention/: 2*L*H_kv*d_h, or
        L*(kv_lora_rank + qk_rope_head_dim) for MLA)."""
        return self.attention.kv_elements_per_token

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
    def active_routed_expert_params(self) -> float:
        """Routed-expert parameters one token passes through: k experts in every MoE layer."""
        if not self.is_moe:
            return 0.0
        return float(self.moe_layer_count * self.experts_per_token * self.params_per_expert)

    @property
    def routed_expert_layers(self) -> int:
        """Routed experts summed over the MoE layers (DeepSeek-V3: 256 x 58 = 14,848; 0 for a dense model)."""
        return int(self.moe_layer_count * self.num_experts) if self.is_moe else 0

    def request_overhead_s(self, base_s, per_expert_layer_s):
        """A request's time before its first token beyond the prefill: the engine's constant and the
        part that grows with the routed experts (efficiency.Efficiency); floats or arrays alike."""
        return base_s + per_expert_layer_s * self.routed_expert_layers

    @property
    def group_sharded_params(self) -> float:
        """Under attention data parallelism that keeps the dense layers tensor-parallel over the group
        (Scheduler.attention_dp_dense, SGLang): everything but the attention and linear-attention mixers,
        the input embedding and the routed experts, that is the dense FFN layers, the shared experts, the
        routers and an untied LM head (a tied one is the embedding, kept whole). 0 for a dense model, whose
        attention replicas are plain data-parallel replicas."""
        if not self.is_moe:
            return 0.0
        shape = self.shape
        linear = architecture.linear_layer_count(shape) * architecture.linear_params_per_layer(shape)
        mixers = architecture.attention_mixer_params(shape) + linear
        return max(float(self.total_params) - self.routed_expert_params - mixers - float(self.embedding_params), 0.0)

    @property
    def tp_replicated_params(self) -> float:
        """Parameters every tensor-parallel rank holds and multiplies whole (architecture.tp_replicated_params:
        MLA's down-projections, DSA's indexer, DeepSeek-V4's one-head projections, the MoE routers): with TP t
        each rank holds (1 - 1/t) of them beyond its share."""
        return float(architecture.tp_replicated_params(self.shape))

    @property
    def routed_expert_params(self) -> float:
        if not self.is_moe:
            return 0.0
        return float(self.moe_layer_count * self.num_experts * self.params_per_expert)

    @property
    def vocab_size(self) -> int:
        return int(round(self.lm_head_params / self.hidden_size)) if self.hidden_size else 0

    def weight_layout(self, dtype: str) -> WeightLayout:
        """How weights at `dtype` are stored: the format (the checkpoint's own where it is of that dtype),
        its bytes per weight with block scales, and the parameters kept in 16 bits (the LM head and
        embeddings under the fp8 and fp4 formats, architecture.SIXTEEN_BIT_HEAD_FORMATS, and the
        checkpoint's listed modules)."""
        name = architecture.weight_format(dtype, self.checkpoint_format)
        bits = architecture.WEIGHT_FORMAT_BITS[name]
        if bits >= 16:
            return WeightLayout(weight_format=name, bytes_per_param=bits / 8.0, sixteen_bit_stored_params=0.0, sixteen_bit_streamed_params=0.0,
                                sixteen_bit_head_params=0.0)  # fmt: skip
        head = float(self.lm_head_params) if name in architecture.SIXTEEN_BIT_HEAD_FORMATS else 0.0
        streamed = head + architecture.sixteen_bit_module_params(self.shape, self.sixteen_bit_modules.get(name, ()))
        stored = streamed + (self.gathered_params if head else 0.0)
        return WeightLayout(weight_format=name, bytes_per_param=bits / 8.0, sixteen_bit_stored_params=stored, sixteen_bit_streamed_params=streamed,
                            sixteen_bit_head_params=head)  # fmt: skip

    @cached_property
    def weight_tables(self) -> WeightTables:
        """weight_layout for every dtype code (units.DTYPES), as the candidate arrays index it."""
        from .efficiency import format_bandwidth_ratio  # efficiency imports this module's ChipSpec

        layouts = [self.weight_layout(name) for name in DTYPES]
        return WeightTables(
            bandwidth_ratio=np.array([format_bandwidth_ratio(w.weight_format, name) for w, name in zip(layouts, DTYPES)]),
            bytes_per_param=np.array([w.bytes_per_param for w in layouts]),
            sixteen_bit_stored_params=np.array([w.sixteen_bit_stored_params for w in layouts]),
            sixteen_bit_streamed_params=np.array([w.sixteen_bit_streamed_params for w in layouts]),
            sixteen_bit_head_params=np.array([w.sixteen_bit_head_params for w in layouts]),
            sixteen_bit_replicated_params=np.array([
                float(architecture.tp_replicated_params(self.shape, self.sixteen_bit_modules.get(w.weight_format, ()))) if w.bytes_per_param < 2.0 else 0.0
                for w in layouts
            ]),
            sixteen_bit_group_params=np.array([
                float(architecture.sixteen_bit_module_params(self.shape, [m for m in self.sixteen_bit_modules.get(w.weight_format, ())
                                                                           if m in GROUP_SHARDED_MODULES]))
                if w.bytes_per_param < 2.0 and self.group_sharded_params else 0.0
                for w in layouts
            ]),
        )

    def weight_bytes(self, dtype: str) -> float:
        """Stored bytes of all the weights at `dtype` (weight_layout)."""
        w = self.weight_layout(dtype)
        return (float(self.total_params) - w.sixteen_bit_stored_params) * w.bytes_per_param + w.sixteen_bit_stored_params * SIXTEEN_BIT_BYTES


@dataclass(frozen=True, kw_only=True)
class WeightLayout:
    weight_format: str
    bytes_per_param: float  # of the format, block scales included
    sixteen_bit_stored_params: float  # kept in 16 bits: LM head, embeddings, the checkpoint's listed modules
    sixteen_bit_streamed_params: float  # of them, read in full by every forward (an untied input embedding is gathered)
    sixteen_bit_head_params: float  # of those, the LM head (its FLOPs go with the positions whose logits are computed)

    @property
    def bits_per_weight(self) -> float:
        return round(self.bytes_per_param * 8.0, 4)


# The 16-bit modules (architecture.SIXTEEN_BIT_MODULES) that ModelSpec.group_sharded_params holds.
GROUP_SHARDED_MODULES = ("router", "shared_experts", "dense_ffn", "moe_latent")


@dataclass(frozen=True, kw_only=True)
class WeightTables:
    """WeightLayout's numbers for every dtype code."""

    bandwidth_ratio: np.ndarray  # the format's weight-only bandwidth scale over its dtype's (efficiency.format_bandwidth_ratio)
    bytes_per_param: np.ndarray
    sixteen_bit_stored_params: np.ndarray
    sixteen_bit_streamed_params: np.ndarray
    sixteen_bit_head_params: np.ndarray
    sixteen_bit_replicated_params: np.ndarray  # of ModelSpec.tp_replicated_params, those kept in 16 bits
    # of ModelSpec.group_sharded_params, the modules kept in 16 bits (the LM head apart: sixteen_bit_head_params)
    sixteen_bit_group_params: np.ndarray


@dataclass(frozen=True, kw_only=True)
class Workload:
    prompt_tokens: int
    output_tokens: int
    concurrency: int | None = None
    request_rate_per_s: float | None = None
    ttft_slo_s: float | None = None
    tpot_slo_s: float | None = None
    # True: `concurrency` clients each send their next request when the last one ends (a
    # closed-loop benchmark); the request rate then follows from Little's law (serving.py).
    closed_loop: bool = False
    # Closed loop only: the share of requests that arrive in step with all the others. A benchmark's
    # clients start together, so its first round is one wave (all prompts queued at once); later
    # rounds come staggered by the prefills before them and see the steady queue (serving.py).
    # 1 / (requests per client): 0.1 for a run of ten rounds, the default until a serving engine's
    # fitted profile (planner/engine/fit.py) gives its own.
    in_step_share: float = 0.1

    def __post_init__(self) -> None:
        if not 0.0 <= self.in_step_share <= 1.0:
            raise ValueError(f"in_step_share must lie in [0, 1], got {self.in_step_share}")

    @property
    def looped(self) -> bool:
        """A closed loop with its clients given: the rate follows from them (serving.py reads it so)."""
        return bool(self.closed_loop and self.concurrency)

    @property
    def context_tokens(self) -> int:
        """Tokens that must fit the model's context: the last generated token is never fed
        back, so P + G - 1 (TensorRT-LLM runs GPT-J at 2048 in + 1 out in a 2048 context)."""
        return self.prompt_tokens + self.output_tokens - 1

    @property
    def mean_decode_context_tokens(self) -> float:
        """Average context over the generation: T = P + G/2 (docs/planner_math.md#decoding-methods)."""
        return self.prompt_tokens + self.output_tokens / 2.0


@dataclass(frozen=True, kw_only=True)
class OfferingSpec:
    slug: str
    pricing_model: str
    usd_per_chip_hour: float | None = None
    purchase_usd_per_chip: float | None = None
    amortisation_years: float | None = None
    power_usd_per_kwh: float | None = None
    pue: float | None = None
    # The fewest chips rented or bought at once (an 8-GPU instance or server, a TPU slice, an NVL72 rack):
    # a configuration pays for whole units.
    chips_per_unit: int = 1
    # Owned: the other parts of one unit as (kind, USD): "system" (a complete machine), "host", "network", "rack".
    system_parts_usd: tuple[tuple[str, float], ...] = ()
    host_watts_per_unit: float | None = None  # drawn whenever the unit is on
    datacentre_usd_per_kw_month: float | None = None  # space, cooling, power delivery per kW of IT load
    utilisation: float | None = None  # expected share of hours an owned unit serves (None: 1.0)

    def __post_init__(self) -> None:
        if self.pricing_model not in PRICING_MODELS:
            raise ValueError(f"{self.slug}: pricing_model must be one of {PRICING_MODELS}")
        if self.chips_per_unit < 1:
            raise ValueError(f"{self.slug}: chips_per_unit must be at least 1")
        if self.utilisation is not None and not 0 < self.utilisation <= 1:
            raise ValueError(f"{self.slug}: utilisation must be in (0, 1]")
        if self.usd_per_chip_hour is None and not (self.capex_usd_per_unit > 0 and self.amortisation_years):
            raise ValueError(f"{self.slug}: needs usd_per_chip_hour, or a purchase price and amortisation_years")

    @property
    def owned(self) -> bool:
        return self.usd_per_chip_hour is None

    @property
    def capex_usd_per_unit(self) -> float:
        """What one unit costs to buy: its accelerators and every other part."""
        return self.chips_per_unit * (self.purchase_usd_per_chip or 0.0) + sum(usd for _, usd in self.system_parts_usd)
