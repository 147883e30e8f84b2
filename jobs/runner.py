"""The torch side of a validation run: detect the device, match it to a catalog chip, run the
trial. Imported only inside the worker task (jobs.services.validation_run_execute)."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from hwcatalog import services as catalog_services
from hwcatalog.architecture import ArchShape
from hwcatalog.models import Chip, ModelArch
from jobs.models import ValidationRun
from jobs.trials.block_diffusion import run_block_diffusion_trial
from jobs.trials.decode import DEFAULT_REPETITIONS, run_decode_trial
from jobs.trials.device import detect_device, generic_cpu_chip, probe_cpu
from jobs.trials.speculative import run_speculative_trial
from jobs.trials.tiny_pair import train_tiny_pair

# Best of 3 unless the run asks otherwise: a tiny pair's runs take milliseconds, and one on a busy CPU can be off
# several times over.
SPECULATIVE_REPEATS = 3
ARCH_FIELDS = [*ArchShape.__dataclass_fields__, "slug", "generation_kind", "default_block_size", "max_context_tokens"]


@dataclass(frozen=True)
class Outcome:
    measured: dict[str, Any]
    chip: Chip | None
    device_name: str | None
    environment: dict[str, Any]
    layers_run: int | None


def model_description(model: ModelArch) -> dict[str, Any]:
    return {name: getattr(model, name) for name in ARCH_FIELDS}


def _chip_for(device: str) -> tuple[Chip | None, dict[str, Any]]:
    """The catalog chip this worker's device is; a CPU the catalog lacks gets a measured row."""
    info = detect_device(device)
    slug = info.get("matched_chip")
    chip = Chip.objects.filter(slug=slug).first() if slug else None
    if (chip is None or chip.measured) and device == "cpu":
        probe = probe_cpu()
        chip = catalog_services.measured_device_record(values=generic_cpu_chip(probe))
        info = {**info, "probe": probe, "matched_chip": chip.slug, "matched_by": "measured probe (the best of this device's probes)"}
    return chip, info


def _peaks(chip: Chip | None, dtype: str) -> tuple[float | None, float | None]:
    if chip is None:
        return None, None
    peaks = chip.peak_flops_per_s()
    return chip.memory_bandwidth_bytes_per_s, peaks.get(dtype) or peaks.get("fp32")


def _mfu_for_dtype_run(result: dict[str, Any], chip: Chip | None, *, asked: str) -> None:
    """A trial fitted to memory in another dtype than asked (bf16 for fp32) is measured against that dtype's
    peak: its MFU figures (the whole-window comparison's too) are recomputed in place."""
    if result.get("dtype") in (None, asked):
        return
    _bandwidth, flops = _peaks(chip, result["dtype"])
    for part in (result, *(v for v in result.values() if isinstance(v, dict) and "achieved_flops_per_s" in v)):
        part["peak_flops_per_s"] = flops
        part["mfu"] = part["achieved_flops_per_s"] / flops if flops else None
        if "prefill_achieved_flops_per_s" in part:
            part["prefill_mfu"] = part["prefill_achieved_flops_per_s"] / flops if flops else None


def _decode(run: ValidationRun, model: ModelArch, device: str, chip: Chip | None, progress) -> dict[str, Any]:
    p = run.params
    bandwidth, flops = _peaks(chip, p["dtype"])
    r = run_decode_trial(
        model_description(model), device=device, dtype=p["dtype"], batch=p["batch"], prompt_tokens=p["prompt_tokens"],
        decode_steps=p["decode_steps"], compile=p.get("compile"), peak_bandwidth_bytes_per_s=bandwidth, peak_flops_per_s=flops,
        max_layers=p.get("max_layers"), repetitions=p.get("repetitions", DEFAULT_REPETITIONS), progress=progress,
    )  # fmt: skip
    _mfu_for_dtype_run(r, chip, asked=p["dtype"])
    return {**r, "tokens_per_s_per_user": r["tokens_per_s_per_sequence"], "output_tokens_per_s_total": r["tokens_per_s_total"]}


def _speculative(run: ValidationRun, model: ModelArch, device: str, progress) -> dict[str, Any]:
    """The tiny trained pair: random weights say nothing about acceptance (the result says which pair ran)."""
    p = run.params
    progress(0.05, "training the tiny target/draft pair on the synthetic corpus")
    pair = train_tiny_pair(seconds_budget=20.0)
    r = run_speculative_trial(
        target=pair.target, draft=pair.draft, prompt=pair.corpus.prompt(16), device=device, dtype="fp32",
        new_tokens=min(p["decode_steps"], 64), k=p.get("draft_tokens", 4), repeats=p.get("repetitions") or SPECULATIVE_REPEATS,
        progress=progress,
    )  # fmt: skip
    return {**r, "note": f"acceptance measured on the tiny trained pair, not on {model.slug} (random weights would say nothing)"}


def _block_diffusion(run: ValidationRun, model: ModelArch, device: str, chip: Chip | None, progress) -> dict[str, Any]:
    p = run.params
    _bandwidth, flops = _peaks(chip, p["dtype"])
    r = run_block_diffusion_trial(
        model_description(model), device=device, dtype=p["dtype"], batch=p["batch"], prompt_tokens=p["prompt_tokens"],
        gen_length=p["decode_steps"], block_size=p.get("block_size"), steps=p.get("steps"), threshold=p.get("threshold"),
        peak_flops_per_s=flops, max_layers=p.get("max_layers"), progress=progress,
    )  # fmt: skip
    _mfu_for_dtype_run(r, chip, asked=p["dtype"])
    return r


def run_trial(*, run: ValidationRun, progress) -> Outcome:
    # PyTorch's ROCm build drives AMD GPUs through the same torch.cuda API.
    device = "cuda" if run.queue in (ValidationRun.Queue.GPU, ValidationRun.Queue.ROCM) else "cpu"
    progress(0.0, f"detecting the {device} device")
    chip, info = _chip_for(device)
    model = ModelArch.objects.get(slug=run.model_slug)
    if run.trial == ValidationRun.Trial.DECODE:
        measured = _decode(run, model, device, chip, progress)
    elif run.trial == ValidationRun.Trial.SPECULATIVE:
        measured = _speculative(run, model, device, progress)
    else:
        measured = _block_diffusion(run, model, device, chip, progress)
    scaled = measured.get("scaled") or {}
    environment = {key: measured.get(key) for key in ("device_type", "device_name", "torch_version", "cuda_version", "driver_version",
                                                       "python_version", "platform", "compile_used", "cuda_graphs_used")}  # fmt: skip
    environment["device_match"] = {k: v for k, v in info.items() if k != "probe"}
    environment["measured_at"] = dt.datetime.now(dt.timezone.utc).isoformat()
    return Outcome(measured=measured, chip=chip, device_name=measured.get("device_name") or info.get("device_name"),
                   environment=environment, layers_run=scaled.get("layers_run"))  # fmt: skip
