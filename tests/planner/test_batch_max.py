"""batch "max" is the largest batch that fits memory and meets both SLOs: held against a brute-force
scan of every batch from 1 past the memory limit (issue 14)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engine.deployment import Deployment
from planner.engine.estimate import estimate, evaluate_batches
from planner.engine.specs import Workload
from tests.planner.engine.factories import h100_sxm, llama_3_1_70b, llama_3_1_8b, mixtral_8x7b

PROMPT = dict(prompt_tokens=1000, output_tokens=300)

CASES = {
    # dense 70B at fp8 over TP 4: the TPOT SLO binds long before memory does
    "dense, TPOT-bound": (llama_3_1_70b(), Deployment(chip=h100_sxm(), chip_count=8, tensor_parallel=4, weight_dtype="fp8"),
                          Workload(**PROMPT, ttft_slo_s=0.5, tpot_slo_s=0.05)),
    # dense 8B on one chip with no SLO: the KV cache binds
    "dense, memory-bound": (llama_3_1_8b(), Deployment(chip=h100_sxm()), Workload(**PROMPT)),
    # MoE over TP 2, a loose TPOT SLO: memory binds
    "MoE, memory-bound": (mixtral_8x7b(), Deployment(chip=h100_sxm(), chip_count=2, tensor_parallel=2),
                          Workload(**PROMPT, ttft_slo_s=2.0, tpot_slo_s=0.2)),
    # MoE over TP 2 and 2 replicas, a tight TPOT SLO
    "MoE, TPOT-bound": (mixtral_8x7b(), Deployment(chip=h100_sxm(), chip_count=4, tensor_parallel=2),
                        Workload(**PROMPT, ttft_slo_s=0.5, tpot_slo_s=0.03)),
    # a request rate: small batches lack the slots Little's law asks for, TTFT falls with the batch
    "dense, under a request rate": (llama_3_1_70b(), Deployment(chip=h100_sxm(), chip_count=8, tensor_parallel=4, weight_dtype="fp8"),
                                    Workload(**PROMPT, request_rate_per_s=25, ttft_slo_s=0.5, tpot_slo_s=0.05)),
    # a closed loop of 400 clients: the first wave's TTFT grows with the batch
    "dense, closed loop, TTFT-bound": (llama_3_1_8b(), Deployment(chip=h100_sxm(), chip_count=2),
                                       Workload(**PROMPT, concurrency=400, closed_loop=True, ttft_slo_s=0.3, tpot_slo_s=0.1)),
    # the same over 32 chips: the answer (4,800) lies more than one scan window (4,096) below the memory limit
    "dense, closed loop, TTFT-bound far below memory": (llama_3_1_8b(), Deployment(chip=h100_sxm(), chip_count=32),
                                                        Workload(**PROMPT, concurrency=500, closed_loop=True, ttft_slo_s=0.2,
                                                                 tpot_slo_s=0.2)),
}  # fmt: skip


def scanned_max(model, deployment, workload) -> tuple[int | None, np.ndarray]:
    """The largest feasible batch among every batch from 1 to past the memory limit, and the reasons."""
    limit = int(evaluate_batches(model, deployment, workload, [1]).max_concurrency[0])
    batches = np.arange(1, limit + 64)
    results = evaluate_batches(model, deployment, workload, batches)
    ok = np.flatnonzero(results.feasible)
    return (int(batches[ok[-1]]) if len(ok) else None), results


@pytest.mark.parametrize("case", CASES)
def test_max_batch_is_the_largest_feasible_batch_of_a_scan(case):
    model, deployment, workload = CASES[case]
    expected, _ = scanned_max(model, deployment, workload)
    e = estimate(model, deployment, workload, batch="max")
    assert expected is not None and e.feasible
    assert e.batch == expected


def test_the_cases_cover_a_tpot_bound_a_memory_bound_and_a_ttft_bound_maximum():
    bound = {}
    for case, (model, deployment, workload) in CASES.items():
        best, results = scanned_max(model, deployment, workload)
        bound[case] = results.reason_text(best)  # why batch best + 1 fails
    assert bound["dense, TPOT-bound"].startswith("TPOT") and bound["MoE, TPOT-bound"].startswith("TPOT")
    assert "KV cache" in bound["dense, memory-bound"] and "KV cache" in bound["MoE, memory-bound"]
    assert bound["dense, closed loop, TTFT-bound"].startswith("TTFT")


@pytest.mark.parametrize("case", CASES)
def test_tpot_never_falls_as_the_batch_grows(case):
    """What makes the search below the memory limit exact: past the first batch that misses the TPOT SLO,
    every larger one misses it too."""
    model, deployment, workload = CASES[case]
    _, results = scanned_max(model, deployment, workload)
    assert np.all(np.diff(results.tpot_s) >= -1e-12)


def test_max_batch_is_batch_1_and_infeasible_when_no_batch_meets_the_slos():
    model, deployment, _ = CASES["dense, TPOT-bound"]
    e = estimate(model, deployment, Workload(**PROMPT, tpot_slo_s=1e-4), batch="max")
    assert e.batch == 1 and not e.feasible and e.reasons[0].startswith("TPOT")
