"""Serving engines are catalog rows: sourced scheduler defaults, read at /api/v1/engines/, used by plans."""

from __future__ import annotations

import pytest


def test_the_catalog_lists_each_profiled_engine_with_sourced_scheduler_defaults(catalog, anonymous_client):
    from planner.engine_profiles import serving_engines

    engines = anonymous_client.get("/api/v1/engines/").json()
    by_name = {e["name"]: e for e in engines}
    # Every engine the planner has a fitted profile for is a catalog row naming that profile.
    assert {e["profile"] for e in engines if e["profile"]} == set(serving_engines()) <= set(by_name)
    assert all(e["sources"] and e["as_of"] for e in engines)
    trt, vllm = by_name["TensorRT-LLM"], by_name["vLLM"]
    assert (trt["kv_memory_rule"], trt["kv_memory_fraction"]) == ("of_free", 0.9)  # of what the weights leave
    assert (vllm["kv_memory_rule"], vllm["max_batch_sequences"], vllm["prefill_token_budget"]) == ("of_total", 1024, 8192)
    assert "trtllm" in trt["aliases"]
    assert anonymous_client.get("/api/v1/engines/sglang/").json()["name"] == "SGLang"


def test_engines_are_read_only_through_the_api(catalog, staff_client):
    assert staff_client.post("/api/v1/engines/", {"slug": "x"}, format="json").status_code == 405
    assert staff_client.delete("/api/v1/engines/vllm/").status_code == 405


def test_a_bad_engine_row_is_refused_naming_the_field(db):
    import datetime as dt

    from django.core.exceptions import ValidationError

    from hwcatalog.models import ServingEngine

    engine = ServingEngine(slug="x", name="X", project_url="https://example.org", chip_kinds=["quantum"], weight_dtypes=["bf16"],
                           kv_memory_rule="of_total", kv_memory_fraction=0.9, sources=["a"], as_of=dt.date(2026, 12, 1))  # fmt: skip
    with pytest.raises(ValidationError) as err:
        engine.full_clean()
    assert "chip_kinds" in err.value.message_dict


def test_an_estimate_on_tensorrt_llm_lets_deepseek_fp8_weights_fill_eight_h100s(catalog, anonymous_client):
    body = {"model": "deepseek-v3", "chip": "nvidia-h100-sxm", "chip_count": 8, "tensor_parallel": 8, "weight_dtype": "fp8",
            "prompt_tokens": 1024, "output_tokens": 128, "batch": 4}  # fmt: skip
    plain = anonymous_client.post("/api/v1/estimates/", body, format="json").json()
    trt = anonymous_client.post("/api/v1/estimates/", {**body, "serving_engine": "TensorRT-LLM"}, format="json").json()
    assert not plain["fits"] and trt["fits"]  # 84 GB of weights per GPU: over 90% of the 85.5 GB (80 GiB) an H100 reports, under what TensorRT-LLM leaves
