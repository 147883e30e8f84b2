"""80% prediction intervals from held-out errors of comparable predictions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.engine.uncertainty import bands_from, chip_family_bands, coverage, interval


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


def test_a_range_that_excludes_its_own_point_says_which_side_comparable_predictions_fell_on():
    # Every comparable TTFT ran 1.2x to 3x the prediction (as the spec defaults' do on NVIDIA GPUs): the range lies above it.
    bands = bands_from(_rows("ttft_s", "gpu", "vLLM", np.linspace(1.2, 3.0, 101)))
    ttft = interval(0.1, "ttft_s", chip_kind="gpu", engine="vLLM", bands=bands)
    assert ttft.low > 0.1 and ttft.basis.endswith("the range lies above the prediction: at least nine in ten comparable predictions ran under the measured value")
    # Tokens/s run inversely: the same errors put its range below the prediction.
    slow = bands_from(_rows("tpot_s", "gpu", "vLLM", np.linspace(1.2, 3.0, 101)))
    assert "lies below the prediction" in interval(100.0, "tokens_per_s_per_user", chip_kind="gpu", engine="vLLM", bands=slow).basis
    assert "lies" not in interval(2.0, "tpot_s", chip_kind="gpu", engine="vLLM", bands=bands_from(_rows("tpot_s", "gpu", "vLLM", RATIOS))).basis


def test_a_group_with_few_values_falls_back_and_an_unmeasured_kind_gets_the_widest_band_widened():
    bands = bands_from(_rows("ttft_s", "gpu", "SGLang", RATIOS[:10]) + _rows("ttft_s", "gpu", "vLLM", RATIOS))
    assert {(b.chip_kind, b.engine) for b in bands} == {("gpu", "vLLM"), ("gpu", "+"), ("gpu", "*"), ("*", "*")}
    sglang = interval(1.0, "ttft_s", chip_kind="gpu", engine="SGLang", bands=bands)
    assert "gpu chips" in sglang.basis and "SGLang" not in sglang.basis
    tpu = interval(1.0, "ttft_s", chip_kind="tpu", engine="JetStream", bands=bands)
    assert "no measurement of a tpu chip" in tpu.basis
    assert math.log(tpu.high / tpu.low) > 1.4 * math.log(sglang.high / sglang.low)


def test_coverage_counts_the_measured_values_inside_their_intervals():
    rows = [{"measured": 1.0, "interval": [0.5, 2.0]}, {"measured": 3.0, "interval": [0.5, 2.0]}, {"measured": 1.0, "interval": None}]
    assert coverage(rows) == 0.5


def test_disaggregated_predictions_get_the_band_of_disaggregated_errors_and_colocated_ones_their_own():
    narrow = [{**r, "mode": "agg"} for r in _rows("ttft_s", "gpu", "SGLang", RATIOS)]
    wide = [{**r, "mode": "disagg"} for r in _rows("ttft_s", "gpu", "SGLang", RATIOS**3)]
    bands = bands_from(narrow + wide)
    colocated = interval(1.0, "ttft_s", chip_kind="gpu", engine="SGLang", bands=bands, serving="colocated")
    disaggregated = interval(1.0, "ttft_s", chip_kind="gpu", engine="SGLang", bands=bands, serving="disaggregated")
    assert (math.log(colocated.low), math.log(colocated.high)) == pytest.approx((-0.4, 0.4))
    assert (math.log(disaggregated.low), math.log(disaggregated.high)) == pytest.approx((-1.2, 1.2))
    assert disaggregated.basis == "101 held-out ttft_s errors on gpu chips with SGLang, disaggregated"
    # A prediction that does not say how it is served takes the band over both.
    either = interval(1.0, "ttft_s", chip_kind="gpu", engine="SGLang", bands=bands)
    assert colocated.high < either.high < disaggregated.high


def test_an_engine_with_few_disaggregated_values_borrows_the_other_engines_disaggregated_band_before_its_own_colocated_one():
    rows = [{**r, "mode": "agg"} for r in _rows("ttft_s", "gpu", "vLLM", RATIOS)]
    rows += [{**r, "mode": "disagg"} for r in _rows("ttft_s", "gpu", "vLLM", RATIOS[:3] ** 3)]
    rows += [{**r, "mode": "disagg"} for r in _rows("ttft_s", "gpu", "SGLang", RATIOS**3)]
    got = interval(1.0, "ttft_s", chip_kind="gpu", engine="vLLM", bands=bands_from(rows), serving="disaggregated")
    assert got.basis == "104 held-out ttft_s errors on gpu chips with every serving engine, disaggregated"


def test_a_band_stored_before_serving_modes_were_kept_reads_as_either_mode(tmp_path):
    from planner.engine.uncertainty import load_bands

    path = tmp_path / "bands.json"
    path.write_text('{"source": "", "bands": [{"metric": "tpot_s", "chip_kind": "gpu", "engine": "*", "low_log_ratio": -0.1, '
                    '"high_log_ratio": 0.2, "values": 40}]}')  # fmt: skip
    (band,) = load_bands(path)
    assert band.serving == "*"
    got = interval(1.0, "tpot_s", chip_kind="gpu", engine="*", bands=[band], serving="disaggregated")
    assert got.high == pytest.approx(math.exp(0.2))


def test_an_unmeasured_chip_kind_widens_the_widest_band_of_predictions_served_the_same_way():
    rows = [{**r, "mode": "agg"} for r in _rows("tpot_s", "gpu", "vLLM", RATIOS)]
    rows += [{**r, "mode": "disagg"} for r in _rows("tpot_s", "gpu", "vLLM", RATIOS**4)]
    bands = bands_from(rows)
    colocated = interval(1.0, "tpot_s", chip_kind="tpu", engine="JetStream", bands=bands, serving="colocated")
    assert colocated.basis == "no measurement of a tpu chip on JetStream: every tpot_s band of colocated predictions, their span widened by half"
    assert (math.log(colocated.low), math.log(colocated.high)) == pytest.approx((-0.6, 0.6))
    disaggregated = interval(1.0, "tpot_s", chip_kind="tpu", engine="JetStream", bands=bands, serving="disaggregated")
    assert (math.log(disaggregated.low), math.log(disaggregated.high)) == pytest.approx((-2.4, 2.4))


def test_an_unmeasured_chip_kind_is_never_less_uncertain_than_a_measured_one():
    # Spec-default errors sit above the prediction, fitted ones around it: the unmeasured kind spans both.
    spec = [{**r, "mode": "agg"} for r in _rows("tpot_s", "gpu", "vLLM", RATIOS * math.exp(0.6))]
    fitted = [{**r, "mode": "agg"} for r in _rows("tpot_s", "gpu", "vLLM", RATIOS)]
    bands = bands_from(spec, engines=False) + bands_from(fitted, pooled=False)
    unmeasured = interval(1.0, "tpot_s", chip_kind="tpu", engine="*", bands=bands, serving="colocated")
    for band in bands:
        assert unmeasured.low < math.exp(band.low_log_ratio) and math.exp(band.high_log_ratio) < unmeasured.high, band


def test_a_fitted_profiles_prediction_keeps_to_fitted_profiles_errors_before_the_spec_defaults():
    # As the stored file is built (accuracy.write_error_bands): engine "*" bands from spec-default predictions,
    # engine bands from the fitted profiles' held-out ones. vLLM has too few disaggregated values of its own.
    spec = [{**r, "mode": "disagg"} for r in _rows("ttft_s", "gpu", "vLLM", RATIOS * math.exp(2.0))]
    fitted = [{**r, "mode": "disagg"} for r in _rows("ttft_s", "gpu", "vLLM", RATIOS[:5])]
    fitted += [{**r, "mode": "disagg"} for r in _rows("ttft_s", "gpu", "SGLang", RATIOS)]
    bands = bands_from(spec, engines=False) + bands_from(fitted, pooled=False)
    vllm = interval(1.0, "ttft_s", chip_kind="gpu", engine="vLLM", bands=bands, serving="disaggregated")
    assert vllm.basis == "106 held-out ttft_s errors on gpu chips with every serving engine, disaggregated"
    assert vllm.low < 1.0 < vllm.high
    # A prediction at the spec defaults (no engine) takes the spec defaults' band.
    bare = interval(1.0, "ttft_s", chip_kind="gpu", engine="*", bands=bands, serving="disaggregated")
    assert bare.basis.startswith("101 held-out ttft_s errors on gpu chips, disaggregated; the range lies above") and bare.low > 1.0


def test_a_band_over_both_modes_says_so_when_a_mode_was_asked_for():
    bands = bands_from([{**r, "mode": "agg"} for r in _rows("tpot_s", "gpu", "vLLM", RATIOS)])
    got = interval(1.0, "tpot_s", chip_kind="gpu", engine="vLLM", bands=[b for b in bands if b.serving == "*"], serving="disaggregated")
    assert got.basis == "101 held-out tpot_s errors on gpu chips with vLLM (too few disaggregated ones: both serving modes)"


def _measured(metric: str, kind: str, ratios) -> list[dict]:
    return [{"metric": metric, "chip_kind": kind, "measured": r, "predicted": 1.0} for r in ratios]


def test_a_chip_kind_measured_outside_the_silicon_file_takes_its_own_held_out_errors():
    silicon = bands_from([{**r, "mode": "agg"} for r in _rows("tpot_s", "gpu", "vLLM", RATIOS)])
    outside = chip_family_bands(_measured("tpot_s", "other", RATIOS * math.exp(0.3)))
    got = interval(1.0, "tpot_s", chip_kind="other", engine="*", bands=silicon + outside, serving="colocated")
    assert got.basis == ("101 held-out tpot_s errors on other chips measured outside the silicon file (chip-family profiles, each "
                         "architecture held out), widened by half")  # fmt: skip
    # The 10th to 90th percentile (-0.1 to 0.7) widened by half about its centre: a chip's misses are its own.
    assert (math.log(got.low), math.log(got.high)) == pytest.approx((-0.3, 0.9))
    # A GPU keeps the silicon file's band; a kind measured nowhere still gets the widened envelope.
    assert "gpu chips" in interval(1.0, "tpot_s", chip_kind="gpu", engine="*", bands=silicon + outside, serving="colocated").basis
    lpu = interval(1.0, "tpot_s", chip_kind="lpu", engine="*", bands=silicon + outside, serving="colocated")
    assert lpu.basis.startswith("no measurement of a lpu chip") and lpu.high > got.high


def test_throughput_measured_outside_the_silicon_file_counts_as_tpot_inverted():
    # Tokens/s predicted 20% high is TPOT predicted 20% low: measured / predicted TPOT = 1.2.
    outside = chip_family_bands(_measured("output_tokens_per_s", "other", [1.0 / 1.2] * 40))
    (band,) = outside
    assert band.metric == "tpot_s" and band.low_log_ratio == pytest.approx(math.log(1.2))


def test_a_chip_kind_with_few_values_outside_the_silicon_file_pools_every_kinds_and_says_so():
    outside = chip_family_bands(_measured("tpot_s", "other", RATIOS) + _measured("decode_tokens_per_s_per_user", "tpu", [1.0] * 5))
    got = interval(1.0, "tpot_s", chip_kind="tpu", engine="*", bands=outside, serving="colocated")
    assert got.basis == ("106 held-out tpot_s errors on chips of every kind measured outside the silicon file (chip-family profiles, "
                         "each architecture held out) (too few on tpu chips: 5), widened by half")  # fmt: skip


def test_a_disaggregated_deployment_of_a_chip_outside_the_silicon_file_spans_the_silicon_files_disaggregated_spread():
    silicon = bands_from([{**r, "mode": "disagg"} for r in _rows("ttft_s", "gpu", "vLLM", RATIOS**4)], engines=False)
    outside = chip_family_bands(_measured("ttft_s", "other", RATIOS))
    colocated = interval(1.0, "ttft_s", chip_kind="other", engine="*", bands=silicon + outside, serving="colocated", outside_silicon=True)
    disaggregated = interval(1.0, "ttft_s", chip_kind="other", engine="*", bands=silicon + outside, serving="disaggregated",
                             outside_silicon=True)  # fmt: skip
    assert (math.log(colocated.low), math.log(colocated.high)) == pytest.approx((-0.6, 0.6))
    assert (math.log(disaggregated.low), math.log(disaggregated.high)) == pytest.approx((-1.6, 1.6))
    assert disaggregated.basis.endswith("then to the silicon file's disaggregated spread (none of these chips measured disaggregated)")


def test_a_gpu_outside_the_silicon_file_takes_its_chip_family_errors_before_the_silicon_files_gpu_band():
    silicon = bands_from([{**r, "mode": "agg"} for r in _rows("tpot_s", "gpu", "vLLM", RATIOS)])
    outside = chip_family_bands(_measured("tpot_s", "gpu", RATIOS * math.exp(1.0)))
    nvidia = interval(1.0, "tpot_s", chip_kind="gpu", engine="*", bands=silicon + outside, serving="colocated")
    amd = interval(1.0, "tpot_s", chip_kind="gpu", engine="*", bands=silicon + outside, serving="colocated", outside_silicon=True)
    assert nvidia.basis == "101 held-out tpot_s errors on gpu chips, colocated"
    assert amd.basis.startswith("101 held-out tpot_s errors on gpu chips measured outside the silicon file")
    assert math.log(amd.low) == pytest.approx(0.4)  # 0.6 to 1.4, widened by half about 1.0


def test_the_stored_bands_cover_every_chip_kind_measured_outside_the_silicon_file():
    from pathlib import Path

    from planner.engine.uncertainty import load_bands

    stored = Path(__file__).resolve().parents[3] / "planner" / "data" / "error_bands.json"
    assert "--bands-other other_chips.csv" in stored.read_text()
    outside = {(b.metric, b.chip_kind) for b in load_bands(stored) if b.engine == "~"}
    assert outside == {(metric, kind) for metric in ("ttft_s", "tpot_s") for kind in ("cpu", "gpu", "other", "tpu")}


def test_kinds_with_too_few_values_pool_their_own_errors_not_a_kind_measured_enough_to_have_a_band():
    # 40 TPU values a wide 0.5x-2x apart, 20 CPU and 20 GPU values all on the mark: the CPU's and GPU's band pools the
    # 40 of those two kinds (each too few alone), not the TPU's spread, which only the TPU's own band carries.
    tpu = _measured("ttft_s", "tpu", np.array([0.5, 2.0] * 20))
    few = _measured("ttft_s", "cpu", np.ones(20)) + _measured("ttft_s", "gpu", np.ones(20))
    bands = {b.chip_kind: b for b in chip_family_bands(tpu + few)}
    assert bands["cpu"].values == bands["gpu"].values == 40 and bands["tpu"].values == 40
    assert bands["cpu"].low_log_ratio == pytest.approx(0.0) and bands["tpu"].high_log_ratio > 1.0
    got = interval(1.0, "ttft_s", chip_kind="cpu", engine="*", bands=tuple(bands.values()), serving="colocated")
    assert got.basis == ("40 held-out ttft_s errors on chips of several kinds measured outside the silicon file (chip-family profiles, "
                         "each architecture held out) (too few on cpu chips: 20; pooled over the cpu and gpu chips, each too few on "
                         "its own), widened by half")  # fmt: skip
    # Too few together, the short kinds take every kind's values, as before.
    sparse = {b.chip_kind: b for b in chip_family_bands(tpu + _measured("ttft_s", "cpu", np.ones(5)))}
    assert sparse["cpu"].values == 45 and sparse["cpu"].pooled_from == "too few on cpu chips: 5"
