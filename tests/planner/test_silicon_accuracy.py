"""`manage.py accuracy` reads AIConfigurator's silicon layout as published and predicts each row's TTFT and TPOT."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command

from planner.engine.silicon import is_silicon_layout, read_silicon, replicate_spread

from tests.planner.accuracy_doc import assert_doc_holds_the_tables

SAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "silicon_sample.csv"


def test_the_layout_is_known_by_its_header_and_read_as_published():
    with SAMPLE.open() as handle:
        header = handle.readline().strip().split(",")
    assert is_silicon_layout(header) and not is_silicon_layout(["id", "model", "chip", "metric", "value"])
    rows = {r.id: r for r in read_silicon(SAMPLE.open())}
    llama = rows["meta_llama_llama_3_1_8b_instruct_meta_llama_llama_3_1_8b_instruct_h100_sxm_trtllm_agg_1024x128_c8_tp1_epnone_1"]
    assert (llama.concurrency, llama.prompt_tokens, llama.output_tokens, llama.mode) == (8, 1024, 128, "agg")
    assert llama.ttft_s == pytest.approx(0.190954, rel=1e-4) and llama.agg.gpus == 1
    disagg = rows["dsr1_h200_trtllm_fp8_disagg_1024x1024_c576_cfg303"]
    assert disagg.agg is None and (disagg.prefill.tensor_parallel, disagg.decode.tensor_parallel, disagg.decode.workers) == (8, 8, 9)
    assert disagg.engine_label.startswith("TensorRT-LLM")


def test_every_row_gets_a_ttft_and_a_tpot_prediction_or_a_reason(catalog, capsys):
    call_command("accuracy", str(SAMPLE), "--json")
    report = json.loads(capsys.readouterr().out)
    rows = list(read_silicon(SAMPLE.open()))
    seen = {(r["id"], r["metric"]) for r in report["rows"]} | {(u["id"], u["metric"]) for u in report["unpredicted"]}
    assert seen == {(r.id, m) for r in rows for m in ("ttft_s", "tpot_s")}
    assert report["summary"]["total"] == 2 * len(rows)
    predicted = {(r["id"], r["metric"]): r for r in report["rows"]}
    # A disaggregated row: TTFT from a prefill worker, TPOT from a decode worker.
    assert predicted[("dsr1_h200_trtllm_fp8_disagg_1024x1024_c576_cfg303", "tpot_s")]["tensor_parallel"] == 8
    # Found through the catalog's Hugging Face aliases and the chip's system name.
    assert predicted[("qwen_qwen3_235b_a22b_fp8_qwen_qwen3_235b_a22b_fp8_h100_sxm_trtllm_agg_512x256_c4_tp4_epnone_2", "tpot_s")]["model"] == "qwen3-235b-a22b"
    # Attention data parallelism: published as attention DP 64 with MoE TP 8 x EP 8, read as the eight
    # B200s it ran on (squared_expert_layout): eight attention replicas of one GPU each, the experts over all 8.
    adp = predicted[("dsr1_b200_trtllm_fp4_agg_8192x1024_c128_cfg191", "tpot_s")]
    assert (adp["tensor_parallel"], adp["attention_data_parallel"]) == (1, 8)
    # GB200 NVL72 found by AIConfigurator's system name.
    assert predicted[("qwen3_32b_qwen3_32b_gb200_trtllm_agg_4000x1000_c_tp1_epnone_1", "tpot_s")]["chip"] == "nvidia-gb200"
    assert {"by_engine", "by_metric"} <= set(report["summary"])


def test_each_tpot_is_set_against_the_least_the_planners_physics_allows_its_measurements(catalog, capsys):
    """A TPOT row carries its roofline (one decode step of the published layout at every peak, no fixed cost, no prefill
    beside it, the fewest sequences its measurements allow): no prediction lies below it, and a measured value below it is
    flagged and kept."""
    call_command("accuracy", str(SAMPLE), "--json")
    report = json.loads(capsys.readouterr().out)
    tpot = [r for r in report["rows"] if r["metric"] == "tpot_s"]
    assert tpot and all(0 < r["tpot_roofline_s"] <= r["predicted"] for r in tpot)
    assert all(r["below_roofline"] == (r["measured"] < r["tpot_roofline_s"]) for r in tpot)
    assert all(r["below_roofline"] is None and r["tpot_roofline_s"] is None for r in report["rows"] if r["metric"] == "ttft_s")
    below = report["below_roofline"]["tpot_s"]
    assert below["count"] == sum(r["below_roofline"] for r in tpot) == sum(below["by_mode_engine"].values())
    assert below["within"]["count"] == len(tpot) - below["count"] and report["summary"]["count"] == 2 * len(tpot)


def test_the_roofline_takes_the_fewest_sequences_the_measurements_allow():
    """By Little's law a closed loop of C clients decodes C x (G - 1) TPOT / (TTFT + (G - 1) TPOT) sequences at a time:
    with the measured TTFT as long as the answer's stream, half of them, and the roofline is the step of that batch (no TTFT: all of them)."""
    import dataclasses

    from planner.engine.silicon import tpot_roofline_s
    from tests.planner.engine.factories import h100_sxm, llama_3_1_8b

    row = next(r for r in read_silicon(SAMPLE.open()) if r.agg is not None and r.agg.gpus == 1 and "llama_3_1_8b" in r.id)
    stream = (row.output_tokens - 1) * row.tpot_s
    half = dataclasses.replace(row, concurrency=64, ttft_s=stream)
    whole = dataclasses.replace(row, concurrency=64, ttft_s=0.0)
    one = dataclasses.replace(row, concurrency=32, ttft_s=0.0)
    model, chip = llama_3_1_8b(), h100_sxm()
    assert tpot_roofline_s(half, model, chip) == pytest.approx(tpot_roofline_s(one, model, chip))
    assert tpot_roofline_s(whole, model, chip) > tpot_roofline_s(half, model, chip)
    # A first token far longer than the answer's stream leaves one sequence decoding at a time; measurements that are not
    # finite, or a negative TTFT, have no roofline.
    alone = dataclasses.replace(row, concurrency=64, ttft_s=stream * 1e6)
    assert tpot_roofline_s(alone, model, chip) == pytest.approx(tpot_roofline_s(dataclasses.replace(row, concurrency=1, ttft_s=0.0), model, chip))
    assert tpot_roofline_s(dataclasses.replace(row, tpot_s=float("nan")), model, chip) is None
    assert tpot_roofline_s(dataclasses.replace(row, ttft_s=-1.0), model, chip) is None


