"""Load test: gunicorn (2 workers) on a fresh PostgreSQL database, driven by locust, headless.

    .venv-load/bin/python benchmarks/loadtest.py --scenario all --duration 60   (or: make loadtest)

Per scenario (mix, reads, estimates) it starts gunicorn, warms each worker up, samples the RSS of
the master and the workers every second, runs locust for --duration with --users closed-loop
clients, and stops gunicorn. Then it writes benchmarks/results/loadtest.json and prints a table.

Needs PostgreSQL at 127.0.0.1:5432 (trust auth, user postgres) and Redis at 127.0.0.1:6379; it
creates and drops the database `hwplanner_load` and only ever FLUSHDBs Redis db 6. The app runs
from .venv, locust from .venv-load (benchmarks/requirements-load.txt); this script is stdlib only.
Gunicorn and the database are cleaned up on any exit, Ctrl-C and errors included.
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
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP_BIN = ROOT / ".venv" / "bin"
LOAD_BIN = ROOT / ".venv-load" / "bin"
RESULTS = ROOT / "benchmarks" / "results" / "loadtest.json"
WORKDIR = ROOT / "var" / "loadtest"  # locust CSVs and logs, gunicorn's log: kept for a look after the run
PG = ["-h", "127.0.0.1", "-p", "5432", "-U", "postgres"]
REDIS_DB = 6
SCENARIOS = {"mix": "Mix", "reads": "CatalogReads", "estimates": "Estimates"}  # scenario -> locust user class
WARM_UP_CLASS = "WarmUp"
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
    """Every `interval` seconds: VmRSS of the gunicorn master and each worker, and the CPU time of
    those and of PostgreSQL's backends for `database` (a backend that closes mid-run keeps its last
    sample; one that opens mid-run counts from zero)."""

    def __init__(self, master: int, database: str, interval: float = 1.0):
        super().__init__(daemon=True)
        self.master, self.database, self.interval = master, database, interval
        self.rss: dict[int, list[tuple[float, int]]] = {}
        self.roles: dict[int, str] = {master: "master"}
        self.cpu: dict[str, dict[int, list[float]]] = {"gunicorn": {}, "postgres": {}}  # pid -> [first, last]
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
        for pid in [self.master, *children(self.master)]:
            self.roles.setdefault(pid, f"worker {pid}")
            kib = rss_kib(pid)
            if kib is not None:
                self.rss.setdefault(pid, []).append((round(now, 2), kib))
        self._sample_cpu(baseline=False)

    def _sample_cpu(self, *, baseline: bool) -> None:
        groups = {"gunicorn": [self.master, *children(self.master)], "postgres": postgres_backends(self.database)}
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


# --- locust -----------------------------------------------------------------------------------
def run_locust(*, user_class: str, port: int, token: str, users: int, duration: int, workdir: Path, label: str) -> tuple[Path, float, int]:
    """Runs locust headless; returns its record of every request (the locustfile's Recorder), the CPU
    seconds locust used and its exit code. Its own CSVs are left beside the record for a cross-check."""
    prefix = workdir / label
    cmd = [str(LOAD_BIN / "locust"), "-f", str(ROOT / "benchmarks" / "locustfile.py"), "--headless",
           "-u", str(users), "-r", str(users), "-t", f"{duration}s", "--host", f"http://127.0.0.1:{port}",
           "--csv", str(prefix), "--only-summary", "--loglevel", "WARNING", "--stop-timeout", "0", user_class]  # fmt: skip
    env = {**os.environ, "HWPLANNER_LOAD_TOKEN": token, "HWPLANNER_LOAD_RESULTS": f"{prefix}_record.json"}
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
        warm_up = dict(user_class=WARM_UP_CLASS, users=4, duration=args.warmup, label=f"{scenario}-warmup")
        run_locust(port=port, token=token, workdir=workdir, **warm_up)
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


def cpu_figures(sampler: ProcessSampler, locust_cpu: float, requests: int) -> dict:
    server, db = sampler.cpu_seconds("gunicorn"), sampler.cpu_seconds("postgres")
    other = sampler.machine_cpu_s - server - db - locust_cpu
    cores = {"gunicorn": server, "postgres": db, "locust": locust_cpu, "other_processes": other}
    return {
        # What else ran meanwhile: other processes' CPU is capacity the service did not get.
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


# The targets for this machine: (scenario, target, measure, comparison, bound).
TARGETS = (
    ("reads", "catalog reads >= 500 req/s", _throughput, ">=", 500.0),
    ("estimates", "estimates >= 200 req/s", _throughput, ">=", 200.0),
    ("mix", "plan p95 < 500 ms (POST /api/v1/plans/, both bodies)", _plan_p95, "<", 500.0),
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
        print(f"\n{scenario}: {r['users']} users, {r['duration_s']} s; CPU cores used: gunicorn {c['gunicorn']}, postgres {c['postgres']}, "
              f"locust {c['locust']}, other processes {c['other_processes']} (of {c['machine']}); "
              f"CPU per request: gunicorn {r['cpu_ms_per_request']['gunicorn']} ms, postgres {r['cpu_ms_per_request']['postgres']} ms; "
              f"projected alone on the machine: {r['projected_req_per_s_alone']} req/s")  # fmt: skip
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
        print(f"  {'MET   ' if v['met'] else 'MISSED'} {v['target']}: {v['measured']}")


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
        results = {s: run_scenario(s, env=env, token=token, args=args, workdir=workdir) for s in scenarios}
    verdicts = judge(results)
    summary = {
        "command": "benchmarks/loadtest.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": started.isoformat(timespec="seconds"), "machine": machine(),
        "settings": {"django_mode": "production", "database": "PostgreSQL (fresh, migrate + loadcatalog)",
                     "gunicorn": {"workers": 2, "worker_class": args.worker_class,
                                  "threads": args.threads if args.worker_class == "gthread" else 1},
                     "api_throttle_rate": THROTTLE, "users": args.users, "duration_s": args.duration},
        "scenarios": results, "targets": verdicts,
    }  # fmt: skip
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(summary, indent=1) + "\n")
    print_table(results, verdicts)
    log(f"wrote {args.output.relative_to(ROOT) if args.output.is_relative_to(ROOT) else args.output}")
    failed = sum(r["total"].get("failures", 0) for r in results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        log("interrupted; gunicorn and locust stopped, database dropped")
        sys.exit(130)
