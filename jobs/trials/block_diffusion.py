"""Block diffusion decoding (BD3-LM, Arriola et al. ICLR 2025; Fast-dLLM v2) against plain whole-window diffusion.

Block diffusion: the answer is generated in blocks of B tokens that start as MASK. Each denoising forward runs the
B block tokens with bidirectional attention inside the block and causal attention to the KV cache of the prompt and
the committed blocks ('block' mode of model.py), then commits tokens: a fixed schedule commits B/S of the most
confident masked tokens per step (S steps), or a confidence threshold commits every masked token above it (at least
one per step). When a block is complete, ONE separate commit forward writes its final KV into the cache (the
denoising forwards wrote KV computed from partly masked inputs, which must not be kept). The commit forward of the
last block computed is skipped: nothing reads it. A block containing EOS ends generation: later blocks are never run.

Whole-window diffusion (LLaDA, MDLM): no cache; every step runs prompt + the whole window bidirectionally.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from jobs.trials.costs import forward_flops
from jobs.trials.memory import fit_trial
from jobs.trials.model import ModelConfig, Transformer
from jobs.trials.runtime import (
    as_config,
    Progress,
    dtype_name,
    environment,
    no_progress,
    prepare_model,
    random_prompt,
    resolve_device,
    resolve_dtype,
    synchronize,
)


def commit_counts(block_size: int, steps: int) -> list[int]:
    """Tokens committed at each step of the fixed schedule: B/S each, the remainder spread over the first steps."""
    base, extra = divmod(block_size, steps)
    return [base + (1 if i < extra else 0) for i in range(steps)]


def _choose(conf: Tensor, masked: Tensor, n: int | None, threshold: float | None) -> Tensor:
    """Which masked positions to commit. conf, masked: [b, B]. Returns a bool [b, B]."""
    conf = conf.masked_fill(~masked, -1.0)
    if n is not None:
        top = conf.topk(n, dim=-1).indices
        pick = torch.zeros_like(masked).scatter_(1, top, True)
    else:
        pick = conf > threshold
        best = conf.argmax(-1, keepdim=True)  # at least one per step
        pick.scatter_(1, best, True)
    return pick & masked


def denoise_block(model: Transformer, block: Tensor, input_pos: Tensor, mask_id: int, *, steps: int,
                  threshold: float | None, mode: str = "block") -> tuple[Tensor, int]:
    """Fill the MASKs of `block` [b, B] at cache positions `input_pos` [B]. Returns (tokens, forwards)."""
    B = block.shape[1]
    schedule = commit_counts(B, steps) if threshold is None else None
    forwards = 0
    while True:
        masked = block == mask_id
        if not bool(masked.any()):
            return block, forwards
        logits = model(block, input_pos, mode=mode)  # [b, B, V]
        logits[..., mask_id] = float("-inf")  # never "commit" a MASK
        conf, pred = logits.float().softmax(-1).max(-1)  # [b, B]
        n = None
        if schedule is not None:
            n = min(schedule[forwards], int(masked.sum(-1).min()))
        pick = _choose(conf, masked, n, threshold)
        block = torch.where(pick, pred, block)
        forwards += 1
        if schedule is not None and forwards == steps:
            # Rows that committed fewer earlier (already-filled positions) finish with their best guesses.
            masked = block == mask_id
            return torch.where(masked, pred, block), forwards


def block_diffusion_generate(model: Transformer, prompt: Tensor, *, gen_length: int, block_size: int, steps: int,
                             mask_id: int, eos_id: int | None = None, threshold: float | None = None) -> tuple[Tensor, dict[str, Any]]:
    """prompt: [b, P]. Returns (generated tokens [b, <= gen_length], counters). Needs caches of >= P + gen_length."""
    dev = prompt.device
    b, P = prompt.shape
    n_blocks = -(-gen_length // block_size)
    model.reset_caches()
    model(prompt, torch.arange(P, device=dev), mode="causal", last_only=True)  # prompt KV, written once
    out: list[Tensor] = []
    c: dict[str, Any] = {"denoise_forwards": 0, "commit_forwards": 0, "blocks": 0, "stopped_early": False,
                         "per_block_forwards": [], "flops": 0.0}
    cfg = model.config
    c["flops"] += forward_flops(cfg, batch=b, new_tokens=P, keys_per_token=(P + 1) / 2)
    done = torch.zeros(b, dtype=torch.bool, device=dev)
    for j in range(n_blocks):
        start = P + j * block_size
        pos = torch.arange(start, start + block_size, device=dev)
        block = torch.full((b, block_size), mask_id, dtype=torch.long, device=dev)
        block, f = denoise_block(model, block, pos, mask_id, steps=steps, threshold=threshold)
        c["denoise_forwards"] += f
        c["per_block_forwards"].append(f)
        c["flops"] += f * forward_flops(cfg, batch=b, new_tokens=block_size, keys_per_token=start + block_size)
        c["blocks"] += 1
        out.append(block)
        if eos_id is not None:
            done |= (block == eos_id).any(-1)
        last = j == n_blocks - 1 or bool(done.all())
        if not last:
            model(block, pos, mode="block", last_only=True)  # commit: the final KV of this block, written once
            c["commit_forwards"] += 1
            c["flops"] += forward_flops(cfg, batch=b, new_tokens=block_size, keys_per_token=start + block_size)
        else:
            c["stopped_early"] = j < n_blocks - 1
            break
    tokens = torch.cat(out, dim=1)[:, :gen_length]
    c["forwards"] = c["denoise_forwards"] + c["commit_forwards"]
    c["prefill_forwards"] = 1
    c["tokens_committed"] = _count_until_eos(tokens, eos_id)
    return tokens, c


def _count_until_eos(tokens: Tensor, eos_id: int | None) -> int:
    """Answer tokens, summed over the batch: up to and including the first EOS of each row."""
    if eos_id is None:
        return int(tokens.numel())
    total = 0
    for row in tokens.tolist():
        total += row.index(eos_id) + 1 if eos_id in row else len(row)
    return total


def whole_window_generate(model: Transformer, prompt: Tensor, *, gen_length: int, steps: int, mask_id: int,
                          eos_id: int | None = None) -> tuple[Tensor, dict[str, Any]]:
    """Plain masked diffusion: S steps, each a cache-free bidirectional forward over prompt + whole window,
    committing gen_length/S of the most confident masked tokens per step."""
    b, P = prompt.shape
    x = torch.cat([prompt, torch.full((b, gen_length), mask_id, dtype=torch.long, device=prompt.device)], dim=1)
    forwards = 0
    for n in commit_counts(gen_length, steps):
        logits = model(x, None, mode="bidirectional")[:, P:]  # [b, G, V]
        logits[..., mask_id] = float("-inf")
        conf, pred = logits.float().softmax(-1).max(-1)
        window = x[:, P:]
        masked = window == mask_id
        n = min(n, int(masked.sum(-1).min()))
        if n > 0:
            pick = _choose(conf, masked, n, None)
            x[:, P:] = torch.where(pick, pred, window)
        forwards += 1
    tokens = x[:, P:]
    flops = forwards * forward_flops(model.config, batch=b, new_tokens=P + gen_length, keys_per_token=P + gen_length)
    return tokens, {"forwards": forwards, "flops": flops, "tokens_committed": _count_until_eos(tokens, eos_id)}


BLOCK_ROOM_TOKENS = 64  # cache room for the last block when the block size is not known before the model is built


def run_block_diffusion_trial(
    model_desc: ModelConfig | Mapping[str, Any] | None = None,
    *,
    model: Transformer | None = None,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "bf16",
    batch: int = 1,
    prompt_tokens: int = 64,
    gen_length: int = 128,
    block_size: int | None = None,
    steps: int | None = None,
    threshold: float | None = None,
    mask_id: int | None = None,
    eos_id: int | None = None,
    compare_whole_window: bool = True,
    peak_flops_per_s: float | None = None,
    max_bytes: float | None = None,
    max_layers: int | None = None,
    seed: int = 0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Time block diffusion (and, optionally, whole-window diffusion with the same number of steps per token).

    block_size defaults to the model's default_block_size (else 32); steps to block_size // 4; mask_id to the last
    vocabulary id. Random weights: the committed tokens are noise, but forwards and time per forward are real.
    """
    progress = progress or no_progress
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    info: dict[str, Any] = {"approximations": [], "scaled": None}
    # The cache holds the prompt, the generation rounded up to whole blocks (at most one block more) and that block.
    block_room = block_size or BLOCK_ROOM_TOKENS
    max_seq = prompt_tokens + gen_length + block_room
    progress(0.0, "building the model")
    if model is None:
        if model_desc is None:
            raise ValueError("give a model or a model description")
        # Too large for the memory: fewer layers, then bf16 for fp32, then a shorter prompt and generation (jobs/trials/memory.py).
        fit = fit_trial(as_config(model_desc), device=dev, dtype=dt, batch=batch, prompt_tokens=prompt_tokens, decode_steps=gen_length,
                        reserved_tokens=block_room, max_bytes=max_bytes, max_layers=max_layers)  # fmt: skip
        dt, prompt_tokens, gen_length = fit.dtype, fit.prompt_tokens, fit.decode_steps
        max_seq = prompt_tokens + gen_length + block_room
        info["fitted_to_memory"] = fit.adjustments
        pm = prepare_model(model_desc, device=dev, dtype=dt, batch=batch, max_seq=max_seq, seed=seed,
                           max_bytes=fit.budget_bytes, max_layers=max_layers)
        model = pm.model
        info.update(pm.info)
    else:
        dt = model.output.weight.dtype
    cfg = model.config
    block_size = block_size or cfg.default_block_size or 32
    steps = steps or max(1, block_size // 4)
    if steps > block_size:
        raise ValueError(f"steps ({steps}) cannot exceed block_size ({block_size}): each step commits >= 1 token")
    mask_id = cfg.vocab_size - 1 if mask_id is None else mask_id
    n_blocks = -(-gen_length // block_size)
    model.setup_caches(batch, prompt_tokens + n_blocks * block_size)
    prompt = random_prompt(cfg.vocab_size - 1, batch, prompt_tokens, seed, dev)  # never the MASK id

    def gen() -> tuple[Tensor, dict[str, Any]]:
        return block_diffusion_generate(model, prompt, gen_length=gen_length, block_size=block_size, steps=steps,
                                        mask_id=mask_id, eos_id=eos_id, threshold=threshold)

    with torch.inference_mode():
        progress(0.1, "warm-up")
        gen()
        progress(0.3, f"block diffusion: {n_blocks} blocks of {block_size}, "
                      + (f"threshold {threshold}" if threshold is not None else f"{steps} steps each"))
        synchronize(dev)
        t0 = time.perf_counter()
        tokens, c = gen()
        synchronize(dev)
        elapsed = time.perf_counter() - t0
        whole: dict[str, Any] | None = None
        if compare_whole_window:
            progress(0.6, "whole-window diffusion for comparison")
            total_steps = n_blocks * steps  # same tokens committed per step as the fixed block schedule
            ww = lambda: whole_window_generate(model, prompt, gen_length=gen_length, steps=min(total_steps, gen_length),
                                               mask_id=mask_id, eos_id=eos_id)  # noqa: E731
            ww()  # warm-up
            synchronize(dev)
            t1 = time.perf_counter()
            _, w = ww()
            synchronize(dev)
            w_time = time.perf_counter() - t1
            whole = {**w, "time_s": w_time, "tokens_per_s": batch * gen_length / w_time,
                     "achieved_flops_per_s": w["flops"] / w_time,
                     "mfu": w["flops"] / w_time / peak_flops_per_s if peak_flops_per_s else None,
                     "note": "cache-free: every step runs prompt + whole window bidirectionally; no early stop"}
    progress(1.0, "done")
    full_schedule = n_blocks * steps + (n_blocks - 1) if threshold is None else None
    return {
        "trial": "block_diffusion",
        **environment(dev),
        "dtype": dtype_name(dt),
        "batch": batch,
        "prompt_tokens": prompt_tokens,
        "gen_length": gen_length,
        "block_size": block_size,
        "steps_per_block": steps if threshold is None else None,
        "threshold": threshold,
        "mask_id": mask_id,
        "eos_id": eos_id,
        "commit_mode": "separate commit forward per block (skipped for the last block computed)",
        "compile_used": False,
        "cuda_graphs_used": False,
        **info,
        **c,
        "full_schedule_forwards": full_schedule,
        "time_s": elapsed,
        "tokens_per_forward": c["tokens_committed"] / c["forwards"],  # all sequences of the batch
        "tokens_per_s": c["tokens_committed"] / elapsed,
        "achieved_flops_per_s": c["flops"] / elapsed,
        "peak_flops_per_s": peak_flops_per_s,
        "mfu": c["flops"] / elapsed / peak_flops_per_s if peak_flops_per_s else None,
        "timing": "wall time incl. the prompt prefill, after a warm-up run; eager",
        "whole_window": whole,
        "sample_tokens": tokens[0, :16].tolist(),
    }