def test_a_disaggregated_roofline_spreads_the_decoding_sequences_over_the_published_workers_or_one_a_worker(catalog):
    """9 published decode workers of a closed loop of 576 decoding all the time hold 64 each; unpublished, one each."""
    import dataclasses

    from planner import catalog_specs
    from planner.engine.silicon import tpot_roofline_s
    from hwcatalog.models import Chip, ModelArch

    row = next(r for r in read_silicon(SAMPLE.open()) if r.id == "dsr1_h200_trtllm_fp8_disagg_1024x1024_c576_cfg303")
    model = catalog_specs.model_spec(ModelArch.objects.get(slug="deepseek-v3"))
    chip = catalog_specs.chip_spec(Chip.objects.get(slug="nvidia-h200-sxm"))
    published = dataclasses.replace(row, ttft_s=0.0)
    assert published.decode.workers == 9 and published.concurrency == 576
    unpublished = dataclasses.replace(published, decode=dataclasses.replace(published.decode, workers=None))
    few = dataclasses.replace(published, concurrency=9)  # one sequence on each of the 9
    assert tpot_roofline_s(unpublished, model, chip) == pytest.approx(tpot_roofline_s(few, model, chip))
    assert tpot_roofline_s(published, model, chip) > tpot_roofline_s(few, model, chip)


def test_cv_fits_engine_profiles_and_holds_out_each_engine_chip_and_model_family(catalog, capsys):
    call_command("accuracy", str(SAMPLE), "--cv", "--json")
    report = json.loads(capsys.readouterr().out)
    assert set(report["cv"]) == {"engine", "chip", "model family"}
    for stats in report["cv"].values():
        assert stats["count"] == report["summary"]["count"]  # every predicted value is predicted held out once
    profiles = {p["engine"]: p for p in report["fit"]["profiles"]}
    assert "*" in profiles and 0.05 <= profiles["*"]["compute_fraction"] <= 0.95
    assert report["spec_defaults"]["count"] == report["summary"]["count"]


