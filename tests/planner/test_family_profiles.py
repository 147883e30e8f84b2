"""Chip-family profiles: fitted to the published measurements on chips other than NVIDIA GPUs, cross-validated,
shipped, and applied only where they speak for a chip."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command

from planner.engine.family_fit import FAMILY_PARAMETERS, FamilyParts, FamilyProfile, load_family_profiles, same_architecture, surrogate

from tests.planner.accuracy_doc import assert_doc_holds_the_tables

OTHER_CHIPS = Path(__file__).resolve().parents[2] / "benchmarks" / "measurements" / "other_chips.csv"


def test_the_surrogate_at_the_spec_defaults_reproduces_each_prediction():
    one = {name: np.array([v]) for name, v in dict(
        compute_fraction0=0.5, bandwidth_fraction0=0.7, step_overhead0=4e-4, request_overhead0=0.03, compute_fraction_bf16_0=0.5,
        bandwidth_fraction_bf16_0=0.7,
        decode_compute_s=1e-4, decode_memory_s=5e-3, decode_fixed_s=1e-3, prefill_compute_s=0.2, prefill_memory_s=0.01,
        prefill_fixed_s=0.01, decode_s=6.4e-3, prefill_s=0.2104, cycle_s=8e-3).items()}  # fmt: skip
    for metric, predicted in (("tpot_s", 7e-3), ("ttft_s", 0.25), ("decode_tokens_per_s_per_user", 140.0), ("output_tokens_per_s", 4000.0)):
        p = FamilyParts(metric=np.array([metric]), measured=np.array([1.0]), predicted=np.array([predicted]), **one)
        assert surrogate(np.array([0.5, 0.7, 4e-4]), p)[0] == pytest.approx(predicted)
        # Half the bandwidth: a memory-bound decode step takes twice as long, the token rate falls.
        slower = surrogate(np.array([0.5, 0.35, 4e-4]), p)[0]
        assert slower > predicted if metric == "tpot_s" else True
        assert slower < predicted if metric in ("decode_tokens_per_s_per_user", "output_tokens_per_s") else True
    # Half the compute fraction doubles a compute-bound prefill; the serving engine's request overhead (30 ms) stays as it is.
    p = FamilyParts(metric=np.array(["ttft_s"]), measured=np.array([1.0]), predicted=np.array([0.25]), **one)
    assert surrogate(np.array([0.25, 0.7, 4e-4]), p)[0] == pytest.approx((0.25 - 0.03) * (0.4 + 0.0104) / 0.2104 + 0.03)


def test_the_other_chips_file_is_fitted_and_cross_validated_and_the_figures_hold(catalog, capsys):
    """docs/accuracy.md's figures (`manage.py accuracy benchmarks/measurements/other_chips.csv --cv`), with a margin."""
    call_command("accuracy", str(OTHER_CHIPS), "--cv", "--json")
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["count"] >= 642 and report["spec_defaults"]["count"] == report["summary"]["count"]
    assert report["spec_defaults"]["mdape"] <= 41.0  # 38.7% (642 rows, 2026-12-07, twenty-sixth session)
    assert report["summary"]["mdape"] <= 18.0  # in-sample, 15.0%
    assert report["cv"]["chip"]["mdape"] <= 22.0 and report["cv"]["engine"]["mdape"] <= 22.0  # 18.7% and 19.0%
    # 23.0%: a new silicon generation, nothing of its architecture measured (31.9% before the kinds' pooled profiles spoke
    # for a measured vendor's new architecture, 2026-12-07, twenty-fifth session)
    assert report["cv"]["architecture"]["mdape"] <= 27.0
    # The chips' 80% bands (uncertainty.chip_family_bands), rebuilt without each chip, cover its values (80% stored).
    assert 0.70 <= report["intervals"]["coverage_cv"]["architecture"] <= 0.90
    families = {p["family"]: p for p in report["fit"]["family_profiles"]}
    assert "NVIDIA gpu" not in families  # NVIDIA GPUs have the serving-engine profiles
    assert all(0.02 <= p["compute_fraction"] <= 0.95 and 0.05 <= p["bandwidth_fraction"] <= 0.95 for p in families.values())
    assert_doc_holds_the_tables("benchmarks/measurements/other_chips.csv", report)
    # A serving benchmark run at a maximum concurrency is read as its closed loop (`load` closed_loop): more clients,
    # a longer wait behind the prompts sent with each (llm-d's MI355X table measures 0.37, 0.87 and 1.20 s).
    predicted = {r["id"]: r["predicted"] for r in report["rows"]}
    waits = [predicted[f"mi355x-vllm-l33-70b-fp8-in4096-out4096-c{clients}-ttft"] for clients in (4, 16, 32)]
    assert waits == sorted(waits) and waits[-1] > 1.5 * waits[0]
    # ... under the server settings its command set: SGLang's GLM-5.2 cookbook runs 256 clients against
    # --max-running-requests 80, so 80 decode at a time and the rest wait for a slot (117.9 s P50 TTFT measured).
    glm = {r["id"]: r for r in report["rows"] if r["id"].startswith("mi355x-sglang-glm52-fp8-in8192-out1024-c256-")}
    assert glm["mi355x-sglang-glm52-fp8-in8192-out1024-c256-tpot"]["batch"] == 80
    assert 0.5 < glm["mi355x-sglang-glm52-fp8-in8192-out1024-c256-ttft"]["predicted"] / 117.866 < 2.0
    # ... and as its build ran: Intel's 2023 ggml had no AMX kernels (`cpu_matrix_dtypes` none), so its int4 prompts
    # prefill on the AVX-512 units: their TTFTs predicted at 0.56-0.97x (0.20-0.33x on the tiles).
    ggml = [r for r in report["rows"] if "-ggml-" in r["id"] and r["metric"] == "ttft_s"]
    assert len(ggml) == 5 and all(0.4 < r["predicted"] / r["measured"] < 2.0 for r in ggml)


