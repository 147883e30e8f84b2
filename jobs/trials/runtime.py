"""What every trial shares: building the (maybe scaled) model, clocks that tell the truth, environment facts."""
from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from jobs.trials.costs import param_counts
from jobs.trials.memory import memory_budget_bytes, plan_layers
from jobs.trials.model import DTYPES, ModelConfig, Transformer, build_model

Progress = Callable[[float, str], None]


def no_progress(fraction: float, message: str) -> None:
    pass


def as_config(desc: ModelConfig | Mapping[str, Any]) -> ModelConfig:
    return desc if isinstance(desc, ModelConfig) else ModelConfig.from_dict(desc)


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, not {dtype!r}") from None


def dtype_name(dtype: torch.dtype) -> str:
    return {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}.get(dtype, str(dtype))


def resolve_device(device: str | torch.device) -> torch.device:
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was requested but torch.cuda.is_available() is False on this machine")
    return dev


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    from jobs.trials.device import cpu_model_name

    return cpu_model_name()


def environment(device: torch.device) -> dict[str, Any]:
    return {
        "device_type": device.type,
        "device_name": device_name(device),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "python_version": platform.python_version(),
        "cpu_threads": torch.get_num_threads(),
    }


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Clock:
    """Marks on a timeline. CUDA: events recorded on the stream (no host sync inside the timed region; read after a
    synchronize). CPU: perf_counter (CPU ops run synchronously, so the clock is read after the work is done)."""

    def __init__(self, device: torch.device, n_marks: int) -> None:
        self.cuda = device.type == "cuda"
        self.device = device
        # Created up front so the timed loop allocates nothing.
        self._events = [torch.cuda.Event(enable_timing=True) for _ in range(n_marks)] if self.cuda else []
        self._times = [0.0] * n_marks

    def mark(self, i: int) -> None:
        if self.cuda:
            self._events[i].record()
        else:
            self._times[i] = time.perf_counter()

    def seconds(self, i: int, j: int) -> float:
        """Seconds between mark i and mark j; call after synchronize()."""
        if self.cuda:
            return self._events[i].elapsed_time(self._events[j]) / 1e3
        return self._times[j] - self._times[i]


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method) without needing numpy."""
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def spread(values: list[float]) -> float:
    """(max - min) / median: 0 for one value or a perfectly steady machine."""
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if len(values) > 1 and middle > 0 else 0.0


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "p90": percentile(values, 0.9), "mean": statistics.fmean(values),
            "min": min(values), "max": max(values)}


@dataclass
class PreparedModel:
    model: Transformer
    full: ModelConfig  # the described model
    run: ModelConfig  # what was built (maybe fewer layers)
    info: dict[str, Any]  # scaled / approximations / weights, merged into every trial result


def prepare_model(desc: ModelConfig | Mapping[str, Any], *, device: torch.device, dtype: torch.dtype, batch: int,
                  max_seq: int, seed: int = 0, max_bytes: float | None = None, max_layers: int | None = None,
                  weights_path: str | None = None) -> PreparedModel:
    """Build the model, scaled down to the layers that fit (weights + static KV within the memory budget)."""
    full = as_config(desc)
    bpe = torch.empty((), dtype=dtype).element_size()
    budget, budget_source = memory_budget_bytes(device, max_bytes)
    plan = plan_layers(full, batch=batch, max_seq=max_seq, bytes_per_el=bpe, budget_bytes=budget, max_layers=max_layers)
    run = full if plan["layers_run"] == full.num_layers else full.with_layers(plan["layers_run"])
    model = build_model(run, device=device, dtype=dtype, seed=seed)
    model.setup_caches(batch, max_seq)
    info: dict[str, Any] = {
        "model": {
            "slug": full.slug,
            "params_full": param_counts(full).total,
            "params_run": param_counts(run).total,
            "layers_full": full.num_layers,
            "layers_run": run.num_layers,
        },
        "scaled": None,
        "memory_budget_bytes": budget,
        "memory_budget_source": budget_source,
        "approximations": list(full.approximations),
        "weights": "random, seed %d" % seed,
    }
    if run.num_layers < full.num_layers:
        info["scaled"] = {k: plan[k] for k in ("layers_run", "layers_full", "scale_factor", "reason")}
    if run.is_moe:
        info["approximations"].append(
            "MoE bytes use the expected experts touched under uniform routing, E*(1-(1-k/E)^tokens), not a count of "
            "the experts the random router picked"
        )
    if weights_path:
        from jobs.trials.weights import load_weights

        info["weights"] = {"path": str(weights_path), **load_weights(model, weights_path)}
    return PreparedModel(model=model, full=full, run=run, info=info)


def random_prompt(vocab_size: int, batch: int, length: int, seed: int, device: torch.device) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (batch, length), generator=gen).to(device)
