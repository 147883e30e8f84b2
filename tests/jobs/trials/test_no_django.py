from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_trial_engine_imports_without_django():
    code = (
        "import sys, jobs.trials\n"
        "assert 'torch' not in sys.modules, 'importing the package alone must not load torch'\n"
        "import jobs.trials.decode, jobs.trials.speculative, jobs.trials.block_diffusion, jobs.trials.device, "
        "jobs.trials.bench, jobs.trials.tiny_pair, jobs.trials.weights\n"
        "bad = sorted(m for m in sys.modules if m == 'django' or m.startswith(('django.', 'celery', 'rest_framework')))\n"
        "assert not bad, bad\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