def test_every_row_names_the_engine_it_ran_on_where_the_catalog_has_it():
    """`serving_engine` is empty only where the row's software is no catalog serving engine: Intel's Gaudi
    model-performance pages (optimum-habana static batches), JetStream's experimental JAX framework, tt-metal's
    tt_transformers demo on Tenstorrent's Wormhole and Qualcomm's Cloud AI 100 SDK."""
    with OTHER_CHIPS.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    unnamed = {r["engine"] for r in rows if not r["serving_engine"]}
    assert unnamed == {"Intel Gaudi SW 1.18.0 (PyTorch 2.4.0)", "JetStream experimental JAX framework (mini_offline_benchmarking.py)",
                       "tt-metal / TT-NN tt_transformers simple_text_demo.py (TT-Metalium, trace on; accuracy precision mode)",
                       "Qualcomm Cloud AI 100 SDK (Platform/Apps SDK 1.12 era), 2023"}


def test_the_stored_family_profiles_are_what_the_documented_command_fits(catalog, capsys, tmp_path):
    from planner.catalog_specs import FAMILY_PROFILES

    out = tmp_path / "families.json"
    call_command("accuracy", str(OTHER_CHIPS), "--profiles-out", str(out))
    capsys.readouterr()
    refitted, source = load_family_profiles(out)
    stored, _ = load_family_profiles(FAMILY_PROFILES)
    assert "--profiles-out" in source and set(refitted) == set(stored)
    for family, profile in stored.items():
        assert (refitted[family].values, refitted[family].chips, refitted[family].transfers) == (profile.values, profile.chips, profile.transfers)
        for name in FAMILY_PARAMETERS:
            assert getattr(refitted[family], name) == pytest.approx(getattr(profile, name), rel=1e-3, abs=1e-6), (family, name)


def test_a_profile_speaks_for_the_chips_of_an_architecture_it_was_fitted_on():
    profile = FamilyProfile(compute_fraction=0.5, bandwidth_fraction=0.5, step_overhead_s=1e-3, values=10, chips=("mi300x", "other"))
    architectures = {"mi300x": "CDNA 3", "other": "CDNA 2"}
    assert same_architecture(profile, "CDNA 3", architectures) == ("mi300x",)
    assert same_architecture(profile, "CDNA 4", architectures) == () and same_architecture(profile, "", architectures) == ()
    assert profile.speaks_for("mi300x") and not profile.speaks_for("mi325x")
    assert profile.speaks_for("mi325x", architecture_peers=("mi300x",))


