from __future__ import annotations

from pathlib import Path

from django.test import Client

from hwcatalog.models import ModelArch
from planner.models import Plan
from tests.frontend.conftest import CHAT_FORM

HF_CONFIGS = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"


def test_home_shows_the_form_with_models_presets_and_csrf(ui_client, catalog):
    response = ui_client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="csrfmiddlewaretoken"' in html
    assert 'value="llama-3.1-70b"' in html and 'data-preset="rag"' in html
    assert '<label for="id_prompt_tokens">' in html


def test_home_preselects_a_model_from_the_query(ui_client, catalog):
    html = ui_client.get("/?model=qwen2.5-7b").content.decode()
    assert 'value="qwen2.5-7b" data-kind="autoregressive" selected' in html


def test_home_with_an_empty_catalog_says_how_to_load_it(ui_client, db):
    html = ui_client.get("/").content.decode()
    assert "manage.py loadcatalog" in html


def test_a_valid_plan_redirects_to_its_stable_url(ui_client, dana, catalog):
    response = ui_client.post("/", CHAT_FORM)
    plan = Plan.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/plans/{plan.id}/"
    assert plan.inputs["workload"]["concurrency"] == 64
    assert plan.created_by == dana


def test_invalid_input_shows_errors_beside_each_field_and_stores_nothing(ui_client, catalog):
    data = {**CHAT_FORM, "prompt_tokens": "abc", "output_tokens": "0", "max_chips": "99999", "kinds": ["gpu", "quantum"]}
    response = ui_client.post("/", data)
    assert response.status_code == 200
    errors = response.context["errors"]
    assert errors["prompt_tokens"] == ["A valid integer is required."]
    assert "greater than or equal to 1" in errors["output_tokens"][0]
    assert "max_chips" in errors and "kinds" in errors
    html = response.content.decode()
    assert 'id="err-prompt_tokens"' in html and 'aria-invalid="true" aria-describedby="err-prompt_tokens"' in html
    assert 'value="abc"' in html  # what was typed is kept
    assert Plan.objects.count() == 0


def test_decoding_errors_from_the_nested_serializer_reach_their_fields(ui_client, catalog):
    response = ui_client.post("/", {**CHAT_FORM, "decoding_method": "speculative", "acceptance_rate": "0.7"})
    assert response.context["errors"] == {"draft_model": ["Speculative decoding needs a draft model slug."]}
    response = ui_client.post("/", {**CHAT_FORM, "model": "llada-8b", "decoding_method": "ar"})
    assert "diffusion" in response.context["errors"]["decoding_method"][0]


def test_an_unknown_model_is_a_model_error(ui_client, catalog):
    response = ui_client.post("/", {**CHAT_FORM, "model": "no-such-model"})
    assert response.context["errors"] == {"model": ["No model architecture with slug 'no-such-model'."]}


def test_a_prompt_longer_than_the_context_is_reported_on_prompt_tokens(ui_client, catalog):
    response = ui_client.post("/", {**CHAT_FORM, "prompt_tokens": "200000"})
    assert "exceeds llama-3.1-70b's context" in response.context["errors"]["prompt_tokens"][0]


def test_a_speculative_plan_with_a_draft_model_is_stored(ui_client, catalog):
    response = ui_client.post("/", {**CHAT_FORM, "decoding_method": "speculative", "draft_model": "llama-3.2-1b", "draft_tokens": "4", "acceptance_rate": "0.7"})
    assert response.status_code == 302
    assert Plan.objects.get().inputs["decodings"][0]["draft_model"] == "llama-3.2-1b"


def test_uploading_a_config_imports_the_model_and_plans_for_it(staff_ui_client, catalog):
    with (HF_CONFIGS / "mistral-7b-v0.1.json").open("rb") as f:
        response = staff_ui_client.post("/", {**CHAT_FORM, "model": "", "config_file": f, "import_name": "Team Mistral"})
    assert response.status_code == 302
    assert ModelArch.objects.filter(slug="team-mistral").exists()
    assert Plan.objects.get().model_slug == "team-mistral"


