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
    predict_metric,
    predict_row,
    read_measurements,
    summarize,
)
from .decoding import (
    acceptance_rate_from_mean_accepted,
    blocks_computed,
    blocks_saved_by_early_stop,
    expected_tokens_per_step,
    speculative_speedup,
)
from .dtypes import choose_compute_dtype, default_kv_dtype
from .efficiency import Calibration, Efficiency, default_efficiency, resolve_efficiency
from .estimate import CostBreakdown, Estimate, MemoryBreakdown, PhaseBreakdown, estimate
from .evaluate import evaluate, lpu_min_chips, weights_total_bytes
from .forward import experts_touched
from .grid import CandidateGrid, cartesian_grid
from .results import Results
from .search import InfeasibleGroup, SearchOptions, SearchResult, pareto_front, search
from .specs import (
    Autoregressive,
    BlockDiffusion,
    ChipSpec,
    Decoding,
    Deployment,
    Diffusion,
    ModelSpec,
    OfferingSpec,
    Speculative,
    Workload,
)

__all__ = [
    "Autoregressive", "BlockDiffusion", "Calibration", "CandidateGrid", "ChipSpec", "CostBreakdown", "Decoding",
    "Deployment", "Diffusion", "Efficiency", "Estimate", "InfeasibleGroup", "MeasuredRow", "MemoryBreakdown",
    "ModelSpec", "OfferingSpec", "PhaseBreakdown", "Results", "SearchOptions", "SearchResult", "Speculative",
    "Workload", "absolute_percentage_error", "acceptance_rate_from_mean_accepted", "blocks_computed",
    "blocks_saved_by_early_stop", "cartesian_grid", "choose_compute_dtype", "choose_layout", "decoding_from_params",
    "default_efficiency", "default_kv_dtype", "estimate", "evaluate", "expected_tokens_per_step", "experts_touched",
    "lpu_min_chips", "pareto_front", "predict_metric", "predict_row", "read_measurements", "resolve_efficiency",
    "search", "speculative_speedup", "summarize", "weights_total_bytes",
]  # fmt: skip