def _source(client, chip: str, **extra) -> str:
    body = {"model": "llama-3.1-8b", "chip": chip, "prompt_tokens": 512, "output_tokens": 128, "batch": 1, **extra}
    response = client.post("/api/v1/estimates/", body, format="json")
    assert response.status_code == 200, response.json()
    return response.json()["efficiency_source"]


def test_a_family_profile_speaks_for_its_chips_and_where_it_transfers(catalog, anonymous_client):
    from planner import catalog_specs

    stored = catalog_specs.stored_family_profiles()
    amd, apple = stored["AMD gpu"], stored["Apple other"]
    assert {"amd-mi300x", "amd-mi355x"} <= set(amd.chips) and _source(anonymous_client, "amd-mi355x").startswith("fitted chip-family profile (AMD gpu")
    # Fitted on two architectures (CDNA 3 and 4), the AMD profile predicts their values, each architecture held out in
    # turn, better than the spec defaults do: it speaks for the family, chips no row measures included.
    assert amd.transfers and not {"amd-mi325x", "amd-mi250x", "amd-mi210"} & set(amd.chips)
    for chip in ("amd-mi325x", "amd-mi250x", "amd-mi210"):
        assert _source(anonymous_client, chip).startswith("fitted chip-family profile (AMD gpu"), chip
    # Apple's holds when each of its chips is held out in turn: it speaks for an Apple chip it was not fitted on.
    assert apple.transfers and "apple-m4-max" not in apple.chips
    assert _source(anonymous_client, "apple-m4-max").startswith("fitted chip-family profile (Apple other")


def test_a_profile_fitted_on_one_chip_speaks_for_its_architecture_and_no_further(
    catalog, anonymous_client, amd_profile_of_the_mi300x_alone
):
    # One architecture, so the profile cannot show that it transfers. It speaks for the MI325X, which runs the MI300X's
    # CDNA 3 kernels, and not for the MI355X (CDNA 4).
    assert "the same CDNA 3 architecture as amd-mi300x" in _source(anonymous_client, "amd-mi325x")
    assert _source(anonymous_client, "amd-mi355x") == "spec defaults"


def test_a_chips_own_calibration_beats_its_family_profile(catalog, anonymous_client):
    from hwcatalog.models import Chip
    from planner import catalog_specs
    from planner.engine.efficiency import FACTORS, default_efficiency
    from planner.models import Calibration

    spec = catalog_specs.chip_spec(Chip.objects.get(slug="amd-mi300x"))
    factors = {name: getattr(default_efficiency(spec, "bf16"), name) for name in FACTORS}
    Calibration.objects.create(chip_slug="amd-mi300x", weight_dtype="bf16", version=1, run_count=2, **factors)
    assert _source(anonymous_client, "amd-mi300x") == "calibration v1 (2 runs)"
    # Measured under some engine, its host costs with it: a named engine adds no request overhead over a calibration.
    assert _source(anonymous_client, "amd-mi300x", serving_engine="vllm") == "calibration v1 (2 runs)"


def test_a_profile_that_does_not_transfer_keeps_to_its_chips():
    from planner.engine.family_fit import FamilyProfile

    profile = FamilyProfile(compute_fraction=0.2, bandwidth_fraction=0.3, step_overhead_s=1e-3, values=10, chips=("a",))
    assert profile.speaks_for("a") and not profile.speaks_for("b")
    assert dataclasses.replace(profile, transfers=True).speaks_for("b")


def test_a_row_names_the_engine_it_ran_on_and_one_that_cannot_run_it_is_not_predicted(catalog, tmp_path):
    from planner.accuracy import accuracy_report

    header = OTHER_CHIPS.open(newline="").readline().strip()
    assert header.endswith(",serving_engine,load,requests,max_sequences,token_budget,memory_fraction,prefill_alone,cpu_matrix_dtypes")
    row = ("x,llama-3.2-3b,intel-xeon-6980p,1,,bf16,,1,1024,1,ar,,ttft_s,1.66,llama.cpp,src,,,{engine},,")
    csv_path = tmp_path / "rows.csv"
    csv_path.write_text("\n".join([header, row.format(engine="llama-cpp"), row.format(engine="").replace("x,", "y,", 1),
                                   row.format(engine="no-such-engine").replace("x,", "z,", 1),
                                   row.format(engine="TensorRT-LLM").replace("x,", "w,", 1)]) + "\n")  # fmt: skip
    report = accuracy_report(csv_path=csv_path, use_calibration=False)
    predicted = {r["id"]: r["predicted"] for r in report["rows"]}
    # llama.cpp keeps bf16 weights off AMX: the same prompt prefills at AVX-512's rate, 8x the AMX datasheet's time
    assert predicted["x"] > 4 * predicted["y"]
    why = {u["id"]: u["reason"] for u in report["unpredicted"]}
    assert set(why) == {"z", "w"} and "no-such-engine" in why["z"]
    assert "TensorRT-LLM runs on gpu chips" in why["w"]  # an engine that does not run on the row's chip


