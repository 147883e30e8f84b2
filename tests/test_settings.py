from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION_ENV = {
    "DJANGO_MODE": "production",
    "DJANGO_SECRET_KEY": "x" * 20 + "a-long-random-production-secret-key-value-0123456789",
    "DJANGO_ALLOWED_HOSTS": "hwplanner.example.com",
}


def _manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=120)


def test_env_bool_rejects_a_typo_with_the_variable_named(monkeypatch):
    monkeypatch.setenv("SOME_FLAG", "treu")
    with pytest.raises(ImproperlyConfigured, match="SOME_FLAG"):
        env_bool("SOME_FLAG", default=False)


def test_env_int_rejects_words_and_out_of_range_values(monkeypatch):
    monkeypatch.setenv("SOME_NUMBER", "ten")
    with pytest.raises(ImproperlyConfigured, match="SOME_NUMBER"):
        env_int("SOME_NUMBER", 1)
    monkeypatch.setenv("SOME_NUMBER", "-3")
    with pytest.raises(ImproperlyConfigured, match=">= 0"):
        env_int("SOME_NUMBER", 1, minimum=0)


def test_production_settings_pass_check_deploy():
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stdout + result.stderr


def test_production_refuses_to_start_without_a_secret_key():
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "DJANGO_SECRET_KEY"}
    result = _manage("check", env=env)
    assert result.returncode != 0 and "DJANGO_SECRET_KEY must be set" in result.stderr


def test_a_bad_debug_value_stops_start_up_with_its_name():
    result = _manage("check", env={"DJANGO_DEBUG": "maybe"})
    assert result.returncode != 0 and "DJANGO_DEBUG" in result.stderr


def _python(script: str, *, env: dict[str, str], var_dir: Path) -> subprocess.CompletedProcess:
    """Run a script with Django set up, with its own var/ (SQLite, broker) and no database or
    broker server from the environment: production settings without touching anything shared."""
    drop = ("DJANGO_", "DATABASE_URL", "REDIS_URL", "SQLITE_PATH", "HWPLANNER_")
    base = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    code = "import django; django.setup()\n" + script
    env = {**base, "DJANGO_SETTINGS_MODULE": "config.settings", "HWPLANNER_VAR_DIR": str(var_dir), **env}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_production_refuses_the_dockerfiles_old_build_only_key():
    result = _manage("check", env={**PRODUCTION_ENV, "DJANGO_SECRET_KEY": "build-only-collectstatic-key-not-used-at-run-time-0123456789"})
    assert result.returncode != 0 and "DJANGO_SECRET_KEY is a published key" in result.stderr
    assert "build-only-collectstatic-key" not in (ROOT / "Dockerfile").read_text()  # the image makes a random one


def test_production_refuses_a_django_insecure_key():
    key = "django-insecure-" + "k" * 50
    result = _manage("check", env={**PRODUCTION_ENV, "DJANGO_SECRET_KEY": key})
    assert result.returncode != 0 and "DJANGO_SECRET_KEY is a published key" in result.stderr


def test_the_development_key_file_is_readable_by_its_owner_only(tmp_path):
    result = _python("from django.conf import settings; print(len(settings.SECRET_KEY))", env={}, var_dir=tmp_path)
    assert result.returncode == 0, result.stderr
    key_file = tmp_path / "secret_key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert int(result.stdout) >= 50 and key_file.read_text().strip()


def test_a_development_key_file_made_world_readable_before_is_tightened_and_kept(tmp_path):
    key_file = tmp_path / "secret_key"
    key_file.write_text("an-older-development-key-" + "z" * 40)
    key_file.chmod(0o644)
    result = _python("from django.conf import settings; print(settings.SECRET_KEY)", env={}, var_dir=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == key_file.read_text().strip()  # sessions signed with it stay valid
    assert key_file.stat().st_mode & 0o777 == 0o600


# Over plain HTTP, with a client's own "X-Forwarded-Proto: https": the redirect to HTTPS shows
# whether the header was believed. A URL that needs no database.
PROXY_HEADER_PROBE = """
from django.test import Client
r = Client().get("/api/v1/nothing-here/", HTTP_HOST="hwplanner.example.com", HTTP_X_FORWARDED_PROTO="https")
print(r.status_code)
"""


def test_production_ignores_x_forwarded_proto_unless_told_to_trust_it(tmp_path):
    untrusted = _python(PROXY_HEADER_PROBE, env=PRODUCTION_ENV, var_dir=tmp_path)
    assert untrusted.returncode == 0, untrusted.stderr
    assert untrusted.stdout.split() == ["301"]  # still plain HTTP: redirected to https://
    trusted = _python(PROXY_HEADER_PROBE, env={**PRODUCTION_ENV, "DJANGO_TRUST_X_FORWARDED_PROTO": "true"}, var_dir=tmp_path)
    assert trusted.returncode == 0, trusted.stderr
    assert trusted.stdout.split() == ["404"]  # believed: served as HTTPS
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env={**PRODUCTION_ENV, "DJANGO_TRUST_X_FORWARDED_PROTO": "true"})
    assert result.returncode == 0, result.stdout + result.stderr


PAGES_PROBE = """
import json
from django.core.management import call_command
from django.test import Client
call_command("migrate", verbosity=0)
client = Client(HTTP_HOST="hwplanner.example.com")
pages = {path: client.get(path, secure=True) for path in ("/", "/catalog/", "/plans/", "/accounts/login/", "/admin/login/")}
print(json.dumps({path: [r.status_code, r.content.decode()] for path, r in pages.items()}))
"""


def test_production_collectstatic_builds_the_manifest_and_html_pages_render(tmp_path):
    static_root, var_dir = tmp_path / "static", tmp_path / "var"
    env = {**PRODUCTION_ENV, "DJANGO_STATIC_ROOT": str(static_root), "HWPLANNER_VAR_DIR": str(var_dir)}
    collect = _manage("collectstatic", "--noinput", env={**env, "DATABASE_URL": "", "REDIS_URL": ""})
    assert collect.returncode == 0, collect.stdout + collect.stderr
    assert (static_root / "staticfiles.json").exists()

    result = _python(PAGES_PROBE, env={"DJANGO_STATIC_ROOT": str(static_root), **PRODUCTION_ENV}, var_dir=var_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    pages = json.loads(result.stdout.strip().splitlines()[-1])
    assert {path: status for path, (status, _) in pages.items()} == dict.fromkeys(pages, 200)
    # The pages name the hashed files of the manifest (app.<hash>.css), which whitenoise serves for a year.
    assert re.search(r"/static/frontend/app\.[0-9a-f]{12}\.css", pages["/"][1])
