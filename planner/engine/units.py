"""Units, data types and the constants the engine assumes, each with its source.

Decimal units throughout (GB = 1e9 bytes, TFLOP/s = 1e12 FLOP/s); GiB only where
a name says so. Data types are small integer codes so that a candidate grid can
carry them in NumPy arrays.
"""

from __future__ import annotations

import numpy as np

from hwcatalog.architecture import DTYPE_BYTES, SIXTEEN_BIT_BYTES  # noqa: F401 (SIXTEEN_BIT_BYTES re-exported)

GB = 1e9
GIB = 2**30
TFLOP = 1e12
HOURS_PER_YEAR = 8766.0  # 365.25 days, the usual amortisation year

# The catalog's one table of bytes per element (hwcatalog/architecture.py); its order is
# the dtype code stored in candidate grids (fp32, bf16, fp16, fp8, int8, int4, fp4).
DTYPES: tuple[str, ...] = tuple(DTYPE_BYTES)
DTYPE_CODE: dict[str, int] = {name: code for code, name in enumerate(DTYPES)}
DTYPE_BYTES_ARRAY = np.array([DTYPE_BYTES[name] for name in DTYPES])

CHIP_KINDS: tuple[str, ...] = ("cpu", "gpu", "tpu", "lpu", "other")
CHIP_KIND_CODE: dict[str, int] = {name: code for code, name in enumerate(CHIP_KINDS)}

# PagedAttention's default block of 16 tokens (Kwon et al., SOSP 2023, sec. 4.1;
# vLLM's `block_size` default). At most one partly filled block per sequence.
KV_BLOCK_TOKENS = 16


def paged_tokens(tokens: float) -> float:
    """Tokens' worth of KV blocks a sequence holds: ceil(tokens/16)*16."""
    return float(np.ceil(tokens / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS)

# vLLM's default gpu_memory_utilization = 0.9: 10% of capacity is left to the
# CUDA context, allocator fragmentation and the runtime. We apply it to every
# chip kind except the LPU, whose compiler allocates SRAM statically.
USABLE_MEMORY_FRACTION = 0.9

# Largest prefill chunk the activation workspace is sized for: vLLM's scheduler
# default max_num_batched_tokens for chunked prefill is of this order (8,192).
PREFILL_CHUNK_TOKENS = 8192

# Activation workspace per token in units of hidden_size elements: residual
# stream, QKV, attention output and a gated-MLP intermediate of ~3.5 d twice
# (~16 d in all). An order-of-magnitude estimate, as the brief allows.
ACTIVATION_WORKSPACE_PER_TOKEN_HIDDEN = 16

# Activation traffic per token per layer in units of hidden_size elements:
# the residual stream read and written around attention and around the MLP.
ACTIVATION_PASSES_PER_LAYER = 4

# Logits are kept in fp32 by vLLM and gpt-fast samplers.
LOGIT_BYTES = 4.0

# Chip-to-chip defaults when a ChipSpec lacks them.
# GenZ `collective_times.py` adds ~5 us of fixed latency per collective.
DEFAULT_LINK_LATENCY_S = 5e-6
# PCIe Gen4 x16: 16 GT/s x 16 lanes x 128/130 encoding / 8 bits = 31.5 GB/s
# per direction (PCI-SIG PCIe 4.0 base specification); rounded to 32e9.
PCIE_GEN4_X16_BYTES_PER_S = 32e9
# Between nodes: one 400 Gb/s NDR InfiniBand NIC per GPU (DGX H100 layout),
# 50 GB/s per direction. Pipeline stages across nodes talk over this.
INTER_NODE_BYTES_PER_S = 50e9
# A collective that leaves the node (TP or expert parallelism wider than a node) runs over every
# GPU's NIC at once: NCCL gives each rail of a rail-optimised fabric its own channel, so the bus
# bandwidth is the node's NIC count x one NIC (NVIDIA's NCCL maintainers expect 46-48 GB/s per
# 400 Gb/s NDR NIC: github.com/NVIDIA/nccl-tests/issues/290). Its fixed cost is the network's:
# an 8-byte all-reduce between two nodes over InfiniBand takes 19-20 us
# (github.com/NVIDIA/nccl-tests/issues/150, nccl-tests all_reduce_perf, 2 nodes, HDR).
INTER_NODE_COLLECTIVE_LATENCY_S = 20e-6

# TPU prompts are padded up to a bucket; JetStream/MaxText buckets by powers
# of two. The smallest bucket we assume is 16 tokens.
TPU_MIN_PREFILL_BUCKET_TOKENS = 16


def dtype_code(name: str) -> int:
    """Code of a dtype name, with an error that lists the valid names."""
    try:
        return DTYPE_CODE[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPES)}") from None


def next_power_of_two(values: np.ndarray | float) -> np.ndarray:
    """Smallest power of two >= value (1 for values <= 1), element-wise."""
    v = np.maximum(np.asarray(values, dtype=float), 1.0)
    return np.exp2(np.ceil(np.log2(v)))
