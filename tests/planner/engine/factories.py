"""Specs for the engine tests. Shapes from each model's Hugging Face config.json;
chip figures from the datasheets (dense peaks) with memory as the datasheet's decimal GB (80e9 for an H100), where
hwcatalog/data/chips/ holds the total the device reports (80 GiB: 81,559 MiB): hand-checked figures stay round."""

from __future__ import annotations

import dataclasses

from planner.engine import ArchShape, ChipSpec, ModelSpec, OfferingSpec

GIB = 2**30


def kv_elements(num_layers: int, num_kv_heads: int, head_dim: int) -> int:
    """2 * L * H_kv * d_h: K and V for every layer (docs/planner_math.md#parameters-and-kv-cache)."""
    return 2 * num_layers * num_kv_heads * head_dim


def dense_model(
    slug: str,
    *,
    total_params: float,
    num_layers: int,
    hidden_size: int,
    num_attention_heads: int,
    num_kv_heads: int,
    vocab_size: int,
    tie_word_embeddings: bool = False,
    max_context_tokens: int = 4096,
) -> ModelSpec:
    shape = ArchShape(
        num_layers=num_layers, hidden_size=hidden_size, num_attention_heads=num_attention_heads, num_kv_heads=num_kv_heads,
        head_dim=hidden_size // num_attention_heads, intermediate_size=4 * hidden_size, vocab_size=vocab_size,
        tie_word_embeddings=tie_word_embeddings, attention_kind="mha" if num_kv_heads == num_attention_heads else "gqa",
    )  # fmt: skip
    return ModelSpec(slug=slug, shape=shape, total_params=total_params, active_params=total_params, max_context_tokens=max_context_tokens)


def dense_8b_textbook() -> ModelSpec:
    """A textbook dense 8B: exactly 8e9 matmul parameters (no vocabulary), for hand-checked figures."""
    shape = ArchShape(num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8, head_dim=128, intermediate_size=14336,
                      vocab_size=0)  # fmt: skip
    return ModelSpec(slug="dense-8b", shape=shape, total_params=8e9, active_params=8e9)


def llama_3_1_8b() -> ModelSpec:
    # meta-llama/Llama-3.1-8B config.json; 8.03e9 parameters published.
    return dense_model("llama-3.1-8b", total_params=8.03e9, num_layers=32, hidden_size=4096, num_attention_heads=32,
                       num_kv_heads=8, vocab_size=128256, max_context_tokens=131072)  # fmt: skip


def llama_3_1_70b() -> ModelSpec:
    return dense_model("llama-3.1-70b", total_params=70.6e9, num_layers=80, hidden_size=8192, num_attention_heads=64,
                       num_kv_heads=8, vocab_size=128256, max_context_tokens=131072)  # fmt: skip


def llama_2_7b() -> ModelSpec:
    return dense_model("llama-2-7b", total_params=6.74e9, num_layers=32, hidden_size=4096, num_attention_heads=32,
                       num_kv_heads=32, vocab_size=32000)  # fmt: skip


def llama_2_70b() -> ModelSpec:
    # meta-llama/Llama-2-70b-hf: 68,976,648,192 parameters by shape.
    return dense_model("llama-2-70b", total_params=68.98e9, num_layers=80, hidden_size=8192, num_attention_heads=64,
                       num_kv_heads=8, vocab_size=32000)  # fmt: skip


def opt_13b() -> ModelSpec:
    # facebook/opt-13b: tied embeddings, MHA, 2048 context.
    return dense_model("opt-13b", total_params=12.85e9, num_layers=40, hidden_size=5120, num_attention_heads=40,
                       num_kv_heads=40, vocab_size=50272, tie_word_embeddings=True, max_context_tokens=2048)  # fmt: skip


def mixtral_8x7b() -> ModelSpec:
    # mistralai/Mixtral-8x7B-v0.1: 8 experts, top-2, every layer MoE,
    # expert = 3 x 4096 x 14336 (gated MLP); 46.7e9 total, 12.9e9 active.
    shape = ArchShape(
        num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8, head_dim=128, intermediate_size=14336,
        vocab_size=32000, num_experts=8, experts_per_token=2, moe_layer_count=32, moe_intermediate_size=14336,
    )  # fmt: skip
    model = ModelSpec(slug="mixtral-8x7b", shape=shape, total_params=46.7e9, active_params=12.9e9, max_context_tokens=32768)
    assert model.params_per_expert == 3 * 4096 * 14336
    return model


def block_diffusion_8b() -> ModelSpec:
    """An 8B block-diffusion model with Llama-3.1-8B's shapes (Fast-dLLM style)."""
    return dataclasses.replace(llama_3_1_8b(), slug="bd-8b", generation_kind="block_diffusion", default_block_size=32)


