"""Hostile shapes of input get a 400 or a 404 that says what is wrong, never a 500: JSON nested too
deep or with too many keys (inputs/json_limits.py, through the API's parser, a form's JSON field and
an uploaded config.json), and control characters in paths, queries and web forms
(config.middleware.ControlCharacterMiddleware)."""
from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from hwcatalog.models import ModelArch
from inputs import json_limits
from planner.models import Plan


def nested(depth: int) -> str:
    """A JSON array nested `depth` levels deep: [[[...]]]."""
    return "[" * depth + "]" * depth


def object_nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.fixture
def stella(db) -> Client:
    """Stella is staff, signed in to the web UI (she may import a config.json there)."""
    user = get_user_model().objects.create_user("stella", password="stella-password-1234", is_staff=True)
    client = Client()
    client.force_login(user)
    return client


# --- JSON shape ---------------------------------------------------------------------------------
def test_json_nested_a_thousand_deep_gets_400_not_a_recursion_error(anonymous_client):
    response = anonymous_client.generic("POST", "/api/v1/estimates/", nested(1000), content_type="application/json")
    assert response.status_code == 400
    assert f"at most {settings.JSON_MAX_DEPTH} deep" in response.json()["detail"]


def test_json_nested_a_hundred_thousand_deep_gets_400_too(anonymous_client):
    response = anonymous_client.generic("POST", "/api/v1/estimates/", nested(100_000), content_type="application/json")
    assert response.status_code == 400 and "Nested deeper than" in response.json()["detail"]


def test_json_one_level_past_the_depth_limit_is_refused_and_at_the_limit_is_not(anonymous_client):
    limit = settings.JSON_MAX_DEPTH
    over = anonymous_client.generic("POST", "/api/v1/estimates/", json.dumps(object_nested(limit + 1)), content_type="application/json")
    assert over.status_code == 400 and "Nested deeper than" in over.json()["detail"]
    at = anonymous_client.generic("POST", "/api/v1/estimates/", json.dumps(object_nested(limit)), content_type="application/json")
    assert at.status_code == 400 and "a" in at.json()  # past the parser: the serializer names the unknown field


def test_json_with_too_many_keys_gets_400(anonymous_client):
    body = json.dumps({f"k{i}": i for i in range(settings.JSON_MAX_KEYS + 1)})
    response = anonymous_client.generic("POST", "/api/v1/estimates/", body, content_type="application/json")
    assert response.status_code == 400
    assert f"at most {settings.JSON_MAX_KEYS}" in response.json()["detail"]


def test_keys_are_counted_over_the_whole_document(anonymous_client):
    half = settings.JSON_MAX_KEYS // 2 + 1
    body = json.dumps({"a": {f"k{i}": i for i in range(half)}, "b": {f"k{i}": i for i in range(half)}})
    response = anonymous_client.generic("POST", "/api/v1/estimates/", body, content_type="application/json")
    assert response.status_code == 400 and "object keys in all" in response.json()["detail"]


def test_nan_is_still_not_json(anonymous_client):
    response = anonymous_client.generic("POST", "/api/v1/estimates/", '{"prompt_tokens": NaN}', content_type="application/json")
    assert response.status_code == 400 and "JSON parse error" in response.json()["detail"]


def test_a_deep_body_to_a_write_changes_nothing(token_client, catalog):
    body = json.dumps({"model": "llama-3.1-8b", "workload": object_nested(settings.JSON_MAX_DEPTH + 5)})
    response = token_client.generic("POST", "/api/v1/plans/", body, content_type="application/json")
    assert response.status_code == 400 and not Plan.objects.exists()


def test_a_deep_config_in_an_import_body_gets_400(staff_client):
    body = json.dumps({"slug": "deep", "config": {"model_type": "llama", "rope_scaling": object_nested(settings.JSON_MAX_DEPTH)}})
    response = staff_client.generic("POST", "/api/v1/models/import/", body, content_type="application/json")
    assert response.status_code == 400 and "Nested deeper than" in response.json()["detail"]
    assert not ModelArch.objects.filter(slug="deep").exists()


def test_a_deep_config_sent_as_a_form_field_gets_400_naming_it(staff_client):
    response = staff_client.post("/api/v1/models/import/", {"slug": "deep", "config": nested(1000)}, format="multipart")
    assert response.status_code == 400 and "Nested deeper than" in response.json()["config"][0]
    assert not ModelArch.objects.filter(slug="deep").exists()


def test_a_deep_config_json_upload_gets_400_naming_the_file_field(staff_client):
    upload = SimpleUploadedFile("config.json", nested(1000).encode(), "application/json")
    response = staff_client.post("/api/v1/models/import/", {"slug": "deep", "config_file": upload}, format="multipart")
    assert response.status_code == 400 and "Nested deeper than" in response.json()["config_file"][0]


