"""Does the model fit? If not, how many of its layers do (same layer shapes, fewer of them)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from jobs.trials.costs import kv_elements_per_token, param_counts
from jobs.trials.model import ModelConfig

CPU_FRACTION = 0.5  # of MemAvailable: the worker, the OS page cache and a second trial must still fit
CUDA_FRACTION = 0.9  # of free device memory (vLLM's default gpu_memory_utilization)
ACTIVATION_SLACK = 1.25  # headroom over weights + KV for activations, logits and the allocator's fragmentation


def mem_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def memory_budget_bytes(device: torch.device, max_bytes: float | None = None) -> tuple[float, str]:
    """Bytes a trial may use on `device`, and where the figure came from."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        budget, source = free * CUDA_FRACTION, f"{CUDA_FRACTION:.0%} of torch.cuda.mem_get_info free"
    else:
        avail = mem_available_bytes()
        if avail is None:
            budget, source = 8e9, "MemAvailable unreadable; assumed 8 GB"
        else:
            budget, source = avail * CPU_FRACTION, f"{CPU_FRACTION:.0%} of MemAvailable"
    if max_bytes is not None and max_bytes < budget:
        budget, source = float(max_bytes), "max_bytes argument"
    return budget, source


def plan_layers(cfg: ModelConfig, *, batch: int, max_seq: int, bytes_per_el: float, budget_bytes: float,
                max_layers: int | None = None) -> dict[str, Any]:
    """Largest layer count n <= L whose weights + KV cache (+ slack) fit the budget.

    Returns {"layers_run", "layers_full", "scale_factor", "reason"}; raises ValueError with a sentence a person can
    act on when not even one layer fits.
    """
    c = param_counts(cfg)
    fixed = (c.embedding + c.head + cfg.hidden_size) * bytes_per_el
    kv_layer = batch * max_seq * kv_elements_per_token(cfg) / cfg.num_layers * bytes_per_el
    # Average layer (dense and MoE mixed as in the full model), so the scaled copy keeps the same mix.
    layer_params = (c.total - c.embedding - c.head - cfg.hidden_size) / cfg.num_layers
    per_layer = layer_params * bytes_per_el + kv_layer
    fits = int((budget_bytes / ACTIVATION_SLACK - fixed) // per_layer)
    n = min(cfg.num_layers, fits)
    reason = "fits"
    if max_layers is not None and max_layers < n:
        n, reason = max_layers, "max_layers argument"
    elif n < cfg.num_layers:
        reason = "memory budget"
    if n < 1:
        need = (fixed + per_layer) * ACTIVATION_SLACK
        raise ValueError(
            f"{cfg.slug or 'the model'} needs {need / 1e9:.3g} GB for its embeddings, head and one layer at batch {batch} "
            f"and {max_seq} tokens; the budget is {budget_bytes / 1e9:.3g} GB: lower the batch or the sequence length"
        )
    return {"layers_run": n, "layers_full": cfg.num_layers, "scale_factor": cfg.num_layers / n, "reason": reason}


MIN_TOKENS = 8  # the shortest prompt (and decode run) a trial shrinks to before giving up


@dataclass(frozen=True, kw_only=True)
class TrialFit:
    dtype: torch.dtype
    prompt_tokens: int
    decode_steps: int
    budget_bytes: float  # the budget the fit was checked against: build the model against the same one
    adjustments: list[str]  # what was changed from the request to fit, in words (empty: nothing)


def fit_trial(cfg: ModelConfig, *, device: torch.device, dtype: torch.dtype, batch: int, prompt_tokens: int, decode_steps: int,
              reserved_tokens: int = 0, max_bytes: float | None = None, max_layers: int | None = None) -> TrialFit:  # fmt: skip
    """The trial as asked when one layer of it fits the memory budget; otherwise the same trial at half precision
    (bf16 for fp32), then with the prompt and the decode run halved in turn down to MIN_TOKENS each, before giving
    up with plan_layers' sentence (issue 14: a 70B model's embeddings and head alone outgrow an fp32 budget on a
    24 GB machine, while the bf16 copy of the same two layers fits). Layers are scaled down by plan_layers itself.
    `reserved_tokens` are cache positions the trial needs beyond prompt + decode (a block-diffusion block)."""
    budget, source = memory_budget_bytes(device, max_bytes)
    adjustments: list[str] = []

    def fits(dt: torch.dtype, prompt: int, steps: int) -> bool:
        try:
            plan_layers(cfg, batch=batch, max_seq=prompt + steps + reserved_tokens, budget_bytes=budget, max_layers=max_layers,
                        bytes_per_el=torch.empty((), dtype=dt).element_size())  # fmt: skip
        except ValueError:
            return False
        return True

    if not fits(dtype, prompt_tokens, decode_steps) and dtype == torch.float32:
        adjustments.append(f"fp32 did not fit the memory budget ({budget / 1e9:.3g} GB, {source}): ran bf16")
        dtype = torch.bfloat16
    asked = (prompt_tokens, decode_steps)
    while not fits(dtype, prompt_tokens, decode_steps) and max(prompt_tokens, decode_steps) > MIN_TOKENS:
        if prompt_tokens >= decode_steps:
            prompt_tokens = max(MIN_TOKENS, prompt_tokens // 2)
        else:
            decode_steps = max(MIN_TOKENS, decode_steps // 2)
    if (prompt_tokens, decode_steps) != asked:
        adjustments.append(f"a {asked[0]}-token prompt and {asked[1]} new tokens did not fit: ran {prompt_tokens} and {decode_steps}")
    return TrialFit(dtype=dtype, prompt_tokens=prompt_tokens, decode_steps=decode_steps, budget_bytes=budget, adjustments=adjustments)
