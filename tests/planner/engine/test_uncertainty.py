"""80% prediction intervals from held-out errors of comparable predictions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.engine.uncertainty import bands_from, coverage, interval


def _rows(metric: str, kind: str, engine: str, ratios) -> list[dict]:
    return [{"metric": metric, "chip_kind": kind, "engine": engine, "measured": r, "predicted": 1.0} for r in ratios]


RATIOS = np.exp(np.linspace(-0.5, 0.5, 101))  # measured / predicted from e^-0.5 to e^0.5


def test_a_band_is_the_10th_to_90th_percentile_of_log_measured_over_predicted():
    (band, *_) = [b for b in bands_from(_rows("tpot_s", "gpu", "vLLM", RATIOS)) if b.engine == "vLLM"]
    assert (band.low_log_ratio, band.high_log_ratio) == pytest.approx((-0.4, 0.4))
    got = interval(2.0, "tpot_s", chip_kind="gpu", engine="vLLM", bands=[band])
    assert (got.low, got.high) == pytest.approx((2.0 * math.exp(-0.4), 2.0 * math.exp(0.4)))
    assert "101 held-out tpot_s errors on gpu chips with vLLM" == got.basis


def test_throughput_borrows_the_tpot_band_inverted():
    bands = bands_from(_rows("tpot_s", "gpu", "vLLM", RATIOS * math.exp(0.2)))
    tpot = interval(1.0, "tpot_s", chip_kind="gpu", engine="vLLM", bands=bands)
    per_user = interval(1.0, "tokens_per_s_per_user", chip_kind="gpu", engine="vLLM", bands=bands)
    assert per_user.low == pytest.approx(1 / tpot.high) and per_user.high == pytest.approx(1 / tpot.low)


def test_a_group_with_few_values_falls_back_and_an_unmeasured_kind_gets_the_widest_band_widened():
    bands = bands_from(_rows("ttft_s", "gpu", "SGLang", RATIOS[:10]) + _rows("ttft_s", "gpu", "vLLM", RATIOS))
    assert {(b.chip_kind, b.engine) for b in bands} == {("gpu", "vLLM"), ("gpu", "*"), ("*", "*")}
    sglang = interval(1.0, "ttft_s", chip_kind="gpu", engine="SGLang", bands=bands)
    assert "gpu chips" in sglang.basis and "SGLang" not in sglang.basis
    tpu = interval(1.0, "ttft_s", chip_kind="tpu", engine="JetStream", bands=bands)
    assert "no measurement of a tpu chip" in tpu.basis
    assert math.log(tpu.high / tpu.low) > 1.4 * math.log(sglang.high / sglang.low)


def test_coverage_counts_the_measured_values_inside_their_intervals():
    rows = [{"measured": 1.0, "interval": [0.5, 2.0]}, {"measured": 3.0, "interval": [0.5, 2.0]}, {"measured": 1.0, "interval": None}]
    assert coverage(rows) == 0.5
