"""Which catalog chip is this? And, for a CPU the catalog does not know, a short measured probe of it.

The mapping is data (device_map.yaml), not code. An unknown device is reported as unmatched with a reason, never
matched to its nearest neighbour: a wrong chip would silently corrupt every calibration made from its trials.
"""
from __future__ import annotations

import datetime as dt
import platform
import re
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

DEVICE_MAP = Path(__file__).with_name("device_map.yaml")
CHIPS_DIR = Path(__file__).resolve().parents[2] / "hwcatalog" / "data" / "chips"


@lru_cache(maxsize=4)
def load_device_map(path: Path = DEVICE_MAP) -> tuple[tuple[re.Pattern[str], str], ...]:
    rows = yaml.safe_load(path.read_text()) or []
    return tuple((re.compile(r["pattern"], re.IGNORECASE), r["chip"]) for r in rows)


def catalog_chip_slugs(chips_dir: Path = CHIPS_DIR) -> set[str]:
    slugs: set[str] = set()
    for f in sorted(chips_dir.glob("*.yaml")) if chips_dir.is_dir() else []:
        slugs.update(r["slug"] for r in (yaml.safe_load(f.read_text()) or []) if isinstance(r, dict) and "slug" in r)
    return slugs


def match_device(device_name: str, path: Path = DEVICE_MAP) -> dict[str, Any]:
    """{"matched_chip": slug | None, "device_name", "pattern" | "reason"}."""
    for pattern, chip in load_device_map(path):
        if pattern.search(device_name):
            return {"matched_chip": chip, "device_name": device_name, "pattern": pattern.pattern}
    return {"matched_chip": None, "device_name": device_name,
            "reason": f"no entry in device_map.yaml matches {device_name!r}"}


def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def detect_device(device: str = "cpu") -> dict[str, Any]:
    """Name the device a trial would run on and match it to a catalog chip."""
    import torch

    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            return {"matched_chip": None, "device_name": None, "reason": "CUDA is not available on this machine"}
        name = torch.cuda.get_device_name(torch.device(device))
    else:
        name = cpu_model_name()
    result = match_device(name)
    result["device_type"] = "cuda" if device.startswith("cuda") else "cpu"
    if result["matched_chip"]:
        result["chip_in_catalog"] = result["matched_chip"] in catalog_chip_slugs()
    return result


def _best_rate(fn, work: float, budget_s: float, min_reps: int = 2) -> float:
    """Best of repeated runs (the least-disturbed one), work units per second, within a time budget."""
    best = 0.0
    t_end = time.perf_counter() + budget_s
    reps = 0
    while reps < min_reps or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        fn()
        t = time.perf_counter() - t0
        best = max(best, work / t)
        reps += 1
    return best


def probe_cpu(*, copy_bytes: int = 128 * 2**20, matmul_n: int = 512, budget_s: float = 1.2) -> dict[str, Any]:
    """Measured (not peak) memory bandwidth and matmul FLOP/s of this CPU with the threads torch uses. < 2 s.

    Bandwidth: copy of a `copy_bytes` fp32 tensor, counting read + write (STREAM 'copy' convention), far larger than
    any cache. FLOP/s: n x n matmul, 2n^3 FLOPs, fp32 and bf16 (None if bf16 matmul fails), through F.linear as the
    models call it: on CPUs without native bf16 a plain bf16 torch.mm can take a path 5x slower than F.linear, which
    would misstate what a trial gets. Being achieved, not datasheet, values, MBU/MFU against them can exceed 1.
    """
    import torch
    import torch.nn.functional as F

    n_el = copy_bytes // 4
    src = torch.ones(n_el, dtype=torch.float32)
    dst = torch.empty_like(src)
    dst.copy_(src)  # fault the pages in before timing
    bandwidth = _best_rate(lambda: dst.copy_(src), 2.0 * copy_bytes, budget_s * 0.4)
    del src, dst
    flops: dict[str, float | None] = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        try:
            x = torch.randn(matmul_n, matmul_n).to(dtype)
            w = torch.randn(matmul_n, matmul_n).to(dtype)
            F.linear(x, w)
            flops[name] = _best_rate(lambda: F.linear(x, w), 2.0 * matmul_n**3, budget_s * 0.3)
        except RuntimeError:
            flops[name] = None
    today = dt.date.today().isoformat()
    return {
        "device_name": cpu_model_name(),
        "measured": True,
        "memory_bandwidth_bytes_per_s": bandwidth,
        "peak_fp32_flops_per_s": flops["fp32"],
        "peak_bf16_flops_per_s": flops["bf16"],
        "threads": torch.get_num_threads(),
        "as_of": today,
        "method": (
            f"measured by probe on {today}: best-of copy of {copy_bytes >> 20} MiB fp32 (read+write bytes) and "
            f"{matmul_n}x{matmul_n} F.linear with {torch.get_num_threads()} threads; achieved, not datasheet peak"
        ),
    }


def sanitise_slug(name: str) -> str:
    s = re.sub(r"\((r|tm)\)", "", name.lower())
    s = re.sub(r"\b(cpu|processor|\d+-core)\b", "", s)
    return re.sub(r"[^a-z0-9]+", "-", s).strip("-")


def generic_cpu_chip(probe: dict[str, Any]) -> dict[str, Any]:
    """A catalog-shaped chip row from a probe, for a CPU the catalog has no row for. Values say they were measured."""
    name = probe["device_name"]
    vendor = "Intel" if "intel" in name.lower() else "AMD" if "amd" in name.lower() else None
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    except (OSError, StopIteration):
        pass
    note = probe["method"]
    return {
        "slug": f"cpu-{sanitise_slug(name)}",
        "vendor": vendor,
        "name": name,
        "kind": "cpu",
        "memory_type": None,
        "memory_capacity_bytes": mem,
        "memory_bandwidth_bytes_per_s": probe["memory_bandwidth_bytes_per_s"],
        "peak_fp32_flops_per_s": probe["peak_fp32_flops_per_s"],
        "peak_bf16_flops_per_s": probe["peak_bf16_flops_per_s"],
        "cores": None,
        "as_of": probe["as_of"],
        "sources": [note],
        "notes": f"{note}. memory_capacity_bytes is this machine's MemTotal, not the chip's maximum.",
    }
