from __future__ import annotations

import math

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.forms.models import model_to_dict
from simple_history.models import HistoricalRecords

from hwcatalog import architecture
from hwcatalog.validation import SLUG_PATTERN, validate_arch, validate_chip, validate_offering, validate_sources

slug_validator = RegexValidator(SLUG_PATTERN, "Lower-case letters, digits, dots and dashes only.")


class Sourced(models.Model):
    """Every catalog row says where its numbers come from and when they were checked."""

    sources = models.JSONField(default=list, help_text="URLs or document references, at least one.")
    as_of = models.DateField(help_text="Date the values were checked or published.")
    notes = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    def _check(self, errors: dict[str, str]) -> None:
        message = validate_sources(self.sources)
        if message:
            errors["sources"] = message
        if errors:
            raise ValidationError(errors)


class Chip(Sourced):
    class Kind(models.TextChoices):
        CPU = "cpu", "CPU"
        GPU = "gpu", "GPU"
        TPU = "tpu", "TPU"
        LPU = "lpu", "LPU"
        OTHER = "other", "Other accelerator"

    slug = models.CharField(max_length=80, unique=True, validators=[slug_validator])
    vendor = models.CharField(max_length=80)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    architecture = models.CharField(
        max_length=80, blank=True, default="",
        help_text="The compute architecture whose kernels the chip runs, as its vendor names it (CDNA 3, Hopper, NeuronCore-v2): "
        "chips of one architecture run one software stack's kernels alike, so a chip-family profile fitted on one speaks for the others.",
    )  # fmt: skip
    memory_type = models.CharField(max_length=40, blank=True, default="")
    memory_capacity_bytes = models.BigIntegerField()
    memory_bandwidth_bytes_per_s = models.FloatField()
    peak_fp32_flops_per_s = models.FloatField(null=True, blank=True)
    peak_bf16_flops_per_s = models.FloatField(null=True, blank=True)
    peak_fp16_flops_per_s = models.FloatField(null=True, blank=True)
    peak_fp8_flops_per_s = models.FloatField(null=True, blank=True)
    peak_int8_flops_per_s = models.FloatField(null=True, blank=True)
    peak_int4_flops_per_s = models.FloatField(null=True, blank=True)
    peak_fp4_flops_per_s = models.FloatField(null=True, blank=True)
    peak_fp16_acc16_flops_per_s = models.FloatField(
        null=True, blank=True,
        help_text="Dense FP16 tensor peak with FP16 accumulation, where it differs from peak_fp16_flops_per_s (which is the "
                  "FP32-accumulate rate): GeForce cards run 16-bit accumulation at twice their FP32-accumulate rate. Used "
                  "for an engine that accumulates its 16-bit GEMMs in 16 bits (ServingEngine.accumulates_in_16_bits).",
    )  # fmt: skip
    on_chip_sram_bytes = models.BigIntegerField(null=True, blank=True)
    link_bandwidth_bytes_per_s = models.FloatField(null=True, blank=True, help_text="Per chip, one direction.")
    link_latency_s = models.FloatField(null=True, blank=True)
    chips_per_node = models.PositiveIntegerField(null=True, blank=True)
    cores = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="CPU cores per socket; for an accelerator whose SDK runs each compute core as its own tensor-parallel rank (AWS NeuronCores), those cores.",
    )  # fmt: skip
    tdp_watts = models.FloatField(null=True, blank=True)
    aliases = models.JSONField(default=list, blank=True, help_text="Other names of this chip (e.g. AIConfigurator's system names h100_sxm, gb200).")
    measured = models.BooleanField(
        default=False,
        help_text="A validation worker's own device, read off a probe: it lives with its runs (GET /api/v1/chips/?measured=true), "
        "never in the public chip list or a plan.",
    )
    history = HistoricalRecords(excluded_fields=["created_at", "updated_at"])

    class Meta:
        ordering = ["vendor", "slug"]
        constraints = [
            models.CheckConstraint(condition=models.Q(memory_capacity_bytes__gt=0), name="chip_memory_capacity_positive"),
            models.CheckConstraint(condition=models.Q(memory_bandwidth_bytes_per_s__gt=0), name="chip_bandwidth_positive"),
        ]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        errors = validate_chip(model_to_dict(self))
        stored = Chip.objects.filter(pk=self.pk).values_list("slug", "aliases").first() if self.pk else None
        errors.update(chip_name_clashes(slug=self.slug, aliases=self.aliases, pk=self.pk, kept=stored))
        self._check(errors)

    def peak_flops_per_s(self) -> dict[str, float]:
        """Dense peak per dtype for the dtypes this chip has a math path for."""
        peaks = {
            "fp32": self.peak_fp32_flops_per_s,
            "bf16": self.peak_bf16_flops_per_s,
            "fp16": self.peak_fp16_flops_per_s,
            "fp8": self.peak_fp8_flops_per_s,
            "int8": self.peak_int8_flops_per_s,
            "int4": self.peak_int4_flops_per_s,
            "fp4": self.peak_fp4_flops_per_s,
        }
        return {dtype: value for dtype, value in peaks.items() if value}

    def ridge_point_flops_per_byte(self, dtype: str = "bf16") -> float | None:
        """Peak FLOP/s over memory bandwidth; None without that peak, or where a row stored before the values' lower
        bounds (validation.MIN_BANDWIDTH) makes it no finite number."""
        peak = self.peak_flops_per_s().get(dtype)
        ridge = peak / self.memory_bandwidth_bytes_per_s if peak and self.memory_bandwidth_bytes_per_s else None
        return ridge if ridge is not None and math.isfinite(ridge) else None


