"""One evaluation priced under many offerings costs exactly what a full estimate per offering does.

POST /api/v1/estimates/ evaluates the chosen configuration once and prices every offering of the
chip from it (Evaluation.cost); these tests hold that shortcut to the engine's own estimate()."""

from __future__ import annotations

import dataclasses
import math

import pytest

from planner.engine import BlockDiffusion, Deployment, Efficiency, OfferingSpec, Speculative, Workload, estimate
from planner.engine.estimate import CostBreakdown, evaluate_deployment

from .factories import (
    block_diffusion_8b,
    epyc_9654,
    h100_purchase,
    h100_reserved,
    h100_sxm,
    llama_2_7b,
    llama_3_1_8b,
    llama_3_1_70b,
    mixtral_8x7b,
    tpu_v5e,
)


def _offerings() -> list[OfferingSpec]:
    """Rented (flat) and owned (power-dependent, with and without a PUE) prices."""
    return [
        h100_reserved(),
        h100_purchase(),
        OfferingSpec(slug="owned-no-pue", pricing_model="purchase", purchase_usd_per_chip=12000.0, amortisation_years=3.0,
                     power_usd_per_kwh=0.15),  # fmt: skip
        OfferingSpec(slug="owned-no-power-price", pricing_model="purchase", purchase_usd_per_chip=9000.0, amortisation_years=5.0),
    ]


H100_CALIBRATION = {("nvidia-h100-sxm", "bf16"): Efficiency(compute_fraction=0.6, bandwidth_fraction=0.75, step_overhead_s=1e-4, link_bandwidth_fraction=0.8, source="calibration v1")}
CHAT = Workload(prompt_tokens=1024, output_tokens=256)
SLO_CHAT = Workload(prompt_tokens=1024, output_tokens=256, ttft_slo_s=0.5, tpot_slo_s=0.05)

CONFIGURATIONS = {
    "dense, one chip": (llama_2_7b(), Deployment(chip=h100_sxm()), CHAT, dict(batch=32)),
    "dense, max batch under SLOs, TP 8, disaggregated": (
        llama_3_1_70b(), Deployment(chip=h100_sxm(), chip_count=8, tensor_parallel=8), SLO_CHAT,
        dict(batch="max", disaggregated=True),
    ),
    "dense, calibrated, 2 replicas of TP 2": (
        llama_3_1_8b(), Deployment(chip=h100_sxm(), chip_count=4, tensor_parallel=2), CHAT, dict(batch=16, calibration=H100_CALIBRATION),
    ),
    "MoE at fp8, TP 2": (
        mixtral_8x7b(), Deployment(chip=h100_sxm(), chip_count=2, tensor_parallel=2, weight_dtype="fp8"), CHAT, dict(batch=64),
    ),
    "speculative": (
        llama_3_1_70b(),
        Deployment(chip=h100_sxm(), chip_count=4, tensor_parallel=4,
                   decoding=Speculative(draft=llama_2_7b(), draft_tokens=4, acceptance_rate=0.8)),
        CHAT, dict(batch=1),
    ),
    "block diffusion": (block_diffusion_8b(), Deployment(chip=h100_sxm(), decoding=BlockDiffusion(block_size=32, tokens_per_forward=2.5)),
                        CHAT, dict(batch=8)),
    "TPU with pipeline parallel, no TDP": (
        llama_3_1_8b(), Deployment(chip=tpu_v5e(), chip_count=4, tensor_parallel=2, pipeline_parallel=2), CHAT, dict(batch=4),
    ),
    "CPU, efficiency override": (
        llama_2_7b(), Deployment(chip=epyc_9654()), Workload(prompt_tokens=256, output_tokens=64), dict(batch=2, efficiency=Efficiency(compute_fraction=0.3, bandwidth_fraction=0.6, step_overhead_s=1e-3, link_bandwidth_fraction=0.8)),
    ),
    "does not fit": (llama_3_1_70b(), Deployment(chip=h100_sxm()), CHAT, dict(batch=1)),
    "misses its SLOs": (llama_2_7b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=1024, output_tokens=256, tpot_slo_s=1e-4), dict(batch=1)),
}  # fmt: skip


def _same(a: CostBreakdown, b: CostBreakdown) -> bool:
    """Field by field, exactly; NaN (no throughput) equals NaN."""
    pairs = zip(dataclasses.astuple(a), dataclasses.astuple(b))
    return all(x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)) for x, y in pairs)


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_each_offering_priced_from_one_evaluation_costs_what_a_full_estimate_does(name):
    model, deployment, workload, kwargs = CONFIGURATIONS[name]
    evaluation = evaluate_deployment(model, deployment, workload, **kwargs)
    for offering in _offerings():
        full = estimate(model, deployment, workload, offering=offering, **kwargs).cost
        shortcut = evaluation.cost(offering)
        assert _same(shortcut, full), (offering.slug, shortcut, full)
        assert _same(evaluation.estimate(offering).cost, full)


def test_the_unpriced_evaluation_is_the_estimate_without_an_offering():
    model, deployment, workload, kwargs = CONFIGURATIONS["dense, max batch under SLOs, TP 8, disaggregated"]
    evaluation = evaluate_deployment(model, deployment, workload, **kwargs)
    assert evaluation.estimate() == estimate(model, deployment, workload, **kwargs)
    assert evaluation.estimate().cost is None


def test_the_configurations_cover_feasible_infeasible_and_power_priced_cases():
    feasibility = {name: evaluate_deployment(m, d, w, **k).estimate().feasible for name, (m, d, w, k) in CONFIGURATIONS.items()}
    assert not feasibility["does not fit"] and not feasibility["misses its SLOs"]
    assert feasibility["dense, one chip"] and feasibility["dense, max batch under SLOs, TP 8, disaggregated"]
    # An owned chip's hourly price follows its power draw, so the shortcut must carry the operating point.
    evaluation = evaluate_deployment(llama_2_7b(), Deployment(chip=h100_sxm()), CHAT, batch=32)
    assert evaluation.cost(h100_purchase()).usd_per_chip_hour < evaluate_deployment(
        llama_2_7b(), Deployment(chip=h100_sxm()), CHAT, batch=256
    ).cost(h100_purchase()).usd_per_chip_hour
