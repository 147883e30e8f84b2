"""A PostgreSQL connection dropped mid-request: a clean 503 with a message, no partial rows, and
the next request succeeds. Also a connection dropped between requests (a database restart)."""
from __future__ import annotations

import os
import threading

import pytest
from django.db import connection

from planner.models import Plan
from tests.faults.conftest import SMALL_PLAN
from tests.worker import running_web, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        if os.environ.get("CI"):
            pytest.fail("CI runs on PostgreSQL (DATABASE_URL); this test must not skip there")
        pytest.skip("needs PostgreSQL (set DATABASE_URL); SQLite has no server connection to drop")
    import psycopg

    settings_dict = connection.settings_dict
    conninfo = psycopg.conninfo.make_conninfo(
        dbname=settings_dict["NAME"], user=settings_dict.get("USER") or "", password=settings_dict.get("PASSWORD") or "",
        host=settings_dict.get("HOST") or "127.0.0.1", port=str(settings_dict.get("PORT") or 5432),
    )  # fmt: skip
    return lambda **kwargs: psycopg.connect(conninfo, **kwargs)


def _web_backends(admin, exclude: list[int]) -> list[int]:
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> ALL(%s) AND backend_type = 'client backend'",
        [exclude],
    ).fetchall()
    return [pid for (pid,) in rows]


def test_a_connection_killed_mid_insert_is_a_503_with_nothing_saved_and_the_next_request_succeeds(api, postgres):
    with running_web() as web:
        assert api.post(f"{web}/api/v1/plans/", json=SMALL_PLAN, timeout=60).status_code == 201  # warm: its connection is open
        before = Plan.objects.count()
        outcome = {}
        with postgres() as locker, postgres(autocommit=True) as admin:
            # Hold the plan table so the request blocks inside its INSERT: truly mid-write.
            locker.execute("LOCK TABLE planner_plan IN EXCLUSIVE MODE")
            request = threading.Thread(target=lambda: outcome.update(r=api.post(f"{web}/api/v1/plans/", json=SMALL_PLAN, timeout=60)))
            request.start()
            blocked = wait_for(lambda: admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
                "AND query ILIKE 'INSERT INTO \"planner_plan\"%%'"
            ).fetchone(), timeout_s=30, interval_s=0.05)  # fmt: skip
            assert blocked, "the request never reached its INSERT"
            admin.execute("SELECT pg_terminate_backend(%s)", [blocked[0]])
            request.join(timeout=60)
            locker.rollback()

        response = outcome["r"]
        assert response.status_code == 503, response.text
        assert "database is unavailable" in response.json()["detail"]
        assert response.headers["Retry-After"] == "5"
        assert Plan.objects.count() == before  # no partial row

        following = api.post(f"{web}/api/v1/plans/", json=SMALL_PLAN, timeout=60)
        assert following.status_code == 201, following.text
        assert Plan.objects.count() == before + 1


def test_connections_dropped_between_requests_are_replaced_without_an_error(api, postgres):
    with running_web() as web:
        assert api.get(f"{web}/api/v1/chips/", timeout=30).status_code == 200  # its persistent connection is open
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            own_pid = cursor.fetchone()[0]
        with postgres(autocommit=True) as admin:
            admin_pid = admin.execute("SELECT pg_backend_pid()").fetchone()[0]
            killed = _web_backends(admin, exclude=[own_pid, admin_pid])
            assert killed, "the web process holds no connection"
            for pid in killed:
                admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        for _ in range(3):
            response = api.get(f"{web}/api/v1/chips/", timeout=30)
            assert response.status_code == 200, response.text
        plan = api.post(f"{web}/api/v1/plans/", json=SMALL_PLAN, timeout=60)
        assert plan.status_code == 201, plan.text
