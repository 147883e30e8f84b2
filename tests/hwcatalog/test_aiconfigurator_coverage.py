"""The catalog resolves every model and system NVIDIA AIConfigurator ships (github.com/ai-dynamo/aiconfigurator,
aic-core/src/aiconfigurator_core/model_configs/ and systems/*.yaml at 095f58a51c4ca8e61b66ec108d86f223f8d559ce):
a measured row of its silicon format names its model by Hugging Face repository and its system by name, and the
planner must find both (issue 11: predicts every row)."""

from __future__ import annotations

import pytest

from hwcatalog.models import Chip, ModelArch
from planner.accuracy import _by_name

AICONFIGURATOR_MODELS = (
    "MiniMaxAI/MiniMax-M2.5", "MiniMaxAI/MiniMax-M2.7", "MiniMaxAI/MiniMax-M3", "Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B",
    "Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B-FP8", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B-FP8", "Qwen/Qwen3-32B",
    "Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-32B-FP8-Static-PerTensor", "Qwen/Qwen3-8B", "Qwen/Qwen3-Coder-480B-A35B-Instruct",
    "Qwen/Qwen3-VL-235B-A22B-Instruct", "Qwen/Qwen3-VL-2B-Instruct", "Qwen/Qwen3-VL-30B-A3B-Instruct",
    "Qwen/Qwen3-VL-32B-Instruct", "Qwen/Qwen3-VL-32B-Thinking", "Qwen/Qwen3-VL-4B-Instruct", "Qwen/Qwen3-VL-8B-Instruct",
    "Qwen/Qwen3.5-122B-A10B", "Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.5-397B-A17B",
    "XiaomiMiMo/MiMo-7B-Base", "XiaomiMiMo/MiMo-V2-Flash", "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-V3.2", "deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Pro", "google/gemma-4-26B-A4B",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct", "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "meta-llama/Meta-Llama-3.1-405B", "meta-llama/Meta-Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-8B",
    "mistralai/Mixtral-8x22B-v0.1", "mistralai/Mixtral-8x7B-v0.1", "moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2.5",
    "moonshotai/Kimi-K3", "nvidia/DeepSeek-V3.1-NVFP4", "nvidia/DeepSeek-V3.2-NVFP4", "nvidia/DeepSeek-V4-Flash-NVFP4",
    "nvidia/DeepSeek-V4-Pro-NVFP4", "nvidia/GLM-5-NVFP4", "nvidia/GLM-5.1-NVFP4", "nvidia/GLM-5.2-NVFP4",
    "nvidia/Gemma-4-26B-A4B-NVFP4", "nvidia/Gemma-4-31B-IT-NVFP4", "nvidia/Kimi-K2.5-NVFP4", "nvidia/Kimi-K2.6-NVFP4",
    "nvidia/Kimi-K2.7-Code-NVFP4", "nvidia/Llama-3.1-70B-Instruct-FP8", "nvidia/Llama-3_3-Nemotron-Super-49B-v1",
    "nvidia/MiniMax-M2.5-NVFP4", "nvidia/MiniMax-M2.7-NVFP4", "nvidia/MiniMax-M3-NVFP4",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4",
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8",
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4", "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4",
    "nvidia/Nemotron-H-56B-Base-8K", "nvidia/Qwen3-235B-A22B-NVFP4", "nvidia/Qwen3.5-122B-A10B-NVFP4",
    "nvidia/Qwen3.5-397B-A17B-NVFP4", "nvidia/Qwen3.6-27B-NVFP4", "nvidia/Qwen3.6-35B-A3B-NVFP4", "openai/gpt-oss-120b",
    "openai/gpt-oss-20b", "sgl-project/DeepSeek-V4-Flash-FP8", "sgl-project/DeepSeek-V4-Pro-FP8",
    "stepfun-ai/Step-3.7-Flash", "stepfun-ai/Step-3.7-Flash-FP8", "zai-org/GLM-5", "zai-org/GLM-5-FP8", "zai-org/GLM-5.1",
    "zai-org/GLM-5.1-FP8", "zai-org/GLM-5.2", "zai-org/GLM-5.2-FP8",
)
AICONFIGURATOR_SYSTEMS = (
    "a100_pcie", "a100_sxm", "a30", "b200_sxm", "b300_sxm", "b60", "gb200", "gb300", "h100_pcie", "h100_sxm", "h200_sxm", "l4",
    "l40s", "rtx_pro_6000_server",
)


def test_every_aiconfigurator_model_id_names_a_catalog_model(catalog):
    models = _by_name(ModelArch.objects.all(), "hf_id", "hf_aliases")
    assert [name for name in AICONFIGURATOR_MODELS if name not in models] == []


def test_every_aiconfigurator_system_names_a_catalog_chip(catalog):
    chips = _by_name(Chip.objects.all(), "aliases")
    assert [name for name in AICONFIGURATOR_SYSTEMS if name not in chips] == []


@pytest.mark.parametrize(("name", "slug"), [
    ("nvidia/Qwen3-235B-A22B-NVFP4", "qwen3-235b-a22b"), ("meta-llama/Meta-Llama-3.1-405B", "llama-3.1-405b"),
    ("sgl-project/DeepSeek-V4-Pro-FP8", "deepseek-v4-pro"), ("nvidia/GLM-5.1-NVFP4", "glm-5.1"),
])  # fmt: skip
def test_a_pre_quantised_checkpoint_finds_the_architecture_it_quantises(catalog, name, slug):
    assert _by_name(ModelArch.objects.all(), "hf_id", "hf_aliases")[name].slug == slug


def test_every_amd_instinct_gpu_answers_to_its_short_name(catalog):
    chips = _by_name(Chip.objects.all(), "aliases")
    for short in ("mi210", "mi250x", "mi300x", "mi325x", "mi355x"):
        assert chips[short].slug == f"amd-{short}"