def chip_name_clashes(*, slug: str | None, aliases, pk=None, kept: tuple[str, list] | None = None) -> dict[str, str]:
    """Errors for a chip's names that another chip already answers to, case aside: an alias that is another chip's slug or
    alias, a slug that is another chip's alias (another chip's slug is the slug field's own uniqueness). A name finds one
    chip (the accuracy command and the importers look chips up by slug or alias). Only the names a write gives are
    checked, not those the row already had (`kept`: its stored slug and aliases), so a row stored before the rule can
    still be updated."""
    kept_slug, kept_aliases = kept or (None, [])
    given = [name for name in aliases or () if isinstance(name, str) and name not in (kept_aliases or ())]
    slug = slug if isinstance(slug, str) and slug != kept_slug else None
    if not given and not slug:
        return {}
    slugs: set[str] = set()
    others: set[str] = set()
    for other_slug, names in Chip.objects.exclude(pk=pk).values_list("slug", "aliases"):
        slugs.add(other_slug.lower())
        others.update(name.lower() for name in names or () if isinstance(name, str))
    errors = {}
    clashes = sorted({name for name in given if name.lower() in slugs | others})
    if clashes:
        errors["aliases"] = f"Already another chip's slug or alias: {', '.join(clashes)}."
    if slug and slug.lower() in others:
        errors["slug"] = f"{slug!r} is already another chip's alias."
    return errors


