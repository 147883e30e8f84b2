from __future__ import annotations

import pytest

from frontend import charts

H100ISH = {"slug": "x", "name": "X", "memory_bandwidth_bytes_per_s": 2e12, "peak_bf16_flops_per_s": 1e15, "peak_fp8_flops_per_s": 2e15}


def test_roof_is_bandwidth_times_intensity_below_the_ridge_and_flat_above():
    points = charts.roof_points(peak_flops_per_s=1e15, bandwidth_bytes_per_s=2e12, intensities=[1, 500, 1000])
    assert points == [{"x": 1, "y": 2e12}, {"x": 500, "y": 1e15}, {"x": 1000, "y": 1e15}]


def test_default_roof_points_are_the_range_ends_and_the_ridge():
    points = charts.roof_points(peak_flops_per_s=1e15, bandwidth_bytes_per_s=2e12)
    assert [p["x"] for p in points] == [charts.INTENSITY_MIN, 500.0, charts.INTENSITY_MAX]
    assert points[1]["y"] == pytest.approx(1e15)


def test_chip_roof_uses_the_requested_dtype_and_falls_back_to_bf16():
    assert charts.chip_roof(H100ISH, "fp8")["ridge_flop_per_byte"] == pytest.approx(1000)
    fallback = charts.chip_roof(H100ISH, "int4")
    assert fallback["dtype"] == "bf16" and fallback["ridge_flop_per_byte"] == pytest.approx(500)


def test_chip_without_peaks_has_no_roof():
    assert charts.chip_roof({"slug": "y", "memory_bandwidth_bytes_per_s": 1e12}) is None


def test_operating_point_is_intensity_and_achieved_flops():
    phase = {"intensity_flop_per_byte": 254.0, "flops_per_chip": 7e12, "time_s": 0.014}
    assert charts.operating_point(phase) == {"x": 254.0, "y": pytest.approx(5e14)}
    assert charts.operating_point({}) is None


def test_memory_breakdown_splits_usable_memory_and_reports_headroom():
    memory = {"weights_bytes_per_chip": 50e9, "kv_bytes_per_chip": 20e9, "activation_bytes_per_chip": 5e9, "usable_bytes_per_chip": 100e9}
    out = charts.memory_breakdown(memory)
    assert out["free_bytes"] == pytest.approx(25e9)
    assert out["headroom_fraction"] == pytest.approx(0.25)
    assert out["over_bytes"] == 0


def test_memory_breakdown_never_shows_negative_free_memory():
    out = charts.memory_breakdown({"weights_bytes_per_chip": 120e9, "usable_bytes_per_chip": 100e9})
    assert out["free_bytes"] == 0 and out["over_bytes"] == pytest.approx(20e9)


def test_configuration_label_reads_like_a_deployment():
    row = {"total_chips": 8, "chip_slug": "h", "tensor_parallel": 4, "pipeline_parallel": 1, "replicas": 2, "weight_dtype": "fp8", "batch": 64, "decoding": "ar"}
    assert charts.configuration_label(row) == "8x h · TP4 · 2 replicas · fp8 · batch 64 · ar"


def test_plan_chart_data_has_a_roof_per_chip_and_dtype_and_sorted_pareto_fronts(chat_plan):
    data = charts.plan_chart_data(chat_plan.results, chat_plan.catalog_snapshot)
    assert len(data["rows"]) == len(chat_plan.results["ranked"])
    first = data["rows"][0]
    assert first["rank"] == 1 and first["decode"]["x"] > 0 and first["memory"]["usable_bytes"] > 0
    assert f"{first['chip_slug']}/{first['compute_dtype']}" in data["roofs"]
    # The error bars of the cost-latency chart: each row's 80% ranges of cost, TTFT and TPOT.
    ranked = chat_plan.results["ranked"][0]["intervals"]
    assert first["intervals"]["usd_per_million_output_tokens"] == [ranked["usd_per_million_output_tokens"]["low"],
                                                                   ranked["usd_per_million_output_tokens"]["high"]]  # fmt: skip
    assert set(first["intervals"]) == {"usd_per_million_output_tokens", "ttft_s", "tpot_s"}
    xs = [p["x"] for p in data["pareto_tpot"]]
    assert xs == sorted(xs) and xs
