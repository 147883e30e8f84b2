"""The web process never imports torch: trials run in workers only."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.worker import worker_env

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import sys
import django
django.setup()
from django.test import Client
from django.urls import get_resolver
import config.wsgi, jobs.tasks, jobs.apis, jobs.services, planner.apis, frontend.views, hwcatalog.apis
get_resolver().url_patterns
client = Client()
for path in ("/", "/api/v1/chips/", "/api/v1/validations/", "/api/schema/"):
    client.get(path)
print("torch" in sys.modules)
"""


def test_the_web_process_serves_pages_without_importing_torch(db):
    # The same (test) database as this process, so the pages find their tables.
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120, env=worker_env())
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "False"
