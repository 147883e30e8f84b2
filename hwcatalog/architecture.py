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

# Bits one stored weight takes in each checkpoint format, its block scales included (a format's dtype
# is FORMAT_DTYPE's; docs/planner_math.md#units-and-data-types). Weights are counted by these, KV
# elements and activations by DTYPE_BYTES.
WEIGHT_FORMAT_BITS: dict[str, float] = {
    "fp32": 32.0,
    "bf16": 16.0,
    "fp16": 16.0,
    "fp8": 8.0,  # one fp32 scale per matrix
    # DeepSeek-V3's quantization_config weight_block_size [128, 128]: one fp32 scale per 128 x 128 block.
    "fp8_block": 8.0 + 32.0 / (128 * 128),
    "int8": 8.0,  # per-channel scales: one 16-bit value per output row, under 0.01 bit per weight here
    # AWQ / GPTQ with group size 128 (the published int4 checkpoints): a 16-bit scale and a packed
    # 4-bit zero point per group of 128 weights.
    "int4": 4.0 + (16.0 + 4.0) / 128,
    # compressed-tensors symmetric int4 in groups of 32 (Kimi K2.5's experts): a 16-bit scale per 32 weights.
    "int4_g32": 4.0 + 16.0 / 32,
    # OCP Microscaling Formats (MX) v1.0: 32 E2M1 elements share one 8-bit E8M0 scale.
    "mxfp4": 4.0 + 8.0 / 32,
    # NVIDIA NVFP4 (Blackwell): 16 E2M1 elements share one FP8 E4M3 scale; the per-tensor fp32
    # scale beside it is negligible (hf_quant_config.json of nvidia/*-NVFP4: group_size 16).
    "nvfp4": 4.0 + 8.0 / 16,
    # llama.cpp's GGUF Q4_K_M: Q4_K blocks with Q6_K for some tensors (the output among them), averaged
    # over the whole model: 4.8944 bits a weight for Llama-3.1-8B, 4.58 GiB (llama.cpp
    # tools/quantize/README.md). Weight-only: dequantised and multiplied in 16 bits, as int4.
    "q4_k_m": 4.8944,
    # llama.cpp's GGUF Q8_0: blocks of 32 int8 weights sharing one fp16 scale, 34 bytes a block (ggml-org/llama.cpp
    # ggml/src/ggml-common.h, block_q8_0). Planned as int8 weights (ggml's CPU path quantises the activations to
    # Q8 blocks and multiplies in int8; the planner's int8 path is weight-only, a simplification).
    "q8_0": 8.0 + 16.0 / 32,
}
FORMAT_DTYPE: dict[str, str] = {
    "fp32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "fp8_block": "fp8", "int8": "int8", "int4": "int4",
    "int4_g32": "int4", "mxfp4": "fp4", "nvfp4": "fp4", "q4_k_m": "int4", "q8_0": "int8",
}  # fmt: skip
# The format a plan at a dtype stores its weights in unless the model's own checkpoint is another
# format of that dtype: fp4 is NVFP4, the format NVIDIA's pre-quantised checkpoints ship (MXFP4 where
# the checkpoint is MXFP4, as gpt-oss's is).
DEFAULT_WEIGHT_FORMAT: dict[str, str] = {"fp32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "int8": "int8", "int4": "int4", "fp4": "nvfp4"}
# Formats whose checkpoints keep the embeddings and the LM head in 16 bits: NVIDIA ModelOpt's FP8 and
# NVFP4 exports exclude lm_head (hf_quant_config.json exclude_modules), DeepSeek-V3's block-scaled FP8
# checkpoint and gpt-oss's MXFP4 one keep a bf16 head (modules_to_not_convert: lm_head). The weight-only
# int8/int4 the measured engines run quantise the head with the rest: gpt-fast's quantize.py replaces
# every nn.Linear, the output layer included; llama.cpp's Q4_K_M stores output.weight at Q6_K.
SIXTEEN_BIT_HEAD_FORMATS: tuple[str, ...] = ("fp8", "fp8_block", "mxfp4", "nvfp4")
# Modules a quantised checkpoint may keep in 16 bits beyond the embeddings and LM head:
# - attention: every attention projection (gpt-oss: model.layers.*.self_attn);
# - attention_inputs: the attention's input projections, its output projection quantised
#   (nvidia/DeepSeek-V3.1-NVFP4 excludes q_a/q_b/kv_a/kv_b_proj, not o_proj);
# - router: the MoE gates (gpt-oss: model.layers.*.mlp.router);
# - shared_experts: a MoE layer's shared experts (Kimi K2.5's int4 and K2.6's NVFP4 checkpoints);
# - dense_ffn: the FFNs of the layers without experts (Kimi K2.6 NVFP4 excludes layer 0, K2.5 mlp.*_proj);
# - linear_attention: the linear-attention / Mamba-2 mixers of a hybrid (Kimi K3's MXFP4 checkpoint ignores
#   .*self_attn.*, its KDA layers included);
# - moe_latent: a latent MoE's projections into and out of the experts' width (Kimi K3: only the routed
#   experts are MXFP4, block_sparse_moe.routed_expert_down_proj / up_proj stay bf16).
SIXTEEN_BIT_MODULES: tuple[str, ...] = (
    "attention", "attention_inputs", "router", "shared_experts", "dense_ffn", "linear_attention", "moe_latent",
)
SIXTEEN_BIT_BYTES = DTYPE_BYTES["bf16"]


def weight_format(dtype: str, checkpoint_format: str = "") -> str:
    """The format weights at `dtype` are stored in: the checkpoint's own when it is of that dtype."""
    return checkpoint_format if FORMAT_DTYPE.get(checkpoint_format) == dtype else DEFAULT_WEIGHT_FORMAT[dtype]


def weight_bytes_per_param(weight_format_name: str) -> float:
    return WEIGHT_FORMAT_BITS[weight_format_name] / 8.0


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
    # A gate on the attention output, projected with the queries (Qwen3-Next, Qwen3.5): q_proj is twice as wide.
    attention_output_gate: bool = False
    # Layers whose token mixer keeps a constant recurrent state instead of a KV cache: Gated DeltaNet linear
    # attention (Qwen3-Next, Qwen3.5) or Mamba-2 (Nemotron-H). Both are described by one set of widths:
    # key heads x key dim (Mamba-2: n_groups x ssm_state_size, the B and C projections), value heads x value dim
    # (Mamba-2: mamba_num_heads x mamba_head_dim, the x projection), and a short causal convolution.
    linear_attention_kind: str = ""  # "", "gated_deltanet", "mamba2"
    linear_attention_layers: int | None = None
    linear_num_key_heads: int | None = None
    linear_key_head_dim: int | None = None
    linear_num_value_heads: int | None = None
    linear_value_head_dim: int | None = None
    linear_conv_kernel_dim: int | None = None
    # Layers with a (full, windowed or latent) attention mixer; None: num_layers - linear_attention_layers.
    # Nemotron-H's blocks hold one sublayer each (Mamba, attention, MLP or MoE), so the counts differ.
    attention_layers: int | None = None
    # Layers with an FFN (dense or MoE); None: all. Nemotron-H's Mamba and attention blocks have none.
    ffn_layers: int | None = None
    shared_expert_intermediate_size: int | None = None  # None: moe_intermediate_size
    # Sparse top-k attention (DeepSeek Sparse Attention, V3.2): an indexer of indexer_num_heads x
    # indexer_head_dim scores every cached token, the attention reads the top sparse_attention_topk.
    sparse_attention_topk: int | None = None
    indexer_num_heads: int | None = None
    indexer_head_dim: int | None = None
    # DeepSeek-V4's compressed attention (deepseek-ai/DeepSeek-V4-Flash config.json and inference/model.py Attention,
    # Compressor, Indexer, as AIConfigurator counts them @095f58a5: sdk/models/deepseek_v4.py for the cache,
    # rust operators/dsv4.rs for the weights). On every attention layer: a query of q_lora_rank, ONE shared key-value
    # vector of head_dim per cached entry (MQA whose key is its value), a sliding window of `sliding_window`
    # raw entries, and a grouped low-rank output (o_groups groups of heads, each to o_lora_rank, then one
    # o_groups*o_lora_rank -> d projection). On top of the window, csa_layers layers (CSA, config
    # compress_ratios 4) pool every csa_compress_ratio tokens into one entry with an overlapping gated
    # compressor and read the sparse_attention_topk entries their indexer (indexer_num_heads x
    # indexer_head_dim, its keys pooled alike) picks; hca_layers layers (HCA, compress_ratios 128) pool
    # every hca_compress_ratio tokens and read all of them; the other attention layers have the window only.
    o_lora_rank: int | None = None
    o_groups: int | None = None
    csa_layers: int | None = None
    csa_compress_ratio: int | None = None
    hca_layers: int | None = None
    hca_compress_ratio: int | None = None
    # LatentMoE (Kimi K3 `routed_expert_hidden_size`, Nemotron 3 `moe_latent_size`): the routed experts run at
    # this width between a d -> latent and a latent -> d projection per MoE layer; shared experts stay at d.
    moe_latent_size: int | None = None

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts)

    @property
    def is_mla(self) -> bool:
        return self.attention_kind == "mla"

    @property
    def has_linear_layers(self) -> bool:
        return bool(self.linear_attention_kind and self.linear_attention_layers)

    @property
    def is_sparse(self) -> bool:
        return bool(self.sparse_attention_topk)

    @property
    def is_compressed(self) -> bool:
        """DeepSeek-V4's compressed attention (shared key-value MQA, window, CSA / HCA layers)."""
        return bool(self.csa_layers or self.hca_layers)


