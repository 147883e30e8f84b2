"""Decode trial: prefill P tokens, then N greedy decode steps at batch b with the static KV cache.

Timing is honest in the gpt-fast sense: a warm-up prefill and a few steps run first (and compile/capture the step),
the cache is reset, and only then is the clock read; on CUDA with events recorded on the stream, read after a
synchronize. The progress callback is never called inside a timed region (a callback that writes a database would
stall the host and, with it, the GPU).
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from jobs.trials.costs import decode_step_bytes, forward_flops, weight_bytes_touched
from jobs.trials.memory import fit_trial
from jobs.trials.model import ModelConfig, Transformer, argmax_token
from jobs.trials.runtime import (
    Clock,
    as_config,
    Progress,
    dtype_name,
    environment,
    no_progress,
    prepare_model,
    random_prompt,
    resolve_device,
    resolve_dtype,
    spread,
    summary,
    synchronize,
)

StepFn = Callable[[Transformer, Tensor, Tensor], Tensor]
DEFAULT_REPETITIONS = 5  # timed repetitions after the warm-up (issue 14: a calibration learns only from steady runs)


def prefill(model: Transformer, idx: Tensor, input_pos: Tensor) -> Tensor:
    """idx: [B, P]; input_pos: [P]. Fills the cache, returns the first generated token [B, 1]."""
    return argmax_token(model(idx, input_pos, last_only=True))


def decode_one_token(model: Transformer, cur: Tensor, input_pos: Tensor) -> Tensor:
    """cur: [B, 1]; input_pos: [1]. Static shapes only, so torch.compile can capture it in a CUDA graph."""
    return argmax_token(model(cur, input_pos))


def decode_n_tokens(model: Transformer, cur: Tensor, input_pos: Tensor, n: int, step: StepFn = decode_one_token,
                    clock: Clock | None = None, out: Tensor | None = None) -> Tensor:
    """n greedy steps from token `cur` at position `input_pos` (advanced in place). Returns the tokens [B, n].

    With a clock, mark i is taken before step i and mark n after the last one. `out` may be preallocated so the
    loop allocates nothing on the host side.
    """
    out = torch.empty(cur.shape[0], n, dtype=torch.long, device=cur.device) if out is None else out
    cur = cur.clone()  # one static input buffer: the same tensor every step, so a captured graph sees one address
    if clock:
        clock.mark(0)
    for i in range(n):
        nxt = step(model, cur, input_pos)
        # A CUDA-graph output is overwritten by the next replay: copy it out before the next step (gpt-fast clones).
        out[:, i : i + 1].copy_(nxt)
        cur.copy_(nxt)
        input_pos += 1
        if clock:
            clock.mark(i + 1)
    return out


def _compiled_step(device: torch.device, want: bool) -> tuple[StepFn, dict[str, Any]]:
    info: dict[str, Any] = {"requested": want, "used": False, "mode": None, "cuda_graphs": False, "error": None}
    if not want:
        return decode_one_token, info
    if not hasattr(torch, "compile"):
        info["error"] = "torch.compile is not available in this torch"
        return decode_one_token, info
    info["mode"] = "reduce-overhead"
    return torch.compile(decode_one_token, mode="reduce-overhead", fullgraph=True), info


def _mark_static_caches(model: Transformer) -> None:
    """Tell dynamo the KV buffers keep their address, so CUDA-graph capture treats them as static inputs (they are
    mutated in place every step; an input it had to copy in and out would cost a cache-sized copy per step)."""
    for layer in model.layers:
        cache = layer.attention.kv_cache
        if cache is not None:
            torch._dynamo.mark_static_address(cache.k_cache)
            torch._dynamo.mark_static_address(cache.v_cache)


def _cudagraph_skips() -> int:
    try:
        from torch._dynamo.utils import counters

        return int(sum(counters["inductor"].get(k, 0) for k in ("cudagraph_skips",)))
    except Exception:  # private API: absent counters just mean we cannot tell
        return 0


def greedy_generate(model: Transformer, prompt: Tensor, n_new: int, step: StepFn = decode_one_token) -> Tensor:
    """Plain greedy decoding with the static cache: the reference the speculative trial must reproduce. [B, n_new]."""
    P = prompt.shape[1]
    model.reset_caches()
    first = prefill(model, prompt, torch.arange(P, device=prompt.device))
    if n_new == 1:
        return first
    rest = decode_n_tokens(model, first, torch.tensor([P], device=prompt.device), n_new - 1, step)
    return torch.cat([first, rest], dim=1)


def run_decode_trial(
    model_desc: ModelConfig | Mapping[str, Any],
    *,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "bf16",
    batch: int = 1,
    prompt_tokens: int = 128,
    decode_steps: int = 128,
    warmup_steps: int | None = None,
    compile: bool | None = None,
    peak_bandwidth_bytes_per_s: float | None = None,
    peak_flops_per_s: float | None = None,
    max_bytes: float | None = None,
    max_layers: int | None = None,
    weights_path: str | None = None,
    seed: int = 0,
    repetitions: int = DEFAULT_REPETITIONS,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Measure TTFT and TPOT of `model_desc` (a catalog ModelArch dict or ModelConfig); see the module docstring.

    After the warm-up, the prefill and the decode steps are timed `repetitions` times (the cache reset in
    between): TTFT and TPOT are the medians over the repetitions (each repetition's TPOT the median of its
    steps), and their spread, (max - min) / median over the repetitions, says how steady the machine was
    (a calibration leaves out a run whose spread is too large).

    Returns a JSON-serialisable dict; MBU/MFU are None when the corresponding peak is None.
    """
    progress = progress or no_progress
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    use_compile = (dev.type == "cuda") if compile is None else compile
    warmup_steps = (8 if use_compile else 3) if warmup_steps is None else warmup_steps
    fit = fit_trial(as_config(model_desc), device=dev, dtype=dt, batch=batch, prompt_tokens=prompt_tokens,
                    decode_steps=decode_steps, max_bytes=max_bytes, max_layers=max_layers)  # fmt: skip
    dt, prompt_tokens, decode_steps = fit.dtype, fit.prompt_tokens, fit.decode_steps
    max_seq = prompt_tokens + decode_steps
    progress(0.0, "building the model" + (f" ({'; '.join(fit.adjustments)})" if fit.adjustments else ""))
    pm = prepare_model(model_desc, device=dev, dtype=dt, batch=batch, max_seq=max_seq, seed=seed,
                       max_bytes=fit.budget_bytes, max_layers=max_layers, weights_path=weights_path)
    model, cfg = pm.model, pm.run
    prompt = random_prompt(cfg.vocab_size, batch, prompt_tokens, seed, dev)
    prompt_pos = torch.arange(prompt_tokens, device=dev)
    step, compile_info = _compiled_step(dev, use_compile)
    if compile_info["mode"] and dev.type == "cuda":
        _mark_static_caches(model)
    skips_before = _cudagraph_skips()

    progress(0.1, "warm-up" + (" and compiling the decode step" if use_compile else ""))
    # no_grad rather than inference_mode: inference tensors and torch.compile/CUDA-graph capture do not always mix.
    with torch.no_grad():
        cur = prefill(model, prompt, prompt_pos)
        n_warm = max(1, min(warmup_steps, decode_steps))
        try:
            decode_n_tokens(model, cur, torch.tensor([prompt_tokens], device=dev), n_warm, step)
            compile_info["used"] = use_compile
        except Exception as exc:  # a compile failure must not lose the trial: fall back to eager and say so
            if not use_compile:
                raise
            compile_info["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
            step = decode_one_token
            decode_n_tokens(model, cur, torch.tensor([prompt_tokens], device=dev), n_warm, step)
        compile_info["cuda_graphs"] = bool(compile_info["used"] and dev.type == "cuda")
        if compile_info["cuda_graphs"] and _cudagraph_skips() > skips_before:
            # Inductor compiled the step but declined to capture it (it logs why); the timings are without graphs.
            compile_info["cuda_graphs"] = False
            compile_info["error"] = "inductor skipped CUDA graph capture (see the torch log with TORCH_LOGS=perf_hints)"
        model.reset_caches()
        synchronize(dev)

        ttfts, rep_tpots, rep_decode_times = [], [], []
        for rep in range(repetitions):
            if rep:
                model.reset_caches()
                synchronize(dev)
            progress(0.4 + 0.5 * rep / repetitions, f"repetition {rep + 1} of {repetitions}: prefill of {prompt_tokens} tokens at batch "
                     f"{batch}, then {decode_steps} decode steps")  # fmt: skip
            pclock = Clock(dev, 2)
            pclock.mark(0)
            cur = prefill(model, prompt, prompt_pos)
            pclock.mark(1)
            synchronize(dev)
            ttfts.append(pclock.seconds(0, 1))
            clock = Clock(dev, decode_steps + 1)
            out = torch.empty(batch, decode_steps, dtype=torch.long, device=dev)
            decode_n_tokens(model, cur, torch.tensor([prompt_tokens], device=dev), decode_steps, step, clock, out)
            synchronize(dev)
            times = [clock.seconds(i, i + 1) for i in range(decode_steps)]
            rep_tpots.append(statistics.median(times))
            rep_decode_times.append(clock.seconds(0, decode_steps))
            step_times = times if rep == 0 else step_times + times
    ttft = statistics.median(ttfts)
    decode_time = statistics.median(rep_decode_times)
    progress(0.95, "computing metrics")

    bpe = torch.empty((), dtype=dt).element_size()
    # Step i writes token P+i and attends to P+i+1 keys; average the per-step counts over the run.
    contexts = [prompt_tokens + i + 1 for i in range(decode_steps)]
    mean_ctx = sum(contexts) / len(contexts)
    step_bytes = decode_step_bytes(cfg, batch=batch, context=mean_ctx, bytes_per_el=bpe)
    step_flops = forward_flops(cfg, batch=batch, new_tokens=1, keys_per_token=mean_ctx)
    prefill_flops = forward_flops(cfg, batch=batch, new_tokens=prompt_tokens, keys_per_token=(prompt_tokens + 1) / 2)
    tpot = {**summary(step_times), "median": statistics.median(rep_tpots)}  # the median repetition; p90, min, max over every step
    achieved_bw = step_bytes["total"] / tpot["median"]
    achieved_flops = step_flops / tpot["median"]
    kv_bytes_per_token = step_bytes["kv_write"] / batch
    prefill_bytes = weight_bytes_touched(cfg, batch * prompt_tokens, bpe) + batch * prompt_tokens * kv_bytes_per_token

    result: dict[str, Any] = {
        "trial": "decode",
        **environment(dev),
        "dtype": dtype_name(dt),
        "fitted_to_memory": fit.adjustments,
        "batch": batch,
        "prompt_tokens": prompt_tokens,
        "decode_steps": decode_steps,
        "warmup_steps": n_warm,
        "cache_length": max_seq,
        "compile": compile_info,
        "compile_used": compile_info["used"],
        "cuda_graphs_used": compile_info["cuda_graphs"],
        **pm.info,
        "repetitions": repetitions,
        "ttft_s": ttft,
        "ttft_s_repetitions": ttfts,
        "ttft_spread": spread(ttfts),
        "tpot_s_repetitions": rep_tpots,
        "tpot_spread": spread(rep_tpots),
        "prefill_tokens_per_s": batch * prompt_tokens / ttft,
        "prefill_flops": prefill_flops,
        "prefill_bytes": prefill_bytes,
        "prefill_achieved_flops_per_s": prefill_flops / ttft,
        "tpot_s": tpot["median"],
        "tpot_s_median": tpot["median"],
        "tpot_s_p90": tpot["p90"],
        "tpot_s_mean": tpot["mean"],
        "tpot_s_min": tpot["min"],
        "tpot_s_max": tpot["max"],
        "decode_time_s": decode_time,
        "tokens_per_s_per_sequence": decode_steps / decode_time,
        "tokens_per_s_total": batch * decode_steps / decode_time,
        "mean_context_tokens": mean_ctx,
        "kv_bytes_per_token": kv_bytes_per_token,
        "bytes_per_step": step_bytes["total"],
        "bytes_per_step_breakdown": step_bytes,
        "flops_per_step": step_flops,
        "achieved_bandwidth_bytes_per_s": achieved_bw,
        "achieved_flops_per_s": achieved_flops,
        "peak_bandwidth_bytes_per_s": peak_bandwidth_bytes_per_s,
        "peak_flops_per_s": peak_flops_per_s,
        "mbu": achieved_bw / peak_bandwidth_bytes_per_s if peak_bandwidth_bytes_per_s else None,
        "mfu": achieved_flops / peak_flops_per_s if peak_flops_per_s else None,
        "prefill_mfu": prefill_flops / ttft / peak_flops_per_s if peak_flops_per_s else None,
        "method": (
            "bytes/FLOPs per step from the built model's shapes at the mean context (jobs/trials/costs.py); "
            "achieved = per-step bytes or FLOPs / median TPOT; MBU = achieved bandwidth / peak (Databricks), "
            "MFU = achieved FLOP/s / peak (PaLM app. B); prefill FLOPs use causal halving"
        ),
        "sample_tokens": out[0, :16].tolist(),
    }
    progress(1.0, "done")
    return result
