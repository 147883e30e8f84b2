"""Under the Content-Security-Policy in a real browser: the admin and the Swagger UI work, and
nothing is refused (test_browser's `page` fails a test on any CSP violation Chromium reports)."""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.frontend.test_browser import browser, page  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_admin_signs_in_and_edits_under_the_policy(page):  # noqa: F811
    get_user_model().objects.create_user("stella", password="stella-password-1234", is_staff=True, is_superuser=True)
    page.goto(page.base + "/admin/")
    page.fill("#id_username", "stella")
    page.fill("#id_password", "stella-password-1234")
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    page.goto(page.base + "/admin/hwcatalog/chip/")
    page.wait_for_selector("#result_list")
    page.click("#result_list tbody tr:first-child th a")
    page.wait_for_selector("form#chip_form")
    # The admin's own scripts ran: the theme toggle and the "Show" links of collapsed fieldsets are added by them.
    assert page.evaluate("() => typeof django !== 'undefined' && typeof django.jQuery === 'function'")


def test_swagger_ui_renders_the_schema_under_the_policy(page):  # noqa: F811
    page.goto(page.base + "/api/docs/")
    page.wait_for_selector("#swagger-ui .info .title")
    page.wait_for_selector("text=/api/v1/plans/")