LINEAR_ATTENTION_KINDS = ("gated_deltanet", "mamba2")


def linear_layer_count(shape: ArchShape) -> int:
    """Layers with a linear-attention / SSM mixer (0 for a pure transformer)."""
    return (shape.linear_attention_layers or 0) if shape.linear_attention_kind else 0


def attention_layer_count(shape: ArchShape) -> int:
    """Layers with an attention mixer (the ones that hold a KV cache)."""
    if shape.attention_layers is not None:
        return shape.attention_layers
    return shape.num_layers - linear_layer_count(shape)


def ffn_layer_count(shape: ArchShape) -> int:
    return shape.num_layers if shape.ffn_layers is None else shape.ffn_layers


def linear_dims(shape: ArchShape) -> tuple[int, int, int]:
    """(key width, value width, conv channels) of one linear layer: key = key heads x key dim, value =
    value heads x value dim, and the convolution runs over q, k and v (Mamba-2: B, C and x)."""
    key = (shape.linear_num_key_heads or 0) * (shape.linear_key_head_dim or 0)
    value = (shape.linear_num_value_heads or 0) * (shape.linear_value_head_dim or 0)
    return key, value, 2 * key + value


def linear_params_per_layer(shape: ArchShape) -> int:
    """One Gated DeltaNet or Mamba-2 mixer (norms and per-head scalars of < 0.01% left out but the gates).

    Gated DeltaNet (transformers Qwen3NextGatedDeltaNet): in_proj_qkvz d x (2k + 2v), in_proj_ba d x 2H_v
    (beta and the decay), conv1d (2k + v) x kernel, out_proj v x d.
    Mamba-2 (Dao and Gu 2024; transformers NemotronHMamba2Mixer): in_proj d x (2v + 2k + H) for z, x, B, C
    and dt, conv1d (2k + v) x kernel, out_proj v x d."""
    if not shape.linear_attention_kind:
        return 0
    d = shape.hidden_size
    key, value, conv = linear_dims(shape)
    heads = shape.linear_num_value_heads or 0
    per_head = 2 if shape.linear_attention_kind == "gated_deltanet" else 1
    return d * (2 * key + 2 * value + per_head * heads) + conv * (shape.linear_conv_kernel_dim or 0) + value * d


