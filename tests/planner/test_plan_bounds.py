"""Plan searches are bounded: candidates are counted exactly before any is built, a search past
the limit is a 400 naming what to narrow, and the grid is searched in chunks of fixed size with
the same answer as one pass."""
from __future__ import annotations

import time

import numpy as np
import pytest

from planner import services
from planner.engine import SearchOptions, Workload, search
from planner.engine.grid import GridSpec, cartesian_grid, grid_chunks, grid_size
from planner.engine.streamed import search_streamed
from planner.serializers import PlanInputSerializer
from tests.planner.engine.factories import (
    a100_reserved, a100_sxm_80gb, epyc_9654, groq_lpu, h100_purchase, h100_reserved, h100_sxm, llama_3_1_70b, tpu_v5e,
)  # fmt: skip

CHIPS = (h100_sxm(), a100_sxm_80gb(), tpu_v5e(), groq_lpu(), epyc_9654())
OFFERINGS = {"nvidia-h100-sxm": (h100_reserved(), h100_purchase()), "nvidia-a100-sxm-80gb": (a100_reserved(),)}
ALL_DTYPES = ["fp32", "bf16", "fp16", "fp8", "int8", "fp4", "int4"]
# The issue's request shape (max_chips 1024, all seven weight dtypes, eight decodings, disaggregated)
# with no concurrency (eleven batch sizes): 71,637,104 candidates by the exact count.
HUGE = {
    "model": "llama-3.1-70b",
    "workload": {"prompt_tokens": 1000, "output_tokens": 300},
    "hardware": {"max_chips": 1024, "weight_dtypes": ALL_DTYPES},
    "decodings": [{"method": "ar"}] * 8,
    "disaggregated": True,
}


def _prepared(body):
    serializer = PlanInputSerializer(data=body)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


@pytest.mark.parametrize("options", [
    {}, {"max_chip_count": 1024, "decoding_count": 3, "weight_dtypes": ("bf16", "fp8", "int4")},
    {"kv_dtypes": ("bf16", "fp8"), "batches": (4,)}, {"max_chip_count": 7},
])  # fmt: skip
def test_the_count_is_the_grids_length_and_the_chunks_join_into_the_grid(options):
    spec = GridSpec(model=llama_3_1_70b(), chips=CHIPS, **options)
    grid = cartesian_grid(llama_3_1_70b(), CHIPS, **options)
    assert grid_size(spec) == len(grid)
    for size in (1_000, 65_536):
        chunks = list(grid_chunks(spec, chunk_candidates=size))
        assert all(len(c) <= size for c in chunks) and sum(len(c) for c in chunks) == len(grid)
        for name in ("chip_index", "chip_count", "tensor_parallel", "pipeline_parallel", "weight_dtype", "kv_dtype", "batch", "decoding_index"):
            assert np.array_equal(np.concatenate([getattr(c, name) for c in chunks]), getattr(grid, name)), name


def test_an_empty_grid_is_one_empty_chunk():
    assert [len(c) for c in grid_chunks(GridSpec(model=llama_3_1_70b(), chips=()), chunk_candidates=10)] == [0]


@pytest.mark.parametrize("budget, pessimistic", [(None, False), (2.0, False), (None, True), (2.0, True)])
def test_a_search_in_chunks_ranks_fronts_and_counts_as_one_pass_does(budget, pessimistic):
    workload = Workload(prompt_tokens=512, output_tokens=256, tpot_slo_s=0.05)
    options = SearchOptions(max_chip_count=256)
    key = (lambda r: np.nan_to_num(r.usd_per_million_output_tokens * (1 + r.results.grid.chip_index), nan=np.inf)) if pessimistic else None
    whole = search(llama_3_1_70b(), CHIPS, OFFERINGS, workload, options)
    ranked = whole.ranked if key is None else whole.ranked[np.argsort(key(whole)[whole.ranked], kind="stable")]
    if budget is not None:
        ranked = ranked[whole.usd_per_million_output_tokens[ranked] <= budget]
    for chunk in (997, 1 << 16):
        streamed = search_streamed(llama_3_1_70b(), CHIPS, OFFERINGS, workload, options, keep=50, rank_key=key,
                                   budget_usd_per_million_output_tokens=budget, chunk_candidates=chunk)  # fmt: skip
        r = streamed.result
        mine = r.ranked if key is None else r.ranked[np.argsort(key(r)[r.ranked], kind="stable")]
        if budget is not None:
            mine = mine[r.usd_per_million_output_tokens[mine] <= budget]
        assert streamed.candidates == whole.candidates and streamed.feasible == len(whole.ranked)
        assert streamed.within_budget == len(ranked)
        assert np.array_equal(streamed.kept[mine[:50]], ranked[:50])
        assert np.array_equal(streamed.kept[r.pareto_cost_tpot], whole.pareto_cost_tpot)
        assert np.array_equal(streamed.kept[r.pareto_cost_ttft], whole.pareto_cost_ttft)
        assert [(g.name, g.count, g.example, int(streamed.kept[g.example_index])) for g in streamed.infeasible] == [
            (g.name, g.count, g.example, g.example_index) for g in whole.infeasible
        ]
        assert r.estimate(int(mine[0])) == whole.estimate(int(ranked[0]))


