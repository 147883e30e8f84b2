"""A real Celery worker process for integration tests, on the same broker and test database."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from django.db import connection

from tests.xdist_env import worker_index

ROOT = Path(__file__).resolve().parent.parent
# One log of each kind per test process (pytest-xdist runs two: tests/xdist_env.py).
WORKER_LOG = ROOT / "var" / f"test-worker-gw{worker_index()}.log"
WEB_LOG = ROOT / "var" / f"test-web-gw{worker_index()}.log"


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        env["SQLITE_PATH"] = str(db["NAME"])
    else:
        user = db.get("USER") or ""
        password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
        host = db.get("HOST") or "127.0.0.1"
        port = db.get("PORT") or 5432
        env["DATABASE_URL"] = f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextmanager
def running_worker(*, queues: str = "cpu", log_path: Path | None = None, extra_env: dict[str, str] | None = None, beat: bool = False):
    """A Celery worker process; with beat=True it also runs the database beat schedule (-B)."""
    command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--queues", queues, "--concurrency", "1",
               "--pool", "prefork", "--loglevel", "INFO", "--without-gossip", "--without-mingle", "--hostname", f"test-{os.getpid()}@%h"]  # fmt: skip
    if beat:
        command += ["--beat", "--schedule", str(ROOT / "var" / f"test-beat-{os.getpid()}")]
    with _process(command, log_path=log_path or WORKER_LOG, extra_env=extra_env) as process:
        yield process


@contextmanager
def running_web(*, log_path: Path | None = None, extra_env: dict[str, str] | None = None):
    """gunicorn (one sync worker, as in production but smaller) on a free port; yields its base URL."""
    port = free_port()
    command = [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1", "--timeout", "60"]
    with _process(command, log_path=log_path or WEB_LOG, extra_env=extra_env):
        base_url = f"http://127.0.0.1:{port}"
        if not wait_for(lambda: _answers(base_url), timeout_s=60):
            raise RuntimeError(f"gunicorn did not start; see {log_path or WEB_LOG}")
        yield base_url


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/api/v1/chips/?page_size=1", timeout=5) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


@contextmanager
def _process(command: list[str], *, log_path: Path, extra_env: dict[str, str] | None):
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**worker_env(), **(extra_env or {})}
    with log_path.open("w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield process
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


def wait_for(predicate, *, timeout_s: float = 60.0, interval_s: float = 0.25):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    return predicate()