def test_a_bad_upload_is_a_config_file_error_and_imports_nothing(staff_ui_client, catalog):
    before = ModelArch.objects.count()
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = staff_ui_client.post("/", {**CHAT_FORM, "config_file": SimpleUploadedFile("config.json", b'{"model_type": "llama"}')})
    assert response.status_code == 200
    assert response.context["errors"]["config_file"]
    assert ModelArch.objects.count() == before and Plan.objects.count() == 0


def test_an_upload_followed_by_an_invalid_plan_keeps_nothing(staff_ui_client, catalog):
    before = ModelArch.objects.count()
    with (HF_CONFIGS / "mistral-7b-v0.1.json").open("rb") as f:
        response = staff_ui_client.post("/", {**CHAT_FORM, "config_file": f, "output_tokens": "-1"})
    assert response.status_code == 200 and "output_tokens" in response.context["errors"]
    assert ModelArch.objects.count() == before


def test_a_post_without_the_csrf_token_is_refused(dana, catalog):
    client = Client(enforce_csrf_checks=True)
    client.force_login(dana)
    response = client.post("/", CHAT_FORM)
    assert response.status_code == 403 and b"CSRF" in response.content
    assert Plan.objects.count() == 0


def test_the_form_offers_every_serving_engine_and_a_chosen_one_narrows_the_plan(ui_client, dana, catalog):
    page = ui_client.get("/").content.decode()
    assert 'name="serving_engine"' in page
    assert ">vLLM (fitted profile on NVIDIA GPUs; gpu, tpu, cpu, other chips of NVIDIA, AMD, Intel cpu, Intel gpu, Google, Apple)<" in page
    assert ">TensorRT-LLM (fitted profile on NVIDIA GPUs; gpu chips of NVIDIA)<" in page
    assert ">JetStream (tpu chips of Google)<" in page
    ui_client.post("/", {**CHAT_FORM, "serving_engine": "vLLM"})
    plan = Plan.objects.get()
    assert plan.inputs["serving_engine"] == "vLLM"
    assert {r["serving_engine"] for r in plan.results["ranked"]} == {"vLLM"}
    errors = ui_client.post("/", {**CHAT_FORM, "serving_engine": "no-such-engine"}).content.decode()
    assert 'id="err-serving_engine"' in errors and Plan.objects.count() == 1


def test_a_cpu_build_typed_in_the_server_settings_reaches_the_plan_and_one_that_reaches_no_cpu_is_named_at_its_field(ui_client, dana, catalog):
    refused = ui_client.post("/", {**CHAT_FORM, "serving_engine": "TensorRT-LLM", "cpu_matrix_dtypes": "none"})
    assert refused.status_code == 200 and "runs on no CPU" in refused.context["errors"]["cpu_matrix_dtypes"][0]
    html = refused.content.decode()
    assert '<details id="server-settings" open>' in html and 'name="cpu_matrix_dtypes" value="none"' in html and Plan.objects.count() == 0
    response = ui_client.post("/", {**CHAT_FORM, "model": "llama-3.1-8b", "serving_engine": "llama.cpp", "cpu_matrix_dtypes": "none",
                                    "kinds": ["cpu"], "max_chips": "1"})  # fmt: skip
    assert response.status_code == 302, response.context and response.context.get("errors")
    assert Plan.objects.get().inputs["scheduler"] == {"cpu_matrix_dtypes": []}


def test_a_closed_loop_is_planned_from_the_form_and_its_page_says_who_waits(ui_client, dana, catalog):
    """The form's third load kind: clients in a closed loop. The plan page names the loop, and a row that runs fewer of
    its clients at once than there are says the others wait for a slot."""
    looped = {**CHAT_FORM, "model": "llama-3.1-8b", "load_kind": "closed_loop", "concurrency": "512", "ttft_slo_s": "", "tpot_slo_s": "",
              "max_chips": "1", "kinds": ["gpu"]}  # fmt: skip
    response = ui_client.post("/", looped)
    assert response.status_code == 302, response.context and response.context.get("errors")
    plan = Plan.objects.get()
    assert plan.inputs["workload"]["closed_loop"] is True
    html = ui_client.get(response["Location"]).content.decode()
    assert "512 clients in a closed loop" in html and "of the 512 clients at once; the others wait for a slot" in html
    missing = ui_client.post("/", {**looped, "concurrency": ""})
    assert missing.status_code == 200 and "A closed loop needs concurrency" in missing.context["errors"]["concurrency"][0]