class ServingEngine(Sourced):
    """A serving engine (TensorRT-LLM, vLLM, SGLang, ...): what it runs on and the scheduler defaults that
    cap the batch a plan may assume on it, each sourced. Its efficiency profile, where one is fitted, is
    planner/data/engine_profiles.json under `profile` (docs/accuracy.md#the-fit)."""

    class MemoryRule(models.TextChoices):
        OF_TOTAL = "of_total", "fraction of the chip's memory (weights, activations and KV together)"
        OF_FREE = "of_free", "fraction of what the weights and activations leave, for the KV cache"

    class MoeDispatch(models.TextChoices):
        ALL_TO_ALL = "all_to_all", "each token's activations go to its experts' ranks and back (all-to-all)"
        ALL_GATHER = "all_gather", "every rank gathers all the group's tokens and reduce-scatters the results"

    class AttentionDpDense(models.TextChoices):
        REPLICATED = "replicated", "each attention replica keeps the dense layers whole"
        TENSOR_PARALLEL = "tensor_parallel", "the dense FFN, shared experts and LM head stay tensor-parallel over the group"

    slug = models.CharField(max_length=80, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=120, unique=True)
    project_url = models.URLField(max_length=300)
    versions = models.CharField(max_length=200, blank=True, default="", help_text="Releases the recorded defaults and measurements are from.")
    chip_kinds = models.JSONField(default=list, help_text="Chip kinds it serves on (gpu, tpu, cpu, ...).")
    chip_vendors = models.JSONField(default=list, blank=True, help_text="Chip vendors it serves on; empty: any.")
    weight_dtypes = models.JSONField(default=list, help_text="Weight dtypes it serves.")
    kv_memory_rule = models.CharField(max_length=8, choices=MemoryRule.choices)
    kv_memory_fraction = models.FloatField(help_text="The default fraction the memory rule applies.")
    max_batch_sequences = models.PositiveIntegerField(null=True, blank=True, help_text="Default cap on sequences running at once; null: none fixed.")
    prefill_token_budget = models.PositiveIntegerField(null=True, blank=True, help_text="Default prompt tokens per step; null: none fixed.")
    moe_dispatch = models.CharField(
        max_length=12, choices=MoeDispatch.choices, default=MoeDispatch.ALL_TO_ALL,
        help_text="How tokens reach the experts across an attention-data-parallel group, by default.",
    )  # fmt: skip
    attention_dp_dense = models.CharField(
        max_length=16, choices=AttentionDpDense.choices, default=AttentionDpDense.REPLICATED,
        help_text="Where the dense layers live under attention data parallelism, by default.",
    )  # fmt: skip
    prefill_runs_alone = models.BooleanField(
        default=False,
        help_text="A step that prefills runs no decodes (SGLang without --enable-mixed-chunk); false: prefill chunks and decodes share steps.",
    )  # fmt: skip
    accumulates_in_16_bits = models.BooleanField(
        default=False,
        help_text="Its prompt GEMMs on a GPU multiply 16-bit operands with 16-bit accumulation (llama.cpp's cuBLAS path: "
                  "CUBLAS_COMPUTE_16F), at the chip's peak_fp16_acc16_flops_per_s where the catalog gives one.",
    )  # fmt: skip
    attention_dp_balance_timeout_steps = models.PositiveIntegerField(
        default=0,
        help_text="Under attention data parallelism, the steps a new prompt is held, while every attention replica is decoding, "
                  "waiting for a prompt on every replica before it prefills (TensorRT-LLM's attention_dp_config with "
                  "enable_balance: timeout_iters); 0: prompts are not held.",
    )  # fmt: skip
    cpu_matrix_dtypes = models.JSONField(
        null=True, blank=True, default=None,
        help_text="On a CPU with matrix units (Intel AMX), the weight dtypes whose GEMMs it runs on them; null: every dtype. "
                  "The others run on the vector units (AVX-512).",
    )  # fmt: skip
    cpu_matrix_experts = models.BooleanField(
        default=True,
        help_text="On a CPU with matrix units, whether a MoE model's routed-expert GEMMs run on them too; false: on the vector units "
                  "(llama.cpp: its AMX kernels take plain matrix multiplies, not the experts' MUL_MAT_ID).",
    )  # fmt: skip
    profile = models.CharField(max_length=80, blank=True, default="", help_text="Its fitted efficiency profile's name, if one is fitted.")
    aliases = models.JSONField(default=list, blank=True, help_text="Other names (e.g. AIConfigurator's backend names trtllm, sglang, vllm).")
    history = HistoricalRecords(excluded_fields=["created_at", "updated_at"])

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=models.Q(kv_memory_fraction__gt=0) & models.Q(kv_memory_fraction__lte=1),
                                   name="engine_kv_memory_fraction_in_0_1"),
        ]  # fmt: skip

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        errors = {}
        for name in ("chip_kinds", "weight_dtypes", "chip_vendors", "aliases"):
            value = getattr(self, name)
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                errors[name] = "A list of non-empty strings."
        if not errors.get("chip_kinds") and not self.chip_kinds:
            errors["chip_kinds"] = "At least one chip kind."
        unknown = sorted(set(self.chip_kinds if isinstance(self.chip_kinds, list) else []) - set(Chip.Kind.values))
        if unknown:
            errors["chip_kinds"] = f"Unknown chip kinds: {', '.join(unknown)}."
        if not errors.get("weight_dtypes") and (odd := sorted(set(self.weight_dtypes) - set(architecture.DTYPE_BYTES))):
            errors["weight_dtypes"] = f"Unknown weight dtypes: {', '.join(odd)}."
        matrix = self.cpu_matrix_dtypes
        if matrix is not None and (not isinstance(matrix, list) or not all(isinstance(v, str) and v for v in matrix)):
            errors["cpu_matrix_dtypes"] = "A list of non-empty strings, or null (every dtype)."
        elif matrix and (odd := sorted(set(matrix) - set(architecture.DTYPE_BYTES))):
            errors["cpu_matrix_dtypes"] = f"Unknown weight dtypes: {', '.join(odd)}."
        if not errors.get("chip_vendors"):
            # "Vendor" (any of its chips) or "Vendor kind" (its chips of that kind only: "Intel cpu")
            odd = [v for v in self.chip_vendors if len(words := v.split()) > 1 and words[-1] not in Chip.Kind.values]
            if odd:
                errors["chip_vendors"] = f"{', '.join(odd)}: a vendor, or a vendor and one of the chip kinds {', '.join(Chip.Kind.values)}."
        self._check(errors)


