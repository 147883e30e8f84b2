from __future__ import annotations

import pytest

from jobs.trials.device import generic_cpu_chip, match_device, probe_cpu


@pytest.mark.parametrize(
    "name, slug",
    [
        ("NVIDIA A100-SXM4-80GB", "nvidia-a100-sxm-80gb"),
        ("NVIDIA H100 80GB HBM3", "nvidia-h100-sxm"),
        ("NVIDIA H100 PCIe", "nvidia-h100-pcie"),
        ("NVIDIA H100 NVL", "nvidia-h100-nvl"),
        ("NVIDIA H200", "nvidia-h200-sxm"),
        ("NVIDIA B200", "nvidia-b200"),
        ("NVIDIA L4", "nvidia-l4"),
        ("NVIDIA L40S", "nvidia-l40s"),
        ("AMD Instinct MI300X", "amd-mi300x"),
        ("Intel(R) Xeon(R) Platinum 8480+", "intel-xeon-8480plus"),
        ("AMD EPYC 9654 96-Core Processor", "amd-epyc-9654"),
    ],
)
def test_a_known_device_name_maps_to_its_chip(name, slug):
    assert match_device(name)["matched_chip"] == slug


@pytest.mark.parametrize("name", ["NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-40GB", "NVIDIA L40", "NVIDIA H200 NVL",
                                  "AMD EPYC", "Intel(R) Xeon(R) Platinum 8480C", "Apple M2"])
def test_an_unknown_device_is_unmatched_with_a_reason(name):
    r = match_device(name)
    assert r["matched_chip"] is None and r["device_name"] == name and "device_map.yaml" in r["reason"]


def test_the_cpu_probe_measures_positive_bandwidth_and_flops():
    probe = probe_cpu(copy_bytes=32 * 2**20, matmul_n=256, budget_s=0.5)
    assert probe["measured"] is True and probe["memory_bandwidth_bytes_per_s"] > 1e8
    assert probe["peak_fp32_flops_per_s"] > 1e8
    assert probe["peak_bf16_flops_per_s"] is None or probe["peak_bf16_flops_per_s"] > 0
    chip = generic_cpu_chip(probe)
    assert chip["slug"].startswith("cpu-") and chip["kind"] == "cpu" and "measured by probe on" in chip["sources"][0]