def linear_state_elements_per_layer(shape: ArchShape) -> int:
    """The recurrent state one sequence keeps in one linear layer: value heads x key dim x value dim
    (Mamba-2: heads x ssm_state_size x head_dim) plus the convolution's last kernel-1 inputs."""
    if not shape.linear_attention_kind:
        return 0
    _, _, conv = linear_dims(shape)
    recurrent = (shape.linear_num_value_heads or 0) * (shape.linear_key_head_dim or 0) * (shape.linear_value_head_dim or 0)
    return recurrent + conv * max((shape.linear_conv_kernel_dim or 1) - 1, 0)


def linear_state_elements(shape: ArchShape) -> int:
    """State elements one sequence holds over all linear layers, whatever its length."""
    return linear_layer_count(shape) * linear_state_elements_per_layer(shape)


def indexer_params_per_layer(shape: ArchShape) -> int:
    """DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2-Exp report sec. 2.1; inference/model.py
    Indexer): queries from the q latent (wq_b: q_lora_rank x heads*dim), one shared key (wk: d x dim) and a
    weight per head (weights_proj: d x heads)."""
    if not shape.is_sparse or shape.is_compressed:  # DeepSeek-V4's indexers: compressed_attention_params
        return 0
    heads, dim = shape.indexer_num_heads or 0, shape.indexer_head_dim or 0
    q_in = shape.q_lora_rank or shape.hidden_size
    return q_in * heads * dim + shape.hidden_size * dim + shape.hidden_size * heads