def test_cv_on_this_projects_format_holds_out_each_chip_architecture_and_engine(catalog, capsys):
    call_command("accuracy", str(SAMPLE.parent / "measured_dev.csv"), "--cv", "--json")
    report = json.loads(capsys.readouterr().out)
    assert set(report["cv"]) == {"chip", "architecture", "engine"}
    assert all(stats["count"] == report["summary"]["count"] for stats in report["cv"].values())
    assert "spec_defaults" in report and "family_profiles" in report["fit"]
    assert_doc_holds_the_tables("tests/fixtures/measured_dev.csv", report)


def test_intervals_are_checked_for_coverage_with_each_group_held_out(catalog, capsys):
    call_command("accuracy", str(SAMPLE), "--json")
    report = json.loads(capsys.readouterr().out)
    assert set(report["intervals"]["coverage_cv"]) == {"engine", "chip", "model family"}
    # A band is where measured values fell around comparable predictions: it may sit wholly above a
    # prediction the model makes too low (TTFT), so only its order is fixed.
    with_interval = [r for r in report["rows"] if r["interval"]]
    assert with_interval and all(r["interval"][0] < r["interval"][1] for r in with_interval)


DEV = SAMPLE.parent / "silicon_dev.csv"  # a copy of shared/reference/silicon/silicon_dev.csv (AIConfigurator, Apache-2.0)


def test_the_whole_silicon_dev_file_is_predicted_and_the_published_figures_hold(catalog, capsys):
    """docs/accuracy.md's figures, each held with a margin of a few points: cross-validated first,
    in-sample and spec defaults beside them (`manage.py accuracy tests/fixtures/silicon_dev.csv --cv`)."""
    call_command("accuracy", str(DEV), "--cv", "--json")
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["total"] == 5368
    # Every value is predicted: the SGLang GB200 attention-DP worker of DeepSeek-V3 fp8 over four GPUs fits once
    # SGLang's dense layers are split over the group (Scheduler.attention_dp_dense), the workers published as one
    # GPU are read as the narrowest that holds the weights.
    assert report["summary"]["count"] == 5368 and report["unpredicted"] == []
    cv = {group: stats["by_metric"] for group, stats in report["cv"].items()}
    for group in ("engine", "chip", "model family"):
        assert cv[group]["tpot_s"]["mdape"] <= 22.5, group
    # An engine that runs its prefills alone (SGLang) keeps its clients in step, every round a wave: its in-step share
    # is 1, not fitted, and a held-out engine takes the share the other engines that mix prefills with decodes show.
    assert cv["engine"]["ttft_s"]["mdape"] <= 48.0
    assert cv["chip"]["ttft_s"]["mdape"] <= 43.0
    assert cv["model family"]["ttft_s"]["mdape"] <= 48.0
    fitted, defaults = report["summary"]["by_metric"], report["spec_defaults"]["by_metric"]
    assert fitted["tpot_s"]["mdape"] <= 20.0 and fitted["ttft_s"]["mdape"] <= 40.0
    assert defaults["tpot_s"]["mdape"] <= 31.0 and defaults["ttft_s"]["mdape"] <= 72.0
    # 134 configurations are published more than once with different TTFT or TPOT: the floor on them (docs/accuracy.md).
    floor = report["replicates"]
    assert floor["groups"] == 134 and floor["tpot_s"]["count"] == floor["ttft_s"]["count"] == 293
    assert floor["tpot_s"]["mdape"] == pytest.approx(18.7, abs=0.1) and floor["ttft_s"]["mdape"] == pytest.approx(11.8, abs=0.1)
    coverage = report["intervals"]["coverage_cv"]
    # Holding out a model family covers 73%, the least of the three: DeepSeek's errors spread wider than the other
    # families', so bands built without it are too narrow for it.
    assert all(0.65 <= share <= 0.9 for share in coverage.values()) and coverage["chip"] >= 0.75, coverage
    # ... and so do they within each serving mode, each mode's bands built from its own errors (bands pooled over both
    # modes held too few disaggregated values and too many colocated ones: docs/accuracy.md, "Prediction intervals").
    by_serving = report["intervals"]["coverage_cv_by_serving"]
    assert all(set(modes) == {"colocated", "disaggregated"} for modes in by_serving.values()), by_serving
    assert all(0.65 <= share <= 0.9 for modes in by_serving.values() for share in modes.values()), by_serving
    # 8 TPOT values lie below the least the planner's physics allows their measurements (docs/accuracy.md: a layout not
    # recorded, a concurrency that cannot have run); the others are predicted closer, held out and in-sample.
    below = report["below_roofline"]["tpot_s"]
    assert 4 <= below["count"] <= 16 and below["within"]["mdape"] < fitted["tpot_s"]["mdape"]
    assert all(r["tpot_roofline_s"] <= r["predicted"] for r in report["rows"] if r["metric"] == "tpot_s")  # a lower bound of every prediction
    assert all(report["cv"][g]["tpot_within_roofline"]["mdape"] < cv[g]["tpot_s"]["mdape"] for g in cv)
    # docs/accuracy.md prints these tables as the command does.
    assert_doc_holds_the_tables("tests/fixtures/silicon_dev.csv", report)


