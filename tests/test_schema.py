from __future__ import annotations

import yaml
from django.core.management import call_command


def test_the_openapi_schema_is_valid_and_generates_without_warnings(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    paths = set(schema["paths"])
    assert {"/api/v1/chips/", "/api/v1/models/", "/api/v1/offerings/", "/api/v1/estimates/", "/api/v1/plans/",
            "/api/v1/plans/{plan_id}/", "/api/v1/plans/{plan_id}/export.csv", "/api/v1/models/import/"} <= paths