def csa_layer_count(shape: ArchShape) -> int:
    """DeepSeek-V4's CSA layers, at most the attention layers (a copy cut to fewer layers, as a draft head's one
    layer, keeps CSA layers first)."""
    return min(shape.csa_layers or 0, max(attention_layer_count(shape), 0))


def hca_layer_count(shape: ArchShape) -> int:
    """DeepSeek-V4's HCA layers, at most the attention layers the CSA ones leave."""
    return min(shape.hca_layers or 0, max(attention_layer_count(shape) - csa_layer_count(shape), 0))


def compressor_params(shape: ArchShape, head_dim: int, overlapping: bool) -> int:
    """One DeepSeek-V4 Compressor (inference/model.py): wkv and wgate, d -> coff * head_dim each, coff 2 where
    consecutive windows overlap (CSA's ratio 4) and 1 otherwise (HCA); its positional bias `ape` (ratio x
    coff * head_dim) and the norm are left out like the other norms and biases."""
    return 2 * shape.hidden_size * (2 if overlapping else 1) * head_dim


def compressed_attention_params(shape: ArchShape) -> int:
    """What DeepSeek-V4's CSA and HCA layers hold beyond the projections every attention layer has, all layers:
    each CSA layer an overlapping compressor of head_dim and an indexer (wq_b: q_lora_rank -> indexer heads x
    dim, weights_proj: d -> indexer heads, and its own overlapping compressor of indexer_head_dim; no wk, the
    keys are the compressor's), each HCA layer a plain compressor. 0 for any other shape."""
    if not shape.is_compressed:
        return 0
    heads, dim = shape.indexer_num_heads or 0, shape.indexer_head_dim or 0
    indexer = (shape.q_lora_rank or shape.hidden_size) * heads * dim + shape.hidden_size * heads + compressor_params(shape, dim, True)
    csa = csa_layer_count(shape) * (compressor_params(shape, shape.head_dim, True) + indexer)
    hca = hca_layer_count(shape) * compressor_params(shape, shape.head_dim, False)
    return csa + hca


def attention_params_per_layer(shape: ArchShape) -> int:
    d = shape.hidden_size
    if shape.is_compressed:
        # DeepSeek-V4 (inference/model.py Attention): wq_a d x q_lora_rank, wq_b q_lora_rank x heads*head_dim, one
        # shared key-value projection wkv d x head_dim per KV head, and the grouped output wo_a (heads*head_dim/G
        # -> G*o_lora_rank, i.e. heads*head_dim x o_lora_rank weights) then wo_b G*o_lora_rank x d.
        q_in = shape.q_lora_rank or d
        q = (d * q_in if shape.q_lora_rank else 0) + q_in * shape.num_attention_heads * shape.head_dim
        return q + d * shape.num_kv_heads * shape.head_dim + attention_output_params_per_layer(shape)
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
        # A sigmoid gate on the output, d -> heads x v_head_dim (Kimi K3's gated MLA, mla_use_output_gate).
        gate = d * heads * (shape.v_head_dim or 0) if shape.attention_output_gate else 0
        return q + kv_a + kv_b + out + gate
    q = d * shape.num_attention_heads * shape.head_dim * (2 if shape.attention_output_gate else 1)
    kv = 2 * d * shape.num_kv_heads * shape.head_dim
    out = shape.num_attention_heads * shape.head_dim * d
    return q + kv + out