def test_the_stored_serving_engine_profiles_are_what_the_documented_command_fits_and_predictions_use_them(catalog, capsys, tmp_path):
    from planner.accuracy import ENGINE_PROFILES
    from planner.engine.fit import load_profiles

    out = tmp_path / "profiles.json"
    call_command("accuracy", str(DEV), "--profiles-out", str(out))
    capsys.readouterr()
    refitted, source = load_profiles(out)
    stored, _ = load_profiles(ENGINE_PROFILES)
    assert "--profiles-out" in source and set(refitted) == set(stored) == {"*", "SGLang", "TensorRT-LLM", "vLLM"}
    for engine, profile in stored.items():
        assert refitted[engine].values == profile.values
        for name in ("compute_fraction", "bandwidth_fraction", "step_overhead_s", "request_overhead_s", "expert_efficiency", "in_step_share"):
            assert getattr(refitted[engine], name) == pytest.approx(getattr(profile, name), rel=1e-3, abs=1e-6), (engine, name)
    # A silicon file is predicted with them; --spec-defaults predicts with nothing fitted.
    call_command("accuracy", str(SAMPLE), "--json")
    with_profiles = json.loads(capsys.readouterr().out)
    call_command("accuracy", str(SAMPLE), "--json", "--spec-defaults")
    defaults = json.loads(capsys.readouterr().out)
    assert "profiles_used" in with_profiles and "profiles_used" not in defaults
    assert {r["efficiency_source"] for r in with_profiles["rows"]} <= {f"fitted serving-engine profile ({e})" for e in ("TensorRT-LLM", "SGLang", "vLLM")}
    assert all(r["efficiency_source"] == "spec defaults" for r in defaults["rows"])
    ttft = {r["id"]: r["predicted"] for r in with_profiles["rows"] if r["metric"] == "ttft_s"}
    bare = {r["id"]: r["predicted"] for r in defaults["rows"] if r["metric"] == "ttft_s"}
    assert all(ttft[k] > bare[k] for k in ttft)  # every fitted engine spends time before its first token


def test_a_tp_degree_that_cannot_split_the_heads_is_read_as_attention_data_parallelism():
    import dataclasses

    from planner.engine.silicon import WorkerLayout, attention_layout

    from .engine.factories import llama_3_1_8b

    base = llama_3_1_8b()
    model = dataclasses.replace(base, shape=dataclasses.replace(base.shape, num_attention_heads=128))  # DeepSeek-V3's 128 heads
    wide = WorkerLayout(workers=1, batch=None, tensor_parallel=72, pipeline_parallel=1, attention_data_parallel=1,
                        moe_tensor_parallel=72, moe_expert_parallel=1)  # fmt: skip
    layout, note = attention_layout(model, wide)
    assert (layout.tensor_parallel, layout.attention_data_parallel, layout.gpus) == (1, 72, 72)
    assert "does not divide the 128 attention heads" in note
    eight = dataclasses.replace(wide, tensor_parallel=8, moe_tensor_parallel=8)
    assert attention_layout(model, eight) == (eight, None)


