from __future__ import annotations

import pytest
from django.core.management import call_command

from hwcatalog.models import Chip, ModelArch, Offering
from hwcatalog.services import catalog_load

REQUIRED_CHIPS = {
    "intel-xeon-8480plus", "amd-epyc-9654", "apple-m2-ultra", "apple-m3-max", "nvidia-a100-sxm-80gb", "nvidia-h100-sxm",
    "nvidia-h100-pcie", "nvidia-h200-sxm", "nvidia-b200", "nvidia-l4", "nvidia-l40s", "amd-mi300x", "amd-mi325x",
    "google-tpu-v4", "google-tpu-v5e", "google-tpu-v5p", "google-tpu-v6e", "intel-gaudi2", "intel-gaudi3",
    "aws-inferentia2", "aws-trainium", "groq-lpu",
    # issue 12: the chips it names, and others users still run or buy
    "nvidia-h200-nvl", "amd-epyc-9965", "amd-epyc-9755", "nvidia-grace-cpu-superchip", "sambanova-sn40l", "nvidia-a40",
    "nvidia-l40", "nvidia-rtx-6000-ada", "nvidia-rtx-3090", "amd-mi210", "google-tpu-v3", "qualcomm-cloud-ai-100-ultra",
    "tenstorrent-wormhole-n300", "tenstorrent-blackhole-p150",
    # every system NVIDIA AIConfigurator models (its systems/*.yaml at 095f58a)
    "nvidia-a30", "nvidia-a100-pcie-80gb", "nvidia-b300", "nvidia-gb200", "nvidia-gb300", "intel-arc-pro-b60",
    "nvidia-rtx-pro-6000-blackwell",
}
MIN_CHIPS = 60  # issue 12
REQUIRED_MODELS = {
    "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.3-70b", "llama-3.1-405b",
    "llama-3.2-1b", "llama-3.2-3b", "mixtral-8x7b", "deepseek-v3", "qwen2.5-7b", "qwen2.5-72b", "gpt-j-6b", "opt-13b",
    "llada-8b", "llada-moe-7b-a1b", "fast-dllm-v2-7b",
    "qwen2.5-3b", "qwen2.5-14b", "qwen2.5-32b", "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b",
    "qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-coder-480b-a35b", "mixtral-8x22b", "gpt-oss-20b", "gpt-oss-120b", "kimi-k2",
    "llama-4-scout", "llama-4-maverick",
    # the catalog issue's further models, each from its real config.json
    "deepseek-v3.2", "phi-4", "qwen3-next-80b-a3b", "qwen3.5-397b-a17b", "qwen3.5-122b-a10b", "qwen3.5-35b-a3b", "glm-4.7-flash",
    "gemma-3-4b", "dream-7b", "sdar-8b-chat",
    # AIConfigurator's further models (model_configs/ at 095f58a), each from its config.json
    "qwen3.6-35b-a3b", "qwen3-vl-2b", "glm-5.1", "glm-5.2", "nemotron-3-super-120b-a12b", "nemotron-3-ultra-550b-a55b",
    "nemotron-3.5-lightning-30b-a3b-nvfp4", "llama-3.3-nemotron-super-49b-v1", "minimax-m3", "step-3.7-flash", "mimo-7b",
    "mimo-v2-flash", "gemma-4-26b-a4b", "gemma-4-31b", "deepseek-v4-flash", "deepseek-v4-pro", "kimi-k3", "kimi-k2.7-code",
}


def test_loading_creates_every_required_chip_and_model(catalog):
    assert REQUIRED_CHIPS <= set(Chip.objects.values_list("slug", flat=True))
    assert REQUIRED_MODELS <= set(ModelArch.objects.values_list("slug", flat=True))
    assert {"cpu", "gpu", "tpu", "lpu", "other"} <= set(Chip.objects.values_list("kind", flat=True))


