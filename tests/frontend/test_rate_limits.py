"""The web UI's forms and both sign-in pages are rate-limited like the API: 429 with Retry-After,
and the view does not run (no plan stored, no validation queued, no password checked)."""
from __future__ import annotations

import pytest

from jobs.models import ValidationRun
from planner.models import Plan
from tests.frontend.conftest import CHAT_FORM, DANA_PASSWORD


def _assert_429(response) -> None:
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert "Too many requests" in response.content.decode()


def test_a_user_over_the_form_rate_gets_a_429_and_no_plan_is_stored(ui_client, catalog, throttle_rates):
    throttle_rates(**{"ui-writes": "2/min"})
    assert [ui_client.post("/", CHAT_FORM).status_code for _ in range(2)] == [302, 302]
    _assert_429(ui_client.post("/", CHAT_FORM))
    assert Plan.objects.count() == 2
    assert ui_client.get("/").status_code == 200  # reading the form is not limited


def test_the_validate_form_shares_the_users_form_budget(ui_client, chat_plan, throttle_rates):
    throttle_rates(**{"ui-writes": "1/min"})
    assert ui_client.post(f"/plans/{chat_plan.id}/validate/", {"rank": 1, "trial": "decode", "queue": "cpu"}).status_code == 302
    _assert_429(ui_client.post(f"/plans/{chat_plan.id}/validate/", {"rank": 1, "trial": "decode", "queue": "cpu"}))
    assert ValidationRun.objects.count() == 1


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_password_guesses_are_limited_per_address_on_both_sign_in_pages(anonymous_ui_client, dana, throttle_rates, path):
    dana.is_staff = True  # so the admin's page lets her in too
    dana.save()
    throttle_rates(**{"sign-in": "3/min"})
    for _ in range(3):
        assert anonymous_ui_client.post(path, {"username": "dana", "password": "wrong"}).status_code == 200  # the form again
    # Over the limit even the right password is not checked: a guesser learns nothing more.
    _assert_429(anonymous_ui_client.post(path, {"username": "dana", "password": DANA_PASSWORD}))
    assert "_auth_user_id" not in anonymous_ui_client.session
    assert anonymous_ui_client.post(path, {"username": "dana", "password": DANA_PASSWORD}, REMOTE_ADDR="198.51.100.9").status_code == 302
