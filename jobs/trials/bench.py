"""Command line for the trials: read a model from the catalog YAML, match the chip, run a trial, print JSON.

    python -m jobs.trials.bench --model llama-3.1-8b --trial decode --device cuda --json
    python -m jobs.trials.bench --model tiny-pair --trial speculative --device cpu
    python -m jobs.trials.bench --model llama-3.2-1b --trial decode --device cpu --max-layers 2 --dtype fp32

No Django: the catalog files are read with PyYAML. Peaks come from the matched chip's row in hwcatalog/data/chips;
on an unmatched CPU a short probe measures them (labelled as measured).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

DATA_DIR = Path(__file__).resolve().parents[2] / "hwcatalog" / "data"
PEAK_FIELDS = {"bf16": "peak_bf16_flops_per_s", "fp16": "peak_fp16_flops_per_s", "fp32": "peak_fp32_flops_per_s"}


def load_rows(kind: str, data_dir: Path = DATA_DIR) -> list[dict[str, Any]]:
    """All rows of hwcatalog/data/<kind>/*.yaml (an absent folder gives no rows)."""
    rows: list[dict[str, Any]] = []
    folder = data_dir / kind
    for f in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        rows.extend(r for r in (yaml.safe_load(f.read_text()) or []) if isinstance(r, dict))
    return rows


def find_model(slug: str, data_dir: Path = DATA_DIR) -> dict[str, Any]:
    rows = load_rows("models", data_dir)
    for row in rows:
        if row.get("slug") == slug:
            return row
    known = ", ".join(sorted(r["slug"] for r in rows if "slug" in r)) or "none"
    raise SystemExit(f"no model {slug!r} in {data_dir / 'models'}; known: {known} (or tiny-pair for speculative)")


def find_chip(slug: str | None, data_dir: Path = DATA_DIR) -> dict[str, Any] | None:
    if not slug:
        return None
    return next((r for r in load_rows("chips", data_dir) if r.get("slug") == slug), None)


def resolve_peaks(args: argparse.Namespace) -> dict[str, Any]:
    """Peak bandwidth and FLOP/s for MBU/MFU: explicit flags, else the matched catalog chip, else (CPU) a probe."""
    from jobs.trials.device import detect_device, generic_cpu_chip, probe_cpu

    detected = detect_device(args.device) if args.chip is None else {"matched_chip": args.chip, "device_name": None, "pattern": "--chip"}
    chip = find_chip(detected.get("matched_chip"))
    out: dict[str, Any] = {"detected": detected, "chip": detected.get("matched_chip"), "chip_in_catalog": chip is not None,
                           "peak_bandwidth_bytes_per_s": None, "peak_flops_per_s": None, "peaks_source": None}
    if chip is not None:
        out["peak_bandwidth_bytes_per_s"] = chip.get("memory_bandwidth_bytes_per_s")
        out["peak_flops_per_s"] = chip.get(PEAK_FIELDS[args.dtype])
        out["peaks_source"] = f"catalog chip {chip['slug']} ({PEAK_FIELDS[args.dtype]}, memory_bandwidth_bytes_per_s)"
    elif args.device == "cpu" and not args.no_probe:
        probe = probe_cpu()
        out["probe"] = probe
        out["generic_chip"] = generic_cpu_chip(probe)
        out["peak_bandwidth_bytes_per_s"] = probe["memory_bandwidth_bytes_per_s"]
        out["peak_flops_per_s"] = probe.get(PEAK_FIELDS[args.dtype])
        out["peaks_source"] = probe["method"]
        out["peaks_note"] = "measured achievable values, not datasheet peaks: MBU/MFU against them can exceed 1"
    if args.peak_bandwidth is not None:
        out["peak_bandwidth_bytes_per_s"], out["peaks_source"] = args.peak_bandwidth, "--peak-bandwidth/--peak-flops flags"
    if args.peak_flops is not None:
        out["peak_flops_per_s"], out["peaks_source"] = args.peak_flops, "--peak-bandwidth/--peak-flops flags"
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m jobs.trials.bench", description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="catalog model slug, or tiny-pair (speculative)")
    p.add_argument("--trial", choices=["decode", "speculative", "block_diffusion"], default="decode")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--decode-steps", type=int, default=128, help="decode steps / new tokens / generation length")
    p.add_argument("--dtype", choices=sorted(PEAK_FIELDS), default="bf16")
    p.add_argument("--no-compile", action="store_true", help="eager decode step (compile is on by default on CUDA)")
    p.add_argument("--json", action="store_true", help="print one JSON object (default: a readable summary)")
    p.add_argument("--max-layers", type=int, default=None, help="run at most this many layers (a scaled copy)")
    p.add_argument("--max-bytes", type=float, default=None, help="memory cap in bytes (forces a scaled copy if exceeded)")
    p.add_argument("--weights", default=None, help="local safetensors/.bin/.pt file or HF folder (never downloaded)")
    p.add_argument("--chip", default=None, help="catalog chip slug to take peaks from, instead of detecting")
    p.add_argument("--peak-bandwidth", type=float, default=None, help="bytes/s, overrides the chip")
    p.add_argument("--peak-flops", type=float, default=None, help="FLOP/s for --dtype, overrides the chip")
    p.add_argument("--no-probe", action="store_true", help="on an unmatched CPU, skip the bandwidth/FLOP probe")
    p.add_argument("--draft-k", type=int, default=4, help="speculative: draft tokens per round")
    p.add_argument("--block-size", type=int, default=None, help="block diffusion: tokens per block")
    p.add_argument("--denoise-steps", type=int, default=None, help="block diffusion: steps per block (fixed schedule)")
    p.add_argument("--threshold", type=float, default=None, help="block diffusion: confidence threshold instead of steps")
    p.add_argument("--eos-id", type=int, default=None, help="block diffusion: EOS token id (early stop)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    peaks = resolve_peaks(args)
    common = dict(device=args.device, max_bytes=args.max_bytes, max_layers=args.max_layers, seed=args.seed)
    if args.trial == "speculative":
        from jobs.trials.speculative import run_speculative_trial

        if args.batch != 1:
            raise SystemExit("speculative: batch 1 only")
        if args.model == "tiny-pair":
            from jobs.trials.tiny_pair import train_tiny_pair

            pair = train_tiny_pair(seed=args.seed)
            prompt = pair.corpus.prompt(min(args.prompt_tokens, 64))
            result = run_speculative_trial(target=pair.target, draft=pair.draft, prompt=prompt, device=args.device,
                                           prompt_tokens=prompt.shape[1], new_tokens=args.decode_steps, k=args.draft_k,
                                           seed=args.seed)
            result["training"] = pair.corpus.training
        else:
            result = run_speculative_trial(find_model(args.model), dtype=args.dtype, prompt_tokens=args.prompt_tokens,
                                           new_tokens=args.decode_steps, k=args.draft_k, **common)
    elif args.trial == "block_diffusion":
        from jobs.trials.block_diffusion import run_block_diffusion_trial

        result = run_block_diffusion_trial(find_model(args.model), dtype=args.dtype, batch=args.batch,
                                           prompt_tokens=args.prompt_tokens, gen_length=args.decode_steps,
                                           block_size=args.block_size, steps=args.denoise_steps, threshold=args.threshold,
                                           eos_id=args.eos_id, peak_flops_per_s=peaks["peak_flops_per_s"], **common)
    else:
        from jobs.trials.decode import run_decode_trial

        result = run_decode_trial(find_model(args.model), dtype=args.dtype, batch=args.batch,
                                  prompt_tokens=args.prompt_tokens, decode_steps=args.decode_steps,
                                  compile=False if args.no_compile else None, weights_path=args.weights,
                                  peak_bandwidth_bytes_per_s=peaks["peak_bandwidth_bytes_per_s"],
                                  peak_flops_per_s=peaks["peak_flops_per_s"], **common)
    result["chip"] = peaks
    return result


def summary_text(r: dict[str, Any]) -> str:
    keys = ["trial", "device_name", "dtype", "batch", "scaled", "ttft_s", "tpot_s_median", "tpot_s_p90",
            "tokens_per_s_total", "achieved_bandwidth_bytes_per_s", "mbu", "mfu", "compile_used", "cuda_graphs_used",
            "lossless", "acceptance_rate", "mean_accepted_tokens_per_target_step", "speedup", "forwards",
            "tokens_per_forward", "stopped_early", "tokens_per_s", "time_s"]
    lines = [f"{k:>40}: {r[k]}" for k in keys if k in r]
    lines.append(f"{'chip':>40}: {r['chip']['chip']} (peaks: {r['chip']['peaks_source']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    print(json.dumps(result, indent=2, default=str) if args.json else summary_text(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