def test_the_catalog_holds_at_least_sixty_chips_each_with_a_source_a_peak_memory_and_bandwidth(catalog):
    chips = list(Chip.objects.all())
    assert len(chips) >= MIN_CHIPS, f"{len(chips)} chips; issue 12 asks for at least {MIN_CHIPS}"
    peaks = ("peak_fp32_flops_per_s", "peak_bf16_flops_per_s", "peak_fp16_flops_per_s", "peak_fp8_flops_per_s",
             "peak_int8_flops_per_s", "peak_int4_flops_per_s", "peak_fp4_flops_per_s")
    for chip in chips:
        assert chip.sources and all(s.strip() for s in chip.sources), chip.slug
        assert chip.as_of and chip.memory_capacity_bytes > 0 and chip.memory_bandwidth_bytes_per_s > 0, chip.slug
        assert any(getattr(chip, key) for key in peaks), chip.slug
        assert chip.tdp_watts is None or chip.tdp_watts > 0, chip.slug
        if chip.kind == "cpu":
            assert chip.cores, chip.slug


def test_aliases_name_one_chip_each(catalog):
    owner = {}
    for slug, aliases in Chip.objects.values_list("slug", "aliases"):
        for alias in aliases or []:
            assert alias not in owner, f"alias {alias} names both {owner[alias]} and {slug}"
            owner[alias] = slug


def test_a_second_load_changes_nothing_and_says_so(catalog, capsys):
    again = catalog_load()
    assert not again.changed
    assert again.unchanged and "already up to date" in again.summary()
    call_command("loadcatalog")
    assert "already up to date" in capsys.readouterr().out


def test_load_restores_an_edited_row(catalog):
    Chip.objects.filter(slug="nvidia-h100-sxm").update(tdp_watts=1.0)
    report = catalog_load()
    assert report.updated == ["chip nvidia-h100-sxm"]
    assert Chip.objects.get(slug="nvidia-h100-sxm").tdp_watts != 1.0


def test_every_chip_model_and_offering_has_a_source_and_a_date(catalog):
    for row in [*Chip.objects.all(), *ModelArch.objects.all()]:
        assert row.sources and all(s.strip() for s in row.sources), row.slug
        assert row.as_of, row.slug
    for offering in Offering.objects.all():
        assert offering.source.strip() and offering.as_of, offering.slug


def test_every_chip_names_its_compute_architecture_and_a_source_says_it(catalog):
    for chip in Chip.objects.filter(measured=False):
        assert chip.architecture.strip(), chip.slug
        words = chip.architecture.replace("(", " ").replace(")", " ").split()
        assert any(any(w.lower() in source.lower() for w in words) for source in chip.sources), chip.slug


# GPUs and TPUs with no public hourly price found (searched 2026-12-01): plans show their speed and no cost.
NO_PUBLIC_HOURLY_PRICE = {
    "nvidia-gb10": "DGX Spark, a desktop machine: sold, not rented",
    "intel-arc-pro-b60": "a workstation card: sold, not rented",
    "nvidia-gb300": "CoreWeave and SF Compute quote GB300 NVL72 by contact only",
    "nvidia-h20": "a China-market part; no provider publishes a rate",
    "amd-mi355x": "neoclouds quote it by contact; no per-GPU-hour rate published",
    "amd-mi250x": "no current public listing",
    "google-tpu-v7": "Ironwood (TPU7x): no published per-chip-hour rate on the Cloud TPU pricing page yet",
    "nvidia-h200-nvl": "no dated per-GPU-hour rate found for the PCIe H200 NVL in the providers' pages searched",
    "nvidia-rtx-6000-ada": "no dated per-GPU-hour rate found in the providers' pages searched",
    "amd-mi210": "no current public listing found",
    "google-tpu-v3": "no dated per-chip-hour rate found in the pricing pages searched",
    "nvidia-a30": "no dated per-GPU-hour rate found in the providers' pages searched",
}


def test_every_rented_accelerator_has_a_dated_price(catalog):
    rented_kinds = {"gpu", "tpu"}
    for chip in Chip.objects.filter(kind__in=rented_kinds):
        hourly = chip.offerings.exclude(pricing_model="purchase").exists()
        if chip.slug in NO_PUBLIC_HOURLY_PRICE:
            assert not hourly, f"{chip.slug} has an hourly price now: take it off NO_PUBLIC_HOURLY_PRICE"
        else:
            assert hourly, f"{chip.slug} has no hourly price"