def test_the_issues_15_million_candidate_request_is_refused_before_any_search_naming_the_fields(catalog, token_client, monkeypatch):
    # Bounded by construction: the grid is counted, never built or searched (the time is printed, not
    # asserted: a shared CI machine's speed says nothing about the code).
    def no_search(*args, **kwargs):
        raise AssertionError("a refused plan must not search")

    monkeypatch.setattr(services, "search_streamed", no_search)
    started = time.perf_counter()
    response = token_client.post("/api/v1/plans/", HUGE, format="json")
    elapsed = time.perf_counter() - started
    assert response.status_code == 400, response.json()
    message = response.json()["hardware"][0]
    assert "limit 5,000,000" in message
    for field in ("hardware.max_chips", "hardware.weight_dtypes", "decodings", "workload.concurrency", "hardware.kinds"):
        assert field in message
    count = int(message.split(" configurations")[0].split()[-1].replace(",", ""))
    assert count > 10 * services.MAX_PLAN_CANDIDATES / 5
    print(f"\n15M-candidate request: {count:,} counted, refused in {elapsed * 1000:.0f} ms")


def test_the_worst_allowed_request_builds_exactly_the_counted_grid(catalog):
    """The largest max_chips under the limit for the issue's request shape: its streamed grid has
    exactly the counted length (the full grid of it would be ~400 MB of int64 rows)."""
    def prepared(max_chips):
        return services.plan_search_prepare(data=_prepared({**HUGE, "hardware": {**HUGE["hardware"], "max_chips": max_chips}}))

    low, high = 1, 1024  # the count grows with max_chips: bisect for the largest allowed
    while low < high:
        middle = (low + high + 1) // 2
        try:
            prepared(middle)
            low = middle
        except services.PlanTooLarge:
            high = middle - 1
    worst = prepared(low)
    spec_length = sum(len(c) for c in grid_chunks(_spec_of(worst), chunk_candidates=1 << 18))
    print(f"\nworst allowed request: max_chips {low}, {worst.candidates:,} candidates")
    assert worst.candidates == spec_length
    assert services.MAX_PLAN_CANDIDATES * 0.9 < worst.candidates <= services.MAX_PLAN_CANDIDATES
    with pytest.raises(services.PlanTooLarge):
        prepared(low + 1)


def _spec_of(prepared):
    from planner import catalog_specs
    from planner.engine.search import grid_spec

    return grid_spec(catalog_specs.model_spec(prepared.model), prepared.specs, prepared.workload, prepared.options)


def test_a_narrower_request_under_the_inline_size_is_searched_in_the_request(catalog, token_client, settings):
    body = {**HUGE, "hardware": {"kinds": ["tpu"], "max_chips": 8}, "decodings": [{"method": "ar"}], "workload": {**HUGE["workload"], "concurrency": 8}}
    count = services.plan_search_prepare(data=_prepared(body)).candidates
    assert count <= settings.PLAN_INLINE_MAX_CANDIDATES
    response = token_client.post("/api/v1/plans/", body, format="json")
    assert response.status_code == 201 and response.json()["status"] == "done"
    assert response.json()["candidate_count"] == count


def test_a_chip_under_a_serving_engine_is_searched_only_at_the_weight_dtypes_the_engine_serves():
    from dataclasses import replace

    from planner.engine.specs import Scheduler
    from planner.engine.units import DTYPE_CODE

    bf16_only = replace(h100_sxm(), slug="nvidia-h100-sxm@bf16-engine", scheduler=Scheduler(engine="bf16-engine", kv_memory_fraction=0.9,
                                                                                             weight_dtypes=("bf16",)))  # fmt: skip
    options = {"weight_dtypes": ("fp32", "bf16", "fp8")}
    grid = cartesian_grid(llama_3_1_70b(), (h100_sxm(), bf16_only), **options)
    assert grid_size(GridSpec(model=llama_3_1_70b(), chips=(h100_sxm(), bf16_only), **options)) == len(grid)
    assert set(grid.weight_dtype[grid.chip_index == 1].tolist()) == {DTYPE_CODE["bf16"]}
    assert set(grid.weight_dtype[grid.chip_index == 0].tolist()) == {DTYPE_CODE[d] for d in options["weight_dtypes"]}
    assert (grid.chip_index == 0).sum() == 3 * (grid.chip_index == 1).sum()


def test_a_plan_naming_no_engine_tries_tensorrt_llm_at_no_weight_dtype_it_does_not_serve(catalog):
    """TensorRT-LLM serves no fp32 weights (its catalog entry): at fp32 only vLLM and SGLang are tried on an H100."""
    hardware = {"chips": ["nvidia-h100-sxm"], "max_chips": 8}
    fp32 = services.plan_search_prepare(data=_prepared({**HUGE, "decodings": [{"method": "ar"}], "hardware": {**hardware, "weight_dtypes": ["fp32"]}}))
    bf16 = services.plan_search_prepare(data=_prepared({**HUGE, "decodings": [{"method": "ar"}], "hardware": {**hardware, "weight_dtypes": ["bf16"]}}))
    assert len(fp32.specs) == len(bf16.specs) == 3
    assert 3 * fp32.candidates == 2 * bf16.candidates
