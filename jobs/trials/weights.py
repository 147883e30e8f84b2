"""Load real weights from LOCAL files into a model.py Transformer (never a download).

Accepts a .safetensors file, a .bin/.pt/.pth torch file, or a Hugging Face folder holding either (sharded or not).
Names may be Hugging Face Llama-style (model.layers.N.self_attn.q_proj.weight, ...) or this package's own.
The safetensors format (8-byte little-endian header length, JSON header, raw tensors) is simple enough to read
here when the `safetensors` package is absent, so no dependency is added.
"""
from __future__ import annotations

import json
import mmap
import re
import struct
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from jobs.trials.model import Transformer

_ST_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
}

# Hugging Face Llama/Mistral/Qwen2 names -> model.py names. HF's rotate-half RoPE is what model.py implements,
# so q_proj/k_proj load without the permutation gpt-fast's convert script applies.
_HF_NAMES: list[tuple[str, str]] = [
    (r"^model\.embed_tokens\.weight$", "tok_embeddings.weight"),
    (r"^model\.norm\.weight$", "norm.weight"),
    (r"^lm_head\.weight$", "output.weight"),
    (r"^model\.layers\.(\d+)\.self_attn\.q_proj\.weight$", r"layers.\1.attention.wq.weight"),
    (r"^model\.layers\.(\d+)\.self_attn\.k_proj\.weight$", r"layers.\1.attention.wk.weight"),
    (r"^model\.layers\.(\d+)\.self_attn\.v_proj\.weight$", r"layers.\1.attention.wv.weight"),
    (r"^model\.layers\.(\d+)\.self_attn\.o_proj\.weight$", r"layers.\1.attention.wo.weight"),
    (r"^model\.layers\.(\d+)\.mlp\.gate_proj\.weight$", r"layers.\1.feed_forward.w1.weight"),
    (r"^model\.layers\.(\d+)\.mlp\.up_proj\.weight$", r"layers.\1.feed_forward.w3.weight"),
    (r"^model\.layers\.(\d+)\.mlp\.down_proj\.weight$", r"layers.\1.feed_forward.w2.weight"),
    (r"^model\.layers\.(\d+)\.input_layernorm\.weight$", r"layers.\1.attention_norm.weight"),
    (r"^model\.layers\.(\d+)\.post_attention_layernorm\.weight$", r"layers.\1.ffn_norm.weight"),
]


def read_safetensors(path: Path) -> dict[str, Tensor]:
    try:
        from safetensors.torch import load_file  # type: ignore[import-not-found]

        return load_file(str(path))
    except ImportError:
        pass
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        # ACCESS_COPY: a private, writable mapping (torch.frombuffer wants writable memory); pages load lazily.
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    out: dict[str, Tensor] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = _ST_DTYPES[meta["dtype"]]
        count = (end - start) // torch.empty((), dtype=dtype).element_size()
        t = torch.frombuffer(mm, dtype=dtype, count=count, offset=8 + n + start) if count else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(meta["shape"])
    return out


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"no weights at {path} (a local file or folder is required; nothing is downloaded)")
    found = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin")) or sorted(path.glob("*.pt")) or sorted(path.glob("*.pth"))
    if not found:
        raise FileNotFoundError(f"{path} holds no *.safetensors, *.bin, *.pt or *.pth files")
    return found


def _read(path: Path) -> dict[str, Tensor]:
    if path.suffix == ".safetensors":
        return read_safetensors(path)
    sd = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    return sd.get("model", sd) if isinstance(sd, dict) and "model" in sd and isinstance(sd["model"], dict) else sd


def rename(name: str) -> str:
    for pattern, repl in _HF_NAMES:
        if re.match(pattern, name):
            return re.sub(pattern, repl, name)
    return name


def load_weights(model: Transformer, path: str | Path) -> dict[str, Any]:
    """Copy matching tensors into `model` (cast to its dtype and device). Layers past the scaled layer count are
    skipped. Returns what happened, for the trial result: files, loaded, skipped_layers, missing, unexpected."""
    params = dict(model.named_parameters())
    loaded: set[str] = set()
    unexpected: list[str] = []
    skipped = 0
    files = _files(Path(path))
    with torch.no_grad():
        for f in files:
            for name, tensor in _read(f).items():
                ours = rename(name)
                m = re.match(r"^layers\.(\d+)\.", ours)
                if m and int(m.group(1)) >= model.config.num_layers:
                    skipped += 1
                    continue
                if ours not in params:
                    unexpected.append(name)
                    continue
                p = params[ours]
                if tuple(p.shape) != tuple(tensor.shape):
                    raise ValueError(f"{name}: checkpoint shape {tuple(tensor.shape)} != model shape {tuple(p.shape)}")
                p.copy_(tensor)
                loaded.add(ours)
    if model.config.tie_word_embeddings and "tok_embeddings.weight" in loaded:
        loaded.add("output.weight")
    missing = sorted(set(params) - loaded)
    return {"files": [str(f) for f in files], "loaded": len(loaded), "skipped_layer_tensors": skipped,
            "missing": missing[:50], "unexpected": unexpected[:50]}