def test_an_attention_dp_left_empty_is_the_experts_span_over_the_attention_tp():
    header = ("id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,batch_size,tp_size,"
              "pp_size,attention_dp_size,moe_tp_size,moe_ep_size,silicon_ttft_ms,silicon_tpot_ms")  # fmt: skip
    rows = read_silicon([header, "a,silicon_concurrency=8,vllm,0.12.0,Qwen/Qwen3-235B-A22B-FP8,h200_sxm,fp8,agg,1000,100,8,1,1,,2,1,356.9,54.9",
                         "b,silicon_concurrency=8,vllm,0.12.0,Qwen/Qwen3-235B-A22B-FP8,h200_sxm,fp8,agg,1000,100,8,2,1,1,2,1,300,40"])  # fmt: skip
    inferred, published = rows
    assert (inferred.agg.tensor_parallel, inferred.agg.attention_data_parallel, inferred.agg.gpus) == (1, 2, 2)
    assert (published.agg.tensor_parallel, published.agg.attention_data_parallel) == (2, 1)


def test_a_configuration_measured_twice_sets_a_floor_at_its_spread_around_the_geometric_mean():
    lines = SAMPLE.read_text().splitlines()
    header, first = lines[0], lines[1]
    cells = first.split(",")
    columns = header.split(",")
    twice = cells.copy()
    twice[columns.index("id")] += "_again"
    ttft, tpot = columns.index("silicon_ttft_ms"), columns.index("silicon_tpot_ms")
    cells[tpot], twice[tpot] = "10", "40"  # geometric mean 20: 100% and 50% from it
    twice[ttft] = cells[ttft]  # TTFT measured the same twice: no spread
    floor = replicate_spread(read_silicon([header, ",".join(cells), ",".join(twice)]))
    assert floor["groups"] == 1
    assert floor["tpot_s"]["count"] == 2 and floor["tpot_s"]["mdape"] == pytest.approx(75.0)
    assert floor["ttft_s"]["count"] == 0 and floor["ttft_s"]["mdape"] is None


def test_a_published_agg_batch_below_the_concurrency_is_not_read_as_the_engines_cap():
    """The row as published (GB200, Qwen3-32B, TensorRT-LLM): batch 4 of concurrency 8 on two GPUs, a TTFT of 0.53 s.
    Read as a cap, four clients would wait a whole request (500 tokens) for a slot: 5.6 s predicted."""
    from planner.engine.silicon import agg_batch

    header = ("id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,batch_size,tp_size,"
              "pp_size,attention_dp_size,moe_tp_size,moe_ep_size,silicon_ttft_ms,silicon_tpot_ms")  # fmt: skip
    per_gpu, capped, per_rank = read_silicon([
        header, "a,silicon_concurrency=8,trtllm,1.3.0rc1,Qwen/Qwen3-32B,gb200,,agg,2000,500,4,2,1,0,0,0,534.0,30.0",
        "b,silicon_concurrency=8,trtllm,1.3.0rc1,Qwen/Qwen3-32B,gb200,,agg,2000,500,16,2,1,0,0,0,534.0,30.0",
        "c,silicon_concurrency=64,trtllm,1.3.0rc1,deepseek-ai/DeepSeek-R1,b200_sxm,fp8,agg,1024,1024,8,1,1,8,1,8,300.0,30.0",
    ])  # fmt: skip
    assert agg_batch(per_gpu) == 8  # not 4: every client in flight
    assert agg_batch(capped) == 8  # a cap above the concurrency: the concurrency
    assert agg_batch(per_rank) == 64  # 8 per attention-DP rank x 8 ranks


def test_the_published_rows_with_a_batch_below_their_concurrency_are_predicted_without_a_wait_for_a_slot(catalog, capsys):
    call_command("accuracy", str(Path(__file__).resolve().parent.parent / "fixtures" / "silicon_dev.csv"), "--json")
    rows = {(r["id"], r["metric"]): r for r in json.loads(capsys.readouterr().out)["rows"]}
    row = rows[("qwen_qwen3_32b_qwen_qwen3_32b_gb200_trtllm_agg_2000x500_c8_tp2_epnone_4", "ttft_s")]
    assert row["batch"] == 8 and row["measured"] == pytest.approx(0.534, abs=1e-3)
    assert row["predicted"] < 1.0  # 5.6 s when batch_size 4 was read as the cap


