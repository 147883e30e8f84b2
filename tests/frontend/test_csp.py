"""The Content-Security-Policy (django-csp, config/settings.py): on every response, and no
template that needs more than it allows (no inline script, event handler or style attribute)."""
from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from tests.frontend.conftest import CHAT, make_plan

ROOT = Path(__file__).resolve().parents[2]
# The project's own templates (Django's admin and drf-spectacular's are held by the page tests below).
TEMPLATES = sorted(path for app in ("frontend", "accounts", "hwcatalog", "planner", "jobs") for path in (ROOT / app).glob("templates/**/*.html"))
# What a browser runs as a script: a <script> with no type or a JavaScript one (json_script's
# type="application/json" is a data block, which CSP does not govern and no browser executes).
DATA_TYPES = {"application/json", "application/ld+json"}


def _policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in header.split(";") if part.strip()}


class _InlineCode(HTMLParser):
    """Collects what the policy would refuse in a page: inline scripts, on* handlers,
    javascript: URLs and style attributes."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "script" and "src" not in attributes and (attributes.get("type") or "text/javascript") not in DATA_TYPES:
            self.found.append(f"inline <script> at line {self.getpos()[0]}")
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"event handler {name}= on <{tag}> at line {self.getpos()[0]}")
            if name == "style":
                self.found.append(f"style= on <{tag}> at line {self.getpos()[0]}")
            if name in ("href", "src", "action", "formaction") and (value or "").strip().lower().startswith("javascript:"):
                self.found.append(f"javascript: URL on <{tag}> at line {self.getpos()[0]}")


def inline_code(html: str) -> list[str]:
    parser = _InlineCode()
    parser.feed(html)
    return parser.found


def test_there_are_templates_to_scan():
    assert any(path.name == "base.html" for path in TEMPLATES) and len(TEMPLATES) >= 10


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_template_has_an_inline_script_handler_or_style(template):
    source = template.read_text()
    # Template tags may sit inside a tag ({% if %} in attributes); the parser reads them as text.
    assert inline_code(source) == []
    assert not re.search(r"<script\b(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")", source), "an inline <script>"


def test_the_policy_allows_our_origin_only_and_no_inline_code(db, client):
    policy = _policy(client.get("/"))
    assert policy["script-src"] == ["'self'"] and policy["style-src"] == ["'self'"]
    assert policy["default-src"] == ["'self'"] and policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    assert not any("unsafe" in source for sources in policy.values() for source in sources)


def test_the_vendored_chart_and_our_scripts_are_same_origin_static_files():
    vendor = ROOT / "frontend" / "static" / "frontend"
    assert list(vendor.glob("vendor/chart*.js")) and list(vendor.glob("js/*.js"))
    assert not settings.STATIC_URL.startswith(("http:", "https:", "//"))  # 'self' covers them


@pytest.fixture
def pages(catalog, chat_plan) -> list[str]:
    other = make_plan({**CHAT, "workload": {**CHAT["workload"], "concurrency": 8}})
    return [
        "/", "/plans/", f"/plans/{chat_plan.id}/", f"/plans/compare/?a={chat_plan.id}&b={other.id}", "/catalog/",
        "/catalog/compare/?chips=nvidia-h100-sxm,amd-mi300x", "/catalog/chips/nvidia-h100-sxm/",
        "/catalog/models/llama-3.1-70b/", "/catalog/prices/", "/accounts/login/", "/admin/login/", "/api/docs/", "/api/v1/chips/",
    ]  # fmt: skip


def test_every_page_carries_the_policy_and_runs_no_inline_code(pages, ui_client):
    signed_out = Client()
    for path in pages:
        response = (signed_out if path.endswith("/login/") else ui_client).get(path)
        assert response.status_code == 200, path
        assert "script-src 'self'" in response["Content-Security-Policy"], path
        if response["Content-Type"].startswith("text/html"):
            assert inline_code(response.content.decode()) == [], path


def test_errors_and_redirects_carry_it_too(db):
    client = Client()
    for path, status in (("/no-such-page/", 404), ("/api/v1/chips/no-such-chip/", 404), ("/admin/", 302)):
        response = client.get(path)
        assert response.status_code == status and "Content-Security-Policy" in response, path


def test_the_admin_pages_run_no_inline_code(catalog, admin_client):
    for path in ("/admin/", "/admin/hwcatalog/chip/", "/admin/hwcatalog/chip/add/", "/admin/auth/user/", "/admin/accounts/apitoken/"):
        response = admin_client.get(path)
        assert response.status_code == 200, path
        assert "Content-Security-Policy" in response, path
        assert inline_code(response.content.decode()) == [], path


def test_swagger_ui_loads_its_init_script_from_a_url(db):
    client = Client()
    page = client.get("/api/docs/")
    assert inline_code(page.content.decode()) == []
    script = re.search(r'<script src="([^"]*script=[^"]*)"', page.content.decode()).group(1)
    init = client.get(script.replace("&amp;", "&"))
    assert init.status_code == 200 and init["Content-Type"].startswith("application/javascript")
    assert b"SwaggerUIBundle" in init.content