def test_a_config_with_a_nul_in_a_string_gets_400_naming_config(staff_client):
    body = {"slug": "nul", "config": {"model_type": "llama", "architectures": ["Llama\u0000ForCausalLM"]}}
    response = staff_client.post("/api/v1/models/import/", body, format="json")
    assert response.status_code == 400 and "NUL" in response.json()["config"][0]


def test_a_chip_source_list_past_the_limits_gets_400_naming_sources(staff_client):
    response = staff_client.post("/api/v1/chips/", {"slug": "deep", "sources": object_nested(settings.JSON_MAX_DEPTH + 1)}, format="json")
    assert response.status_code == 400  # the parser's limit: the body is one level deeper than the field
    response = staff_client.post("/api/v1/chips/", {"slug": "deep", "sources": nested(1000)}, format="multipart")
    assert response.status_code == 400 and "Nested deeper than" in response.json()["sources"][0]


def test_the_web_forms_deep_config_upload_is_a_config_file_error(stella, catalog):
    upload = SimpleUploadedFile("config.json", nested(1000).encode(), "application/json")
    response = stella.post("/", {"model": "", "prompt_tokens": "100", "output_tokens": "10", "config_file": upload})
    assert response.status_code == 200  # the form again, with the error by its field
    assert "Nested deeper than" in response.context["errors"]["config_file"][0]
    assert not Plan.objects.exists()


def test_the_admins_deep_config_upload_is_a_form_error(db):
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", password="root-password-1234"))
    upload = SimpleUploadedFile("config.json", nested(1000).encode(), "application/json")
    response = admin.post("/admin/hwcatalog/modelarch/import-hf/", {"slug": "deep", "config_file": upload})
    assert response.status_code == 200 and "Nested deeper than" in response.content.decode()
    assert not ModelArch.objects.filter(slug="deep").exists()


def test_json_limits_check_walks_without_recursion():
    deep: list = []
    for _ in range(50_000):
        deep = [deep]
    with pytest.raises(json_limits.JSONLimitError):
        json_limits.check(deep)


# --- control characters in paths and queries ------------------------------------------------------
@pytest.mark.parametrize("path", ["/api/v1/chips/%00/", "/api/v1/models/%00/history/", "/api/v1/offerings/a%1Fb/"])
def test_a_control_character_in_an_api_path_is_a_json_404(anonymous_client, db, path):
    response = anonymous_client.get(path)
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert "control character" in response.json()["detail"]


@pytest.mark.parametrize("path", ["/catalog/chips/%00/", "/catalog/models/x%7F/"])
def test_a_control_character_in_a_page_path_is_an_html_404(anonymous_client, db, path):
    response = anonymous_client.get(path)
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize(
    ("url", "parameter"),
    [
        ("/api/v1/plans/?model=%00", "model"),
        ("/api/v1/chips/?search=a%00b", "search"),
        ("/api/v1/chips/?vendor=%0A", "vendor"),
        ("/api/v1/validations/?plan=%00", "plan"),
        ("/api/v1/models/?%00=1", "\x00"),
    ],
)
def test_a_control_character_in_an_api_query_is_a_400_naming_the_parameter(anonymous_client, db, url, parameter):
    response = anonymous_client.get(url)
    assert response.status_code == 400
    assert "control character" in response.json()[parameter][0]


def test_a_nul_in_the_chip_compare_query_is_an_html_400(anonymous_client, catalog):
    response = anonymous_client.get("/catalog/compare/?chips=%00")
    assert response.status_code == 400 and response["Content-Type"].startswith("text/html")
    assert "chips: Contains the control character U+0000" in response.content.decode()


def test_ordinary_queries_still_pass(anonymous_client, catalog):
    assert anonymous_client.get("/api/v1/chips/?search=h100%20sxm&vendor=NVIDIA").status_code == 200
    assert anonymous_client.get("/catalog/compare/?chips=nvidia-h100-sxm,nvidia-h200-sxm").status_code == 200


def test_a_nul_in_a_web_form_field_is_a_400_and_stores_nothing(stella, catalog):
    upload = SimpleUploadedFile("config.json", (settings.BASE_DIR / "tests/fixtures/hf_configs/mistral-7b-v0.1.json").read_bytes())
    form = {"model": "", "prompt_tokens": "100", "output_tokens": "10", "config_file": upload, "import_name": "team\x00mistral"}
    response = stella.post("/", form)
    assert response.status_code == 400 and "NUL" in response.content.decode()
    assert not ModelArch.objects.filter(name__startswith="team").exists() and not Plan.objects.exists()