@pytest.mark.parametrize("use_calibration", [False, True], ids=["spec defaults", "chip-family profile"])
def test_a_row_naming_an_engine_waits_its_request_overhead_before_the_first_token(catalog, tmp_path, use_calibration):
    """As an API request naming the engine: at the chip's spec defaults the engine's step and request overheads, under
    the chip-family profile (which fits no time before the prefill) its request overhead; a row naming none, neither."""
    from hwcatalog.models import Chip
    from planner import catalog_specs
    from planner.accuracy import accuracy_report
    from planner.engine.efficiency import default_efficiency
    from planner.engine_profiles import stored_profiles

    header = OTHER_CHIPS.open(newline="").readline().strip()
    row = "{id},llama-3.1-8b,amd-mi300x,1,1,bf16,,1,1024,1,ar,,ttft_s,0.1,vLLM,src,,,{engine},,"
    csv_path = tmp_path / "rows.csv"
    csv_path.write_text("\n".join([header, row.format(id="named", engine="vllm"), row.format(id="unnamed", engine="")]) + "\n")
    report = accuracy_report(csv_path=csv_path, use_calibration=use_calibration)
    predicted = {r["id"]: r["predicted"] for r in report["rows"]}
    waited, vllm = predicted["named"] - predicted["unnamed"], stored_profiles()["vLLM"]
    if use_calibration:  # the chip-family profile's own step overhead
        assert waited == pytest.approx(vllm.request_overhead_s, rel=0.05)
    else:  # the prefill's one step at vLLM's step overhead too
        spec = catalog_specs.chip_spec(Chip.objects.get(slug="amd-mi300x"))
        assert waited == pytest.approx(vllm.request_overhead_s + vllm.step_overhead_s - default_efficiency(spec).step_overhead_s, rel=0.05)


def test_nvidia_gpus_under_llama_cpp_take_their_own_profile_and_only_under_it(catalog, anonymous_client):
    """llama.cpp has no serving-engine profile of the silicon file, so its published NVIDIA rows are fitted as a family of
    their own, keyed by the chips under the engine: a request naming llama.cpp on an NVIDIA GPU takes it, one naming vLLM
    takes vLLM's profile, one naming no engine the spec defaults."""
    from planner import catalog_specs

    under = catalog_specs.stored_family_profiles()["NVIDIA gpu under llama.cpp"]
    assert {"nvidia-a40", "nvidia-rtx-4090", "nvidia-h100-pcie"} <= set(under.chips) and under.transfers
    for chip in ("nvidia-a40", "nvidia-l4"):  # one it was fitted on, one it transfers to
        assert _source(anonymous_client, chip, serving_engine="llama.cpp").startswith("fitted chip-family profile (NVIDIA gpu under llama.cpp"), chip
    assert _source(anonymous_client, "nvidia-a40", serving_engine="vLLM") == "fitted serving-engine profile (vLLM)"
    assert _source(anonymous_client, "nvidia-a40") == "spec defaults"


def test_an_estimate_under_llama_cpp_on_an_nvidia_gpu_lies_inside_its_interval(catalog, anonymous_client):
    """Its efficiency is a fitted profile's, so its intervals are the fitted profiles' errors (services.band_basis), not
    the spec defaults' of the silicon file, which assume the spec defaults' miss."""
    body = {"model": "llama-3.1-8b", "chip": "nvidia-rtx-4090", "prompt_tokens": 512, "output_tokens": 128, "batch": 1,
            "serving_engine": "llama.cpp", "weight_dtype": "fp16"}  # fmt: skip
    response = anonymous_client.post("/api/v1/estimates/", body, format="json")
    assert response.status_code == 200, response.json()
    answer = response.json()
    for figure in ("ttft_s", "tpot_s"):
        band = answer["intervals"][figure]
        assert band["low"] <= answer[figure] <= band["high"], (figure, band)
        assert "spec defaults" not in band["basis"], band["basis"]