# Chips sold several to a node whose chip-to-chip link rate no source found (searched 2026-12-05). Tensor parallelism
# over them falls back to PCIe Gen4 x16 (planner/engine/hardware.py), which the planner's answers then assume.
NO_SOURCED_LINK = {
    "amd-epyc-9965": "Turin's socket-to-socket xGMI rate: no source gives it (Genoa's is not copied)",
    "amd-epyc-9755": "Turin's socket-to-socket xGMI rate: no source gives it",
    "amd-epyc-9175f": "Turin's socket-to-socket xGMI rate: no source gives it",
    "sambanova-sn40l": "SambaNova publishes no RDU-to-RDU link rate",
}


def test_every_chip_sold_several_to_a_node_has_a_sourced_link_rate(catalog):
    for chip in Chip.objects.filter(chips_per_node__gt=1):
        if chip.slug in NO_SOURCED_LINK:
            assert chip.link_bandwidth_bytes_per_s is None, f"{chip.slug} has a link rate now: take it off NO_SOURCED_LINK"
        else:
            assert chip.link_bandwidth_bytes_per_s, f"{chip.slug}: {chip.chips_per_node} a node and no link rate"


@pytest.mark.parametrize("slug", sorted(REQUIRED_MODELS))
def test_shape_derived_parameter_count_is_within_two_percent_of_the_published_count(catalog, slug):
    model = ModelArch.objects.get(slug=slug)
    assert model.parameter_count() == pytest.approx(model.total_params, rel=0.02)
    if model.active_params:
        assert model.active_parameter_count() == pytest.approx(model.active_params, rel=0.02)


def test_published_kv_checks_hold_for_the_catalog_rows(catalog):
    assert ModelArch.objects.get(slug="llama-2-70b").kv_cache_bytes_per_token("bf16") == 327_680
    assert ModelArch.objects.get(slug="opt-13b").kv_cache_bytes_per_token("fp16") == 819_200
    assert ModelArch.objects.get(slug="llama-3.1-8b").parameter_count() == pytest.approx(8.03e9, rel=0.01)


def test_a_chip_named_as_another_chip_is_named_loads_nothing(db, tmp_path):
    for folder in ("chips", "models", "offerings"):
        (tmp_path / folder).mkdir()
    row = ("kind: gpu, memory_capacity_bytes: 1.0e+9, memory_bandwidth_bytes_per_s: 1.0e+9, peak_bf16_flops_per_s: 1.0e+12, "
           "as_of: 2024-01-01, sources: [x]")  # fmt: skip
    (tmp_path / "chips" / "x.yaml").write_text(
        f"- {{slug: one-chip, vendor: X, name: One, aliases: [one], {row}}}\n"
        f"- {{slug: two-chip, vendor: X, name: Two, aliases: [ONE], {row}}}\n"  # the first chip's alias, case aside
    )
    with pytest.raises(Exception, match="aliases"):
        catalog_load(data_dir=tmp_path)
    assert not Chip.objects.exists()


def test_a_bad_data_file_loads_nothing(db, tmp_path):
    for folder in ("chips", "models", "offerings"):
        (tmp_path / folder).mkdir()
    (tmp_path / "chips" / "x.yaml").write_text(
        "- {slug: good-chip, vendor: X, name: Good, kind: gpu, memory_capacity_bytes: 1.0e+9, memory_bandwidth_bytes_per_s: 1.0e+9,"
        " peak_bf16_flops_per_s: 1.0e+12, as_of: 2024-01-01, sources: [x]}\n"
        "- {slug: bad-chip, vendor: X, name: Bad, kind: gpu, memory_capacity_bytes: 1.0e+9, memory_bandwidth_bytes_per_s: 0,"
        " peak_bf16_flops_per_s: 1.0e+12, as_of: 2024-01-01, sources: [x]}\n"
    )
    with pytest.raises(Exception, match="memory_bandwidth_bytes_per_s"):
        catalog_load(data_dir=tmp_path)
    assert not Chip.objects.exists()
