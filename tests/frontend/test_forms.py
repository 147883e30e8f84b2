from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import QueryDict

from frontend import forms


def post(**values) -> QueryDict:
    q = QueryDict(mutable=True)
    for key, value in values.items():
        q.setlist(key, value if isinstance(value, list) else [value])
    return q


def test_payload_nests_workload_hardware_and_decoding():
    payload = forms.plan_payload(post(
        model="m", prompt_tokens="10", output_tokens="5", load_kind="concurrency", concurrency="8", request_rate_per_s="3",
        kinds=["gpu", "tpu"], max_chips="16", ownership="rent", decoding_method="speculative", draft_model="d",
        draft_tokens="4", acceptance_rate="0.7", steps="9",
    ))  # fmt: skip
    assert payload["workload"] == {"prompt_tokens": "10", "output_tokens": "5", "concurrency": "8"}
    assert payload["hardware"] == {"kinds": ["gpu", "tpu"], "max_chips": "16", "ownership": "rent"}
    assert payload["decodings"] == [{"method": "speculative", "draft_model": "d", "draft_tokens": "4", "acceptance_rate": "0.7"}]


def test_payload_sends_the_request_rate_when_chosen_and_leaves_empty_fields_out():
    payload = forms.plan_payload(post(model="m", prompt_tokens="10", output_tokens="", load_kind="request_rate", concurrency="8", request_rate_per_s="2.5"))
    assert payload["workload"] == {"prompt_tokens": "10", "request_rate_per_s": "2.5"}
    assert "decodings" not in payload and "budget_usd_per_million_output_tokens" not in payload


def test_payload_sends_a_closed_loop_of_the_concurrent_clients_when_chosen():
    payload = forms.plan_payload(post(model="m", prompt_tokens="10", output_tokens="5", load_kind="closed_loop", concurrency="64",
                                      request_rate_per_s="2"))
    assert payload["workload"] == {"prompt_tokens": "10", "output_tokens": "5", "concurrency": "64", "closed_loop": True}


def test_nested_errors_map_to_form_fields():
    errors = forms.form_errors({
        "workload": {"prompt_tokens": ["A valid integer is required."]},
        "hardware": {"kinds": {0: ['"zzz" is not a valid choice.']}, "non_field_errors": ["Too broad."]},
        "decodings": [{}, {"draft_model": ["Needed."]}],
        "budget_usd_per_million_output_tokens": ["Must be >= 0."],
        "non_field_errors": ["Something else."],
    })  # fmt: skip
    assert errors == {
        "prompt_tokens": ["A valid integer is required."], "kinds": ['"zzz" is not a valid choice.'], "hardware": ["Too broad."],
        "draft_model": ["Needed."], "budget": ["Must be >= 0."], "form": ["Something else."],
    }  # fmt: skip


def test_a_decoding_method_error_lands_on_the_method_select():
    assert forms.form_errors({"decodings": {"method": ["x is a diffusion model."]}}) == {"decoding_method": ["x is a diffusion model."]}


def test_upload_slug_comes_from_name_or_path_then_file_name():
    upload = SimpleUploadedFile("config.json", b'{"_name_or_path": "meta-llama/Llama-3.1-8B", "model_type": "llama"}')
    assert forms.read_config_upload(upload).slug == "llama-3.1-8b"
    upload = SimpleUploadedFile("My Model.json", b'{"model_type": "llama"}')
    assert forms.read_config_upload(upload).slug == "my-model"
    upload = SimpleUploadedFile("config.json", b'{"model_type": "qwen2"}', "application/json")
    assert forms.read_config_upload(upload, name="Team Qwen").slug == "team-qwen"


def test_upload_that_is_not_json_is_an_error():
    assert "Not a JSON file" in forms.read_config_upload(SimpleUploadedFile("config.json", b"{nope")).error
    assert forms.read_config_upload(SimpleUploadedFile("config.json", b"[1, 2]")).error == "A config.json must be a JSON object."


