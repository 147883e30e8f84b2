from __future__ import annotations

from hwcatalog.models import Chip


def test_an_oversized_body_gets_413_and_changes_nothing(db, token_client):
    body = b'{"slug": "x", "padding": "' + b"a" * 17_000_000 + b'"}'
    response = token_client.generic("POST", "/api/v1/chips/", body, content_type="application/json")
    assert response.status_code == 413 and "exceeds the limit" in response.json()["detail"]
    assert not Chip.objects.exists()