def test_a_worker_published_as_one_gpu_that_cannot_hold_the_weights_is_read_as_the_narrowest_that_can(catalog, capsys, tmp_path):
    """The 2026-04-06 SGLang GB200 DeepSeek-R1 disagg rows publish 1 in every prefill and decode field: 671e9
    parameters at fp8 on one 192 GB GPU. Read as a layout not recorded: TP 4, the narrowest power of two
    dividing the 128 heads whose shard (168 GB) fits, where TP 2 (337 GB) does not."""
    with DEV.open() as handle:
        header = handle.readline()
        row = next(line for line in handle if line.startswith("2026_04_06_deepseek_r1_gb200_sglang_fp8_disagg_1024x1024_c4096_tp1_ep1_1170,"))
    published = tmp_path / "one_gpu.csv"
    published.write_text(header + row)
    (parsed,) = read_silicon(published.open())
    assert parsed.prefill.gpus == parsed.decode.gpus == 1
    call_command("accuracy", str(published), "--json")
    report = json.loads(capsys.readouterr().out)
    assert report["unpredicted"] == [] and {r["metric"] for r in report["rows"]} == {"ttft_s", "tpot_s"}
    assert {r["tensor_parallel"] for r in report["rows"]} == {4}
    # accuracy --json says how each row was read
    assert all(any("read as not recorded" in w for w in r["warnings"]) for r in report["rows"])
    from hwcatalog.models import Chip, ModelArch
    from planner import catalog_specs
    from planner.engine.silicon import silicon_estimates

    model, chip = ModelArch.objects.get(slug="deepseek-v3"), Chip.objects.get(slug="nvidia-gb200")
    estimates = silicon_estimates(parsed, catalog_specs.model_spec(model), catalog_specs.chip_spec(chip))
    assert all(any("read as not recorded" in w and "tensor_parallel 4" in w for w in e.warnings) for e in estimates.values())


def test_a_worker_whose_published_fields_square_its_width_is_read_as_that_width():
    """TensorRT-LLM DeepSeek rows named "tp8_ep8" publish attention_dp_size 64 with MoE TP 8 x EP 8 on an
    8-GPU node, and measure what the tp 1 x attention DP 8 x EP 8 row of the same run measures. The same
    fields within a node (a 4-GPU worker of attention DP 4 and MoE 2 x 2) are consistent and kept."""
    from planner.engine.silicon import WorkerLayout, attention_layout, squared_expert_layout

    from .engine.factories import llama_3_1_8b

    published = WorkerLayout(workers=None, batch=1, tensor_parallel=1, pipeline_parallel=1, attention_data_parallel=64,
                             moe_tensor_parallel=8, moe_expert_parallel=8)  # fmt: skip
    layout, note = squared_expert_layout(published, node_size=8)
    assert (layout.tensor_parallel, layout.attention_data_parallel, layout.moe_expert_parallel, layout.gpus) == (1, 8, 8, 8)
    assert "read as 8 GPUs" in note
    # Through attention_layout, as every row is read.
    assert attention_layout(llama_3_1_8b(), published, 8)[0] == layout
    # The same squaring in tp_size (tp 64, MoE TP 8 x EP 8): TP 8 with the experts over the 8.
    tp_squared = WorkerLayout(workers=None, batch=1, tensor_parallel=64, pipeline_parallel=1, attention_data_parallel=1,
                              moe_tensor_parallel=8, moe_expert_parallel=8)  # fmt: skip
    read, note = squared_expert_layout(tp_squared, node_size=8)
    assert (read.tensor_parallel, read.attention_data_parallel, read.moe_tensor_parallel, read.moe_expert_parallel, read.gpus) == (8, 1, 1, 8, 8)
    assert "tp_size 64" in note and "tensor parallelism 8" in note
    # 64 GPUs fit a GB200 NVL72 domain: there the fields may say what ran, and are kept.
    assert squared_expert_layout(published, node_size=72) is None
    within = WorkerLayout(workers=None, batch=8, tensor_parallel=1, pipeline_parallel=1, attention_data_parallel=4,
                          moe_tensor_parallel=2, moe_expert_parallel=2)  # fmt: skip
    assert squared_expert_layout(within, node_size=8) is None and attention_layout(llama_3_1_8b(), within, 8) == (within, None)
    eight = WorkerLayout(workers=None, batch=8, tensor_parallel=1, pipeline_parallel=1, attention_data_parallel=8,
                         moe_tensor_parallel=1, moe_expert_parallel=8)  # fmt: skip
    assert squared_expert_layout(eight, node_size=8) is None and attention_layout(llama_3_1_8b(), eight, 8) == (eight, None)