def h100_sxm() -> ChipSpec:
    return ChipSpec(
        slug="nvidia-h100-sxm", kind="gpu", vendor="NVIDIA", memory_capacity_bytes=80e9, memory_bandwidth_bytes_per_s=3.35e12,
        peak_flops_per_s={"fp32": 66.9e12, "bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12, "int8": 1978.9e12},
        on_chip_sram_bytes=50e6, link_bandwidth_bytes_per_s=450e9, chips_per_node=8, tdp_watts=700,
    )  # fmt: skip


def textbook_h100() -> ChipSpec:
    """A rounded H100 for hand-checked roofline figures (docs/planner_math.md#forward-cost): 1e15 FLOP/s bf16, 3.3e12 B/s."""
    return ChipSpec(slug="textbook-h100", kind="gpu", vendor="NVIDIA", memory_capacity_bytes=80e9,
                    memory_bandwidth_bytes_per_s=3.3e12, peak_flops_per_s={"bf16": 1e15}, chips_per_node=8)  # fmt: skip


def a100_sxm_80gb() -> ChipSpec:
    return ChipSpec(
        slug="nvidia-a100-sxm-80gb", kind="gpu", vendor="NVIDIA", memory_capacity_bytes=80e9,
        memory_bandwidth_bytes_per_s=2.039e12,
        peak_flops_per_s={"fp32": 19.5e12, "bf16": 312e12, "fp16": 312e12, "int8": 624e12},
        on_chip_sram_bytes=40e6, link_bandwidth_bytes_per_s=300e9, chips_per_node=8, tdp_watts=400,
    )  # fmt: skip


def tpu_v5e() -> ChipSpec:
    # 16 GiB HBM, 819 GB/s, 197 TFLOP/s bf16; ICI 400 GB/s bidirectional.
    return ChipSpec(
        slug="google-tpu-v5e", kind="tpu", vendor="Google", memory_capacity_bytes=16 * GIB, memory_bandwidth_bytes_per_s=819e9,
        peak_flops_per_s={"bf16": 197e12, "int8": 393e12}, link_bandwidth_bytes_per_s=200e9, chips_per_node=8,
    )  # fmt: skip


def groq_lpu() -> ChipSpec:
    # 230 MB SRAM per chip and nothing else; 80 TB/s on-die.
    return ChipSpec(
        slug="groq-lpu", kind="lpu", vendor="Groq", memory_capacity_bytes=230e6, memory_bandwidth_bytes_per_s=80e12,
        peak_flops_per_s={"bf16": 188e12, "int8": 750e12}, on_chip_sram_bytes=230e6, chips_per_node=8,
    )  # fmt: skip


def epyc_9654() -> ChipSpec:
    # One socket: 12 x DDR5-4800 = 460.8 GB/s theoretical; 768 GB (12 x 64 GB).
    # Peaks derived, unverified: 96 cores x 2.4 GHz x 64 bf16 FLOP/cycle (2 x 256-bit
    # VDPBF16PS), and x 32 for fp32 FMA.
    return ChipSpec(
        slug="amd-epyc-9654", kind="cpu", vendor="AMD", memory_capacity_bytes=768e9, memory_bandwidth_bytes_per_s=460.8e9,
        peak_flops_per_s={"fp32": 7.37e12, "bf16": 14.7e12}, on_chip_sram_bytes=384e6, chips_per_node=2, tdp_watts=360,
    )  # fmt: skip


def xeon_8480plus() -> ChipSpec:
    # A Xeon 8480+ socket as the catalog lists it: AMX gives 16x the fp32 FMA rate in bf16, 32x in int8.
    return ChipSpec(slug="xeon", kind="cpu", vendor="Intel", memory_capacity_bytes=512e9, memory_bandwidth_bytes_per_s=307.2e9,
                    peak_flops_per_s={"fp32": 7.168e12, "bf16": 114.688e12, "int8": 229.376e12})  # fmt: skip


def inferentia2() -> ChipSpec:
    # Per chip: 2 NeuronCores-v2, 32 GiB HBM, 820 GiB/s, 190 TFLOP/s bf16 (aws.yaml); 12 chips in an inf2.48xlarge.
    return ChipSpec(
        slug="aws-inferentia2", kind="other", vendor="AWS", memory_capacity_bytes=32 * GIB, memory_bandwidth_bytes_per_s=820 * GIB,
        peak_flops_per_s={"fp32": 47.5e12, "bf16": 190e12, "fp16": 190e12, "int8": 380e12}, chips_per_node=12, cores=2,
    )  # fmt: skip


def h100_reserved() -> OfferingSpec:
    # AWS EC2 Capacity Blocks p5 (us-east-1), 2024: $4.916 per GPU-hour.
    return OfferingSpec(slug="aws-p5-capacity-block", pricing_model="reserved", usd_per_chip_hour=4.916)


def a100_reserved() -> OfferingSpec:
    # AWS EC2 Capacity Blocks p4d (A100-40GB), 2024: $1.844 per GPU-hour; used as a stand-in.
    return OfferingSpec(slug="aws-p4d-capacity-block", pricing_model="reserved", usd_per_chip_hour=1.844)


def h100_purchase() -> OfferingSpec:
    return OfferingSpec(slug="h100-owned", pricing_model="purchase", purchase_usd_per_chip=30000.0, amortisation_years=4.0,
                        power_usd_per_kwh=0.10, pue=1.3)  # fmt: skip