def test_payload_sends_the_named_engines_server_settings_that_are_given():
    payload = forms.plan_payload(post(model="m", prompt_tokens="10", output_tokens="5", serving_engine="vLLM", max_sequences="64",
                                      token_budget="", memory_fraction="0.85"))  # fmt: skip
    assert payload["serving_engine"] == "vLLM" and payload["scheduler"] == {"max_sequences": "64", "memory_fraction": "0.85"}
    assert "scheduler" not in forms.plan_payload(post(model="m", prompt_tokens="10", output_tokens="5", max_sequences=""))
    assert forms.form_errors({"scheduler": ["Name the serving_engine these settings are the command line of."]}) == {
        "serving_engine": ["Name the serving_engine these settings are the command line of."]}
    assert forms.form_errors({"scheduler": {"memory_fraction": ["Ensure this value is less than or equal to 1.0."]}}) == {
        "memory_fraction": ["Ensure this value is less than or equal to 1.0."]}


def test_a_cpu_builds_matrix_dtypes_are_typed_as_words_and_none_is_a_build_without_the_kernels():
    assert forms.matrix_dtypes_payload("int4 int8") == ["int4", "int8"]
    assert forms.matrix_dtypes_payload(" int4, bf16 ") == ["int4", "bf16"]
    assert forms.matrix_dtypes_payload("None") == [] and forms.matrix_dtypes_payload("[]") == []
    assert forms.matrix_dtypes_text(None) == "" and forms.matrix_dtypes_text([]) == "none" and forms.matrix_dtypes_text(["int4", "int8"]) == "int4 int8"
    payload = forms.plan_payload(post(model="m", prompt_tokens="10", output_tokens="5", serving_engine="llama.cpp", cpu_matrix_dtypes="none"))
    assert payload["scheduler"] == {"cpu_matrix_dtypes": []}
    assert "scheduler" not in forms.plan_payload(post(model="m", prompt_tokens="10", output_tokens="5", cpu_matrix_dtypes="  "))
    assert forms.form_errors({"scheduler": {"cpu_matrix_dtypes": {0: ['"fp99" is not a valid choice.']}}}) == {
        "cpu_matrix_dtypes": ['"fp99" is not a valid choice.']}
    assert forms.simulation_form_errors({"scheduler": {"cpu_matrix_dtypes": ["A CPU build's setting, and nvidia-h100-sxm is a gpu."]}}) == {
        "cpu_matrix_dtypes": ["A CPU build's setting, and nvidia-h100-sxm is a gpu."]}


def test_simulating_a_plan_row_carries_the_plans_cpu_build():
    """A plan's CPU build (scheduler.cpu_matrix_dtypes) is the plan's, so the row's simulation runs the same build."""
    row = {"chip_slug": "intel-xeon-8480plus", "chip_count": 1, "tensor_parallel": 1, "batch": 8, "replicas": 1}
    plan = {"model": "llama-2-7b", "workload": {"prompt_tokens": 100, "output_tokens": 10}, "serving_engine": "llama.cpp",
            "scheduler": {"cpu_matrix_dtypes": []}}  # fmt: skip
    assert forms.simulation_values_from_plan(plan, row, plan_id="p", rank=1)["cpu_matrix_dtypes"] == "none"
    tiles = {**plan, "scheduler": {"cpu_matrix_dtypes": ["int4", "int8"]}}
    assert forms.simulation_values_from_plan(tiles, row, plan_id="p", rank=1)["cpu_matrix_dtypes"] == "int4 int8"
    assert forms.simulation_values_from_plan({**plan, "scheduler": {}}, row, plan_id="p", rank=1)["cpu_matrix_dtypes"] == ""


def test_simulating_a_plan_row_keeps_the_plans_memory_fraction_unless_its_simulation_stage_set_its_own():
    """The plan's candidates ran under its server settings, so the row's simulation starts from them; the plan's
    simulation stage's own knobs, where given, are what the stage simulated the row with."""
    row = {"chip_slug": "nvidia-h100-sxm", "chip_count": 1, "tensor_parallel": 1, "batch": 8, "replicas": 1}
    plan = {"model": "llama-3.1-8b", "workload": {"prompt_tokens": 100, "output_tokens": 10}, "scheduler": {"memory_fraction": 0.7}}
    assert forms.simulation_values_from_plan(plan, row, plan_id="p", rank=1)["memory_fraction"] == 0.7
    staged = {**plan, "simulation": {"scheduler": {"memory_fraction": 0.6}}}
    assert forms.simulation_values_from_plan(staged, row, plan_id="p", rank=1)["memory_fraction"] == 0.6
    assert forms.simulation_values_from_plan({**plan, "scheduler": {}}, row, plan_id="p", rank=1)["memory_fraction"] == ""

