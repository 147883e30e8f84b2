"""The simulator's step cost is the planner's forward model, tabulated: the same numbers, not a copy."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engine import Deployment, Diffusion, Speculative, Workload, estimate
from planner.engine.forward import forward_cost
from planner.engine.simulation import step_cost_for
from planner.engine.simulation.step_cost import deployment_hardware

from .factories import h100_sxm, llama_3_1_8b, mixtral_8x7b


def _forward_s(model, deployment, **kwargs) -> float:
    hw = deployment_hardware(model, deployment)
    return float(forward_cost(model, hw, **{k: np.atleast_1d(np.asarray(v, dtype=float)) for k, v in kwargs.items()}).time_s[0])


@pytest.mark.parametrize("batch, context", [(1, 100), (8, 1000), (64, 3000), (256, 500)])
def test_a_decode_step_costs_what_the_forward_model_says(batch, context):
    model, deployment = llama_3_1_8b(), Deployment(chip=h100_sxm())
    cost = step_cost_for(model, deployment)
    expected = _forward_s(model, deployment, sequences=batch, new_tokens=1, attention_pairs=context, kv_read_tokens=context,
                          kv_write_tokens=1)  # fmt: skip
    got = cost.step_time_s(prefill_tokens=0, decode_sequences=batch, decode_context_tokens=batch * context)
    assert got == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("model", [llama_3_1_8b(), mixtral_8x7b()], ids=lambda m: m.slug)
def test_a_lone_prefill_step_costs_the_estimates_prefill(model):
    deployment = Deployment(chip=h100_sxm(), chip_count=2, tensor_parallel=2)
    cost = step_cost_for(model, deployment)
    est = estimate(model, deployment, Workload(prompt_tokens=2000, output_tokens=100), batch=1)
    assert cost.step_time_s(prefill_tokens=2000, decode_sequences=0, decode_context_tokens=0) == pytest.approx(est.prefill.time_s, rel=1e-9)


def test_a_mixed_step_is_one_forward_over_all_its_tokens():
    model, deployment = llama_3_1_8b(), Deployment(chip=h100_sxm())
    cost = step_cost_for(model, deployment)
    # 512 prefill tokens (256 of them cached before: a second chunk) beside 32 decodes at 2,000 tokens each.
    pairs = (768**2 - 256**2) / 2.0
    got = cost.step_time_s(prefill_tokens=512, decode_sequences=32, decode_context_tokens=64_000, prefill_pairs=pairs,
                           prefill_kv_read_tokens=256)  # fmt: skip
    # Logits for the 32 decoding positions and the one the prefill chunk finishes its prompt with.
    expected = _forward_s(model, deployment, sequences=1, new_tokens=544, attention_pairs=pairs + 64_000, kv_read_tokens=64_256,
                          kv_write_tokens=544, logit_tokens=33)  # fmt: skip
    # The prefill pays its un-captured kernel launches once per step (evaluate._prefill's extra overhead).
    assert got == pytest.approx(expected + cost.prefill_overhead_s, rel=1e-9)


def test_the_kv_blocks_hold_what_the_estimates_memory_rule_allows():
    model, deployment = llama_3_1_8b(), Deployment(chip=h100_sxm())
    cost = step_cost_for(model, deployment)
    est = estimate(model, deployment, Workload(prompt_tokens=8192, output_tokens=1), batch=1)
    # The estimate's sequences of 8,192 tokens, in blocks of 16, fit the simulator's blocks (it reserves no logits row).
    assert cost.kv_blocks // (8192 // 16) == pytest.approx(est.memory.max_concurrency, abs=1)


@pytest.mark.parametrize(
    "deployment, words",
    [
        (Deployment(chip=h100_sxm(), chip_count=2, pipeline_parallel=2), "pipeline_parallel=2"),
        (Deployment(chip=h100_sxm(), decoding=Diffusion(steps=64)), "autoregressive, speculative and block-diffusion"),
    ],
)
def test_it_refuses_what_it_does_not_model_and_says_what(deployment, words):
    with pytest.raises(ValueError, match=words):
        step_cost_for(llama_3_1_8b(), deployment)


def test_the_simulator_is_as_pure_as_the_engine():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    forbidden = ("django", "rest_framework", "celery", "torch", "kombu", "numba")
    code = ("import sys, planner.engine.simulation, planner.engine.simulation.bench; "
            f"print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {forbidden!r})))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True, env={"PYTHONPATH": str(root)})
    assert out.stdout.strip() == ""
