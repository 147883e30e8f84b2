from __future__ import annotations

from hwcatalog.models import Chip


def test_an_api_edit_is_recorded_with_who_when_and_old_and_new_values(catalog, catalog_token_client, staff_client):
    old = Chip.objects.get(slug="nvidia-h100-sxm").tdp_watts
    assert catalog_token_client.patch("/api/v1/chips/nvidia-h100-sxm/", {"tdp_watts": 650}, format="json").status_code == 200
    history = staff_client.get("/api/v1/chips/nvidia-h100-sxm/history/").json()
    newest, created = history[0], history[-1]
    assert newest["change"] == "changed" and newest["changed_by"] == "alice"
    assert newest["changes"] == {"tdp_watts": {"old": old, "new": 650.0}}
    assert created["change"] == "created" and created["reason"] == "loadcatalog" and created["changed_by"] is None


def test_the_admin_shows_a_rows_history(catalog, admin_client):
    chip = Chip.objects.get(slug="nvidia-h100-sxm")
    response = admin_client.get(f"/admin/hwcatalog/chip/{chip.pk}/history/")
    assert response.status_code == 200 and b"loadcatalog" in response.content
