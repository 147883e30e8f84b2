from __future__ import annotations

import json
import logging

from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from hwcatalog.models import Chip, ModelArch
from planner.models import Plan


def test_an_oversized_body_gets_413_and_changes_nothing(db, token_client):
    body = b'{"slug": "x", "padding": "' + b"a" * 17_000_000 + b'"}'
    response = token_client.generic("POST", "/api/v1/chips/", body, content_type="application/json")
    assert response.status_code == 413 and "exceeds the limit" in response.json()["detail"]
    assert not Chip.objects.exists()


def _json_body_of(size: int) -> bytes:
    padding = size - len(b'{"padding": ""}')
    return b'{"padding": "' + b"a" * padding + b'"}'


def test_a_json_body_over_the_data_upload_limit_gets_a_json_413_and_no_traceback(db, anonymous_client, caplog):
    body = _json_body_of(settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 500_000)  # 3 MB: under 16 MB, over 2.5 MB
    with caplog.at_level(logging.WARNING):
        response = anonymous_client.generic("POST", "/api/v1/estimates/", body, content_type="application/json")
    assert response.status_code == 413 and response["Content-Type"] == "application/json"
    detail = response.json()["detail"]
    assert f"exceeds the limit of {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes" in detail and "multipart/form-data" in detail
    assert not [r for r in caplog.records if r.name.startswith("django.security")]  # no RequestDataTooBig


def test_a_json_body_just_under_the_data_upload_limit_still_reaches_the_view(db, anonymous_client):
    body = _json_body_of(settings.DATA_UPLOAD_MAX_MEMORY_SIZE - 1_000)
    response = anonymous_client.generic("POST", "/api/v1/estimates/", body, content_type="application/json")
    assert response.status_code == 400 and "model" in response.json()  # the serializer's answer, not a size limit


def test_a_form_body_over_the_data_upload_limit_gets_413_and_stores_nothing(catalog, django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_user("fiona"))
    body = "model=llama-3.1-70b&padding=" + "a" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 10)
    response = client.generic("POST", "/", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 413 and "exceeds the limit" in response.json()["detail"]
    assert not Plan.objects.exists()


def test_a_multipart_upload_over_the_data_upload_limit_keeps_the_larger_limit(db, catalog_token_client):
    # File parts do not count against DATA_UPLOAD_MAX_MEMORY_SIZE: a 3 MB config.json reaches the
    # serializer, which refuses it by MAX_CONFIG_UPLOAD_BYTES and names the field.
    big = SimpleUploadedFile("config.json", _json_body_of(settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 500_000), "application/json")
    response = catalog_token_client.post("/api/v1/models/import/", {"slug": "big", "config_file": big}, format="multipart")
    assert response.status_code == 400
    assert "a config.json may be at most" in json.dumps(response.json()["config_file"])
    assert not ModelArch.objects.filter(slug="big").exists()


def test_djangos_own_400_is_json_under_api_and_html_elsewhere(db):
    client = Client(HTTP_HOST="evil.example.com")  # not in ALLOWED_HOSTS: Django answers 400 itself
    api = client.get("/api/v1/chips/")
    assert api.status_code == 400 and api["Content-Type"] == "application/json"
    assert api.json() == {"detail": "Bad request."}
    page = client.get("/catalog/")
    assert page.status_code == 400 and page["Content-Type"].startswith("text/html")
