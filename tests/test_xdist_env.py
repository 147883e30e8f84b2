"""Each pytest-xdist test process moves to a Redis database of its own (tests/xdist_env.py)."""
from __future__ import annotations

import pytest

from tests.xdist_env import redis_url_for


def test_the_second_process_takes_the_next_database_on_the_same_server():
    assert redis_url_for("redis://127.0.0.1:6379/3", 1) == "redis://127.0.0.1:6379/4"
    assert redis_url_for("redis://127.0.0.1:6379", 1) == "redis://127.0.0.1:6379/1"
    assert redis_url_for("redis://127.0.0.1:6379/3", 0) == "redis://127.0.0.1:6379/3"


def test_a_database_past_the_servers_sixteen_is_a_clear_error():
    with pytest.raises(RuntimeError, match="leaves no Redis database for test process gw1"):
        redis_url_for("redis://127.0.0.1:6379/15", 1)
