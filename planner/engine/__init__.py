"""Pure math core of the LLM-inference hardware planner: Python + NumPy only.

No Django, torch, DRF or Celery here (a test asserts it). Callers build frozen
specs (ChipSpec, ModelSpec, Workload, OfferingSpec, a Decoding) and call
`estimate` for one configuration or `search` for a ranked grid; `evaluate` is
the single vectorised path both use.
"""

from __future__ import annotations

from .accuracy import (
    MeasuredRow,
    absolute_percentage_error,
    choose_layout,
    decoding_from_params,
    group_stats,
    predict_measured,
    predict_metric,
    predict_row,
    ratio_stats,
    read_measurements,
    summarize,
)
from .attention import Attention, Chunked, FullAttention, Hybrid, LatentAttention, LinearState, SlidingWindow, SparseTopK
from .chips import ChipPolicy, policy_for
from .decoding import (
    Autoregressive,
    BlockDiffusion,
    Decoding,
    DecodingMethod,
    Diffusion,
    DraftHeads,
    Speculative,
    acceptance_rate_from_mean_accepted,
    blocks_computed,
    blocks_saved_by_early_stop,
    expected_tokens_per_step,
    method_names,
    speculative_speedup,
)
from .deployment import Deployment
from .dtypes import choose_compute_dtype, default_kv_dtype
from .efficiency import Calibration, Efficiency, default_efficiency, resolve_efficiency
from .estimate import CostBreakdown, Estimate, MemoryBreakdown, PhaseBreakdown, estimate
from .evaluate import evaluate, lpu_min_chips, weights_total_bytes
from .grid import CandidateGrid, cartesian_grid
from .parallel import tensor_parallel_options
from .results import Results
from .search import InfeasibleGroup, SearchOptions, SearchResult, pareto_front, search
from .specs import ChipSpec, ModelSpec, OfferingSpec, Workload

# The one definition lives with the catalog's shape arithmetic (hwcatalog/architecture.py).
from hwcatalog.architecture import ArchShape, experts_touched  # noqa: E402

__all__ = [
    "ArchShape", "Attention", "Autoregressive", "BlockDiffusion", "Calibration", "CandidateGrid", "ChipPolicy", "ChipSpec", "Chunked",
    "CostBreakdown", "Decoding", "DecodingMethod", "Deployment", "Diffusion", "DraftHeads", "Efficiency", "Estimate",
    "FullAttention", "Hybrid", "InfeasibleGroup", "LatentAttention", "LinearState", "MeasuredRow", "MemoryBreakdown",
    "ModelSpec", "OfferingSpec", "PhaseBreakdown", "Results", "SearchOptions", "SearchResult", "SlidingWindow", "SparseTopK",
    "Speculative", "Workload", "absolute_percentage_error", "acceptance_rate_from_mean_accepted", "blocks_computed",
    "blocks_saved_by_early_stop", "cartesian_grid", "choose_compute_dtype", "choose_layout", "decoding_from_params",
    "default_efficiency", "default_kv_dtype", "estimate", "evaluate", "expected_tokens_per_step", "experts_touched",
    "lpu_min_chips", "method_names", "pareto_front", "policy_for", "predict_measured", "predict_metric", "predict_row", "read_measurements",
    "resolve_efficiency", "search", "speculative_speedup", "group_stats", "ratio_stats", "summarize", "tensor_parallel_options", "weights_total_bytes",
]  # fmt: skip
