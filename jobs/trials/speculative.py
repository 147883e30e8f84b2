"""Greedy speculative decoding (Leviathan, Kalman, Matias, ICML 2023), batch 1, with both models' static caches.

Each round: the draft proposes k tokens one by one; the target scores [last, d1..dk] in ONE forward; the longest
prefix where d_i equals the target's greedy choice is accepted, plus the target's own next token (the correction, or
the bonus when all k were accepted). With greedy verification the output must equal target-only greedy decoding;
every run checks that against a plain target run and reports "lossless".

Stale cache entries past the accepted prefix need no rollback: the causal mask hides keys beyond a query's position,
and the next round overwrites those positions before any query can see them.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from jobs.trials.decode import decode_one_token, greedy_generate, prefill
from planner.engine.decoding.acceptance import expected_tokens_per_step
from jobs.trials.model import ModelConfig, Transformer
from jobs.trials.runtime import (
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


def speculative_generate(target: Transformer, draft: Transformer, prompt: Tensor, n_new: int, k: int) -> tuple[Tensor, dict[str, int]]:
    """prompt: [1, P]. Returns (tokens [1, n_new], counters). Both models need caches of >= P + n_new + k + 1."""
    if prompt.shape[0] != 1:
        raise ValueError("speculative decoding here is batch 1 only (per-sequence acceptance makes batches ragged)")
    dev = prompt.device
    P = prompt.shape[1]
    target.reset_caches()
    draft.reset_caches()
    last = prefill(target, prompt, torch.arange(P, device=dev))  # [1, 1]
    prefill(draft, prompt, torch.arange(P, device=dev))
    out: list[Tensor] = [last]
    n_out = 1
    pos = P  # `last` sits at position pos; both caches are valid below pos
    c = {"rounds": 0, "proposed": 0, "accepted": 0, "target_forwards": 1, "draft_forwards": 1, "emitted_in_rounds": 0}
    while n_out < n_new:
        drafts: list[Tensor] = []
        cur = last
        for i in range(k):
            cur = decode_one_token(draft, cur, torch.tensor([pos + i], device=dev))
            drafts.append(cur)
        c["draft_forwards"] += k
        proposal = torch.cat(drafts, dim=1)  # [1, k]
        logits = target(torch.cat([last, proposal], dim=1), torch.arange(pos, pos + k + 1, device=dev))  # [1, k+1, V]
        greedy = logits.argmax(-1)  # [1, k+1]: the target's choice after last, d1, ..., dk
        c["target_forwards"] += 1
        agree = (proposal == greedy[:, :k])[0].int()
        n_acc = int(agree.cumprod(0).sum())  # the one host sync per round
        out.append(proposal[:, :n_acc])
        out.append(greedy[:, n_acc : n_acc + 1])
        if n_acc == k:
            # The draft never consumed dk: write its KV at pos + k so the draft cache stays whole.
            decode_one_token(draft, proposal[:, k - 1 :], torch.tensor([pos + k], device=dev))
            c["draft_forwards"] += 1
        c["rounds"] += 1
        c["proposed"] += k
        c["accepted"] += n_acc
        c["emitted_in_rounds"] += n_acc + 1
        n_out += n_acc + 1
        last = greedy[:, n_acc : n_acc + 1]
        pos += n_acc + 1
    return torch.cat(out, dim=1)[:, :n_new], c


def _timed(device: torch.device, fn):
    synchronize(device)
    t0 = time.perf_counter()
    result = fn()
    synchronize(device)
    return result, time.perf_counter() - t0


def compare_speculative(target: Transformer, draft: Transformer, prompt: Tensor, *, n_new: int, k: int,
                        repeats: int = 1) -> dict[str, Any]:
    """Run plain target greedy, plain draft greedy and speculative on the same prompt; time them (best of `repeats`,
    after a warm-up) and check the speculative output equals the target's. The draft's plain run gives Leviathan's
    cost ratio c (a draft forward's time over a target forward's), which the planner's speedup formula takes."""
    dev = prompt.device
    with torch.inference_mode():
        greedy_generate(target, prompt, min(n_new, 4))  # warm-up (allocator, kernels)
        greedy_generate(draft, prompt, min(n_new, 4))
        speculative_generate(target, draft, prompt, min(n_new, 4), k)
        plain_t = draft_t = spec_t = float("inf")
        for _ in range(repeats):
            plain, t = _timed(dev, lambda: greedy_generate(target, prompt, n_new))
            plain_t = min(plain_t, t)
            _, t = _timed(dev, lambda: greedy_generate(draft, prompt, n_new))
            draft_t = min(draft_t, t)
            (spec, c), t = _timed(dev, lambda: speculative_generate(target, draft, prompt, n_new, k))
            spec_t = min(spec_t, t)
    mismatch = (spec != plain)[0].nonzero()
    alpha = c["accepted"] / c["proposed"] if c["proposed"] else None
    tau = c["emitted_in_rounds"] / c["rounds"] if c["rounds"] else None
    # Leviathan et al. eq. 1 (the planner's own): expected tokens per target step if acceptances were i.i.d. with rate alpha.
    iid = None if alpha is None else expected_tokens_per_step(alpha, k)
    return {
        "lossless": bool(mismatch.numel() == 0),
        "first_mismatch_index": int(mismatch[0]) if mismatch.numel() else None,
        "draft_tokens_k": k,
        "new_tokens": n_new,
        "acceptance_rate": alpha,
        "mean_accepted_tokens_per_target_step": tau,
        "expected_tokens_per_step_iid": iid,
        **c,
        "speculative_time_s": spec_t,
        "plain_time_s": plain_t,
        "tokens_per_s": n_new / spec_t,
        "plain_tokens_per_s": n_new / plain_t,
        "speedup": plain_t / spec_t,
        "draft_plain_time_s": draft_t,
        "plain_token_time_s": plain_t / n_new,
        "draft_token_time_s": draft_t / n_new,
        "speculative_token_time_s": spec_t / n_new,
        "draft_cost_ratio": draft_t / plain_t,
        "timing": "wall time of prefill + generation, best of %d, after a warm-up; eager (no compile)" % repeats,
        "sample_tokens": spec[0, :16].tolist(),
    }


