"""Workloads as users bring them: distributions that mean what they say, and errors that name the field."""

from __future__ import annotations

import numpy as np
import pytest

from planner.engine.simulation import Arrivals, Lengths, SimulationWorkload, Trace, WorkloadError


def _workload(**overrides) -> SimulationWorkload:
    values = dict(requests=20_000, arrivals=Arrivals.poisson(10.0), prompt=Lengths.fixed(100), output=Lengths.fixed(10), seed=3)
    return SimulationWorkload(**{**values, **overrides})


def test_poisson_arrivals_come_at_the_rate_with_exponential_gaps():
    gaps = np.diff(_workload().sample().arrival_s)
    assert gaps.mean() == pytest.approx(0.1, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)


def test_gamma_arrivals_keep_the_rate_and_take_the_coefficient_of_variation():
    gaps = np.diff(_workload(arrivals=Arrivals.gamma(10.0, cv=3.0)).sample().arrival_s)
    assert gaps.mean() == pytest.approx(0.1, rel=0.1)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.1)


@pytest.mark.parametrize("kind", ["normal", "lognormal"])
def test_normal_and_lognormal_lengths_have_the_mean_and_spread_asked(kind):
    tokens = _workload(prompt=Lengths(kind=kind, mean_tokens=1000.0, std_tokens=300.0)).sample().prompt_tokens
    assert tokens.mean() == pytest.approx(1000.0, rel=0.02)
    assert tokens.std() == pytest.approx(300.0, rel=0.05)
    assert tokens.min() >= 1 and tokens.dtype == np.int64


def test_histogram_lengths_fall_in_their_bins_by_weight():
    tokens = _workload(output=Lengths.histogram([1, 100, 1000], [3, 1])).sample().output_tokens
    assert ((tokens >= 1) & (tokens <= 1000)).all()
    assert (tokens < 100).mean() == pytest.approx(0.75, abs=0.02)


def test_a_trace_is_taken_as_given_sorted_by_arrival_and_shifted_to_start_at_zero():
    requests = SimulationWorkload(trace=Trace(arrival_s=[12.0, 10.0, 11.0], prompt_tokens=[3, 1, 2], output_tokens=[30, 10, 20])).sample()
    assert list(requests.arrival_s) == [0.0, 1.0, 2.0]
    assert list(requests.prompt_tokens) == [1, 2, 3]
    assert list(requests.output_tokens) == [10, 20, 30]


def test_a_shared_prefix_reaches_the_share_of_requests_asked():
    requests = _workload(shared_prefix_tokens=64, shared_prefix_fraction=0.25).sample()
    assert (requests.prefix_tokens == 64).mean() == pytest.approx(0.25, abs=0.02)
    assert set(np.unique(requests.prefix_tokens)) == {0, 64}


@pytest.mark.parametrize(
    "workload, field",
    [
        (_workload(requests=0), "requests"),
        (_workload(arrivals=Arrivals.poisson(-1.0)), "arrivals.rate_per_s"),
        (_workload(arrivals=Arrivals(kind="uniform", rate_per_s=1.0)), "arrivals.kind"),
        (_workload(arrivals=Arrivals.gamma(5.0, cv=0.0)), "arrivals.cv"),
        (_workload(arrivals=Arrivals.closed_loop(concurrency=0)), "arrivals.concurrency"),
        (_workload(prompt=Lengths.fixed(0)), "prompt.tokens"),
        (_workload(prompt=Lengths.normal(float("nan"), 10.0)), "prompt.mean_tokens"),
        (_workload(output=Lengths.lognormal(100.0, -5.0)), "output.std_tokens"),
        (_workload(output=Lengths(kind="zipf")), "output.kind"),
        (_workload(output=Lengths.histogram([10, 5], [1])), "output.bin_edges_tokens"),
        (_workload(output=Lengths.histogram([1, 5, 10], [1])), "output.bin_weights"),
        (_workload(output=Lengths(kind="normal", mean_tokens=10.0, std_tokens=1.0, min_tokens=5, max_tokens=2)), "output.max_tokens"),
        (_workload(prompt=None), "prompt"),
        (_workload(shared_prefix_fraction=1.5), "shared_prefix_fraction"),
        (_workload(prompt=Lengths.fixed(500), shared_prefix_tokens=5000, shared_prefix_fraction=0.5), "shared_prefix_tokens"),
        (SimulationWorkload(trace=Trace(arrival_s=[0.0, 1.0], prompt_tokens=[5, 0], output_tokens=[1, 1])), "trace.prompt_tokens[1]"),
        (SimulationWorkload(trace=Trace(arrival_s=[0.0, -1.0], prompt_tokens=[5, 5], output_tokens=[1, 1])), "trace.arrival_s[1]"),
        (SimulationWorkload(trace=Trace(arrival_s=[0.0], prompt_tokens=[5], output_tokens=[2.5])), "trace.output_tokens[0]"),
        (SimulationWorkload(trace=Trace(arrival_s=[0.0, 1.0], prompt_tokens=[5], output_tokens=[1, 1])), "trace"),
        (SimulationWorkload(trace=Trace(arrival_s=["soon"], prompt_tokens=[5], output_tokens=[1])), "trace.arrival_s"),
        (SimulationWorkload(trace=Trace(arrival_s=[0.0], prompt_tokens=[5], output_tokens=[1]), prompt=Lengths.fixed(3)), "trace"),
    ],
)
def test_bad_workload_inputs_raise_an_error_naming_the_field(workload, field):
    with pytest.raises(WorkloadError) as caught:
        workload.sample()
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
