from __future__ import annotations

import os
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