def test_a_decode_pool_published_without_its_worker_count_is_read_as_the_median_the_published_pools_deploy():
    """The dev file's disaggregated rows that publish decode_num_workers deploy 3, 4, 1, 9 and 5 TensorRT-LLM
    decode workers most often (median 4 over 81 rows) and one SGLang worker (56 rows); an engine with fewer
    than ten such rows takes the pooled median (3, 140 rows)."""
    from planner.engine.silicon import published_decode_workers

    priors = published_decode_workers(read_silicon(DEV.open()))
    assert priors == {"*": 3.0, "trtllm": 4.0, "sglang": 1.0}
    assert published_decode_workers([]) == {}


def test_an_unpublished_decode_worker_count_splits_the_concurrency_over_the_prior_and_says_so(catalog):
    """A TensorRT-LLM DeepSeek-R1 row of the dev file published without its decode workers (B200 NVFP4, 10
    clients), whose twin in the same file (the same TTFT and TPOT to the last digit) publishes 5 decode
    workers of 2 sequences: read with the prior of 4 workers it decodes 3 sequences a worker, not all 10."""
    from hwcatalog.models import Chip, ModelArch
    from planner import catalog_specs
    from planner.engine.silicon import published_decode_workers, silicon_estimates

    rows = list(read_silicon(DEV.open()))
    by_id = {r.id: r for r in rows}
    unpublished = by_id["2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_disagg_1024x1024_c10_tp4_0_ep4_0_1152"]
    twin = next(r for r in rows if r.decode is not None and r.decode.workers and r.engine == "trtllm" and r.system == "b200_sxm"
                and r.concurrency == 10 and r.prompt_tokens == 1024 and abs(r.tpot_s - unpublished.tpot_s) < 1e-6)  # fmt: skip
    assert unpublished.decode.workers is None and (twin.decode.workers, twin.decode.batch) == (5, 2)
    model = catalog_specs.model_spec(ModelArch.objects.get(slug="deepseek-v3"))
    chip = catalog_specs.chip_spec(Chip.objects.get(slug="nvidia-b200"))
    read = silicon_estimates(unpublished, model, chip, decode_workers=published_decode_workers(rows))["tpot_s"]
    alone = silicon_estimates(unpublished, model, chip)["tpot_s"]  # without priors: one worker holds all ten
    assert (read.batch, alone.batch) == (3, 10)
    assert any("decode_num_workers is not published: read as 4 (the median of the TensorRT-LLM rows" in w for w in read.warnings)
    assert read.tpot_s < alone.tpot_s  # fewer sequences a step touch fewer of the 256 experts
    published = silicon_estimates(twin, model, chip, decode_workers=published_decode_workers(rows))["tpot_s"]
    assert published.batch == 2 and not any("not published" in w for w in published.warnings)


def test_a_held_out_group_gives_nothing_to_the_decode_worker_counts_its_fold_reads(catalog):
    """Cross-validation reads the decode-worker priors off the rows outside the held-out group: with TensorRT-LLM held
    out only SGLang's 56 published pools and vLLM's 3 remain (median 1), so TensorRT-LLM's unpublished rows take that
    pooled 1 and decode the whole concurrency on one worker; holding GB200 out leaves TensorRT-LLM's median at 5."""
    from hwcatalog.models import Chip, ModelArch
    from planner import catalog_specs
    from planner.accuracy import _by_name, _Silicon
    from planner.engine.silicon import silicon_estimates

    silicon = _Silicon(DEV, _by_name(ModelArch.objects.all(), "hf_id", "hf_aliases"), _by_name(Chip.objects.all(), "aliases"), {})
    assert silicon.decode_workers == {"*": 3.0, "trtllm": 4.0, "sglang": 1.0}
    without_trtllm = silicon.decode_workers_without("engine", "TensorRT-LLM")
    assert without_trtllm == {"*": 1.0, "sglang": 1.0}
    assert silicon.decode_workers_without("chip", "nvidia-gb200")["trtllm"] == 5.0
    row = next(r for r in silicon.measured if r.id == "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_disagg_1024x1024_c10_tp4_0_ep4_0_1152")
    model = catalog_specs.model_spec(ModelArch.objects.get(slug="deepseek-v3"))
    chip = catalog_specs.chip_spec(Chip.objects.get(slug="nvidia-b200"))
    held_out = silicon_estimates(row, model, chip, decode_workers=without_trtllm)
    assert held_out["tpot_s"].batch == 10
    assert all(any("every engine's rows that publish theirs" in w for w in e.warnings) for e in held_out.values())


