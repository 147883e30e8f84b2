"""The pessimistic plan ranking and a fleet's pessimistic capacity take the band of how the deployment is served
(colocated or disaggregated), as the rows' own intervals do (planner/engine/uncertainty.py)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from planner import fleet_services, services
from planner.engine.uncertainty import ErrorBand

# Fitted vLLM errors on GPUs: TPOT within 20% when colocated, within a factor of two when disaggregated.
BANDS = (
    ErrorBand(metric="tpot_s", chip_kind="gpu", engine="vLLM", serving="colocated", low_log_ratio=-0.2, high_log_ratio=0.2, values=100),
    ErrorBand(metric="tpot_s", chip_kind="gpu", engine="vLLM", serving="disaggregated", low_log_ratio=-0.7, high_log_ratio=0.7, values=100),
    ErrorBand(metric="tpot_s", chip_kind="*", engine="*", serving="*", low_log_ratio=-0.3, high_log_ratio=0.3, values=200),
)


@pytest.fixture(autouse=True)
def bands(monkeypatch):
    monkeypatch.setattr(services, "error_bands", lambda: BANDS)
    monkeypatch.setattr(fleet_services, "error_bands", lambda: BANDS)


def _search_result(disaggregated: bool, served=(1000.0, 1000.0)):
    return SimpleNamespace(
        usd_per_million_output_tokens=np.array([1.0, 2.0]),
        results=SimpleNamespace(context=SimpleNamespace(disaggregated=disaggregated), grid=SimpleNamespace(chip_index=np.array([0, 0])),
                                output_tokens_per_s_total=np.array([1000.0, 1000.0]), served_output_tokens_per_s=np.array(served)),
    )


@pytest.mark.parametrize(("disaggregated", "high"), [(False, 0.2), (True, 0.7)])
def test_the_pessimistic_cost_is_the_high_end_of_the_band_of_how_the_plan_is_served(disaggregated, high):
    chip = SimpleNamespace(vendor="NVIDIA", kind="gpu")
    cost = services._pessimistic_cost(_search_result(disaggregated), [chip], ["vLLM"])
    assert cost == pytest.approx(np.array([1.0, 2.0]) * np.exp(high))
    # Charged to a request rate's tokens, a row's cost rises only where its capacity at the band's high end could fall
    # short of them: 100 of 1,000 tokens/s never does; 900 does, by 0.9 x exp(high) where that exceeds 1.
    rated = services._pessimistic_cost(_search_result(disaggregated, served=(100.0, 900.0)), [chip], ["vLLM"])
    assert rated == pytest.approx(np.array([1.0, 2.0 * max(1.0, 0.9 * np.exp(high))]))


@pytest.mark.parametrize(("disaggregated", "low"), [(False, -0.2), (True, -0.7)])
def test_a_fleets_pessimistic_capacity_is_the_low_end_of_the_band_of_how_it_is_served(disaggregated, low):
    search = SimpleNamespace(chips=[SimpleNamespace(slug="nvidia-h100-sxm", vendor="NVIDIA", kind="gpu")],
                             specs=[SimpleNamespace(slug="nvidia-h100-sxm@vLLM")],
                             options=SimpleNamespace(disaggregated=disaggregated))  # fmt: skip
    assert fleet_services._throughput_low_ratios(search) == pytest.approx([np.exp(low)])


def test_a_cost_charged_to_a_rates_tokens_moves_only_where_the_capacity_falls_short():
    from planner.engine.uncertainty import served_cost_ratio, served_share

    assert served_share(100.0, 1000.0) == pytest.approx(0.1) and served_share(None, 1000.0) == 1.0 and served_share(5.0, 0.0) == 1.0
    assert served_cost_ratio(np.array([0.8, 1.5, 20.0]), 0.1) == pytest.approx([1.0, 1.0, 2.0])
    assert served_cost_ratio(np.array([0.8, 1.5]), 1.0) == pytest.approx([0.8, 1.5])  # no rate: the band itself


def test_a_streamed_plan_works_each_chips_pessimistic_factor_out_once_per_serving_mode(monkeypatch):
    """band_basis reads the chip's calibrations; a streamed search ranks each chunk, so the factor is kept across them."""
    calls = []
    real = services.band_basis
    monkeypatch.setattr(services, "band_basis", lambda chip, engine: calls.append(engine) or real(chip, engine))
    chip, memo = SimpleNamespace(vendor="NVIDIA", kind="gpu"), {}
    for _chunk in range(3):
        cost = services._pessimistic_cost(_search_result(False), [chip], ["vLLM"], memo)
    assert cost == pytest.approx(np.array([1.0, 2.0]) * np.exp(0.2)) and calls == ["vLLM"]
    services._pessimistic_cost(_search_result(True), [chip], ["vLLM"], memo)
    assert calls == ["vLLM", "vLLM"] and set(memo) == {"colocated", "disaggregated"}
