#!/usr/bin/env python
"""Benchmark the agent API under gunicorn: knowledge search next to a trivial endpoint.

Starts gunicorn (2 sync workers) on 127.0.0.1 at a free port, on a temporary SQLite database
(or a scratch PostgreSQL database) holding the shipped knowledge fixtures, issues an agent token, and sends a bounded
loopback load from a few threads to ``POST /api/v1/knowledge/search`` and ``GET /api/v1/ping``
(the same app behind the same token authentication) in short alternating rounds of one run,
so a busy machine slows both alike. Prints
requests/s, p50/p99 latency and errors for both, and the throughput ratio search/ping.

The load generator is ``wrk`` when it is installed (``apt-get install wrk``): one native client
thread holding ``--threads`` connections, so the client takes little of the cores the server
runs on. Without it (or with ``--generator python``) the load comes from Python threads in this
process, which compete with the server for the same cores and understate both rates. The report
names the generator it used.

Targets: ratio >= 0.5 with the fixtures, >= 0.3 with ``--scope-documents`` (10k documents in the
searched scope), and zero errors. It reports; it never fails on a missed target.
The server it starts is stopped before it exits, whatever happens.

Usage::

    python bench/bench_api.py                    # 10 x 200 requests per endpoint, 4 threads
    python bench/bench_api.py --requests 200 --rounds 1 --threads 2
    python bench/bench_api.py --database postgres     # created and dropped by the script
    python bench/bench_api.py --scope-documents 10000 # + 10k documents in the searched scope
    python bench/bench_api.py --generator python      # Python threads even when wrk is there

With ``--scope-documents N`` the database also holds N documents that pass the gate in one scope
(plus ~20% the gate rejects), built as ``bench_knowledge.py`` builds its measured scopes and
indexed as approvals index them; the search requests then ask that scope, rotating through 20
queries of the same vocabulary.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
TARGET_RATIO = 0.5  # the shipped fixtures
TARGET_RATIO_IN_SCOPE = 0.3  # with --scope-documents (10k in the searched scope)
WORKERS = 2

SEARCH_BODY = json.dumps(
    {
        "query": "小程序优惠券无法使用",
        "tenant": "teahouse",
        "brand": "leaf-and-cup",
        "store": "store-002",
        "campaign": "campaign-b",
        "occurred_at": "2026-09-18T14:00:00+08:00",
        "known_at": "2026-09-18T14:10:00+08:00",
        "facts": {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200},
    },
    ensure_ascii=False,
).encode("utf-8")


@dataclass(frozen=True)
class Endpoint:
    label: str
    method: str
    path: str
    body: bytes | None = None


PING = Endpoint("GET /api/v1/ping", "GET", "/api/v1/ping")
SEARCH = Endpoint("POST /api/v1/knowledge/search", "POST", "/api/v1/knowledge/search", SEARCH_BODY)
SCOPE_STORE = "store-001"  # the measured scope of --scope-documents (bench_knowledge's layout)
SCOPE_QUERIES = 20


def scope_search_bodies(seed: int = 7) -> list[bytes]:
    """Search bodies asking the scope ``--scope-documents`` fills, with its times."""
    import random

    import bench_knowledge as bk

    rng = random.Random(seed)
    return [
        json.dumps(
            {
                "query": bk._query(rng),
                "tenant": bk.TENANT,
                "brand": bk.BRAND,
                "store": SCOPE_STORE,
                "campaign": bk.CAMPAIGN,
                "occurred_at": bk.OCCURRED_AT.isoformat(),
                "known_at": bk.KNOWN_AT.isoformat(),
                "facts": bk._facts(rng),
            },
            ensure_ascii=False,
        ).encode("utf-8")
        for _ in range(SCOPE_QUERIES)
    ]


def load_scope(size: int) -> int:
    """In this process (``DATABASE_URL`` set): ``size`` admitted documents in one scope."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    django.setup()
    import bench_knowledge as bk

    from knowledge.models import Document

    corpus = bk.Corpus(seed=11)
    corpus.next_id = (
        Document.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    ) + 1
    corpus.build_scope(SCOPE_STORE, size)
    from django.db import connection

    corpus.finish_loading(connection.vendor)
    print(f"loaded {corpus.documents:,} documents, {corpus.postings:,} postings", flush=True)
    return 0