def test_the_form_runs_a_named_engine_under_its_server_settings(ui_client, dana, catalog):
    capped = {**CHAT_FORM, "model": "llama-3.1-8b", "ttft_slo_s": "", "tpot_slo_s": "", "max_chips": "2", "kinds": ["gpu"],
              "serving_engine": "vLLM", "max_sequences": "8"}  # fmt: skip
    response = ui_client.post("/", capped)
    assert response.status_code == 302, response.context and response.context.get("errors")
    plan = Plan.objects.get()
    assert plan.inputs["scheduler"] == {"max_sequences": 8}
    assert all(r["batch"] <= 8 * r["replicas"] for r in plan.results["ranked"])
    refused = ui_client.post("/", {**capped, "serving_engine": ""})
    assert refused.status_code == 200 and "serving_engine" in refused.context["errors"]
    assert 'id="server-settings" open' in refused.content.decode() and 'value="8"' in refused.content.decode()



def test_a_request_rate_chosen_and_left_empty_is_an_error_at_the_rate_and_stores_nothing(ui_client, catalog):
    # it had been dropped: a plan stored with no load at all, its page reading "1,000 prompt + 300 output tokens, ;"
    response = ui_client.post("/", {**CHAT_FORM, "load_kind": "request_rate", "request_rate_per_s": "", "concurrency": ""})
    assert response.status_code == 200
    assert response.context["errors"]["request_rate_per_s"] == ["This field may not be null."]
    assert 'id="err-request_rate_per_s"' in response.content.decode()
    assert Plan.objects.count() == 0


def test_percentile_slos_a_simulation_stage_and_ranking_by_pessimistic_cost_are_planned_from_the_form(ui_client, dana, catalog):
    form = {**CHAT_FORM, "model": "llama-3.1-8b", "concurrency": "8", "max_chips": "2", "kinds": ["gpu"], "rank_by": "pessimistic",
            "slo_ttft_s": "0.8", "slo_ttft_p": "99", "slo_tpot_s": "0.05", "slo_tpot_p": "", "sim_top_n": "2", "sim_requests": "60"}  # fmt: skip
    response = ui_client.post("/", form)
    assert response.status_code == 302, response.context and response.context["errors"]
    plan = Plan.objects.get()
    assert plan.inputs["slo_percentiles"] == {"ttft": {"p": 99.0, "s": 0.8}, "tpot": {"p": 95.0, "s": 0.05}}  # an empty percentile: 95
    assert plan.inputs["rank_by"] == "pessimistic" and plan.inputs["simulation"]["top_n"] == 2
    assert plan.results["simulation"]["candidates"] == 2 and plan.results["simulation"]["requests_per_candidate"] == 60


def test_a_bad_percentile_slo_is_an_error_beside_its_field_and_stores_nothing(ui_client, catalog):
    response = ui_client.post("/", {**CHAT_FORM, "slo_ttft_s": "0.5", "slo_ttft_p": "120", "sim_top_n": "0"})
    assert response.status_code == 200
    errors = response.context["errors"]
    assert "less than or equal to 99.99" in errors["slo_ttft_p"][0] and "greater than or equal to 1" in errors["sim_top_n"][0]
    html = response.content.decode()
    assert 'id="err-slo_ttft_p"' in html and '<details id="percentile-slos" open>' in html and 'value="120"' in html
    assert Plan.objects.count() == 0


def test_the_form_offers_percentile_slos_and_the_ranking_basis(ui_client, catalog):
    html = ui_client.get("/").content.decode()
    assert 'name="slo_ttft_s"' in html and 'name="slo_tpot_p"' in html and 'name="sim_top_n"' in html
    assert '<option value="pessimistic"' in html and '<details id="percentile-slos">' in html