@pytest.mark.django_db
def test_an_engine_that_runs_its_prefills_alone_keeps_a_colocated_loop_in_step_and_the_share_speaks_for_the_rest(catalog):
    """SGLang runs a prefill step with no decode beside it, so a colocated loop's clients finish together and send
    their next prompts together: every round a wave (share 1), at the spec defaults as under a profile. Its
    disaggregated decodes never wait for a prefill, and TensorRT-LLM mixes prefill chunks into decode steps: the
    profile's share speaks for them."""
    from hwcatalog.models import Chip, ModelArch
    from planner.accuracy import _by_name, _Silicon
    from planner.engine.fit import load_profiles
    from planner.engine_profiles import ENGINE_PROFILES

    silicon = _Silicon(DEV, _by_name(ModelArch.objects.all(), "hf_id", "hf_aliases"), _by_name(Chip.objects.all(), "aliases"), {})
    assert "SGLang" in silicon.alone_engines and not {"TensorRT-LLM", "vLLM"} & silicon.alone_engines
    ids = {"dsr1_h200_sglang_fp8_agg_1024x1024_c4_cfg81": (True, "SGLang"), "dsr1_gb200_sglang_fp4_disagg_1024x1024_c2048_cfg483": (False, "SGLang"),
           "dsr1_b200_trtllm_fp4_agg_1024x1024_c32_cfg91": (False, "TensorRT-LLM")}  # fmt: skip
    rows, _ = silicon.predict(only=set(ids), shares=True)
    ttft = {r["id"]: r["_parts"] for r in rows if r["metric"] == "ttft_s"}
    assert set(ttft) == set(ids)
    for row_id, (in_step, _engine) in ids.items():
        parts = ttft[row_id]
        assert (parts["staggered"] == parts["in_step"]) is in_step, row_id
        assert in_step or parts["staggered"] < parts["in_step"]
    profiles, _ = load_profiles(ENGINE_PROFILES)
    by_id = {r.id: r for r in silicon.measured if r.id in ids}
    for row_id, (in_step, engine) in ids.items():
        assert silicon.in_step_share(by_id[row_id], engine, profiles[engine]) == (1.0 if in_step else profiles[engine].in_step_share)
    assert silicon.in_step_share(by_id["dsr1_h200_sglang_fp8_agg_1024x1024_c4_cfg81"], "SGLang", None) == 1.0
    # ... and the predictions use it: each TTFT is the estimate at the share the rule gives, and says so when read in step
    from planner.accuracy import IN_STEP_WARNING
    from planner.engine.accuracy import predict_metric
    from planner.engine.silicon import silicon_estimates

    predicted, _ = silicon.predict(profiles=profiles, only=set(ids))
    for r in predicted:
        if r["metric"] != "ttft_s":
            continue
        in_step, engine = ids[r["id"]]
        key, profile = silicon.spec_key(by_id[r["id"]]), profiles[engine]
        expected = silicon_estimates(by_id[r["id"]], *silicon.specs[key], efficiency=profile.factors(), decode_workers=silicon.decode_workers,
                                     in_step_share=1.0 if in_step else profile.in_step_share)["ttft_s"]  # fmt: skip
        expected = predict_metric("ttft_s", expected)
        assert r["predicted"] == pytest.approx(expected, rel=1e-9), r["id"]
        assert (IN_STEP_WARNING.format(engine="SGLang") in r["warnings"]) is in_step
