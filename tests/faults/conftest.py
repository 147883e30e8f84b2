"""Fault tests: real processes (gunicorn, a Celery worker, a private redis-server) and real
faults (a broker restarted with its queues lost, a database backend killed mid-request)."""
from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager

import pytest
import requests
from django.contrib.auth import get_user_model

from accounts.services import api_token_create
from hwcatalog.services import catalog_load
from tests.worker import ROOT, free_port, wait_for


@pytest.fixture
def api(db):
    """A requests session to a real web process: a write-scoped token of a fresh user, and the catalog loaded."""
    catalog_load()
    user = get_user_model().objects.create_user("faults")
    _, key = api_token_create(user=user, name="fault tests", scope="write")
    session = requests.Session()
    session.headers["Authorization"] = f"Token {key}"
    return session


SMALL_PLAN = {
    "model": "llama-3.2-1b",
    "workload": {"prompt_tokens": 200, "output_tokens": 100, "concurrency": 4},
    "hardware": {"kinds": ["gpu"], "max_chips": 8},
}


class PrivateRedis:
    """A redis-server of the test's own on a free port, without persistence (as CI's is): a
    restart loses every queued message, the worst case for a broker."""

    def __init__(self):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None
        self.log_path = ROOT / "var" / f"test-redis-{self.port}.log"

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--logfile", str(self.log_path)]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        if not wait_for(lambda: self.ping(), timeout_s=20, interval_s=0.1):
            raise RuntimeError(f"redis-server did not start; see {self.log_path}")

    def stop(self) -> None:
        """Kill it outright: what a crash or an OOM kill does to a broker without persistence."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        wait_for(lambda: not self.ping(), timeout_s=10, interval_s=0.1)

    def client(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=1)

    def ping(self) -> bool:
        try:
            return bool(self.client().ping())
        except Exception:  # noqa: BLE001 - any error means "not answering"
            return False

    def queue_length(self, queue: str) -> int:
        return int(self.client().llen(queue))


@contextmanager
def private_redis():
    if shutil.which("redis-server") is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed, and CI must run the broker fault test")
        pytest.skip("redis-server is not installed (CI's machine has it)")
    server = PrivateRedis()
    server.start()
    try:
        yield server
    finally:
        server.stop()
