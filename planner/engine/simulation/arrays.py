"""The candidate arrays estimate() builds, for one deployment at given batches (the same calls as evaluate())."""

from __future__ import annotations

import numpy as np

from ..deployment import Deployment
from ..dtypes import ComputeTable, compute_table, default_kv_dtype
from ..efficiency import Calibration, Override, efficiency_table
from ..grid import CandidateGrid
from ..hardware import CandidateHardware, candidate_hardware, chip_table
from ..specs import ModelSpec
from ..units import DTYPE_CODE


def deployment_arrays(
    model: ModelSpec, deployment: Deployment, *, efficiency: Override | None = None, calibration: Calibration | None = None,
    batch: np.ndarray | None = None,
) -> tuple[CandidateGrid, ComputeTable, CandidateHardware]:
    """(grid, compute table, hardware) of `deployment`, one candidate per entry of `batch` (the whole
    deployment's sequences; default one)."""
    batch = np.ones(1) if batch is None else np.asarray(batch, dtype=float)
    model = deployment.stored_model(model)
    kv = deployment.kv_dtype or default_kv_dtype(deployment.weight_dtype, deployment.chip)
    chips = (deployment.chip,)
    m = len(batch)
    grid = CandidateGrid(
        chip_index=np.zeros(m), chip_count=np.full(m, deployment.chip_count), tensor_parallel=np.full(m, deployment.tensor_parallel),
        pipeline_parallel=np.full(m, deployment.pipeline_parallel), weight_dtype=np.full(m, DTYPE_CODE[deployment.weight_dtype]),
        kv_dtype=np.full(m, DTYPE_CODE[kv]), batch=batch, decoding_index=np.zeros(m),
        attention_data_parallel=np.full(m, deployment.attention_data_parallel),
        expert_parallel=None if deployment.expert_parallel is None else np.full(m, deployment.expert_parallel),
    )  # fmt: skip
    factors = efficiency_table(chips, calibration=calibration, override=efficiency)
    compute = compute_table(chips)
    return grid, compute, candidate_hardware(chip_table(chips), grid, compute, factors, model.weight_tables)
