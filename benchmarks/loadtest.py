"""Load test: gunicorn (2 workers) on a fresh PostgreSQL database, driven by locust, headless.

    .venv-load/bin/python benchmarks/loadtest.py --scenario all --duration 60   (or: make loadtest)

Per scenario (mix, reads, estimates, plans) it starts gunicorn, warms each worker up, samples the RSS of
the master and the workers every second, runs locust for --duration with --users closed-loop
clients, and stops gunicorn. Then it writes benchmarks/results/loadtest.json and prints a table; a
run of some scenarios keeps the stored results of the others (each says when it was measured).

plans: a Celery worker runs beside gunicorn as deployed beside a web tier on one machine (`nice -n 10`,
--concurrency 1: docs/benchmarks.md), and 4 of the largest plans the size limit allows are kept queued
or running on it for the whole window (submitted through the API with a write token; each one that
finishes is replaced at once), while locust reads the catalog at a fixed pace (--rate req/s in all).
It records the plans completed and their worker-side times, and samples the worker's RSS and CPU too.

Needs PostgreSQL at 127.0.0.1:5432 (trust auth, user postgres) and Redis at 127.0.0.1:6379; it
creates and drops the database `hwplanner_load` and only ever FLUSHDBs Redis db 6 (the plans
scenario's broker too). The app runs from .venv, locust from .venv-load
(benchmarks/requirements-load.txt); this script is stdlib only. Gunicorn, the worker and the database
are cleaned up on any exit, Ctrl-C and errors included.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import json
import math
import os
import platform
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP_BIN = ROOT / ".venv" / "bin"
LOAD_BIN = ROOT / ".venv-load" / "bin"
RESULTS = ROOT / "benchmarks" / "results" / "loadtest.json"
WORKDIR = ROOT / "var" / "loadtest"  # locust CSVs and logs, gunicorn's log: kept for a look after the run
PG = ["-h", "127.0.0.1", "-p", "5432", "-U", "postgres"]
REDIS_DB = 6
SCENARIOS = {"mix": "Mix", "reads": "CatalogReads", "estimates": "Estimates", "plans": "PacedCatalogReads"}  # scenario -> locust user class
WARM_UP_CLASS = "WarmUp"
# The plans scenario warms up with reads only: WarmUp's whole-catalog plans are queued for a worker now
# (over PLAN_INLINE_MAX_CANDIDATES), and would stand in the worker's queue ahead of the kept 4.
WARM_UP_CLASSES = {"plans": "CatalogReads"}
# The request shape (tests/planner/test_plan_worker.py's HUGE): llama-3.1-70b, all 7 weight dtypes,
# 8 decodings, disaggregated, over the whole catalog; the plans scenario searches the largest max_chips the
# size limit (planner.services.MAX_PLAN_CANDIDATES) still allows against the catalog it loaded.
LARGEST_PLAN_SHAPE = {
    "model": "llama-3.1-70b", "workload": {"prompt_tokens": 1000, "output_tokens": 300},
    "hardware": {"max_chips": 1024, "weight_dtypes": ["fp32", "bf16", "fp16", "fp8", "int8", "fp4", "int4"]},
    "decodings": [{"method": "ar"}] * 8, "disaggregated": True,
}  # fmt: skip
# Throttles (API_THROTTLE_*) set so high that they never refuse: the run measures the service, not
# the limit. A per-second window keeps DRF's per-client history short (at most a second of requests);
# a per-minute one would make every request load and store a minute of timestamps.
THROTTLE = "1000000/s"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(message: str) -> None:
    print(f"[loadtest] {message}", file=sys.stderr, flush=True)


def run(cmd: list[str], *, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- /proc readers ----------------------------------------------------------------------------
def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime (fields 14, 15 of stat)


def busy_cpu_seconds() -> float:
    """CPU time all processes on the machine have used since boot (/proc/stat: all but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLK_TCK


def postgres_backends(database: str) -> list[int]:
    """PostgreSQL's server processes for connections to `database` (their title names it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError, PermissionError):
                title = (entry / "cmdline").read_bytes().decode(errors="replace")
                if title.startswith("postgres: ") and f" {database} " in title:
                    found.append(int(entry.name))
    return found


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError, IndexError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return sorted(found)


class ProcessSampler(threading.Thread):
    """Every `interval` seconds: VmRSS of the gunicorn master and each worker (and of each process tree in
    `trees`: the Celery worker's master and pool children), and the CPU time of those, of PostgreSQL's
    backends for `database` and of `driver` (this script and its psql; a process that ends mid-run keeps
    its last sample; one that starts mid-run counts from zero)."""

    def __init__(self, master: int, database: str, interval: float = 1.0, *, trees: dict[str, int] | None = None,
                 driver: list[int] | None = None):  # fmt: skip
        super().__init__(daemon=True)
        self.master, self.database, self.interval = master, database, interval
        self.trees, self.driver = trees or {}, driver or [os.getpid()]
        self.rss: dict[int, list[tuple[float, int]]] = {}
        self.roles: dict[int, str] = {master: "master"} | {pid: f"{name} master" for name, pid in self.trees.items()}
        self.cpu: dict[str, dict[int, list[float]]] = {"gunicorn": {}, "postgres": {}, "driver": {}} | {name: {} for name in self.trees}
        self._stop_event = threading.Event()
        self._t0 = time.monotonic()
        self._machine0 = busy_cpu_seconds()
        self._sample_cpu(baseline=True)

    def run(self) -> None:
        while not self._stop_event.is_set():
            self._sample(time.monotonic() - self._t0)
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        self._sample(time.monotonic() - self._t0)
        self.elapsed_s = time.monotonic() - self._t0
        self.machine_cpu_s = busy_cpu_seconds() - self._machine0

    def _sample(self, now: float) -> None:
        trees = {"worker": self.master} | {f"{name} child": pid for name, pid in self.trees.items()}
        for child_role, root in trees.items():
            for pid in [root, *children(root)]:
                self.roles.setdefault(pid, f"{child_role} {pid}")
                kib = rss_kib(pid)
                if kib is not None:
                    self.rss.setdefault(pid, []).append((round(now, 2), kib))
        self._sample_cpu(baseline=False)

    def _sample_cpu(self, *, baseline: bool) -> None:
        groups = {"gunicorn": [self.master, *children(self.master)], "postgres": postgres_backends(self.database), "driver": self.driver}
        groups |= {name: [pid, *children(pid)] for name, pid in self.trees.items()}
        for group, pids in groups.items():
            for pid in pids:
                seconds = cpu_seconds(pid)
                if seconds is not None:
                    self.cpu[group].setdefault(pid, [seconds if baseline else 0.0, seconds])[1] = seconds

    def cpu_seconds(self, group: str) -> float:
        return sum(last - first for first, last in self.cpu[group].values())

    def rss_summary(self) -> list[dict]:
        out = []
        for pid, series in self.rss.items():
            first, last = series[0][1] / 1024, series[-1][1] / 1024
            out.append({
                "process": self.roles[pid], "pid": pid, "samples": len(series),
                "first_mib": round(first, 1), "last_mib": round(last, 1),
                "min_mib": round(min(kib for _, kib in series) / 1024, 1), "max_mib": round(max(kib for _, kib in series) / 1024, 1),
                "drift_mib": round(last - first, 1), "slope_mib_per_min": round(_slope(series) * 60 / 1024, 2),
                "every_10s_mib": [round(kib / 1024, 1) for t, kib in _every(series, 10.0)],
            })  # fmt: skip
        return out


def _every(series: list[tuple[float, int]], step_s: float) -> list[tuple[float, int]]:
    """The first sample at or after each multiple of step_s, and the last one."""
    picked, next_t = [], 0.0
    for t, value in series:
        if t >= next_t:
            picked.append((t, value))
            next_t += step_s * (1 + int((t - next_t) // step_s))
    return picked if picked[-1] == series[-1] else [*picked, series[-1]]


def _slope(series: list[tuple[float, int]]) -> float:
    """Least-squares slope of (t, value): a steady leak shows here even when last == first by chance."""
    n = len(series)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in series) / n
    mv = sum(v for _, v in series) / n
    var = sum((t - mt) ** 2 for t, _ in series)
    return sum((t - mt) * (v - mv) for t, v in series) / var if var else 0.0


# --- the service under test -------------------------------------------------------------------
def app_env(*, database: str) -> dict[str, str]:
    """Production mode (DEBUG off, as deployed) on the fresh database, with throttles that never refuse."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "API_THROTTLE_"))}
    env.update({
        "DJANGO_MODE": "production",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SECURE_SSL_REDIRECT": "false",  # plain HTTP on loopback; no TLS proxy in front
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{database}",
        "REDIS_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
        "API_THROTTLE_ANON": THROTTLE, "API_THROTTLE_TOKEN": THROTTLE, "API_THROTTLE_PLANS": THROTTLE,
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    })  # fmt: skip
    return env


def manage(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run([str(APP_BIN / "python"), "manage.py", *args], env=env, check=check)


def create_token(env: dict[str, str]) -> str:
    """A write-scoped key; createtoken prints only the key on stdout."""
    return manage(env, "createtoken", "loadtest", "--scope", "write").stdout.strip()


@contextlib.contextmanager
def single_run(lock_path: Path):
    """One load test at a time: a second would drop the first one's database and share its CPUs."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"another load test is running (it holds {lock_path})") from None
        yield


@contextlib.contextmanager
def fresh_database(name: str):
    run(["dropdb", *PG, "--if-exists", "--force", name])
    run(["createdb", *PG, name])
    run(["redis-cli", "-n", str(REDIS_DB), "FLUSHDB"])
    try:
        yield name
    finally:
        run(["dropdb", *PG, "--if-exists", "--force", name], check=False)
        run(["redis-cli", "-n", str(REDIS_DB), "FLUSHDB"], check=False)
        log(f"dropped database {name}, flushed redis db {REDIS_DB}")


@contextlib.contextmanager
def gunicorn(env: dict[str, str], *, port: int, worker_class: str, threads: int, logdir: Path):
    # As the Dockerfile starts it, plus the worker class, a log file and no control socket (gunicorn 27
    # opens one at ~/.gunicorn/gunicorn.ctl by default, a path every other gunicorn of this user shares).
    cmd = [str(APP_BIN / "gunicorn"), "config.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2",
           "--worker-class", worker_class, "--error-logfile", str(logdir / "gunicorn.log"), "--no-control-socket"]  # fmt: skip
    if worker_class == "gthread":
        cmd += ["--threads", str(threads)]
    master = subprocess.Popen(cmd, env=env, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    workers: set[int] = set()
    try:
        wait_until_up(port, master, logdir / "gunicorn.log")
        workers.update(children(master.pid))
        yield master
    finally:
        workers.update(children(master.pid))
        stop_process(master, workers)


def wait_until_up(port: int, master: subprocess.Popen, logfile: Path, timeout_s: float = 60) -> None:
    deadline, last_error = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        if master.poll() is not None:
            raise RuntimeError(f"gunicorn exited ({master.returncode}):\n{logfile.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/chips/?page_size=1", timeout=5).read()
            if len(children(master.pid)) >= 2:
                return
        except OSError as exc:  # refused while booting; HTTPError (a 4xx/5xx) is an OSError too
            last_error = exc
        time.sleep(0.3)
    raise RuntimeError(f"gunicorn did not answer GET /api/v1/chips/ with 200 on port {port} within {timeout_s:.0f} s: {last_error}")


def stop_process(master: subprocess.Popen, workers: set[int]) -> None:
    """SIGTERM the master (it stops its workers), then SIGKILL whatever we started that is left."""
    if master.poll() is None:
        master.terminate()
        try:
            master.wait(timeout=15)
        except subprocess.TimeoutExpired:
            master.kill()
            master.wait()
    for pid in workers:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            if b"gunicorn" in Path(f"/proc/{pid}/cmdline").read_bytes():  # still ours, not a reused pid
                os.kill(pid, signal.SIGKILL)


# --- the plans scenario: a Celery worker kept busy with the largest allowed plans ------------------
@contextlib.contextmanager
def celery_worker(env: dict[str, str], *, nice: int, concurrency: int, logdir: Path):
    """The cpu-queue worker as docs/benchmarks.md advises beside a web tier on one machine: `nice -n N`
    and --concurrency 1 (on 2 cores). Yields (process, how its priority was lowered)."""
    cmd = [str(APP_BIN / "celery"), "-A", "config", "worker", "--queues", "cpu", "--concurrency", str(concurrency),
           "--loglevel", "INFO", "--hostname", "loadtest@%h", "--logfile", str(logdir / "celery.log")]  # fmt: skip
    if nice:
        cmd = ["nice", "-n", str(nice), *cmd]  # nice execs the worker: the pid is the worker's
    # A session of its own, so the whole tree stops with one signal; gunicorn has one too.
    process = subprocess.Popen(cmd, env=env, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        yield process, {"nice": nice, "autogroup_nice": autogroup_nice(process.pid, nice) if nice else None}
    finally:
        stop_worker(process)


def autogroup_nice(pid: int, nice: int) -> int | None:
    """With the kernel's autogroups on, each session is a scheduling group and a process's nice weighs only
    against its own group: a nice-10 worker in its own session would still take as much CPU as gunicorn's
    whole session. Setting the session's autogroup nice weighs the worker against gunicorn as separate
    containers with cpu_shares do (docker-compose.yml). None when the kernel has no autogroups."""
    enabled = Path("/proc/sys/kernel/sched_autogroup_enabled")
    if not enabled.exists() or enabled.read_text().strip() != "1":
        return None
    Path(f"/proc/{pid}/autogroup").write_text(str(nice))
    return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])


def stop_worker(process: subprocess.Popen) -> None:
    """SIGTERM the worker's group (a warm shutdown waits for the running search), SIGKILL it after 10 s."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # pool children left behind by a killed master
    process.wait()


def largest_allowed_plan(env: dict[str, str]) -> tuple[dict, int]:
    """LARGEST_PLAN_SHAPE at the largest max_chips the size limit allows (binary search over the exact
    count, as tests/planner/test_plan_worker.py finds it), and its candidate count."""
    code = f"""
import json
from planner import services
from planner.serializers import PlanInputSerializer
shape = json.loads({json.dumps(json.dumps(LARGEST_PLAN_SHAPE))})
def candidates(max_chips):
    serializer = PlanInputSerializer(data={{**shape, "hardware": {{**shape["hardware"], "max_chips": max_chips}}}})
    serializer.is_valid(raise_exception=True)
    try:
        return services.plan_search_prepare(data=serializer.validated_data).candidates
    except services.PlanTooLarge:
        return 0
low, high = 1, shape["hardware"]["max_chips"]
while low < high:
    middle = (low + high + 1) // 2
    low, high = (middle, high) if candidates(middle) else (low, middle - 1)
print(json.dumps({{"max_chips": low, "candidates": candidates(low)}}))
"""
    found = json.loads(manage(env, "shell", "-c", code).stdout.strip().splitlines()[-1])
    return {**LARGEST_PLAN_SHAPE, "hardware": {**LARGEST_PLAN_SHAPE["hardware"], "max_chips": found["max_chips"]}}, found["candidates"]


class Psql:
    """One psql session kept open for the keeper's polls (this script has no database driver); psql writes
    each answer at once, and an \\echo marker ends it."""

    END = "__loadtest_end__"

    def __init__(self, database: str):
        self.process = subprocess.Popen(["psql", *PG, "-X", "-q", "-A", "-t", "-F", "\t", database], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)  # fmt: skip

    def rows(self, sql: str) -> list[list[str]]:
        self.process.stdin.write(f"{sql.strip().rstrip(';')};\n\\echo {self.END}\n")
        self.process.stdin.flush()
        rows, errors = [], []
        while (line := self.process.stdout.readline()) != f"{self.END}\n":
            if not line:
                raise RuntimeError(f"psql exited ({self.process.poll()}): {' '.join(errors)}")
            (errors if line.startswith(("psql:", "ERROR:", "LINE ")) else rows).append(line.rstrip("\n"))
        if errors:
            raise RuntimeError(f"psql: {' '.join(errors)}")
        return [row.split("\t") for row in rows if row]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class PlanKeeper(threading.Thread):
    """Keeps `in_flight` plans queued or running on the worker: POSTs `body` to /api/v1/plans/ with the write
    token (each must be answered 202: queued), reads their state from the database every `poll_s` through
    one psql session (not the API: the web tier serves only the measured reads and the submissions), and
    POSTs another as soon as one is done or failed. Every plan's times are kept for plans_summary()."""

    def __init__(self, *, port: int, token: str, body: dict, database: str, in_flight: int, poll_s: float = 0.2):
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/api/v1/plans/"
        self.token, self.body, self.in_flight, self.poll_s = token, body, in_flight, poll_s
        self.psql = Psql(database)
        self.plans: dict[str, dict] = {}  # id -> posted_at, post_ms, then status, created/started/finished (epoch s), search_s, error
        self.pending: list[str] = []
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            while not self._stop_event.is_set():
                while len(self.pending) < self.in_flight and not self._stop_event.is_set():
                    self._submit()
                self._poll()
                self._stop_event.wait(self.poll_s)
        except BaseException as exc:  # noqa: BLE001 - kept and raised in the main thread by stop()
            self.error = exc

    def wait_running(self, timeout_s: float = 120) -> None:
        """Until the worker has taken the first plan (it is up and consuming)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.error is None:
            if any(p.get("started") for p in list(self.plans.values())):
                return
            time.sleep(0.2)
        raise RuntimeError(f"the worker took no plan within {timeout_s:.0f} s (see var/loadtest/celery.log): {self.error}")

    def stop(self) -> None:
        """No more submissions; one last look at the plans' state."""
        self._stop_event.set()
        self.join()
        try:
            if self.error is None:
                self._poll()
        finally:
            self.psql.close()
        if self.error is not None:
            raise RuntimeError(f"the plan keeper failed: {self.error}") from self.error

    def _submit(self) -> None:
        request = urllib.request.Request(self.url, data=json.dumps(self.body).encode(), method="POST", headers={
            "Content-Type": "application/json", "Accept": "application/json", "Authorization": f"Token {self.token}"})  # fmt: skip
        posted_at = time.time()
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                code, answer = response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            code, answer = error.code, error.read()[:300]
        if code != 202:
            raise RuntimeError(f"POST /api/v1/plans/ answered {code}, not 202 (queued): {answer}")
        self.plans[answer["id"]] = {"posted_at": posted_at, "post_ms": round((time.perf_counter() - started) * 1e3, 1), "status": "queued"}
        self.pending.append(answer["id"])

    def _poll(self) -> None:
        if not self.pending:
            return
        ids = ",".join(f"'{pk}'" for pk in self.pending)  # uuids the API gave us
        sql = ("select id, status, extract(epoch from created_at), extract(epoch from started_at), extract(epoch from finished_at), "
               "results->>'search_seconds', left(regexp_replace(error, '\\s+', ' ', 'g'), 200) "  # one line per plan
               f"from planner_plan where id in ({ids})")  # fmt: skip
        for pk, status, created, started, finished, search_s, error in self.psql.rows(sql):
            self.plans[pk].update(status=status, created=_float(created), started=_float(started), finished=_float(finished),
                                  search_s=_float(search_s), error=error)  # fmt: skip
            if status in ("done", "failed"):
                self.pending.remove(pk)


def _float(text: str) -> float | None:
    return float(text) if text else None


def in_flight_profile(intervals: list[tuple[float, float | None]], start: float, end: float) -> dict:
    """How many plans were queued or running over [start, end], from each one's (created, finished or None):
    the time-weighted mean, the least and the most, and the share of the window at each count."""
    events = []
    for created, finished in intervals:
        since, until = max(created, start), min(end if finished is None else finished, end)
        if since < until:
            events += [(since, 1), (until, -1)]
    time_at: dict[int, float] = {}
    count, now = 0, start
    for t, delta in sorted(events):
        time_at[count] = time_at.get(count, 0.0) + t - now
        count, now = count + delta, t
    time_at[count] = time_at.get(count, 0.0) + end - now
    span = max(end - start, 1e-9)
    seen = [n for n, seconds in time_at.items() if seconds > 1e-9]
    return {
        "mean": round(sum(n * s for n, s in time_at.items()) / span, 2), "min": min(seen, default=0), "max": max(seen, default=0),
        "share_of_time": {str(n): round(time_at[n] / span, 3) for n in sorted(seen)},
    }  # fmt: skip


def plans_summary(plans: dict[str, dict], *, start: float, end: float, in_flight: int) -> dict:
    """The window's plans: how many finished in it, their worker-side times (taken -> stored, the search alone,
    waiting in the queue), the POSTs' 202 times, and how many were queued or running."""
    finished = [p for p in plans.values() if p.get("finished") is not None and start <= p["finished"] <= end]
    done = [p for p in finished if p["status"] == "done"]

    def spread(values: list[float], scale: float = 1.0) -> dict:
        ordered = sorted(v * scale for v in values)
        return {"n": len(ordered), "min": _round(ordered[0]) if ordered else None, "p50": _percentile(ordered, 50),
                "p95": _percentile(ordered, 95), "max": _round(ordered[-1]) if ordered else None}  # fmt: skip

    posted = [p for p in plans.values() if start <= p["posted_at"] <= end]
    return {
        "kept_in_flight": in_flight, "submitted": len(plans), "submitted_in_window": len(posted),
        "completed_in_window": len(done), "failed_in_window": len(finished) - len(done),
        "completed_per_min": round(len(done) * 60 / max(end - start, 1e-9), 1),
        "errors": sorted({p["error"] for p in finished if p["status"] != "done" and p.get("error")})[:5],
        "worker_run_s": spread([p["finished"] - p["started"] for p in done if p.get("started")]),
        "search_s": spread([p["search_s"] for p in done if p.get("search_s") is not None]),
        "queue_wait_s": spread([p["started"] - p["created"] for p in done if p.get("started") and p.get("created")]),
        "post_202_ms": spread([p["post_ms"] for p in posted]),
        "queued_or_running": in_flight_profile([(p.get("created") or p["posted_at"], p.get("finished")) for p in plans.values()],
                                               start, end),
    }  # fmt: skip


def _round(value: float) -> float:
    return round(value, 2) if abs(value) < 10 else round(value, 1)


# --- locust -----------------------------------------------------------------------------------
def run_locust(
    *, user_class: str, port: int, token: str, users: int, duration: int, workdir: Path, label: str, extra_env: dict[str, str] | None = None
) -> tuple[Path, float, int]:
    """Runs locust headless; returns its record of every request (the locustfile's Recorder), the CPU
    seconds locust used and its exit code. Its own CSVs are left beside the record for a cross-check."""
    prefix = workdir / label
    cmd = [str(LOAD_BIN / "locust"), "-f", str(ROOT / "benchmarks" / "locustfile.py"), "--headless",
           "-u", str(users), "-r", str(users), "-t", f"{duration}s", "--host", f"http://127.0.0.1:{port}",
           "--csv", str(prefix), "--only-summary", "--loglevel", "WARNING", "--stop-timeout", "0", user_class]  # fmt: skip
    env = {**os.environ, "HWPLANNER_LOAD_TOKEN": token, "HWPLANNER_LOAD_RESULTS": f"{prefix}_record.json", **(extra_env or {})}
    with open(workdir / f"{label}-locust.log", "w") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            cpu = 0.0
            while proc.poll() is None:
                cpu = cpu_seconds(proc.pid) or cpu
                time.sleep(0.5)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    record = Path(f"{prefix}_record.json")
    if not record.exists():
        log_tail = (workdir / f"{label}-locust.log").read_text()[-3000:]
        raise RuntimeError(f"locust ({user_class}) exited {proc.returncode} without its record:\n{log_tail}")
    return record, cpu, proc.returncode


def summarise(path: Path) -> tuple[list[dict], dict, list[dict]]:
    """The locustfile's record -> per endpoint and total: requests, failures, req/s, exact percentiles."""
    record = json.loads(path.read_text())
    elapsed = record["elapsed_s"]
    failed: dict[tuple[str, str], int] = {}
    for f in record["failures"]:
        failed[(f["method"], f["name"])] = failed.get((f["method"], f["name"]), 0) + f["count"]
    endpoints = [
        _stats(r["method"], r["name"], r["times_ms"], failed.get((r["method"], r["name"]), 0), elapsed) for r in record["requests"]
    ]
    every = [t for r in record["requests"] for t in r["times_ms"]]
    total = _stats(None, "Aggregated", every, sum(failed.values()), elapsed)
    return endpoints, total, record["failures"]


def _stats(method: str | None, name: str, times_ms: list[float], failures: int, elapsed_s: float) -> dict:
    ordered = sorted(times_ms)
    return {
        "method": method, "endpoint": name, "requests": len(ordered), "failures": failures,
        "req_per_s": round(len(ordered) / elapsed_s, 1),
        "p50_ms": _percentile(ordered, 50), "p95_ms": _percentile(ordered, 95), "p99_ms": _percentile(ordered, 99),
        "mean_ms": round(sum(ordered) / len(ordered), 1) if ordered else None, "max_ms": round(ordered[-1], 1) if ordered else None,
    }  # fmt: skip


def _percentile(ordered: list[float], p: float) -> float | None:
    """Nearest rank: the smallest value with at least p% of the samples at or below it."""
    if not ordered:
        return None
    return round(ordered[max(math.ceil(p / 100 * len(ordered)) - 1, 0)], 1)


def run_scenario(scenario: str, *, env: dict[str, str], token: str, args: argparse.Namespace, workdir: Path) -> dict:
    port = free_port()
    threads = f" x {args.threads} threads" if args.worker_class == "gthread" else ""
    log(f"{scenario}: gunicorn {args.worker_class} (2 workers{threads}) on :{port}")
    with gunicorn(env, port=port, worker_class=args.worker_class, threads=args.threads, logdir=workdir) as master:
        # Warm-up, discarded: every kind of request (whole-catalog plans too) for a few seconds, so both
        # workers have imported, connected and grown to their working size before the RSS baseline.
        warm_up = dict(user_class=WARM_UP_CLASSES.get(scenario, WARM_UP_CLASS), users=4, duration=args.warmup, label=f"{scenario}-warmup")
        run_locust(port=port, token=token, workdir=workdir, **warm_up)
        if scenario == "plans":
            return run_plans_scenario(env=env, token=token, args=args, workdir=workdir, port=port, master=master)
        sampler = ProcessSampler(master.pid, args.database)
        sampler.start()
        log(f"{scenario}: locust -u {args.users} for {args.duration} s")
        try:
            record, locust_cpu, code = run_locust(user_class=SCENARIOS[scenario], port=port, token=token, users=args.users,
                                                  duration=args.duration, workdir=workdir, label=scenario)  # fmt: skip
        finally:
            sampler.stop()
    endpoints, total, failures = summarise(record)
    return {
        "scenario": scenario, "locust_user_class": SCENARIOS[scenario], "users": args.users, "duration_s": args.duration,
        "endpoints": endpoints, "total": total, "failures": failures, "locust_exit_code": code,
        "rss": sampler.rss_summary(),
        **cpu_figures(sampler, locust_cpu, total["requests"]),
    }  # fmt: skip


def run_plans_scenario(*, env: dict[str, str], token: str, args: argparse.Namespace, workdir: Path, port: int,
                       master: subprocess.Popen) -> dict:  # fmt: skip
    """Catalog reads at --rate req/s while a worker beside gunicorn always has --plans-in-flight of the largest
    allowed plans queued or running (the keeper replaces each one that finishes)."""
    body, candidates = args.largest_plan
    paced = args.rate > 0
    user_class = SCENARIOS["plans"] if paced else "CatalogReads"  # --rate 0: closed loop, as the reads scenario
    locust_env = {"HWPLANNER_LOAD_USER_RATE": f"{args.rate / args.users:.6g}"} if paced else {}
    with celery_worker(env, nice=args.worker_nice, concurrency=args.worker_concurrency, logdir=workdir) as (worker, priority):
        log(f"plans: a worker (nice {args.worker_nice}, autogroup nice {priority['autogroup_nice']}, concurrency "
            f"{args.worker_concurrency}); keeping {args.plans_in_flight} plans of {candidates:,} candidates (max_chips "
            f"{body['hardware']['max_chips']}) queued or running")  # fmt: skip
        keeper = PlanKeeper(port=port, token=token, body=body, database=args.database, in_flight=args.plans_in_flight)
        keeper.start()
        try:
            if args.plans_in_flight:  # 0: the same reads beside an idle worker, for comparison
                keeper.wait_running()
            sampler = ProcessSampler(master.pid, args.database, trees={"celery": worker.pid}, driver=[os.getpid(), keeper.psql.process.pid])
            sampler.start()
            pace = f" at {args.rate:g} req/s in all" if paced else ""
            log(f"plans: locust {user_class} -u {args.users}{pace} for {args.duration} s")
            start = time.time()
            try:
                record, locust_cpu, code = run_locust(
                    user_class=user_class,
                    port=port,
                    token=token,
                    users=args.users,
                    duration=args.duration,
                    workdir=workdir,
                    label="plans",
                    extra_env=locust_env,
                )
            finally:
                end = time.time()
                sampler.stop()
        finally:
            keeper.stop()
    endpoints, total, failures = summarise(record)
    figures = cpu_figures(sampler, locust_cpu, total["requests"])
    figures["projected_req_per_s_alone"] = None  # a paced load with a worker beside it measures latency, not capacity
    return {
        "scenario": "plans", "locust_user_class": user_class, "users": args.users, "duration_s": args.duration,
        "offered_req_per_s": args.rate if paced else None,
        "endpoints": endpoints, "total": total, "failures": failures, "locust_exit_code": code,
        "worker": {"command": f"{'nice -n ' + str(args.worker_nice) + ' ' if args.worker_nice else ''}celery -A config worker --queues cpu "
                              f"--concurrency {args.worker_concurrency}", **priority},
        "plan_body": body, "plan_candidates": candidates,
        "plans": plans_summary(keeper.plans, start=start, end=end, in_flight=args.plans_in_flight),
        "rss": sampler.rss_summary(),
        **figures,
    }  # fmt: skip


def cpu_figures(sampler: ProcessSampler, locust_cpu: float, requests: int) -> dict:
    server, db = sampler.cpu_seconds("gunicorn"), sampler.cpu_seconds("postgres")
    trees = {name: sampler.cpu_seconds(name) for name in sampler.trees}
    driver = sampler.cpu_seconds("driver")
    other = sampler.machine_cpu_s - server - db - locust_cpu - driver - sum(trees.values())
    cores = {"gunicorn": server, "postgres": db, **trees, "locust": locust_cpu, "driver": driver, "other_processes": other}
    return {
        # What else ran meanwhile: other processes' CPU is capacity the service did not get. "driver" is
        # this script (its sampler, and the plans scenario's keeper with its psql session).
        "cpu_cores": {k: round(max(v, 0.0) / sampler.elapsed_s, 2) for k, v in cores.items()} | {"machine": os.cpu_count()},
        # CPU per request changes least with contention: capacity ~ cores free for the service / this.
        "cpu_ms_per_request": {"gunicorn": round(1e3 * server / max(requests, 1), 2), "postgres": round(1e3 * db / max(requests, 1), 2)},
        # A projection, not a measurement: the req/s if gunicorn and PostgreSQL had every core locust leaves.
        "projected_req_per_s_alone": round(requests * (os.cpu_count() - locust_cpu / sampler.elapsed_s) / max(server + db, 1e-9), 1),
    }


# --- report -----------------------------------------------------------------------------------
def _throughput(result: dict) -> float:
    return result["total"]["req_per_s"]


def _plan_p95(result: dict) -> float | None:
    """The worse p95 of the two plan bodies (narrowed, whole catalog)."""
    rows = [e for e in result["endpoints"] if e["method"] == "POST" and e["endpoint"].startswith("/api/v1/plans/")]
    return max((e["p95_ms"] for e in rows if e["p95_ms"] is not None), default=None)


def _chips_p95_while_plans_ran(result: dict) -> float | None:
    """GET /api/v1/chips/'s p95, counted only when the plans really ran meanwhile: the worker finished at
    least one in the window, and never fewer than all but one were queued or running (one is missing only
    between its finish and its replacement's 202)."""
    plans = result["plans"]
    if plans["completed_in_window"] < 1 or plans["queued_or_running"]["min"] < plans["kept_in_flight"] - 1:
        return None
    return next((e["p95_ms"] for e in result["endpoints"] if e["method"] == "GET" and e["endpoint"] == "/api/v1/chips/"), None)


# The targets for this machine: (scenario, target, measure, comparison, bound).
TARGETS = (
    ("reads", "catalog reads >= 500 req/s", _throughput, ">=", 500.0),
    ("estimates", "estimates >= 200 req/s", _throughput, ">=", 200.0),
    ("mix", "plan p95 < 500 ms (POST /api/v1/plans/, both bodies)", _plan_p95, "<", 500.0),
    ("plans", "GET /api/v1/chips/ p95 < 100 ms while 4 of the largest plans run", _chips_p95_while_plans_ran, "<", 100.0),
)


def judge(results: dict[str, dict]) -> list[dict]:
    verdicts = []
    for scenario, what, measure, op, bound in TARGETS:
        if scenario not in results:
            continue
        value = measure(results[scenario])
        met = value is not None and (value >= bound if op == ">=" else value < bound)
        verdicts.append({"target": what, "scenario": scenario, "measured": value, "met": met})
    return verdicts


def merge_results(previous: dict | None, run: dict) -> dict:
    """This run's summary with the stored scenarios it did not run kept (a run of --scenario plans keeps mix,
    reads and estimates as they were measured). Each scenario carries the date, command, settings and machine
    of the run that measured it; the top level is this run's, and the targets are judged over them all."""
    stamp = ("date", "command", "settings", "machine")
    scenarios = {name: {**{k: run[k] for k in stamp}, **result} for name, result in run["scenarios"].items()}
    for name, result in ((previous or {}).get("scenarios") or {}).items():
        if name not in scenarios:
            scenarios[name] = {**{k: previous[k] for k in stamp if k in previous}, **result}
    order = [*SCENARIOS, *sorted(set(scenarios) - set(SCENARIOS))]
    merged = {name: scenarios[name] for name in order if name in scenarios}
    return {**run, "scenarios": merged, "targets": judge(merged)}


def machine() -> dict:
    names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")]
    mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    python = run([str(APP_BIN / "python"), "-c", "import platform; print(platform.python_version())"]).stdout.strip()
    gunicorn_version = run([str(APP_BIN / "gunicorn"), "--version"]).stdout.strip()
    locust_version = run([str(LOAD_BIN / "locust"), "--version"]).stdout.strip().split(" from ")[0]
    return {"nproc": os.cpu_count(), "cpu": names[0] if names else "?", "memory_gib": round(mem_kib / 2**20, 1), "python": python,
            "kernel": platform.release(), "gunicorn": gunicorn_version, "locust": locust_version}  # fmt: skip


def print_table(results: dict[str, dict], verdicts: list[dict]) -> None:
    for scenario, r in results.items():
        c = r["cpu_cores"]
        split = ", ".join(f"{'other processes' if k == 'other_processes' else k} {v}" for k, v in c.items() if k != "machine")
        pace = f" at {r['offered_req_per_s']:g} req/s offered" if r.get("offered_req_per_s") else ""
        alone = r.get("projected_req_per_s_alone")
        projected = f"; projected alone on the machine: {alone} req/s" if alone else ""
        print(f"\n{scenario}: {r['users']} users{pace}, {r['duration_s']} s; CPU cores used: {split} (of {c['machine']}); "
              f"CPU per request: gunicorn {r['cpu_ms_per_request']['gunicorn']} ms, postgres {r['cpu_ms_per_request']['postgres']} ms"
              f"{projected}")  # fmt: skip
        if "plans" in r:
            p, q, run_s = r["plans"], r["plans"]["queued_or_running"], r["plans"]["worker_run_s"]
            print(f"  worker: {r['worker']['command']} (autogroup nice {r['worker']['autogroup_nice']}); plans of {r['plan_candidates']:,} "
                  f"candidates: {p['completed_in_window']} completed in the window ({p['completed_per_min']}/min), "
                  f"{p['failed_in_window']} failed; worker run s p50 {_fmt(run_s['p50'])} "
                  f"(min {_fmt(run_s['min'])}, max {_fmt(run_s['max'])}), "
                  f"search s p50 {_fmt(p['search_s']['p50'])}, queue wait s p50 {_fmt(p['queue_wait_s']['p50'])}; "
                  f"POST 202 ms p50 {_fmt(p['post_202_ms']['p50'])}, max {_fmt(p['post_202_ms']['max'])}; "
                  f"queued or running: mean {q['mean']}, min {q['min']}, share of time {q['share_of_time']}")  # fmt: skip
        print(f"  {'endpoint':<38}{'requests':>9}{'fail':>6}{'req/s':>8}{'p50':>7}{'p95':>7}{'p99':>7}  ms")
        for e in [*r["endpoints"], r["total"]]:
            name = f"{e['method'] or ''} {e['endpoint']}".strip()
            latencies = "".join(f"{_fmt(e[k]):>7}" for k in ("p50_ms", "p95_ms", "p99_ms"))
            print(f"  {name:<38}{e['requests']:>9}{e['failures']:>6}{e['req_per_s']:>8}{latencies}")
        for p in r["rss"]:
            print(f"  RSS {p['process']:<14} first {p['first_mib']:.1f} MiB, last {p['last_mib']:.1f}, min {p['min_mib']:.1f}, "
                  f"max {p['max_mib']:.1f}, drift {p['drift_mib']:+.1f} MiB, slope {p['slope_mib_per_min']:+.2f} MiB/min")  # fmt: skip
    print()
    for v in verdicts:
        stored = "" if v["scenario"] in results else " (stored result)"
        print(f"  {'MET   ' if v['met'] else 'MISSED'} {v['target']}: {v['measured']}{stored}")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--duration", type=int, default=60, help="seconds of load per scenario (default 60)")
    parser.add_argument("--warmup", type=int, default=10, help="seconds of discarded warm-up per scenario (default 10)")
    parser.add_argument("--users", type=int, default=24, help="concurrent closed-loop clients (default 24)")
    parser.add_argument("--worker-class", choices=["sync", "gthread"], default="sync")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker with gthread (default 4)")
    parser.add_argument(
        "--rate",
        type=float,
        default=200.0,
        help="plans: catalog reads per second offered in all, paced over the users (default 200; 0: closed loop)",
    )
    parser.add_argument("--plans-in-flight", type=int, default=4, help="plans: largest allowed plans kept queued or running (default 4)")
    parser.add_argument("--worker-nice", type=int, default=10, help="plans: the worker's nice value (default 10, as deployed)")
    parser.add_argument("--worker-concurrency", type=int, default=1, help="plans: the worker's --concurrency (default 1, as on 2 cores)")
    parser.add_argument("--database", default="hwplanner_load")
    parser.add_argument("--output", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def _interrupt(signum, frame) -> None:
    # SIGTERM (make, a CI timeout) unwinds like Ctrl-C, so the finally blocks stop gunicorn and drop the database.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    scenarios = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    started = datetime.datetime.now(datetime.UTC)
    workdir = WORKDIR
    with single_run(workdir.parent / "loadtest.lock"), fresh_database(args.database):
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        env = app_env(database=args.database)
        env["HWPLANNER_VAR_DIR"] = str(workdir / "var")
        log("migrate + loadcatalog")
        manage(env, "migrate", "--noinput")
        manage(env, "loadcatalog")
        token = create_token(env)
        if "plans" in scenarios:
            args.largest_plan = largest_allowed_plan(env)
        results = {s: run_scenario(s, env=env, token=token, args=args, workdir=workdir) for s in scenarios}
    summary = {
        "command": "benchmarks/loadtest.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": started.isoformat(timespec="seconds"), "machine": machine(),
        "settings": {"django_mode": "production", "database": "PostgreSQL (fresh, migrate + loadcatalog)",
                     "gunicorn": {"workers": 2, "worker_class": args.worker_class,
                                  "threads": args.threads if args.worker_class == "gthread" else 1},
                     "api_throttle_rate": THROTTLE, "users": args.users, "duration_s": args.duration},
        "scenarios": results,
    }  # fmt: skip
    previous = json.loads(args.output.read_text()) if args.output.exists() else None
    merged = merge_results(previous, summary)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(merged, indent=1) + "\n")
    print_table(results, merged["targets"])
    log(f"wrote {args.output.relative_to(ROOT) if args.output.is_relative_to(ROOT) else args.output}")
    failed = sum(r["total"].get("failures", 0) for r in results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        log("interrupted; gunicorn and locust stopped, database dropped")
        sys.exit(130)
