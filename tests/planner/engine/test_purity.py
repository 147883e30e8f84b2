"""The engine is pure: importing it loads no web framework, task queue or torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
FORBIDDEN = ("django", "rest_framework", "celery", "torch", "kombu")


def test_importing_planner_engine_loads_no_django_drf_celery_or_torch():
    code = (
        "import sys, planner.engine, planner.engine.bench, planner.engine.accuracy; "
        f"print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})))"
    )
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": os.environ.get("PATH", "")}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == ""
