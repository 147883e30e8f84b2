"""A calibration stores and applies every efficiency factor; an override replaces only the factors it names."""

from __future__ import annotations

import dataclasses

import pytest

from hwcatalog.models import Chip
from planner import catalog_specs
from planner.engine.efficiency import FACTORS, Efficiency, default_efficiency, resolve_efficiency
from planner.models import Calibration

ESTIMATE = {"model": "llama-2-7b", "chip": "nvidia-a100-sxm-80gb", "prompt_tokens": 2048, "output_tokens": 128, "batch": 1,
            "weight_dtype": "bf16"}  # fmt: skip


def _estimate(client, **extra) -> dict:
    response = client.post("/api/v1/estimates/", {**ESTIMATE, **extra}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def _numbers(estimate: dict) -> dict:
    return {k: estimate[k] for k in ("ttft_s", "tpot_s", "output_tokens_per_s_total", "mfu", "mbu")}


def test_the_calibration_table_has_a_column_for_every_factor():
    columns = {f.name for f in Calibration._meta.get_fields()}
    assert set(FACTORS) <= columns
    assert set(FACTORS) == {f.name for f in dataclasses.fields(Efficiency)} - {"source"}


def test_a_calibration_holding_exactly_the_defaults_changes_nothing(catalog, anonymous_client):
    before = _estimate(anonymous_client)
    chip = catalog_specs.chip_spec(Chip.objects.get(slug="nvidia-a100-sxm-80gb"))
    defaults = default_efficiency(chip, "bf16")
    assert defaults.collective_overhead_s > 0 and defaults.prefill_layer_overhead_s > 0
    Calibration.objects.create(chip_slug=chip.slug, weight_dtype="bf16", version=1, run_count=1,
                               **{name: getattr(defaults, name) for name in FACTORS})  # fmt: skip
    after = _estimate(anonymous_client)
    assert after["efficiency_source"] == "calibration v1 (1 runs)"
    assert _numbers(after) == _numbers(before)


def test_a_calibration_fitted_before_the_overheads_were_stored_keeps_the_chips_defaults(catalog):
    chip = catalog_specs.chip_spec(Chip.objects.get(slug="nvidia-a100-sxm-80gb"))
    Calibration.objects.create(chip_slug=chip.slug, weight_dtype="bf16", version=1, run_count=2, compute_fraction=0.6,
                               bandwidth_fraction=0.7, step_overhead_s=2e-4, link_bandwidth_fraction=0.8)  # fmt: skip
    used = catalog_specs.calibrations_for([chip.slug])[(chip.slug, "bf16")]
    defaults = default_efficiency(chip, "bf16")
    assert used.compute_fraction == 0.6 and used.bandwidth_fraction == 0.7
    assert used.collective_overhead_s == defaults.collective_overhead_s
    assert used.prefill_layer_overhead_s == defaults.prefill_layer_overhead_s


def test_a_fit_stores_every_factor_it_did_not_fit_from_its_prior(catalog):
    from planner.calibrations import calibration_fit
    from planner.engine.calibration import Observation

    chip_row = Chip.objects.get(slug="nvidia-a100-sxm-80gb")
    prior = default_efficiency(catalog_specs.chip_spec(chip_row), "bf16")
    observation = Observation(decode_bytes=13.5e9, decode_flops=13.5e9, tpot_s=0.0105, prefill_bytes=13.6e9, prefill_flops=2.8e13,
                              ttft_s=0.14, peak_flops_per_s=312e12, bandwidth_bytes_per_s=2.039e12)  # fmt: skip
    row = calibration_fit(chip=chip_row, weight_dtype="bf16", observations=[observation], run_ids=["r1"])
    assert row.collective_overhead_s == prior.collective_overhead_s
    assert row.prefill_layer_overhead_s == prior.prefill_layer_overhead_s
    assert row.link_bandwidth_fraction == prior.link_bandwidth_fraction


def test_an_override_of_one_factor_keeps_the_others(catalog, anonymous_client):
    before = _estimate(anonymous_client)
    chip = catalog_specs.chip_spec(Chip.objects.get(slug="nvidia-a100-sxm-80gb"))
    same = _estimate(anonymous_client, efficiency={"bandwidth_fraction": default_efficiency(chip, "bf16").bandwidth_fraction})
    assert same["efficiency_source"] == "override"
    assert _numbers(same) == _numbers(before)
    slower = _estimate(anonymous_client, efficiency={"bandwidth_fraction": 0.3})
    assert slower["tpot_s"] > before["tpot_s"] and slower["ttft_s"] >= before["ttft_s"]


def test_an_empty_override_is_a_400_and_the_engine_refuses_unknown_factors(catalog, anonymous_client):
    empty = anonymous_client.post("/api/v1/estimates/", {**ESTIMATE, "efficiency": {}}, format="json")
    assert empty.status_code == 400 and "efficiency" in empty.json()
    chip = catalog_specs.chip_spec(Chip.objects.get(slug="nvidia-a100-sxm-80gb"))
    with pytest.raises(ValueError, match="unknown efficiency factors: \\['speed'\\]"):
        resolve_efficiency(chip, "bf16", override={"speed": 2.0})


def _slow_vllm_calibration(chip_slug: str = "nvidia-h100-sxm") -> Calibration:
    chip = catalog_specs.chip_spec(Chip.objects.get(slug=chip_slug))
    factors = {name: getattr(default_efficiency(chip, "bf16"), name) for name in FACTORS}
    return Calibration.objects.create(chip_slug=chip_slug, serving_engine="vLLM", weight_dtype="bf16", version=1, run_count=3,
                                      **{**factors, "bandwidth_fraction": 0.3})  # fmt: skip


def test_a_calibration_measured_under_an_engine_speaks_for_that_engine_only(catalog, anonymous_client):
    body = {**ESTIMATE, "chip": "nvidia-h100-sxm"}
    bare, profiled = _estimate(anonymous_client, chip="nvidia-h100-sxm"), _estimate(anonymous_client, chip="nvidia-h100-sxm", serving_engine="vLLM")
    _slow_vllm_calibration()
    calibrated = _estimate(anonymous_client, chip="nvidia-h100-sxm", serving_engine="vLLM")
    assert calibrated["efficiency_source"] == "calibration v1 (3 runs, vLLM)" and calibrated["chip_slug"] == body["chip"]
    assert calibrated["tpot_s"] > profiled["tpot_s"]  # its 0.3 of peak bandwidth, over the engine's fitted 0.6
    # Without the engine, and under another engine, nothing changed.
    assert _numbers(_estimate(anonymous_client, chip="nvidia-h100-sxm")) == _numbers(bare)
    assert _estimate(anonymous_client, chip="nvidia-h100-sxm", serving_engine="SGLang")["efficiency_source"].startswith("fitted")


def test_a_plan_row_under_an_engine_uses_that_engines_calibration(catalog, token_client):
    _slow_vllm_calibration()
    plan = token_client.post("/api/v1/plans/", {"model": "llama-3.1-8b", "workload": {"prompt_tokens": 512, "output_tokens": 128},
                                                "hardware": {"chips": ["nvidia-h100-sxm"], "max_chips": 1, "weight_dtypes": ["bf16"]},
                                                "serving_engine": "vLLM"}, format="json")  # fmt: skip
    assert plan.status_code == 201, plan.json()
    rows = plan.json()["results"]["ranked"]
    assert rows and {r["efficiency_source"] for r in rows} == {"calibration v1 (3 runs, vLLM)"}


def test_calibration_versions_count_per_chip_engine_and_dtype(catalog):
    from planner.calibrations import calibration_fit, calibration_rollback
    from planner.engine.calibration import Observation

    chip_row = Chip.objects.get(slug="nvidia-h100-sxm")
    observation = Observation(decode_bytes=16e9, decode_flops=16e9, tpot_s=0.007, prefill_bytes=16e9, prefill_flops=1.6e13,
                              ttft_s=0.03, peak_flops_per_s=989e12, bandwidth_bytes_per_s=3.35e12)  # fmt: skip
    own = calibration_fit(chip=chip_row, weight_dtype="bf16", observations=[observation], run_ids=["a"])
    vllm = [calibration_fit(chip=chip_row, weight_dtype="bf16", observations=[observation], run_ids=[r], serving_engine="vLLM") for r in "bc"]
    assert (own.version, own.serving_engine) == (1, "") and [v.version for v in vllm] == [1, 2]
    calibration_rollback(chip_slug="nvidia-h100-sxm", weight_dtype="bf16", to_version=1, serving_engine="vLLM")
    assert not Calibration.objects.get(pk=vllm[1].pk).active and Calibration.objects.get(pk=own.pk).active


def test_a_calibration_names_its_engine_as_requests_do(catalog, anonymous_client):
    from planner.calibrations import calibration_fit
    from planner.engine.calibration import Observation

    chip_row = Chip.objects.get(slug="nvidia-h100-sxm")
    observation = Observation(decode_bytes=16e9, decode_flops=16e9, tpot_s=0.007, prefill_bytes=16e9, prefill_flops=1.6e13,
                              ttft_s=0.03, peak_flops_per_s=989e12, bandwidth_bytes_per_s=3.35e12)  # fmt: skip
    row = calibration_fit(chip=chip_row, weight_dtype="bf16", observations=[observation], run_ids=["a"], serving_engine="VLLM")
    assert row.serving_engine == "vLLM"  # stored under the catalog's name, which a request naming "vllm" resolves to
    # A row stored under another of the engine's names before (an alias, another case) still speaks for requests naming it.
    legacy = _slow_vllm_calibration("nvidia-h200-sxm")
    legacy.serving_engine = "sglang"
    legacy.save()
    assert _estimate(anonymous_client, chip="nvidia-h200-sxm", serving_engine="SGLang")["efficiency_source"] == legacy.label
    with pytest.raises(ValueError, match="no serving engine named 'gpt-fast'"):
        calibration_fit(chip=chip_row, weight_dtype="bf16", observations=[observation], run_ids=["b"], serving_engine="gpt-fast")