def run_speculative_trial(
    target_desc: ModelConfig | Mapping[str, Any] | None = None,
    draft_desc: ModelConfig | Mapping[str, Any] | None = None,
    *,
    target: Transformer | None = None,
    draft: Transformer | None = None,
    prompt: Tensor | None = None,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "bf16",
    batch: int = 1,
    prompt_tokens: int = 32,
    new_tokens: int = 64,
    k: int = 4,
    repeats: int = 1,
    max_bytes: float | None = None,
    max_layers: int | None = None,
    seed: int = 0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Either pass trained `target` and `draft` models (e.g. tiny_pair.train_tiny_pair()) and a `prompt`, or catalog
    descriptions: then both get random weights, and acceptance is meaningless (reported as such)."""
    progress = progress or no_progress
    if batch != 1:
        raise ValueError("speculative trial supports batch 1 only")
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    max_seq = prompt_tokens + new_tokens + k + 1
    info: dict[str, Any] = {"approximations": [], "scaled": None}
    progress(0.0, "preparing target and draft")
    if target is None or draft is None:
        if target_desc is None:
            raise ValueError("give target/draft models or a target description")
        pm = prepare_model(target_desc, device=dev, dtype=dt, batch=1, max_seq=max_seq, seed=seed,
                           max_bytes=max_bytes, max_layers=max_layers)
        target = pm.model
        info.update(pm.info)
        # Default draft: the same shapes with 1/8 of the layers (a real pair would come from the catalog).
        dcfg = draft_desc if draft_desc is not None else pm.run.with_layers(max(1, pm.run.num_layers // 8))
        draft = prepare_model(dcfg, device=dev, dtype=dt, batch=1, max_seq=max_seq, seed=seed + 1, max_layers=max_layers).model
        info["acceptance_meaningful"] = False
        info["acceptance_note"] = "random weights: acceptance and speedup say nothing about a real pair; losslessness still holds"
    else:
        target, draft = target.to(dev), draft.to(dev)
        for m in (target, draft):
            m.setup_caches(1, max_seq)
        info["acceptance_meaningful"] = True
        dt = target.output.weight.dtype
    if prompt is None:
        prompt = random_prompt(target.config.vocab_size, 1, prompt_tokens, seed, dev)
    prompt = prompt.to(dev)
    if prompt.shape[1] != prompt_tokens:
        for m in (target, draft):
            m.setup_caches(1, prompt.shape[1] + new_tokens + k + 1)
    progress(0.2, f"speculative (k={k}) and plain greedy, {new_tokens} tokens")
    stats = compare_speculative(target, draft, prompt, n_new=new_tokens, k=k, repeats=repeats)
    progress(1.0, "done")
    return {
        "trial": "speculative",
        **environment(dev),
        "dtype": dtype_name(dt),
        "batch": 1,
        "batch_note": "batch 1 only: batch > 1 is not supported by this trial",
        "prompt_tokens": prompt.shape[1],
        "target": {"slug": target.config.slug, "layers": target.config.num_layers},
        "draft": {"slug": draft.config.slug, "layers": draft.config.num_layers},
        "compile_used": False,
        "cuda_graphs_used": False,
        **info,
        **stats,
    }