def test_runs_measured_under_an_engine_beat_the_family_profile_under_it(catalog):
    from hwcatalog.models import Chip
    from planner import catalog_specs
    from planner.engine.efficiency import FACTORS, default_efficiency
    from planner.models import Calibration

    chip = Chip.objects.get(slug="nvidia-a40")
    spec = catalog_specs.chip_spec(chip)
    factors = {name: getattr(default_efficiency(spec, "fp16"), name) for name in FACTORS}
    before = catalog_specs.calibrations_for(["nvidia-a40"])
    assert str(before[("nvidia-a40@llama.cpp", "fp16")].source).startswith("fitted chip-family profile (NVIDIA gpu under llama.cpp")
    # A calibration of the A40 under llama.cpp, stored for every dtype ("*"), wins in every dtype.
    Calibration.objects.create(chip_slug="nvidia-a40", weight_dtype="*", serving_engine="llama.cpp", version=1, active=True,
                               run_count=3, **factors)  # fmt: skip
    after = catalog_specs.calibrations_for(["nvidia-a40"])
    assert not any(slug == "nvidia-a40@llama.cpp" and dtype != "*" for slug, dtype in after)
    assert ("nvidia-a40@llama.cpp", "*") in after


def _decode_values(bandwidths: list[float], step_overhead_s: float = 1e-3) -> FamilyParts:
    """Memory-bound decode steps of several sizes, each measured at its family's bandwidth fraction (bf16 default 0.7)."""
    memory_s = np.array([(2e-3, 5e-3, 1e-2)[i % 3] for i in range(len(bandwidths))])
    n = len(bandwidths)
    return FamilyParts(
        metric=np.array(["tpot_s"] * n), measured=memory_s * 0.7 / np.array(bandwidths) + step_overhead_s, predicted=memory_s + 4e-4,
        compute_fraction0=np.full(n, 0.5), bandwidth_fraction0=np.full(n, 0.7), step_overhead0=np.full(n, 4e-4), request_overhead0=np.zeros(n),
        compute_fraction_bf16_0=np.full(n, 0.5), bandwidth_fraction_bf16_0=np.full(n, 0.7), decode_compute_s=np.full(n, 1e-5),
        decode_memory_s=memory_s, decode_fixed_s=np.zeros(n), prefill_compute_s=np.full(n, 0.1), prefill_memory_s=np.full(n, 0.01),
        prefill_fixed_s=np.zeros(n), decode_s=memory_s + 4e-4, prefill_s=np.full(n, 0.1004), cycle_s=memory_s + 4e-4,
    )  # fmt: skip


def test_a_pooled_profile_weighs_each_family_the_same_however_often_it_was_published():
    """Twenty-four values of a family at 0.8 of peak bandwidth and nine of another at 0.4: value by value, the first family
    pulls the pooled profile its way; with each family one stratum, the fit is the one of nine values each. A family of
    one value weighs an eighth of one of MIN_VALUES (8) or more; the profile names the vendors behind its values."""
    from planner.engine.family_fit import fit_families, stratum_weights

    def pooled(a: int, b: int, strata: bool):
        p = _decode_values([0.8] * a + [0.4] * b)
        labels, chips, usable = np.array(["pooled other"] * (a + b)), np.array(["a"] * a + ["b"] * b), np.ones(a + b, dtype=bool)
        return fit_families(p, labels, chips, usable, strata=np.array(["A other"] * a + ["B other"] * b) if strata else None)["pooled other"]

    balanced, by_value, by_family = pooled(9, 9, False), pooled(24, 9, False), pooled(24, 9, True)
    assert by_family.bandwidth_fraction == pytest.approx(balanced.bandwidth_fraction, rel=0.01)
    assert by_family.step_overhead_s == pytest.approx(balanced.step_overhead_s, rel=0.01)
    assert by_value.bandwidth_fraction > balanced.bandwidth_fraction * 1.1
    assert by_family.vendors == ("A", "B") and by_value.vendors == () and by_family.values == 33
    weights = stratum_weights(np.array(["A other"] * 30 + ["B other"]))
    assert weights[-1] == pytest.approx(weights[:30].sum() / 8)
    assert pooled(30, 1, True).vendors == ("A", "B")