def attention_output_params_per_layer(shape: ArchShape) -> int:
    """The attention's output projection (heads x value dim -> d; DeepSeek-V4's grouped low-rank wo_a and wo_b)."""
    if shape.is_compressed:
        rank = shape.o_lora_rank or 0
        return shape.num_attention_heads * shape.head_dim * rank + (shape.o_groups or 0) * rank * shape.hidden_size
    value_dim = (shape.v_head_dim or 0) if shape.is_mla else shape.head_dim
    return shape.num_attention_heads * value_dim * shape.hidden_size


def tp_replicated_params(shape: ArchShape, sixteen_bit_modules=None) -> int:
    """Parameters every tensor-parallel rank holds whole, all layers: the projections into a low-rank or one-head
    space, which engines keep replicated rather than split (vLLM deepseek_v2.py: q_a_proj and kv_a_proj_with_mqa,
    the DSA Indexer's wq_b, wk and weights_proj, and the MoE router `gate` are ReplicatedLinear; SGLang and
    TensorRT-LLM alike). MLA's query and key-value down-projections and DSA's indexer; DeepSeek-V4's query
    down-projection, its one shared key-value projection, compressors and indexers; every MoE layer's router.
    With `sixteen_bit_modules` (SIXTEEN_BIT_MODULES a checkpoint keeps in 16 bits), only those of them it keeps
    so: the attention's (`attention` or `attention_inputs`, DSA's indexer apart as sixteen_bit_module_params
    counts it) and the routers (`router`)."""
    d = shape.hidden_size
    if sixteen_bit_modules is not None:
        modules = set(sixteen_bit_modules)
        attention = bool(modules & {"attention", "attention_inputs"})
        whole = tp_replicated_params(shape)
        routers = _moe_layers(shape) * d * (shape.num_experts or 0)
        indexers = 0 if shape.is_compressed else attention_layer_count(shape) * indexer_params_per_layer(shape)
        return (whole - routers - indexers if attention else 0) + (routers if "router" in modules else 0)
    q_down = d * shape.q_lora_rank if shape.q_lora_rank else 0
    if shape.is_compressed:
        mixers = attention_layer_count(shape) * (q_down + d * shape.num_kv_heads * shape.head_dim) + compressed_attention_params(shape)
    else:
        kv_down = d * ((shape.kv_lora_rank or 0) + (shape.qk_rope_head_dim or 0)) if shape.is_mla else 0
        mixers = attention_layer_count(shape) * ((q_down + kv_down if shape.is_mla else 0) + indexer_params_per_layer(shape))
    return mixers + _moe_layers(shape) * d * (shape.num_experts or 0)


def attention_mixer_params(shape: ArchShape) -> int:
    """Every attention layer's token mixer, all layers: the projections, DSA's indexer, DeepSeek-V4's compressors
    and indexers (the linear-attention layers apart: linear_params_per_layer)."""
    per_layer = attention_params_per_layer(shape) + indexer_params_per_layer(shape)
    return attention_layer_count(shape) * per_layer + compressed_attention_params(shape)


def ffn_params(hidden_size: int, intermediate_size: int, ffn_kind: str) -> int:
    matrices = 3 if ffn_kind == "gated" else 2
    return matrices * hidden_size * intermediate_size


def params_per_expert(shape: ArchShape) -> int:
    """Parameters of one routed expert in one MoE layer (0 for a dense model)."""
    if not shape.is_moe:
        return 0
    width = shape.moe_latent_size or shape.hidden_size  # LatentMoE: the experts run at the latent width
    return ffn_params(width, shape.moe_intermediate_size or shape.intermediate_size, shape.ffn_kind)


