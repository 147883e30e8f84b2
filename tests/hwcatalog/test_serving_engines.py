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


def test_the_catalog_carries_the_engines_deployments_use_on_every_kind_of_chip(catalog, anonymous_client):
    from hwcatalog.models import ServingEngine
    from planner.catalog_specs import serving_engine_named

    by_slug = {e["slug"]: e for e in anonymous_client.get("/api/v1/engines/").json()}
    # The list: llama.cpp, LMDeploy, vLLM-TPU/JetStream, IPEX/OpenVINO, MLX, and the stacks behind the measured rows.
    assert {"llama-cpp", "lmdeploy", "jetstream", "openvino", "mlx-lm", "neuronx", "vllm-gaudi", "sglang-jax", "itrex", "tgi"} <= set(by_slug)
    assert by_slug["llama-cpp"]["max_batch_sequences"] == 4 and by_slug["llama-cpp"]["prefill_token_budget"] == 2048
    assert (by_slug["lmdeploy"]["kv_memory_rule"], by_slug["lmdeploy"]["kv_memory_fraction"]) == ("of_free", 0.8)
    # Every name a request may use (slug, name, fitted profile, alias) resolves to one engine only.
    names = [(n, e.slug) for e in ServingEngine.objects.all() for n in {m.casefold() for m in (e.slug, e.name, e.profile, *e.aliases) if m}]
    assert len({n for n, _ in names}) == len(names)
    assert all(serving_engine_named(n.upper()).slug == slug for n, slug in names)


def test_an_estimate_naming_llama_cpp_on_a_mac_runs_under_its_slots_with_the_chips_own_efficiency(catalog, anonymous_client):
    body = {"model": "llama-3.1-8b", "chip": "apple-m2-ultra", "chip_count": 1, "weight_dtype": "int4", "prompt_tokens": 512,
            "output_tokens": 256, "batch": 4, "serving_engine": "LLAMA-CPP"}  # fmt: skip
    four = anonymous_client.post("/api/v1/estimates/", body, format="json").json()
    assert four["fits"] and four["serving_engine"] == "llama.cpp"
    # No engine profile was fitted on Apple silicon: the chip keeps its family's (fitted on llama.cpp's own rows).
    assert four["efficiency_source"].startswith("fitted chip-family profile (Apple other")
    eight = anonymous_client.post("/api/v1/estimates/", {**body, "batch": 8}, format="json").json()
    assert not eight["fits"] and "room for 4 concurrent sequences" in eight["reasons"][0]  # llama-server's four slots


@pytest.mark.parametrize(
    ("engine", "chip", "dtype", "says"),
    [
        ("llama.cpp", "intel-gaudi3", "bf16", "runs on NVIDIA, AMD, Intel cpu, Intel gpu, Apple chips only"),
        ("TensorRT-LLM", "amd-mi300x", "bf16", "runs on NVIDIA chips only"),
        ("JetStream", "nvidia-h100-sxm", "bf16", "runs on tpu chips"),
        ("llama.cpp", "nvidia-h100-sxm", "fp8", "serves fp32, bf16, fp16, fp4, int8, int4 weights, not fp8"),
    ],
)
def test_an_engine_is_refused_where_it_does_not_run_naming_the_field(catalog, anonymous_client, engine, chip, dtype, says):
    body = {"model": "llama-3.1-8b", "chip": chip, "chip_count": 1, "weight_dtype": dtype, "prompt_tokens": 512, "output_tokens": 256,
            "serving_engine": engine}  # fmt: skip
    response = anonymous_client.post("/api/v1/estimates/", body, format="json")
    assert response.status_code == 400 and says in response.json()["serving_engine"][0]