def test_a_chip_its_family_does_not_speak_for_takes_its_kinds_pooled_profile_where_its_vendor_was_measured(catalog, anonymous_client):
    """Trainium3 (NeuronCore-v4) and Inferentia (v1): AWS's profile, fitted on NeuronCore-v2 and v3, does not transfer;
    the pooled profile of the 'other' chips does (each architecture held out is predicted better than at the spec
    defaults), and AWS is among the vendors it measured, so it speaks for them; Tenstorrent's Blackhole (the Wormhole's
    six values are too few for a profile of Tenstorrent's own) and AMD's Zen 4 EPYC likewise, and Qualcomm's Cloud AI
    100 Ultra, measured on two values, too few for Qualcomm's own profile, is among the chips the pool was fitted on. A
    vendor measured on no chip of the kind (Cerebras, SambaNova), or a kind measured on none (Groq's LPU), keeps the
    spec defaults; a chip its own family's profile speaks for keeps that, and an NVIDIA GPU is left to the
    serving-engine profiles."""
    from planner import catalog_specs

    stored = catalog_specs.stored_family_profiles()
    assert stored["pooled other"].transfers and not stored["AWS other"].transfers and "AWS" in stored["pooled other"].vendors
    assert "Tenstorrent" in stored["pooled other"].vendors and "AMD" in stored["pooled cpu"].vendors and "Cerebras" not in stored["pooled other"].vendors
    assert {"aws-trainium3", "aws-inferentia"}.isdisjoint(stored["pooled other"].chips)
    source = _source(anonymous_client, "aws-trainium3")
    assert source.startswith("fitted chip-family profile (pooled other") and "nothing measured on AWS's NeuronCore-v4" in source, source
    assert _source(anonymous_client, "aws-inferentia").startswith("fitted chip-family profile (pooled other")
    assert _source(anonymous_client, "apple-m4-max").startswith("fitted chip-family profile (Apple other")
    assert _source(anonymous_client, "nvidia-a40") == "spec defaults"
    assert _source(anonymous_client, "tenstorrent-blackhole-p150").startswith("fitted chip-family profile (pooled other")
    assert _source(anonymous_client, "amd-epyc-9654").startswith("fitted chip-family profile (pooled cpu")
    assert "qualcomm-cloud-ai-100-ultra" in stored["pooled other"].chips and "Qualcomm" in stored["pooled other"].vendors
    assert _source(anonymous_client, "qualcomm-cloud-ai-100-ultra").startswith("fitted chip-family profile (pooled other")
    unmeasured = ("cerebras-wse-3", "sambanova-sn40l", "groq-lpu")
    assert not {slug for slug, _ in catalog_specs.calibrations_for(unmeasured)}


def test_a_kind_whose_chips_hold_one_fitted_family_gets_no_pooled_profile(catalog, capsys):
    """A pool of one family is that family's profile under another name: fitted to the same values, passing or failing
    the same transfer test, it could speak for no chip the family's own profile does not. measured_dev.csv's chips
    outside the silicon file are all Apple's, so its fit has Apple's profile and no pool; the TPUs of other_chips.csv,
    all Google's, have none in the profiles the planner ships (the refit test above holds them to the command)."""
    from planner import catalog_specs
    from planner.engine.family_fit import pooled_kind

    call_command("accuracy", str(OTHER_CHIPS.parents[2] / "tests" / "fixtures" / "measured_dev.csv"), "--fit", "--json")
    fitted = {p["family"] for p in json.loads(capsys.readouterr().out)["fit"]["family_profiles"]}
    assert "Apple other" in fitted and not any(pooled_kind(family) for family in fitted), fitted
    stored = catalog_specs.stored_family_profiles()
    pools = {family: profile for family, profile in stored.items() if pooled_kind(family)}
    assert "Google tpu" in stored and "pooled tpu" not in pools
    assert set(pools) == {"pooled cpu", "pooled gpu", "pooled other"}


