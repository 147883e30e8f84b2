from __future__ import annotations

import pytest

from planner.engine import Deployment, Workload, default_efficiency, estimate

from .factories import a100_sxm_80gb, h100_sxm, llama_2_7b


def test_fp8_math_reaches_a_smaller_share_of_its_peak_than_bf16():
    chip = h100_sxm()
    assert default_efficiency(chip, "fp8").compute_fraction == pytest.approx(0.7 * default_efficiency(chip, "bf16").compute_fraction)
    # A chip without fp8 math falls back to bf16 and keeps the bf16 share.
    assert default_efficiency(a100_sxm_80gb(), "fp8").compute_fraction == default_efficiency(a100_sxm_80gb(), "bf16").compute_fraction


def test_prefill_pays_a_launch_overhead_per_layer_that_decode_steps_do_not():
    model = llama_2_7b()
    result = estimate(model, Deployment(chip=h100_sxm()), Workload(prompt_tokens=128, output_tokens=2), batch=1)
    per_layer = default_efficiency(h100_sxm(), "bf16").prefill_layer_overhead_s
    assert result.prefill.overhead_s == pytest.approx(result.decode.overhead_s + model.num_layers * per_layer)
    # A 128-token prompt: the fixed cost is a large share of TTFT (TensorRT-LLM measures 7 ms on H100).
    assert result.prefill.overhead_s / result.ttft_s > 0.4