def moe_latent_params_per_layer(shape: ArchShape) -> int:
    """LatentMoE's d -> latent and latent -> d projections of one MoE layer, run by every token (0 without)."""
    return 2 * shape.hidden_size * shape.moe_latent_size if shape.is_moe and shape.moe_latent_size else 0


def params_per_shared_expert(shape: ArchShape) -> int:
    """One shared expert (its own width where the config gives one: Nemotron-3-Nano's is twice a routed one)."""
    if not shape.is_moe:
        return 0
    width = shape.shared_expert_intermediate_size or shape.moe_intermediate_size or shape.intermediate_size
    return ffn_params(shape.hidden_size, width, shape.ffn_kind)


def experts_touched(num_experts, experts_per_token, tokens):
    """Distinct experts one MoE layer reads for `tokens` routed tokens under uniform routing:
    E*(1 - (1 - k/E)^tokens) (each expert is missed by a token w.p. 1 - k/E). Floats or NumPy
    arrays alike (the engine passes arrays, the trials floats)."""
    return num_experts * (1.0 - (1.0 - experts_per_token / num_experts) ** tokens)


def _moe_layers(shape: ArchShape) -> int:
    """MoE layers: the shape's count, else every layer with an FFN."""
    if not shape.is_moe:
        return 0
    return ffn_layer_count(shape) if shape.moe_layer_count is None else shape.moe_layer_count


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
    dense_layers = ffn_layer_count(shape) - moe_layers
    attention = attention_mixer_params(shape)
    linear = linear_layer_count(shape) * linear_params_per_layer(shape)
    dense_ffn = dense_layers * ffn_params(shape.hidden_size, shape.intermediate_size, shape.ffn_kind)
    moe_ffn = 0
    if moe_layers:
        shared = (shape.num_shared_experts or 0) * params_per_shared_expert(shape)
        router = shape.hidden_size * (shape.num_experts or 0)
        moe_ffn = moe_layers * (experts_counted * params_per_expert(shape) + shared + router + moe_latent_params_per_layer(shape))
    return attention + linear + dense_ffn + moe_ffn


def parameter_count(shape: ArchShape) -> int:
    """Total parameters from the shapes (norms and biases left out: < 0.1% here)."""
    return _layer_params(shape, shape.num_experts or 0) + stored_embedding_params(shape)


def active_parameter_count(shape: ArchShape) -> int:
    """Parameters a token passes through: MoE layers count only the routed top-k experts."""
    return _layer_params(shape, shape.experts_per_token or 0) + stored_embedding_params(shape)


def kv_cache_elements_per_token(shape: ArchShape) -> float:
    """Elements cached per token over all layers.

    Standard attention: K and V, 2 * L * H_kv * d_h (vLLM paper §3: OPT-13B 800 KB/token at fp16).
    MLA caches the compressed latent plus the decoupled RoPE key, L * (kv_lora_rank + rope_dim)
    (DeepSeek-V2 paper, Table 1: 576 elements per layer for V3's sizes).
    Only attention layers hold a cache (a hybrid's linear / Mamba layers keep a constant state instead:
    linear_state_elements). DeepSeek Sparse Attention also caches the indexer's key, indexer_head_dim
    elements per layer (stored in fp8 by DeepSeek's kernels: the bytes here are an upper bound).
    DeepSeek-V4's compressed attention: what a token adds once the sequence outgrows the window, one shared
    key-value entry of head_dim per csa_compress_ratio tokens plus the indexer's key of indexer_head_dim alike on
    each CSA layer, one entry per hca_compress_ratio tokens on each HCA layer (V4-Pro: 30 x (512 + 128) / 4 +
    31 x 512 / 128 = 4,924, 9.62 GiB a 1M-token sequence at bf16); the window's raw entries are a constant per
    sequence (compressed_window_elements).
    """
    if shape.is_compressed:
        hd, index = shape.num_kv_heads * shape.head_dim, shape.indexer_head_dim or 0
        csa = csa_layer_count(shape) * (hd + index) / shape.csa_compress_ratio if shape.csa_layers else 0.0
        hca = hca_layer_count(shape) * hd / shape.hca_compress_ratio if shape.hca_layers else 0.0
        return csa + hca
    layers = attention_layer_count(shape)
    indexer = layers * (shape.indexer_head_dim or 0) if shape.is_sparse else 0
    if shape.is_mla:
        return layers * ((shape.kv_lora_rank or 0) + (shape.qk_rope_head_dim or 0)) + indexer
    return 2 * layers * shape.num_kv_heads * shape.head_dim + indexer