def test_an_engine_named_on_a_chip_outside_its_profile_brings_its_host_costs_not_its_kernels(catalog, anonymous_client, token_client, monkeypatch):
    from planner import catalog_specs
    from planner.engine_profiles import stored_profiles

    body = {"model": "deepseek-v3", "chip": "amd-mi355x", "chip_count": 8, "tensor_parallel": 8, "weight_dtype": "fp8",
            "prompt_tokens": 1024, "output_tokens": 256, "batch": 4}  # fmt: skip
    profile = stored_profiles()["SGLang"]
    # A chip with a fitted profile of its own (the AMD chip-family profile) keeps its kernels and step overhead, and takes
    # the engine's request overhead, which the chip-family profile does not fit.
    unnamed = anonymous_client.post("/api/v1/estimates/", body, format="json").json()
    fitted = anonymous_client.post("/api/v1/estimates/", {**body, "serving_engine": "sglang"}, format="json").json()
    assert fitted["efficiency_source"].startswith("fitted chip-family profile (AMD gpu")
    assert fitted["efficiency_source"].endswith(", with SGLang's request overhead")
    assert fitted["ttft_s"] - unnamed["ttft_s"] == pytest.approx(profile.request_overhead_s, rel=0.05)
    assert fitted["tpot_s"] == pytest.approx(unnamed["tpot_s"], rel=0.01)
    # A request's own efficiency override wins over what the engine brings.
    none = anonymous_client.post("/api/v1/estimates/", {**body, "serving_engine": "sglang", "efficiency": {"request_overhead_s": 0}},
                                 format="json").json()  # fmt: skip
    assert none["ttft_s"] == pytest.approx(unnamed["ttft_s"], rel=1e-6)
    # A plan naming the engine waits it once too.
    plan = {"model": "deepseek-v3", "workload": {"prompt_tokens": 1024, "output_tokens": 256, "concurrency": 4},
            "serving_engine": "sglang", "hardware": {"chips": ["amd-mi355x"], "weight_dtypes": ["fp8"], "max_chips": 8}}  # fmt: skip
    response = token_client.post("/api/v1/plans/", plan, format="json")
    assert response.status_code == 201, response.json()
    rows = response.json()["results"]["ranked"]
    row = next(r for r in rows if r["chip_count"] == 8 and r["tensor_parallel"] == 8 and r["batch"] == 4)
    alone = anonymous_client.post("/api/v1/estimates/", {**body, "serving_engine": "sglang", "batch": 4}, format="json").json()
    assert row["ttft_s"] == pytest.approx(alone["ttft_s"], rel=1e-6)
    # With no chip-family profile, the MI355X is at its spec defaults.
    monkeypatch.setattr(catalog_specs, "stored_family_profiles", lambda: {})
    plain = anonymous_client.post("/api/v1/estimates/", body, format="json").json()
    sglang = anonymous_client.post("/api/v1/estimates/", {**body, "serving_engine": "sglang"}, format="json").json()
    assert plain["efficiency_source"] == "spec defaults"
    assert sglang["efficiency_source"] == "spec defaults with SGLang's step and request overheads (its fitted serving-engine profile)"
    # The request's handling before its prefill and the scheduler's work per step come with the engine; the MI355X's
    # compute and bandwidth stay at its spec defaults (SGLang's profile was fitted on NVIDIA GPUs).
    assert sglang["ttft_s"] - plain["ttft_s"] >= profile.request_overhead_s
    assert sglang["tpot_s"] - plain["tpot_s"] == pytest.approx(profile.step_overhead_s - 3e-4, rel=0.2)


def test_a_fitted_engine_is_named_as_its_profile_and_a_vendor_kind_must_be_a_kind(catalog):
    import datetime as dt

    from django.core.exceptions import ValidationError

    from hwcatalog.models import ServingEngine

    # Requests resolve an engine to its name, which keys its fitted profile and error bands.
    assert all(e.profile in ("", e.name) for e in ServingEngine.objects.all())
    engine = ServingEngine(slug="x", name="X", project_url="https://example.org", chip_kinds=["cpu"], chip_vendors=["Intel cpus"],
                           weight_dtypes=["bf16", "fp7"], kv_memory_rule="of_total", kv_memory_fraction=0.9, sources=["a"],
                           as_of=dt.date(2026, 12, 5))  # fmt: skip
    with pytest.raises(ValidationError) as err:
        engine.full_clean()
    assert "Intel cpus" in err.value.message_dict["chip_vendors"][0] and "fp7" in err.value.message_dict["weight_dtypes"][0]


def test_llama_cpp_runs_only_its_quantised_weights_on_a_cpus_matrix_units(catalog, anonymous_client):
    by_slug = {e["slug"]: e for e in anonymous_client.get("/api/v1/engines/").json()}
    assert by_slug["llama-cpp"]["cpu_matrix_dtypes"] == ["int8", "int4"]  # Q8_0 and the 4-bit GGUF types (ggml-cpu/amx)
    assert by_slug["llama-cpp"]["cpu_matrix_experts"] is False  # its AMX kernels do not take MUL_MAT_ID
    assert by_slug["sglang"]["cpu_matrix_dtypes"] is None and by_slug["sglang"]["cpu_matrix_experts"]  # all on the matrix units
    from hwcatalog.models import ServingEngine
    from planner.catalog_specs import scheduler_spec

    llama = scheduler_spec(ServingEngine.objects.get(slug="llama-cpp"))  # what estimates under it read
    assert (llama.cpu_matrix_dtypes, llama.cpu_matrix_experts) == (("int8", "int4"), False)


@pytest.mark.parametrize("value, says", [(["int3"], "Unknown weight dtypes: int3"), (5, "A list"), ({"a": 1}, "A list"), ([""], "A list")])
def test_a_bad_matrix_dtype_list_is_refused_naming_the_field(db, value, says):
    import datetime as dt

    from django.core.exceptions import ValidationError

    from hwcatalog.models import ServingEngine

    engine = ServingEngine(slug="x", name="X", project_url="https://example.org", chip_kinds=["cpu"], weight_dtypes=["bf16"],
                           kv_memory_rule="of_total", kv_memory_fraction=0.9, cpu_matrix_dtypes=value, sources=["a"],
                           as_of=dt.date(2026, 12, 1))  # fmt: skip
    with pytest.raises(ValidationError) as err:
        engine.full_clean()
    assert says in err.value.message_dict["cpu_matrix_dtypes"][0]


def test_a_reason_names_a_searched_variant_as_its_chip_under_its_engine():
    from planner.engine_profiles import readable

    assert readable("one amd-mi210@SGLang has 68.7 GB; 2 x nvidia-h100-sxm@TensorRT-LLM (TP 2)") == (
        "one amd-mi210 under SGLang has 68.7 GB; 2 x nvidia-h100-sxm under TensorRT-LLM (TP 2)")
    assert readable("llama-3.1-70b needs 141 GB of weights") == "llama-3.1-70b needs 141 GB of weights"