class Offering(models.Model):
    class PricingModel(models.TextChoices):
        ON_DEMAND = "on_demand", "On demand"
        RESERVED = "reserved", "Reserved"
        SPOT = "spot", "Spot"
        PURCHASE = "purchase", "Purchase"

    slug = models.CharField(max_length=120, unique=True, validators=[slug_validator])
    chip = models.ForeignKey(Chip, on_delete=models.CASCADE, related_name="offerings")
    provider = models.CharField(max_length=80)
    instance_name = models.CharField(max_length=80, blank=True, default="")
    region = models.CharField(max_length=80, blank=True, default="")
    pricing_model = models.CharField(max_length=12, choices=PricingModel.choices)
    usd_per_chip_hour = models.FloatField(null=True, blank=True)
    purchase_usd_per_chip = models.FloatField(null=True, blank=True)
    amortisation_years = models.FloatField(null=True, blank=True)
    power_usd_per_kwh = models.FloatField(null=True, blank=True)
    pue = models.FloatField(null=True, blank=True)
    # The fewest chips sold or rented at once: a 1-GPU instance 1, an 8-GPU server 8, a TPU slice its chips,
    # an NVL72 rack 72. A configuration pays for whole units.
    chips_per_unit = models.PositiveIntegerField(default=1)
    # Owned systems: the parts of one unit beside its accelerators, each with its price and source
    # ([{"kind": "host"|"network"|"rack"|"system", "description", "usd", "source"}], docs/catalog_format.md).
    system_parts = models.JSONField(default=list, blank=True)
    host_watts_per_unit = models.FloatField(null=True, blank=True)  # CPUs, memory, NICs, fans, switch share
    datacentre_usd_per_kw_month = models.FloatField(null=True, blank=True)  # space, cooling, power delivery per IT kW
    utilisation = models.FloatField(null=True, blank=True)  # expected share of hours an owned unit serves
    as_of = models.DateField()
    source = models.CharField(max_length=1000)
    notes = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = HistoricalRecords(excluded_fields=["created_at", "updated_at"])

    class Meta:
        ordering = ["chip__slug", "pricing_model", "slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def capex_usd_per_unit(self) -> float | None:
        """An owned unit's price: its accelerators and every other part (None for a rental)."""
        if self.pricing_model != self.PricingModel.PURCHASE:
            return None
        return self.chips_per_unit * (self.purchase_usd_per_chip or 0.0) + sum(float(p["usd"]) for p in self.system_parts or [])

    def clean(self) -> None:
        errors = validate_offering(model_to_dict(self))
        if not self.source.strip():
            errors["source"] = "A source is required."
        if errors:
            raise ValidationError(errors)


class ModelArch(Sourced):
    class AttentionKind(models.TextChoices):
        MHA = "mha", "Multi-head"
        GQA = "gqa", "Grouped-query"
        MQA = "mqa", "Multi-query"
        MLA = "mla", "Multi-head latent"

    class FfnKind(models.TextChoices):
        GATED = "gated", "Gated (SwiGLU, 3 matrices)"
        PLAIN = "plain", "Plain (2 matrices)"

    class GenerationKind(models.TextChoices):
        AUTOREGRESSIVE = "autoregressive", "Autoregressive"
        DIFFUSION = "diffusion", "Diffusion"
        BLOCK_DIFFUSION = "block_diffusion", "Block diffusion"

    slug = models.CharField(max_length=80, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    family = models.CharField(max_length=80)
    total_params = models.BigIntegerField(help_text="Published total parameter count.")
    active_params = models.BigIntegerField(null=True, blank=True, help_text="Published active count (MoE); empty = total.")
    num_layers = models.PositiveIntegerField()
    hidden_size = models.PositiveIntegerField()
    num_attention_heads = models.PositiveIntegerField()
    num_kv_heads = models.PositiveIntegerField()
    head_dim = models.PositiveIntegerField()
    intermediate_size = models.PositiveIntegerField()
    vocab_size = models.PositiveIntegerField()
    tie_word_embeddings = models.BooleanField(default=False)
    ffn_kind = models.CharField(max_length=8, choices=FfnKind.choices, default=FfnKind.GATED)
    attention_kind = models.CharField(max_length=4, choices=AttentionKind.choices)
    q_lora_rank = models.PositiveIntegerField(null=True, blank=True)
    kv_lora_rank = models.PositiveIntegerField(null=True, blank=True)
    qk_nope_head_dim = models.PositiveIntegerField(null=True, blank=True)
    qk_rope_head_dim = models.PositiveIntegerField(null=True, blank=True)
    v_head_dim = models.PositiveIntegerField(null=True, blank=True)
    num_experts = models.PositiveIntegerField(null=True, blank=True)
    experts_per_token = models.PositiveIntegerField(null=True, blank=True)
    num_shared_experts = models.PositiveIntegerField(null=True, blank=True)
    moe_layer_count = models.PositiveIntegerField(null=True, blank=True)
    moe_intermediate_size = models.PositiveIntegerField(null=True, blank=True)
    generation_kind = models.CharField(max_length=16, choices=GenerationKind.choices, default=GenerationKind.AUTOREGRESSIVE)
    default_block_size = models.PositiveIntegerField(null=True, blank=True)
    max_context_tokens = models.PositiveIntegerField()
    sliding_window = models.PositiveIntegerField(null=True, blank=True, help_text="Tokens a windowed layer attends to (empty: none).")
    sliding_window_layers = models.PositiveIntegerField(
        null=True, blank=True, help_text="How many layers use the window (empty with a window: all of them)."
    )
    attention_output_gate = models.BooleanField(
        default=False, help_text="A sigmoid gate on the attention output, projected with the queries (Qwen3-Next, Qwen3.5)."
    )

    class LinearAttentionKind(models.TextChoices):
        NONE = "", "none"
        GATED_DELTANET = "gated_deltanet", "Gated DeltaNet linear attention"
        MAMBA2 = "mamba2", "Mamba-2 state-space layer"

    linear_attention_kind = models.CharField(
        max_length=16, blank=True, default="", choices=LinearAttentionKind.choices,
        help_text="The mixer of the layers that keep a constant recurrent state instead of a KV cache.",
    )
    linear_attention_layers = models.PositiveIntegerField(null=True, blank=True, help_text="Layers with the linear / SSM mixer.")
    linear_num_key_heads = models.PositiveIntegerField(null=True, blank=True, help_text="Gated DeltaNet key heads; Mamba-2: n_groups.")
    linear_key_head_dim = models.PositiveIntegerField(null=True, blank=True, help_text="Gated DeltaNet key head dim; Mamba-2: ssm_state_size.")
    linear_num_value_heads = models.PositiveIntegerField(null=True, blank=True, help_text="Gated DeltaNet value heads; Mamba-2: mamba_num_heads.")
    linear_value_head_dim = models.PositiveIntegerField(null=True, blank=True, help_text="Gated DeltaNet value head dim; Mamba-2: mamba_head_dim.")
    linear_conv_kernel_dim = models.PositiveIntegerField(null=True, blank=True, help_text="The short causal convolution's width.")
    attention_layers = models.PositiveIntegerField(
        null=True, blank=True, help_text="Layers with an attention mixer (empty: num_layers - linear_attention_layers)."
    )
    ffn_layers = models.PositiveIntegerField(null=True, blank=True, help_text="Layers with an FFN, dense or MoE (empty: all).")
    shared_expert_intermediate_size = models.PositiveIntegerField(
        null=True, blank=True, help_text="A shared expert's width where it differs from moe_intermediate_size."
    )
    sparse_attention_topk = models.PositiveIntegerField(
        null=True, blank=True, help_text="Tokens a sparse-attention query reads (DeepSeek Sparse Attention: index_topk)."
    )
    indexer_num_heads = models.PositiveIntegerField(null=True, blank=True, help_text="The sparse-attention indexer's heads.")
    indexer_head_dim = models.PositiveIntegerField(null=True, blank=True, help_text="The sparse-attention indexer's head dim (its cached key).")
    # DeepSeek-V4's compressed attention (hwcatalog.architecture.ArchShape; DeepSeek-V4-Flash inference/model.py).
    o_lora_rank = models.PositiveIntegerField(
        null=True, blank=True, help_text="DeepSeek-V4: the rank each group of heads' output is projected to (wo_a) before wo_b."
    )
    o_groups = models.PositiveIntegerField(null=True, blank=True, help_text="DeepSeek-V4: the groups of heads of the grouped output projection.")
    csa_layers = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="DeepSeek-V4 compressed sparse attention (CSA) layers: window + entries pooled over csa_compress_ratio tokens, "
        "of which the indexer's top sparse_attention_topk are read.",
    )  # fmt: skip
    csa_compress_ratio = models.PositiveIntegerField(null=True, blank=True, help_text="Tokens pooled into one cached entry on a CSA layer (compress_ratios 4).")
    hca_layers = models.PositiveIntegerField(
        null=True, blank=True, help_text="DeepSeek-V4 heavily compressed attention (HCA) layers: window + every entry pooled over hca_compress_ratio tokens."
    )
    hca_compress_ratio = models.PositiveIntegerField(null=True, blank=True, help_text="Tokens pooled into one cached entry on an HCA layer (compress_ratios 128).")
    moe_latent_size = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="LatentMoE: the width the routed experts run at, between a projection from and one back to hidden_size "
        "(Kimi K3 routed_expert_hidden_size).",
    )  # fmt: skip
    hf_id = models.CharField(max_length=200, blank=True, default="", db_index=True, help_text="Hugging Face repository, e.g. meta-llama/Llama-3.1-8B.")
    hf_aliases = models.JSONField(
        default=list, blank=True, help_text="Other Hugging Face repositories of the same architecture (instruct, pre-quantised: nvidia/...-FP8)."
    )
    class CheckpointFormat(models.TextChoices):
        NONE = "", "not stated"
        FP32 = "fp32", "fp32"
        BF16 = "bf16", "bf16"
        FP16 = "fp16", "fp16"
        FP8 = "fp8", "fp8 (per tensor)"
        FP8_BLOCK = "fp8_block", "fp8, block-scaled"
        INT8 = "int8", "int8"
        INT4 = "int4", "int4 with group scales"
        INT4_G32 = "int4_g32", "int4 in groups of 32"
        MXFP4 = "mxfp4", "MXFP4"
        NVFP4 = "nvfp4", "NVFP4"

    checkpoint_format = models.CharField(
        max_length=16, blank=True, default="", choices=CheckpointFormat.choices,
        help_text="The published checkpoint's weight format, read from quantization_config / hf_quant_config.json.",
    )
    sixteen_bit_modules = models.JSONField(
        default=dict, blank=True,
        help_text="Per checkpoint format below 16 bits (mxfp4, nvfp4, ...), the modules its checkpoint keeps in 16 bits beyond the "
        "embeddings and LM head (attention, attention_inputs, router), read from modules_to_not_convert / exclude_modules.",
    )  # fmt: skip
    history = HistoricalRecords(excluded_fields=["created_at", "updated_at"])

    class Meta:
        ordering = ["family", "slug"]
        verbose_name = "model architecture"
        constraints = [
            models.CheckConstraint(condition=models.Q(total_params__gt=0), name="modelarch_total_params_positive"),
        ]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        self._check(validate_arch(model_to_dict(self)))

    def shape(self) -> architecture.ArchShape:
        return architecture.ArchShape(
            **{field: getattr(self, field) for field in architecture.ArchShape.__dataclass_fields__}
        )

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts)

    def parameter_count(self) -> int:
        """Parameters derived from the shapes (a test holds it within 2% of total_params)."""
        return architecture.parameter_count(self.shape())

    def active_parameter_count(self) -> int:
        return architecture.active_parameter_count(self.shape())

    def kv_cache_bytes_per_token(self, dtype: str = "bf16") -> float:
        return architecture.kv_cache_bytes_per_token(self.shape(), dtype)

    def linear_state_bytes_per_sequence(self, dtype: str = "bf16") -> float:
        """The constant state a sequence holds in the linear / Mamba layers (0 without any)."""
        return architecture.linear_state_elements(self.shape()) * architecture.bytes_per_element(dtype)

    def weight_bytes(self, dtype: str = "bf16") -> float:
        """Bytes of the shape-derived parameter count at a dtype (what the planner counts; the published
        count is a rounded label), in the format it is stored in: block scales counted, the embeddings, LM
        head and the checkpoint's 16-bit modules at 16 bits (architecture.weight_bytes)."""
        return architecture.weight_bytes(self.shape(), dtype, self.checkpoint_format, self.sixteen_bit_modules)


class CatalogVersion(models.Model):
    """One row whose token changes, in the same transaction, with every write to a chip, an
    offering or a model. Web processes key their cache of catalog API answers by it
    (hwcatalog/cache.py), so a committed edit is seen by every process at once."""

    token = models.CharField(max_length=32)
    changed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"catalog version {self.token} @ {self.changed_at:%Y-%m-%d %H:%M:%S}"