def kv_cache_bytes_per_token(shape: ArchShape, dtype: str) -> float:
    return kv_cache_elements_per_token(shape) * bytes_per_element(dtype)


def compressed_window_elements(shape: ArchShape) -> int:
    """DeepSeek-V4: the raw entries every attention layer keeps for its window, one head_dim vector per token
    (key = value), a constant per sequence once it is `sliding_window` tokens long (0 for any other shape)."""
    if not shape.is_compressed:
        return 0
    return attention_layer_count(shape) * (shape.sliding_window or 0) * shape.num_kv_heads * shape.head_dim


def sixteen_bit_module_params(shape: ArchShape, modules) -> int:
    """Parameters of the SIXTEEN_BIT_MODULES named in `modules` (the embeddings and LM head apart)."""
    unknown = set(modules) - set(SIXTEEN_BIT_MODULES)
    if unknown:
        raise ValueError(f"unknown 16-bit modules {sorted(unknown)}; expected some of {', '.join(SIXTEEN_BIT_MODULES)}")
    total = 0
    # DeepSeek-V4's compressors and indexers sit under attn.* with the projections (nvidia/DeepSeek-V4-*-NVFP4
    # exclude *.attn.*); DSA's indexer is not counted here, as before.
    if "attention" in modules:
        total += attention_layer_count(shape) * attention_params_per_layer(shape) + compressed_attention_params(shape)
    elif "attention_inputs" in modules:
        inputs = attention_params_per_layer(shape) - attention_output_params_per_layer(shape)
        total += attention_layer_count(shape) * inputs + compressed_attention_params(shape)
    moe_layers = _moe_layers(shape)
    if "router" in modules:
        total += moe_layers * shape.hidden_size * (shape.num_experts or 0)
    if "shared_experts" in modules:
        total += moe_layers * (shape.num_shared_experts or 0) * params_per_shared_expert(shape)
    if "dense_ffn" in modules:
        total += (ffn_layer_count(shape) - moe_layers) * ffn_params(shape.hidden_size, shape.intermediate_size, shape.ffn_kind)
    if "linear_attention" in modules:
        total += linear_layer_count(shape) * linear_params_per_layer(shape)
    if "moe_latent" in modules:
        total += moe_layers * moe_latent_params_per_layer(shape)
    return total


def sixteen_bit_params(shape: ArchShape, weight_format_name: str, modules=()) -> tuple[int, int]:
    """(stored, streamed): the parameters a checkpoint in this format keeps in 16 bits, and of them
    those a forward reads in full (the LM head where the format keeps it, SIXTEEN_BIT_HEAD_FORMATS, and
    the listed modules; an untied input embedding is only gathered). None for a 16/32-bit format."""
    if WEIGHT_FORMAT_BITS[weight_format_name] >= 16:
        return 0, 0
    head = weight_format_name in SIXTEEN_BIT_HEAD_FORMATS
    streamed = (lm_head_params(shape) if head else 0) + sixteen_bit_module_params(shape, modules)
    return streamed + (embedding_params(shape) if head and not shape.tie_word_embeddings else 0), streamed


def weight_bytes(shape: ArchShape, dtype: str, checkpoint_format: str = "", sixteen_bit_modules=None) -> float:
    """Stored bytes of the weights at `dtype`, in the format it is stored in (weight_format), its
    16-bit parts at 16 bits; `sixteen_bit_modules` maps a checkpoint format to the modules it keeps
    in 16 bits (ModelArch.sixteen_bit_modules)."""
    name = weight_format(dtype, checkpoint_format)
    stored, _ = sixteen_bit_params(shape, name, (sixteen_bit_modules or {}).get(name, ()))
    return (parameter_count(shape) - stored) * weight_bytes_per_param(name) + stored * SIXTEEN_BIT_BYTES