def test_a_chip_takes_its_familys_profile_whatever_the_case_of_its_vendors_name(catalog):
    """The pools match a chip's vendor case and spacing aside (catalog_specs.name_key); so does the chip's own family,
    or a chip whose vendor an operator typed "google" would fall past Google's profile."""
    from hwcatalog.models import Chip
    from planner import catalog_specs

    chip = Chip.objects.get(slug="google-tpu-v7")
    chip.vendor = "google "
    calibration = catalog_specs.family_calibration([chip], catalog_specs.stored_family_profiles())
    assert calibration[("google-tpu-v7", "bf16")].source.startswith("fitted chip-family profile (Google tpu")


def test_a_chip_no_fitted_profile_speaks_for_gets_the_widest_intervals_and_says_so(catalog, anonymous_client):
    def intervals(chip):
        body = {"model": "llama-3.1-8b", "chip": chip, "prompt_tokens": 512, "output_tokens": 128, "batch": 1}
        response = anonymous_client.post("/api/v1/estimates/", body, format="json")
        assert response.status_code == 200, response.json()
        answer = response.json()
        return {figure: (band["high"] / band["low"], band["basis"]) for figure, band in answer["intervals"].items()}

    pooled, unmeasured = intervals("aws-trainium3"), intervals("cerebras-wse-3")
    for figure in ("ttft_s", "tpot_s"):
        assert "no measurement of a other chip of this vendor" in unmeasured[figure][1], unmeasured[figure]
        assert "held-out" in pooled[figure][1] and unmeasured[figure][0] > pooled[figure][0], (figure, pooled[figure], unmeasured[figure])


def test_a_pooled_profile_speaks_for_the_chips_it_was_fitted_on_and_where_it_transfers_for_its_vendors(catalog):
    from hwcatalog.models import Chip
    from planner import catalog_specs

    pool = FamilyProfile(compute_fraction=0.3, bandwidth_fraction=0.6, step_overhead_s=2e-3, values=20,
                         chips=("tenstorrent-wormhole-n300", "aws-trainium"), vendors=("Tenstorrent",))  # fmt: skip
    chips = Chip.objects.filter(slug__in=("tenstorrent-wormhole-n300", "tenstorrent-blackhole-p150", "aws-trainium3"))
    calibration = catalog_specs.family_calibration(chips, {"pooled other": pool})
    assert {slug for slug, _ in calibration} == {"tenstorrent-wormhole-n300"}
    transfers = dataclasses.replace(pool, transfers=True)
    calibration = catalog_specs.family_calibration(chips, {"pooled other": transfers})
    assert {slug for slug, _ in calibration} == {"tenstorrent-wormhole-n300", "tenstorrent-blackhole-p150"}
    assert calibration[("tenstorrent-blackhole-p150", "bf16")].bandwidth_fraction == pytest.approx(0.6)
    # A device a worker probed states no architecture: not known to be a new one, it keeps the spec defaults.
    probed = Chip.objects.get(slug="tenstorrent-blackhole-p150")
    probed.architecture = ""
    assert not catalog_specs.family_calibration([probed], {"pooled other": transfers})
    # Its transfer test tries it on every vendor's chips (planner/accuracy.py).
    calibration = catalog_specs.family_calibration(chips, {"pooled other": transfers}, measured_vendors_only=False)
    assert {slug for slug, _ in calibration} == {"tenstorrent-wormhole-n300", "tenstorrent-blackhole-p150", "aws-trainium3"}


def test_a_calibration_measured_under_the_named_engine_counts_as_a_measurement_of_the_chip(catalog):
    from hwcatalog.models import Chip
    from planner import catalog_specs, services
    from planner.engine.efficiency import FACTORS, default_efficiency
    from planner.engine.uncertainty import UNMEASURED
    from planner.models import Calibration

    chip = Chip.objects.get(slug="cerebras-wse-3")
    assert services.band_basis(chip, None) == (UNMEASURED, True) and services.band_basis(chip, "llama.cpp") == (UNMEASURED, True)
    factors = {name: getattr(default_efficiency(catalog_specs.chip_spec(chip), "bf16"), name) for name in FACTORS}
    Calibration.objects.create(chip_slug=chip.slug, weight_dtype="bf16", serving_engine="llama.cpp", version=1, active=True, run_count=2,
                               **factors)  # fmt: skip
    assert services.band_basis(chip, "llama.cpp") == ("*", True)  # its own runs under the engine speak for it
    assert services.band_basis(chip, None) == (UNMEASURED, True)  # not for a request that names no engine
