"""Accuracy helpers: errors, summaries, metric mapping and the measurements CSV."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from planner.engine import Deployment, Speculative, Workload, estimate
from planner.engine.simulation import SchedulerOptions
from planner.engine.specs import Scheduler
from planner.engine.accuracy import (
    absolute_percentage_error,
    choose_layout,
    decoding_from_params,
    predict_measured,
    predict_metric,
    predict_row,
    read_measurements,
    summarize,
)

from .factories import a100_sxm_80gb, h100_sxm, llama_2_7b, llama_2_70b, xeon_8480plus
from .test_scheduler_defaults import LLAMA_CPP_LIKE

HEADER = (
    "id,model,chip,chip_count,tensor_parallel,weight_dtype,kv_dtype,batch,prompt_tokens,output_tokens,decoding,decoding_params,"
    "metric,value,engine,source,notes"
)
DEV_CSV = Path(__file__).resolve().parents[2] / "fixtures" / "measured_dev.csv"


def test_absolute_percentage_error_is_relative_to_the_measurement():
    assert absolute_percentage_error(110.0, 100.0) == pytest.approx(10.0)
    assert absolute_percentage_error(90.0, 100.0) == pytest.approx(10.0)
    with pytest.raises(ValueError):
        absolute_percentage_error(1.0, 0.0)


def test_summarize_reports_median_mean_and_groups():
    rows = [
        {"predicted": 110, "measured": 100, "metric": "ttft_s", "chip_kind": "gpu"},
        {"predicted": 80, "measured": 100, "metric": "ttft_s", "chip_kind": "gpu"},
        {"predicted": 100, "measured": 100, "metric": "tpot_s", "chip_kind": "cpu"},
    ]
    s = summarize(rows)
    assert s["count"] == 3 and s["mdape"] == pytest.approx(10.0) and s["mape"] == pytest.approx(10.0)
    assert s["by_chip_kind"]["gpu"]["mdape"] == pytest.approx(15.0)
    assert s["by_metric"]["tpot_s"] == {"mdape": 0.0, "mape": 0.0, "count": 1}


def test_predict_metric_maps_every_metric_name_to_the_estimate():
    e = estimate(llama_2_7b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=128, output_tokens=128), batch=8)
    assert predict_metric("decode_tokens_per_s_per_user", e) == e.tokens_per_s_per_user
    assert predict_metric("output_tokens_per_s", e) == e.output_tokens_per_s_total
    assert predict_metric("ttft_s", e) == e.ttft_s
    assert predict_metric("tpot_s", e) == e.tpot_s
    assert predict_metric("speedup_vs_ar", e) == 1.0
    with pytest.raises(ValueError):
        predict_metric("joules", e)


@pytest.mark.skipif(not DEV_CSV.exists(), reason="dev measurements not present")
def test_the_dev_measurements_parse_with_max_batches_and_empty_kv_dtypes():
    rows = read_measurements(DEV_CSV.read_text().splitlines())
    assert len(rows) >= 80
    assert any(r.kv_dtype is None for r in rows)
    spec = next(r for r in rows if r.decoding == "speculative")
    assert spec.decoding_params["draft_model"] == "llama-2-7b"


def test_a_speculative_row_becomes_a_speculative_decoding_with_its_draft():
    params = {"draft_model": "llama-2-7b", "draft_tokens": 4, "mean_accepted_tokens": 3.6}
    decoding = decoding_from_params("speculative", params, llama_2_7b())
    assert isinstance(decoding, Speculative) and decoding.mean_accepted_tokens == 3.6
    with pytest.raises(ValueError):
        decoding_from_params("speculative", {}, None)


def test_llama_cpp_rows_without_tp_split_layers_across_gpus():
    rows = read_measurements(
        [
            HEADER,
            "x,llama-2-70b,nvidia-a100-sxm-80gb,4,,fp16,,1,0,1024,ar,,decode_tokens_per_s_per_user,7,llama.cpp CUDA,src,",
            "y,llama-2-70b,nvidia-a100-sxm-80gb,4,,fp16,,max,128,128,ar,,output_tokens_per_s,2000,vLLM,src,",
        ]
    )
    assert choose_layout(rows[0], llama_2_70b(), a100_sxm_80gb()) == (1, 4)
    assert choose_layout(rows[1], llama_2_70b(), a100_sxm_80gb()) == (4, 1)
    throughput = predict_row(rows[1], llama_2_70b(), a100_sxm_80gb())
    assert throughput.batch == throughput.memory.max_concurrency > 100  # "max": the max-throughput point


def test_a_gpt_fast_row_is_predicted_within_twenty_percent():
    # gpt-fast Llama-2-7B bf16 on A100-80GB: 104.9 tok/s at batch 1 (README @32971d3).
    row = read_measurements(
        [
            HEADER,
            "gf,llama-2-7b,nvidia-a100-sxm-80gb,1,1,bf16,bf16,1,5,200,ar,,decode_tokens_per_s_per_user,104.9,gpt-fast,src,",
        ]
    )[0]
    predicted = predict_metric(row.metric, predict_row(row, llama_2_7b(), a100_sxm_80gb()))
    assert absolute_percentage_error(predicted, row.value) < 20.0


def test_a_static_batchs_ttft_is_the_prefill_of_every_prompt_in_it():
    """A static batch (no `load`) of eight 2,048-token prompts sent together: no prompt's first token comes before all eight
    are prefilled (the Neuron throughput tables' TTFT), so each waits for the batch's prefill; one prompt, or a closed loop's
    clients, keeps the estimate's TTFT."""
    batch, single, loop = read_measurements([
        HEADER + ",load",
        "b8,llama-2-7b,nvidia-a100-sxm-80gb,1,1,bf16,bf16,8,2048,128,ar,,ttft_s,1,vLLM,src,,",
        "b1,llama-2-7b,nvidia-a100-sxm-80gb,1,1,bf16,bf16,1,2048,128,ar,,ttft_s,1,vLLM,src,,",
        "c8,llama-2-7b,nvidia-a100-sxm-80gb,1,1,bf16,bf16,8,2048,128,ar,,ttft_s,1,vLLM,src,,closed_loop",
    ])  # fmt: skip
    est = predict_row(batch, llama_2_7b(), a100_sxm_80gb())
    assert predict_measured(batch, est) == pytest.approx(est.ttft_s - est.prefill.time_s + 8 * est.prefill_batched_s_per_prompt, rel=1e-12)
    # Compute-bound at 2,048 tokens: eight prompts take about eight times one.
    assert 6.0 < predict_measured(batch, est) / predict_metric("ttft_s", est) < 8.5
    for row in (single, loop):
        est = predict_row(row, llama_2_7b(), a100_sxm_80gb())
        assert predict_measured(row, est) == predict_metric("ttft_s", est)
    # Masked diffusion has no prefill of its own: its TTFT is the estimate's.
    diffusion = dataclasses.replace(batch, decoding="diffusion")
    assert predict_measured(diffusion, est) == predict_metric("ttft_s", est)


def test_a_batch_the_kv_cache_cannot_hold_runs_what_it_holds_and_says_so():
    # 2,000 sequences of 2,048 + 1,024 tokens of Llama-2-7B do not fit one H100: the engine admits what fits.
    row = read_measurements(
        [HEADER, "big,llama-2-7b,nvidia-h100-sxm,1,1,bf16,bf16,2000,2048,1024,ar,,output_tokens_per_s,1,vLLM,src,"]
    )[0]
    e = predict_row(row, llama_2_7b(), h100_sxm())
    assert e.fits and 1 <= e.batch == e.memory.max_concurrency < 2000
    assert any("wait for a slot" in w for w in e.warnings)
    # Anything else that stops a configuration still does: the weights of a 70B model on one chip.
    big = read_measurements([HEADER, "w,llama-2-70b,nvidia-h100-sxm,1,1,bf16,bf16,8,128,128,ar,,output_tokens_per_s,1,vLLM,src,"])[0]
    assert not predict_row(big, llama_2_70b(), h100_sxm()).fits


def test_a_measured_run_past_the_models_context_is_predicted_as_it_ran_and_says_so():
    """The Neuron benchmarks run Llama-2-7B (a 4,096-token context) over 128 + 8,064 positions: an estimate refuses
    that, a measured row is predicted as it ran, with the reason in its warnings."""
    row = read_measurements([HEADER, "long,llama-2-7b,nvidia-h100-sxm,1,1,bf16,bf16,1,128,8064,ar,,tpot_s,0.01,x,src,"])[0]
    refused = estimate(llama_2_7b(), Deployment(chip=h100_sxm(), chip_count=1, weight_dtype="bf16"),
                       Workload(prompt_tokens=128, output_tokens=8064), batch=1)  # fmt: skip
    assert not refused.fits and "context" in " ".join(refused.reasons)
    predicted = predict_row(row, llama_2_7b(), h100_sxm())
    assert predicted.fits and any("past llama-2-7b's context of 4096" in w for w in predicted.warnings)
    # Longer than the shorter run of the same model: the cache it reads grows with the positions.
    short = read_measurements([HEADER, "short,llama-2-7b,nvidia-h100-sxm,1,1,bf16,bf16,1,128,2048,ar,,tpot_s,0.01,x,src,"])[0]
    assert predicted.tpot_s > predict_row(short, llama_2_7b(), h100_sxm()).tpot_s


def test_an_optional_weight_format_column_is_read_and_predicted_with():
    header = HEADER + ",weight_format"
    line = "r,llama-3.1-8b,nvidia-h100-sxm,1,1,int4,bf16,1,0,128,ar,,decode_tokens_per_s_per_user,100,llama.cpp,src,GGUF Q4_K_M,q4_k_m"
    row = read_measurements([header, line])[0]
    assert row.weight_format == "q4_k_m"
    assert read_measurements([HEADER, line.rsplit(",", 1)[0]])[0].weight_format is None  # the column is optional
    from .factories import llama_3_1_8b

    gguf = predict_row(row, llama_3_1_8b(), h100_sxm())
    assert gguf.memory.weights_bytes_per_chip == pytest.approx(llama_3_1_8b().total_params * 4.8944 / 8)


def test_a_closed_loop_row_waits_behind_the_prompts_its_clients_send_with_it():
    """A serving benchmark run at a maximum concurrency (`load` closed_loop) is a closed loop of that many clients:
    its TTFT carries the wait behind the prompts sent with it, where a static batch's is one prefill."""
    header = HEADER + ",load,requests"
    line = "c,llama-2-7b,nvidia-h100-sxm,1,1,bf16,bf16,32,2048,256,ar,,ttft_s,1,vLLM,src,,{load},{requests}"
    static = read_measurements([header, line.format(load="", requests="")])[0]
    looped = read_measurements([header, line.format(load="closed_loop", requests="")])[0]
    one_round = read_measurements([header, line.format(load="closed_loop", requests="32")])[0]
    assert static.load is None and looped.load == "closed_loop" and one_round.requests == 32
    assert looped.in_step_share is None and one_round.in_step_share == 1.0  # 32 clients sent 32 prompts: one wave
    alone, queued, wave = (predict_row(r, llama_2_7b(), h100_sxm()) for r in (static, looped, one_round))
    assert alone.queue_wait_s == 0.0 < queued.queue_wait_s < wave.queue_wait_s
    assert alone.ttft_s < queued.ttft_s < wave.ttft_s
    # The columns are optional: a file without them reads every row as a static batch.
    assert read_measurements([HEADER, line.format(load="", requests="").rsplit(",", 2)[0]])[0].load is None


@pytest.mark.parametrize(
    ("batch", "load", "requests", "message"),
    [
        ("32", "open_loop", "", "load 'open_loop' is not one of 'closed_loop'"),
        ("max", "closed_loop", "", "a closed loop needs its clients in `batch`"),
        ("32", "", "100", "`requests` is a closed loop's count of prompts"),
        ("32", "closed_loop", "0", "`requests` is a closed loop's count of prompts"),
        ("32", "closed_loop", "many", "invalid literal for int() with base 10: 'many'"),
    ],
)
def test_a_load_the_reader_cannot_read_is_refused_naming_the_row(batch, load, requests, message):
    line = f"bad,llama-2-7b,nvidia-h100-sxm,1,1,bf16,bf16,{batch},128,128,ar,,ttft_s,1,vLLM,src,,{load},{requests}"
    with pytest.raises(ValueError, match="row bad: ") as refused:
        read_measurements([HEADER + ",load,requests", line])
    assert message in str(refused.value)


def test_a_closed_loop_of_one_token_requests_keeps_the_prefill_busy_without_overloading_it():
    """Each client's request ends at its first token, so the prefill never rests; the clients wait for their answers, so
    the loop cannot outrun it (an open loop at a rate the prefill cannot serve is refused)."""
    workload = Workload(prompt_tokens=2048, output_tokens=1, concurrency=32, closed_loop=True)
    looped = estimate(llama_2_7b(), Deployment(chip=h100_sxm()), workload, batch=32)
    alone = estimate(llama_2_7b(), Deployment(chip=h100_sxm()), Workload(prompt_tokens=2048, output_tokens=1), batch=1)
    assert looped.fits and not looped.reasons and looped.ttft_s > 10 * alone.ttft_s  # behind the other 31 prompts
    rated = Workload(prompt_tokens=2048, output_tokens=1, request_rate_per_s=1e4)
    overloaded = estimate(llama_2_7b(), Deployment(chip=h100_sxm()), rated, batch=32)
    assert overloaded.reasons == ("prefill alone cannot keep up with 10000 requests/s on 1 x nvidia-h100-sxm",)


SETTINGS_HEADER = HEADER + ",load,requests,max_sequences,token_budget,memory_fraction,prefill_alone"


def test_a_server_cap_below_the_clients_makes_them_wait_for_a_slot_and_decodes_fewer_at_a_time():
    """A closed loop of 64 clients against a server that runs at most 16 requests (`max_sequences`, SGLang's
    --max-running-requests): the other 48 wait for a slot, so TTFT grows by whole requests while each decode step
    carries 16 sequences, not 64."""
    line = "cap,llama-2-7b,nvidia-h100-sxm,1,1,bf16,bf16,64,1024,256,ar,,{metric},1,SGLang,src,,closed_loop,640,{cap},,,"
    capped, free = (read_measurements([SETTINGS_HEADER, line.format(metric="ttft_s", cap=cap)])[0] for cap in ("16", ""))
    assert capped.server.max_sequences == 16 and free.server.max_sequences is None
    at_cap, uncapped = predict_row(capped, llama_2_7b(), h100_sxm()), predict_row(free, llama_2_7b(), h100_sxm())
    assert at_cap.batch == 16 and uncapped.batch == 64
    assert at_cap.tpot_s < uncapped.tpot_s
    # By Little's law the 48 clients beyond the cap wait (64 - 16) / 16 = 3 requests' time in all, each request its
    # prefill and 255 decode steps; the prompts' own queue behind one another adds a little.
    one_request_s = at_cap.ttft_s - at_cap.queue_wait_s + 255 * at_cap.tpot_s
    assert at_cap.queue_wait_s == pytest.approx(3 * one_request_s, rel=0.05)
    assert at_cap.ttft_s > 50 * uncapped.ttft_s
    assert any("the serving engine's batch cap" in w for w in at_cap.warnings)


def test_the_server_settings_replace_only_what_they_name():
    line = "s,llama-2-7b,nvidia-h100-sxm,1,1,bf16,bf16,8,1024,256,ar,,tpot_s,1,vLLM,src,,,,,{budget},{memory},{alone}"
    row = read_measurements([SETTINGS_HEADER, line.format(budget="512", memory="0.5", alone="TRUE")])[0]
    scheduler = row.server.configured(h100_sxm()).scheduler
    assert (scheduler.prefill_token_budget, scheduler.kv_memory_fraction, scheduler.prefill_runs_alone) == (512, 0.5, True)
    assert scheduler.max_batch_sequences is None  # not set: no cap, as on the chip without a serving engine
    plain = read_measurements([SETTINGS_HEADER, line.format(budget="", memory="", alone="")])[0]
    assert plain.server.configured(h100_sxm()) == h100_sxm()  # no setting: the chip as it was
    # Over a serving engine's scheduler, a setting replaces that default and keeps the engine's others.
    engine = dataclasses.replace(h100_sxm(), scheduler=Scheduler(engine="e", kv_memory_fraction=0.9, kv_memory_of_free=True,
                                                                 max_batch_sequences=256, prefill_token_budget=8192))  # fmt: skip
    budget_only = read_measurements([SETTINGS_HEADER, line.format(budget="512", memory="", alone="")])[0].server
    assert budget_only.configured(engine).scheduler == dataclasses.replace(engine.scheduler, prefill_token_budget=512)
    # The simulator takes the batch cap and the token budget as its own arguments: its path (caps=False) leaves them.
    capped = SchedulerOptions(max_sequences=8, token_budget=512, memory_fraction=0.5)
    assert capped.configured(engine, caps=False).scheduler == dataclasses.replace(engine.scheduler, kv_memory_fraction=0.5)
    # A smaller KV share holds fewer sequences.
    half, whole = (predict_row(r, llama_2_7b(), h100_sxm()).memory for r in (row, plain))
    assert half.usable_bytes_per_chip == pytest.approx(0.5 * 80e9) and half.max_concurrency < whole.max_concurrency


def test_a_build_without_a_cpus_matrix_kernels_prefills_on_its_vector_units():
    """`cpu_matrix_dtypes` none: a llama.cpp build from before its AMX backend (the ITREX release data's ggml of 2023)
    multiplies its int4 weights on an AMX Xeon's AVX-512 units, 4x the fp32 FMA rate rather than AMX's 32x; the
    column left empty keeps the engine's own list (the catalog's llama.cpp: int8 and int4 on the tiles)."""
    header = SETTINGS_HEADER + ",cpu_matrix_dtypes"
    line = "g,llama-2-7b,xeon,1,1,int4,,1,1024,32,ar,,ttft_s,1,ggml,src,,,,,,,,{matrix}"
    xeon = dataclasses.replace(xeon_8480plus(), scheduler=LLAMA_CPP_LIKE)
    old, current = (read_measurements([header, line.format(matrix=m)])[0] for m in ("none", ""))
    assert old.server.cpu_matrix_dtypes == () and current.server.cpu_matrix_dtypes is None
    assert old.server.configured(xeon).scheduler == dataclasses.replace(LLAMA_CPP_LIKE, cpu_matrix_dtypes=())
    built = old.server.configured(xeon)
    assert built.math_peak_flops_per_s("int8", "int4") == pytest.approx(4 * 7.168e12)  # VNNI: 4x the fp32 FMA rate
    assert xeon.math_peak_flops_per_s("int8", "int4") == pytest.approx(229.376e12)  # AMX: 32x
    on_vector, on_amx = (predict_row(r, llama_2_7b(), xeon) for r in (old, current))
    # The GEMMs at an eighth of the rate; the attention (16-bit, on AVX-512 under llama.cpp either way) unchanged.
    assert 3 * on_amx.prefill.compute_s < on_vector.prefill.compute_s < 8 * on_amx.prefill.compute_s
    assert on_vector.ttft_s > 3 * on_amx.ttft_s
    assert any("llama.cpp runs int4 weights' GEMMs on the vector units of xeon" in w for w in on_vector.warnings)
    # Named dtypes replace the engine's list; on a chip with no serving engine named the build's list still applies.
    listed = read_measurements([header, line.format(matrix="int8 bf16")])[0].server
    assert listed.configured(xeon).scheduler.cpu_matrix_dtypes == ("int8", "bf16")
    bare = predict_row(old, llama_2_7b(), xeon_8480plus())
    assert any("the engine runs int4 weights' GEMMs on the vector units of xeon" in w for w in bare.warnings)
    # The serving simulator's path (caps=False, as SchedulerOptions.applied takes it) carries the build's list too.
    assert old.server.configured(xeon, caps=False).scheduler.cpu_matrix_dtypes == ()


def test_a_cpu_build_setting_on_a_row_that_is_not_on_a_cpu_is_refused():
    header = SETTINGS_HEADER + ",cpu_matrix_dtypes"
    line = "gpu,llama-2-7b,nvidia-h100-sxm,1,1,bf16,bf16,8,128,128,ar,,ttft_s,1,vLLM,src,,,,,,,,none"
    row = read_measurements([header, line])[0]
    with pytest.raises(ValueError, match="cpu_matrix_dtypes is a CPU build's setting; nvidia-h100-sxm is a gpu"):
        predict_row(row, llama_2_7b(), h100_sxm())
    with pytest.raises(ValueError, match="unknown weight dtypes"):
        SchedulerOptions(cpu_matrix_dtypes=("int3",))
    assert SchedulerOptions(cpu_matrix_dtypes=["int8"]) == SchedulerOptions(cpu_matrix_dtypes=("int8",))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (",,,,int3", "cpu_matrix_dtypes 'int3': int3 is not a weight dtype"),
        ("0,,,", "max_sequences must be at least 1"),
        ("8.5,,,", "max_sequences '8.5' is not a whole number"),
        (",-1,,", "token_budget must be at least 1"),
        (",,1.5,", "memory_fraction must be in (0, 1]"),
        (",,,Sometimes", "prefill_alone 'Sometimes' is not true or false"),
        ("256k,,,", "max_sequences '256k' is not a number"),
        (",,0.9x,", "memory_fraction '0.9x' is not a number"),
    ],
)
def test_a_server_setting_the_reader_cannot_read_is_refused_naming_the_row(settings, message):
    line = f"bad,llama-2-7b,nvidia-h100-sxm,1,1,bf16,bf16,8,128,128,ar,,ttft_s,1,vLLM,src,,closed_loop,,{settings}"
    with pytest.raises(ValueError, match="row bad: ") as refused:
        read_measurements([SETTINGS_HEADER + ",cpu_matrix_dtypes", line])
    assert message in str(refused.value)