@dataclass
class Measurement:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    elapsed: float = 0.0
    first_error: str = ""

    @property
    def completed(self) -> int:
        return len(self.latencies) + self.errors

    def rate(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed else 0.0

    def percentile(self, p: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        index = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))
        return ordered[index] * 1000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="per endpoint and round")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds per endpoint")
    parser.add_argument("--threads", type=int, default=4, help="concurrent client threads")
    parser.add_argument("--time-cap", type=float, default=60.0, help="seconds per phase, at most")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured requests per endpoint")
    parser.add_argument(
        "--generator",
        choices=("auto", "wrk", "python"),
        default="auto",
        help="the load generator: wrk when installed (auto), or Python threads",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=3.0,
        help="seconds per endpoint and round under wrk (it runs for a time, not a count)",
    )
    parser.add_argument(
        "--database",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="a temporary SQLite file, or a scratch PostgreSQL database created and dropped here",
    )
    parser.add_argument(
        "--scope-documents",
        type=int,
        default=0,
        help="also load this many documents into one scope and search it (0: fixtures only)",
    )
    parser.add_argument("--load-scope", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument(
        "--postgres-server",
        default="postgres://postgres@127.0.0.1:5432",
        help="the PostgreSQL server for --database postgres (no database name)",
    )
    return parser.parse_args(argv)


@contextmanager
def scratch_database(args: argparse.Namespace, workdir: Path) -> Iterator[str]:
    """The URL of an empty database that exists only while the benchmark runs."""
    if args.database == "sqlite":
        yield f"sqlite:///{workdir / 'bench.sqlite3'}"
        return
    import psycopg

    name = f"agentapi_bench_{os.getpid()}"
    server = args.postgres_server.rstrip("/")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{server}/{name}"
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(  # noqa: S603 - this interpreter and manage.py, fixed arguments
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise SystemExit(f"manage.py {args[0]} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout.strip()


_bodies: dict[str, list[bytes]] = {}
_turn = [0]


def request_once(port: int, endpoint: Endpoint, headers: dict[str, str]) -> int:
    # Gunicorn's sync workers close every connection after its response, so each request is a
    # new loopback connection, for both endpoints alike.
    body = endpoint.body
    rotation = _bodies.get(endpoint.label)
    if rotation:
        _turn[0] += 1
        body = rotation[_turn[0] % len(rotation)]
    connection = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        connection.request(endpoint.method, endpoint.path, body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def answered(port: int, headers: dict[str, str]) -> dict[str, int]:
    """How the rotation's search bodies are answered (so a benchmark of empty answers shows)."""
    statuses: dict[str, int] = {}
    for body in _bodies[SEARCH.label]:
        connection = http.client.HTTPConnection(HOST, port, timeout=30)
        try:
            connection.request("POST", SEARCH.path, body=body, headers=headers)
            reply = json.loads(connection.getresponse().read())
        finally:
            connection.close()
        key = f"{reply.get('status')} ({len(reply.get('evidence', []))} evidence)"
        statuses[key] = statuses.get(key, 0) + 1
    return statuses


def run_phase(
    port: int, endpoint: Endpoint, headers: dict[str, str], count: int, threads: int, cap: float
) -> Measurement:
    """``count`` requests from ``threads`` threads, stopping early when ``cap`` seconds pass."""
    measurement = Measurement()
    lock = threading.Lock()
    remaining = [count]
    deadline = time.monotonic() + cap

    def take() -> bool:
        with lock:
            if remaining[0] <= 0 or time.monotonic() > deadline:
                return False
            remaining[0] -= 1
            return True

    def worker() -> None:
        while take():
            began = time.perf_counter()
            try:
                status = request_once(port, endpoint, headers)
                problem = "" if status == 200 else f"HTTP {status}"
            except OSError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            took = time.perf_counter() - began
            with lock:
                if problem:
                    measurement.errors += 1
                    measurement.first_error = measurement.first_error or problem
                else:
                    measurement.latencies.append(took)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    started = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    measurement.elapsed = time.perf_counter() - started
    return measurement


WRK_SCRIPT = """
local bodies = {%(bodies)s}
local headers = {%(headers)s}
local prepared = {}
local turn = 0

function init(args)
  for i, name in ipairs(bodies) do
    local file = assert(io.open(name, "rb"))
    prepared[i] = wrk.format("%(method)s", "%(path)s", headers, file:read("*a"))
    file:close()
  end
  if #prepared == 0 then
    prepared[1] = wrk.format("%(method)s", "%(path)s", headers, nil)
  end
end

function request()
  turn = turn %% #prepared + 1
  return prepared[turn]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK %%d %%d %%d %%d %%d %%d %%d %%d %%d\\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


@dataclass
class WrkMeasurement:
    """What one or more ``wrk`` runs report: counts and per-run latency percentiles."""

    requests: int = 0
    errors: int = 0
    elapsed: float = 0.0
    first_error: str = ""
    p50s: list[float] = field(default_factory=list)
    p99s: list[float] = field(default_factory=list)

    @property
    def completed(self) -> int:
        return self.requests

    def rate(self) -> float:
        return (self.requests - self.errors) / self.elapsed if self.elapsed else 0.0

    def percentile(self, p: float) -> float:
        """The median over runs of each run's own p50 or p99 (wrk keeps no raw samples)."""
        runs = self.p50s if p == 50 else self.p99s
        if not runs:
            return float("nan")
        ordered = sorted(runs)
        return ordered[len(ordered) // 2]


def lua_string(text: str) -> str:
    """``text`` as a Lua string literal (ASCII: paths, a token, header names)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def wrk_script(workdir: Path, endpoint: Endpoint, headers: dict[str, str]) -> Path:
    """A wrk Lua script sending ``endpoint`` (rotating its bodies) and printing one WRK line."""
    bodies = _bodies.get(endpoint.label) or ([endpoint.body] if endpoint.body else [])
    names = []
    for number, body in enumerate(bodies):
        name = workdir / f"{endpoint.method.lower()}-{number}.body"
        name.write_bytes(body)
        names.append(lua_string(str(name)))
    sent = {key: value for key, value in headers.items() if key != "Connection"}
    script = workdir / f"{endpoint.method.lower()}-{endpoint.path.strip('/').replace('/', '-')}.lua"
    script.write_text(
        WRK_SCRIPT
        % {
            "bodies": ", ".join(names),
            "headers": ", ".join(f"[{lua_string(k)}] = {lua_string(v)}" for k, v in sent.items()),
            "method": endpoint.method,
            "path": endpoint.path,
        }
    )
    return script


def run_wrk(port: int, script: Path, connections: int, seconds: float) -> WrkMeasurement:
    """One ``wrk`` run of ``seconds`` with one client thread holding ``connections``."""
    done = subprocess.run(  # noqa: S603 - wrk from PATH, fixed arguments
        [
            str(shutil.which("wrk")),
            "-t1",
            f"-c{connections}",
            f"-d{max(1, round(seconds))}s",
            "--timeout",
            "30s",
            "-s",
            str(script),
            f"http://{HOST}:{port}/",
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    )
    line = next((row for row in done.stdout.splitlines() if row.startswith("WRK ")), "")
    if done.returncode != 0 or not line:
        raise SystemExit(f"wrk failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    total, micros, connect, read, write, status, timeout, p50, p99 = map(int, line.split()[1:])
    errors = connect + read + write + status + timeout
    kinds = {"connect": connect, "read": read, "write": write, "HTTP non-2xx": status}
    kinds["timeout"] = timeout
    return WrkMeasurement(
        requests=total,
        errors=errors,
        elapsed=micros / 1e6,
        first_error=", ".join(f"{kind} {n}" for kind, n in kinds.items() if n),
        p50s=[p50 / 1000],
        p99s=[p99 / 1000],
    )


def merge_wrk(parts: list[WrkMeasurement]) -> WrkMeasurement:
    total = WrkMeasurement()
    for part in parts:
        total.requests += part.requests
        total.errors += part.errors
        total.elapsed += part.elapsed
        total.first_error = total.first_error or part.first_error
        total.p50s.extend(part.p50s)
        total.p99s.extend(part.p99s)
    return total


def merge(parts: list[Measurement]) -> Measurement:
    total = Measurement()
    for part in parts:
        total.latencies.extend(part.latencies)
        total.errors += part.errors
        total.elapsed += part.elapsed
        total.first_error = total.first_error or part.first_error
    return total


def wait_until_serving(port: int, headers: dict[str, str], server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"gunicorn exited with status {server.returncode}")
        try:
            if request_once(port, PING, headers) == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("gunicorn did not answer within 30 s")


def stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is not None:
        return
    server.send_signal(signal.SIGTERM)  # the master stops its workers gracefully
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=10)


def report(label: str, result: Measurement | WrkMeasurement) -> None:
    print(
        f"{label:<32} {result.completed:>6} req  {result.rate():>8.1f} req/s  "
        f"p50 {result.percentile(50):>7.2f} ms  p99 {result.percentile(99):>7.2f} ms  "
        f"errors {result.errors}" + (f"  (first: {result.first_error})" if result.errors else "")
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.load_scope:
        return load_scope(args.load_scope)
    if args.generator == "wrk" and not shutil.which("wrk"):
        raise SystemExit("--generator wrk: wrk is not installed (apt-get install wrk)")
    generator = "wrk" if args.generator != "python" and shutil.which("wrk") else "python"
    workdir = Path(tempfile.mkdtemp(prefix="bench-api-"))
    try:
        with scratch_database(args, workdir) as database_url:
            results = measure(args, database_url, generator, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    ping: Measurement | WrkMeasurement
    search: Measurement | WrkMeasurement
    if generator == "wrk":
        ping, search = merge_wrk(results[PING.label]), merge_wrk(results[SEARCH.label])
    else:
        ping, search = merge(results[PING.label]), merge(results[SEARCH.label])
    print()
    print(
        "load generator: "
        + (
            f"wrk (1 thread, {args.threads} connections, {args.rounds} x {args.duration:g} s "
            "per endpoint; p50/p99 are the median of each round's own)"
            if generator == "wrk"
            else f"Python threads in this process ({args.threads}); they share the server's cores"
        )
    )
    report(PING.label, ping)
    report(SEARCH.label, search)
    ratio = search.rate() / ping.rate() if ping.rate() else float("nan")
    errors = ping.errors + search.errors
    target = TARGET_RATIO_IN_SCOPE if args.scope_documents else TARGET_RATIO
    print()
    print(f"throughput ratio search/ping: {ratio:.2f} (target >= {target})")
    print(f"errors: {errors} (target 0)")
    verdict = "met" if ratio >= target and errors == 0 else "MISSED"
    print(f"targets {verdict}")
    return 0


def measure(
    args: argparse.Namespace, database_url: str, generator: str, workdir: Path
) -> dict[str, list[Any]]:
    # The per-account rate limit is off: the benchmark measures the server, not the limit.
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_DEBUG": "0",
        "PYTHONPATH": str(ROOT),
        "CONSOLE_API_RATE": "",
    }
    server: subprocess.Popen[bytes] | None = None
    try:
        print("preparing the database (migrate, knowledge fixtures, agent token) ...", flush=True)
        manage(env, "migrate", "--noinput", "-v", "0")
        manage(env, "add_user", "bench-operator", "--role", "operator")
        manage(env, "add_user", "agent-7", "--role", "agent")
        manage(
            env,
            "import_knowledge",
            str(ROOT / "fixtures" / "knowledge.json"),
            "--as",
            "bench-operator",
            "--json",
        )
        token = json.loads(manage(env, "create_token", "agent-7", "--name", "bench", "--json"))[
            "token"
        ]
        if args.scope_documents:
            print(f"loading {args.scope_documents:,} documents into one scope ...", flush=True)
            loaded = subprocess.run(  # noqa: S603 - this interpreter and this script
                [sys.executable, __file__, "--load-scope", str(args.scope_documents)],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=1800,
            )
            if loaded.returncode != 0:
                raise SystemExit(f"loading the scope failed:\n{loaded.stdout}\n{loaded.stderr}")
            print(loaded.stdout.strip(), flush=True)
            _bodies[SEARCH.label] = scope_search_bodies()
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Connection": "close",
        }
        port = free_port()
        server = subprocess.Popen(  # noqa: S603 - this interpreter running gunicorn, fixed arguments
            [
                sys.executable,
                "-m",
                "gunicorn",
                "console.wsgi:application",
                "--workers",
                str(WORKERS),
                "--bind",
                f"{HOST}:{port}",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
        )
        wait_until_serving(port, headers, server)
        if _bodies.get(SEARCH.label):
            print("statuses of the scope's queries:", answered(port, headers), flush=True)
        results: dict[str, list[Any]] = {PING.label: [], SEARCH.label: []}
        if generator == "wrk":
            print(
                f"gunicorn: {WORKERS} workers on {HOST}:{port}; client: wrk, "
                f"{args.threads} connections, {args.rounds} x {args.duration:g} s per endpoint",
                flush=True,
            )
            scripts = {e.label: wrk_script(workdir, e, headers) for e in (PING, SEARCH)}
            for endpoint in (PING, SEARCH):
                run_wrk(port, scripts[endpoint.label], args.threads, 1)
            for _ in range(args.rounds):
                for endpoint in (PING, SEARCH):
                    results[endpoint.label].append(
                        run_wrk(port, scripts[endpoint.label], args.threads, args.duration)
                    )
            return results
        print(
            f"gunicorn: {WORKERS} workers on {HOST}:{port}; client: {args.threads} threads, "
            f"{args.rounds} x {args.requests} requests per endpoint, "
            f"cap {args.time_cap:g} s per phase",
            flush=True,
        )

        def phase(endpoint: Endpoint, count: int) -> Measurement:
            return run_phase(port, endpoint, headers, count, args.threads, args.time_cap)

        for endpoint in (PING, SEARCH):
            phase(endpoint, args.warmup)
        for _ in range(args.rounds):
            for endpoint in (PING, SEARCH):
                results[endpoint.label].append(phase(endpoint, args.requests))
        return results
    finally:
        if server is not None:
            stop(server)


if __name__ == "__main__":
    raise SystemExit(main())
