"""Give each pytest-xdist test process a broker and a cache of its own (loaded with `-p tests.xdist_env`).

`make test` runs the suite in two processes (`pytest -n 2`). Each gets its own test database from
pytest-django, but Redis and the file broker are named by the environment: two processes on one Redis
database would take each other's Celery messages (a worker of one process running the other's task
against the wrong database) and clear each other's rate-limit counters. This plugin is imported before
pytest-django reads the settings, so the process `gwN` moves to Redis database n + N and to its own
broker folder and var/ folder, and the Celery workers and web processes that its tests start inherit all three.
"""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REDIS_DATABASES = 16  # redis-server's default `databases`


def worker_index() -> int:
    """0 outside xdist and in its first process (gw0), N in gwN."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name.removeprefix("gw") or 0)


def redis_url_for(url: str, index: int) -> str:
    """The same server, database n + index (n from the URL's path, 0 if it names none)."""
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    database = base + index
    if database >= REDIS_DATABASES:
        raise RuntimeError(f"REDIS_URL {url} leaves no Redis database for test process gw{index} (needs {database} < {REDIS_DATABASES})")
    return urlunsplit(parts._replace(path=f"/{database}"))


def _separate() -> None:
    index = worker_index()
    if index == 0:
        return
    if os.environ.get("REDIS_URL"):
        os.environ["REDIS_URL"] = redis_url_for(os.environ["REDIS_URL"], index)
        import redis

        # A fresh database, as .ci/run empties the first one: no message of an earlier run lingers.
        redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()
    broker_dir = os.environ.get("HWPLANNER_BROKER_DIR")
    if broker_dir:
        os.environ["HWPLANNER_BROKER_DIR"] = f"{broker_dir}-gw{index}"
    # Without Redis the rate-limit counters are files under var/ (config/settings.py): a folder of its own.
    var_dir = os.environ.get("HWPLANNER_VAR_DIR", str(Path(__file__).resolve().parent.parent / "var"))
    os.environ["HWPLANNER_VAR_DIR"] = str(Path(var_dir) / f"gw{index}")


_separate()
