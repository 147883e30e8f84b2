from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from jobs.trials.bench import find_model, load_rows

ROOT = Path(__file__).resolve().parents[3]


def _bench(*args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    proc = subprocess.run([sys.executable, "-m", "jobs.trials.bench", *args, "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_the_cli_runs_a_scaled_catalog_model_on_cpu_and_prints_json():
    r = _bench("--model", "tinyllama-1.1b", "--trial", "decode", "--device", "cpu", "--dtype", "fp32",
               "--max-layers", "1", "--prompt-tokens", "8", "--decode-steps", "4", "--no-probe",
               "--peak-bandwidth", "1e13", "--peak-flops", "1e15")
    assert r["trial"] == "decode" and r["model"]["slug"] == "tinyllama-1.1b"
    assert r["scaled"]["layers_run"] == 1 and r["scaled"]["layers_full"] == r["model"]["layers_full"]
    assert r["tpot_s_median"] > 0 and 0 < r["mbu"] <= 1
    assert r["chip"]["peaks_source"].startswith("--peak")


def test_catalog_rows_are_read_without_django():
    assert any(row["slug"] == "llama-3.1-8b" for row in load_rows("models"))
    assert find_model("llama-3.2-1b")["num_kv_heads"] == 8
