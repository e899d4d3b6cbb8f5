#!/usr/bin/env python
"""Benchmark the agent API under gunicorn: knowledge search next to a trivial endpoint.

Runs the production recipe (``scripts/cluster.py``'s, one instance, no load balancer):
``console.settings_production`` with generated secrets, gunicorn with ``--preload``, 2 worker
processes of 4 threads and keep-alive connections, on 127.0.0.1, on a temporary SQLite database
(or a scratch PostgreSQL database) holding the shipped knowledge fixtures. It issues an agent
token and sends a bounded loopback load over keep-alive connections to
``POST /api/v1/knowledge/search`` and ``GET /api/v1/ping`` (the same app behind the same token
authentication) in short alternating rounds of one run, so a busy machine slows both alike.
Prints requests/s, p50/p99 latency, errors and the CPU time per request of the server's
processes (gunicorn's master and workers, read from ``/proc``; on PostgreSQL also the database
backends') for both, and the ratios search/ping of throughput and of CPU per request.

Before the load it times token authentication in-process (``agentapi.auth.token_user``, the
statement compiled once) against the former code (the queryset built and compiled on every
call, kept here as :func:`former_token_user`), interleaved, and prints the ratio.

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
    python bench/bench_api.py --tiny                  # seconds: the test suite's run

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import postgres_create, sqlite_prepared  # noqa: E402
from scripts.cluster import Recipe  # noqa: E402

HOST = "127.0.0.1"
TARGET_RATIO = 0.5  # the shipped fixtures
TARGET_RATIO_IN_SCOPE = 0.3  # with --scope-documents (10k in the searched scope)
WORKERS = 2  # gunicorn worker processes
THREADS = 4  # threads per worker process (gthread: keep-alive connections)
TICKS = os.sysconf("SC_CLK_TCK")

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
    parser.add_argument(
        "--auth-samples",
        type=int,
        default=2000,
        help="token authentications timed in-process against the former code (0: none)",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="2 rounds of 20 requests, 2 threads, 50 authentications: the test suite's check "
        "that the script still runs (its figures mean nothing)",
    )
    parser.add_argument("--load-scope", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--postgres-server",
        default="postgres://postgres@127.0.0.1:5432",
        help="the PostgreSQL server for --database postgres (no database name)",
    )
    args = parser.parse_args(argv)
    if args.tiny:
        args.requests, args.rounds, args.threads, args.warmup = 20, 2, 2, 5
        args.duration, args.auth_samples = 1.0, 50
    return args


@contextmanager
def scratch_database(args: argparse.Namespace, workdir: Path) -> Iterator[str]:
    """The URL of an empty database that exists only while the benchmark runs."""
    if args.database == "sqlite":
        yield f"sqlite:///{sqlite_prepared(workdir / 'bench.sqlite3')}"
        return
    import psycopg

    name = f"agentapi_bench_{os.getpid()}"
    server = args.postgres_server.rstrip("/")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        postgres_create(admin, name)
    try:
        yield f"{server}/{name}"
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_bodies: dict[str, list[bytes]] = {}
_turn = [0]


def _body(endpoint: Endpoint) -> bytes | None:
    rotation = _bodies.get(endpoint.label)
    if not rotation:
        return endpoint.body
    _turn[0] += 1
    return rotation[_turn[0] % len(rotation)]


def request_once(port: int, endpoint: Endpoint, headers: dict[str, str]) -> int:
    """One request on a connection of its own."""
    connection = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        connection.request(endpoint.method, endpoint.path, body=_body(endpoint), headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


class KeptAlive:
    """One client's keep-alive connection, as an agent's HTTP client keeps one: opened again
    (and the request sent again, timed) when the server closed it while idle."""

    def __init__(self, port: int, timeout: float = 30) -> None:
        self.port = port
        self.timeout = timeout
        self.connection = http.client.HTTPConnection(HOST, port, timeout=timeout)

    def request(self, endpoint: Endpoint, headers: dict[str, str]) -> int:
        body = _body(endpoint)
        for attempt in (1, 2):
            try:
                self.connection.request(endpoint.method, endpoint.path, body=body, headers=headers)
                response = self.connection.getresponse()
                response.read()
                if response.will_close:
                    self.close()
                return response.status
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.connection.close()
        self.connection = http.client.HTTPConnection(HOST, self.port, timeout=self.timeout)


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
        client = KeptAlive(port)
        while take():
            began = time.perf_counter()
            try:
                status = client.request(endpoint, headers)
                problem = "" if status == 200 else f"HTTP {status}"
            except (OSError, http.client.HTTPException) as exc:
                problem = f"{type(exc).__name__}: {exc}"
                client.close()
            took = time.perf_counter() - began
            with lock:
                if problem:
                    measurement.errors += 1
                    measurement.first_error = measurement.first_error or problem
                else:
                    measurement.latencies.append(took)
        client.connection.close()

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
    """Until gunicorn answers a ping. The socket is bound and listening before gunicorn starts
    (``fd://``), so a connection waits in its backlog until a worker accepts it: nothing is
    polled on a timer, and a server that exits is noticed within one request's timeout."""
    while True:
        if server.poll() is not None:
            raise SystemExit(f"gunicorn exited with status {server.returncode}")
        connection = http.client.HTTPConnection(HOST, port, timeout=10)
        try:
            connection.request(PING.method, PING.path, headers=headers)
            status = connection.getresponse().status
        except TimeoutError:
            continue
        finally:
            connection.close()
        if status != 200:
            raise SystemExit(f"gunicorn answered the first ping with HTTP {status}")
        return


def stop(server: subprocess.Popen[bytes]) -> None:
    """Stop gunicorn's master and workers (its own session), gracefully first."""
    if server.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)  # the master stops its workers gracefully
        with suppress(subprocess.TimeoutExpired):
            server.wait(timeout=20)
    with suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGKILL)  # whatever of its session outlived it
    server.wait()


def process_cpu(group: int, pids: set[int]) -> float:
    """CPU seconds (user and system) of the live processes of process group ``group`` (a
    gunicorn master started in a session of its own, and its workers) and of ``pids``."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[2]) == group or int(entry.name) in pids:
            total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


@dataclass
class Cpu:
    """CPU seconds spent while an endpoint was measured: the server's processes, and (on
    PostgreSQL) the backends serving its connections."""

    server: float = 0.0
    database: float = 0.0

    def per_request(self, requests: int) -> tuple[float, float]:
        """(server, database) CPU milliseconds per request."""
        if not requests:
            return float("nan"), float("nan")
        return self.server / requests * 1000, self.database / requests * 1000


class CpuMeter:
    """Reads the CPU time of the server's processes and of the database's backends."""

    def __init__(self, server: subprocess.Popen[bytes], database_url: str) -> None:
        self.group = server.pid
        self.database_url = database_url if database_url.startswith("postgres") else ""

    def backends(self) -> set[int]:
        if not self.database_url:
            return set()
        import psycopg

        with psycopg.connect(self.database_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid()"
            ).fetchall()
        return {int(pid) for (pid,) in rows}

    def sample(self) -> tuple[float, float, set[int]]:
        backends = self.backends()
        return process_cpu(self.group, set()), process_cpu(-1, backends), backends

    def around(self, phase: Callable[[], Any], into: Cpu) -> Any:
        """``phase()``, adding the CPU time it cost into ``into``. Backends that connected
        during the phase count from zero: they began with it."""
        server_before, database_before, backends = self.sample()
        result = phase()
        server_after, _database, now = self.sample()
        into.server += server_after - server_before
        into.database += process_cpu(-1, backends | now) - database_before
        return result


def report(label: str, result: Measurement | WrkMeasurement, cpu: Cpu, postgres: bool) -> None:
    server, database = cpu.per_request(result.completed)
    print(
        f"{label:<32} {result.completed:>6} req  {result.rate():>8.1f} req/s  "
        f"p50 {result.percentile(50):>7.2f} ms  p99 {result.percentile(99):>7.2f} ms  "
        f"CPU {server:>6.2f} ms/req"
        + (f" + database {database:.2f}" if postgres else "")
        + f"  errors {result.errors}"
        + (f"  (first: {result.first_error})" if result.errors else "")
    )


def former_token_user(text: str) -> Any:
    """``agentapi.auth.TokenBackend.authenticate`` as it was before its statement was compiled
    once: the queryset built and compiled on every call. The baseline of the authentication
    figure; the same checks, the same answer."""
    from agentapi.models import ApiToken
    from agentapi.services import LAST_USED_RESOLUTION
    from agentapi.tokens import digest_matches, token_prefix
    from reviewconsole import clock
    from reviewconsole.roles import TOKEN_ROLE

    text = text.strip()
    prefix = token_prefix(text)
    row = (
        ApiToken.objects.select_related("user")
        .filter(prefix=prefix, user__groups__name=TOKEN_ROLE)
        .first()
        if prefix is not None
        else None
    )
    if not digest_matches(text, row.token_hash if row is not None else None):
        return None
    assert row is not None
    if row.revoked_at is not None or not row.user.is_active:
        return None
    now = clock.now()
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row.user


def prepared(samples: int) -> int:
    """In this process (the benchmark's environment): the database migrated, the knowledge
    fixtures imported by an operator, an agent and its token; then, with ``samples``, token
    authentication timed (:func:`auth_figures`). One process rather than one ``manage.py`` per
    step: each would set Django up again. Prints one line of JSON."""
    import io

    import django

    django.setup()
    from django.core.management import call_command

    def command(*args: str) -> str:
        out = io.StringIO()
        call_command(*args, stdout=out)
        return out.getvalue()

    command("migrate", "--noinput", "-v", "0")
    command("add_user", "bench-operator", "--role", "operator")
    command("add_user", "agent-7", "--role", "agent")
    fixtures = str(ROOT / "fixtures" / "knowledge.json")
    command("import_knowledge", fixtures, "--as", "bench-operator", "--json")
    token = json.loads(command("create_token", "agent-7", "--name", "bench", "--json"))["token"]
    answer: dict[str, Any] = {"token": token}
    if samples:
        answer["auth"] = auth_figures(token, samples)
    print(json.dumps(answer))
    return 0


def auth_figures(token: str, samples: int) -> dict[str, Any]:
    """p50 of token authentication, the compiled statement against the former code,
    interleaved call by call in alternating order; both must give the same answers."""
    from agentapi.auth import token_user

    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    current, former = token_user(token), former_token_user(token)
    assert current is not None and former is not None and current.pk == former.pk
    assert token_user(forged) is None and former_token_user(forged) is None
    arms: tuple[Callable[[str], Any], Callable[[str], Any]] = (token_user, former_token_user)
    times: tuple[list[float], list[float]] = ([], [])
    for turn in range(samples):
        for index in (0, 1) if turn % 2 else (1, 0):
            began = time.perf_counter()
            arms[index](token)
            times[index].append(time.perf_counter() - began)
    compiled, built = (sorted(t)[len(t) // 2] * 1000 for t in times)
    return {"samples": samples, "compiled_ms": compiled, "former_ms": built}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.load_scope:
        return load_scope(args.load_scope)
    if args.prepare:
        return prepared(args.auth_samples)
    if args.generator == "wrk" and not shutil.which("wrk"):
        raise SystemExit("--generator wrk: wrk is not installed (apt-get install wrk)")
    generator = "wrk" if args.generator != "python" and shutil.which("wrk") else "python"
    workdir = Path(tempfile.mkdtemp(prefix="bench-api-"))
    try:
        with scratch_database(args, workdir) as database_url:
            results, cpu, auth = measure(args, database_url, generator, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    ping: Measurement | WrkMeasurement
    search: Measurement | WrkMeasurement
    if generator == "wrk":
        ping, search = merge_wrk(results[PING.label]), merge_wrk(results[SEARCH.label])
    else:
        ping, search = merge(results[PING.label]), merge(results[SEARCH.label])
    print()
    if auth:
        ratio = auth["compiled_ms"] / auth["former_ms"]
        print(
            f"token authentication in-process ({auth['samples']} each, interleaved): compiled "
            f"statement p50 {auth['compiled_ms']:.3f} ms, former code {auth['former_ms']:.3f} ms,"
            f" ratio {ratio:.2f}"
        )
    print(
        "server: console.settings_production, gunicorn --preload, "
        f"{WORKERS} workers x {THREADS} threads, keep-alive; "
        "CPU: the server's processes (and the database backends) per request"
    )
    print(
        "load generator: "
        + (
            f"wrk (1 thread, {args.threads} connections, {args.rounds} x {args.duration:g} s "
            "per endpoint; p50/p99 are the median of each round's own)"
            if generator == "wrk"
            else f"Python threads in this process ({args.threads}, one keep-alive connection"
            " each); they share the server's cores"
        )
    )
    postgres = args.database == "postgres"
    report(PING.label, ping, cpu[PING.label], postgres)
    report(SEARCH.label, search, cpu[SEARCH.label], postgres)
    ratio = search.rate() / ping.rate() if ping.rate() else float("nan")
    ping_cpu = sum(cpu[PING.label].per_request(ping.completed)[: 2 if postgres else 1])
    search_cpu = sum(cpu[SEARCH.label].per_request(search.completed)[: 2 if postgres else 1])
    errors = ping.errors + search.errors
    target = TARGET_RATIO_IN_SCOPE if args.scope_documents else TARGET_RATIO
    print()
    print(f"throughput ratio search/ping: {ratio:.2f} (target >= {target})")
    print(f"CPU per request ratio search/ping: {search_cpu / ping_cpu:.2f}")
    print(f"errors: {errors} (target 0)")
    verdict = "met" if ratio >= target and errors == 0 else "MISSED"
    print(f"targets {verdict}")
    return 0


def production_environment(database_url: str, workdir: Path) -> dict[str, str]:
    """The environment ``scripts/cluster.py`` gives an instance (production settings, fresh
    secrets, the audit anchor and static files under ``workdir``), on ``database_url``."""
    import secrets

    (workdir / "static").mkdir(exist_ok=True)
    recipe = Recipe(processes=WORKERS, threads=THREADS, python=sys.executable)
    return {
        **os.environ,
        **recipe.environment(secrets.token_urlsafe(50), secrets.token_hex(32), str(workdir)),
        "DATABASE_URL": database_url,
        "PYTHONPATH": str(ROOT),
        # The per-account rate limit is off: the benchmark measures the server, not the limit.
        "CONSOLE_API_RATE": "",
    }


def gunicorn_argv(listener: socket.socket) -> list[str]:
    """The recipe's gunicorn command (``scripts/cluster.py``), serving the socket ``listener``."""
    argv = Recipe(processes=WORKERS, threads=THREADS, python=sys.executable).gunicorn_argv(0)
    argv[argv.index("--bind") + 1] = f"fd://{listener.fileno()}"
    return [*argv, "--log-level", "warning"]


def measure(
    args: argparse.Namespace, database_url: str, generator: str, workdir: Path
) -> tuple[dict[str, list[Any]], dict[str, Cpu], dict[str, Any]]:
    env = production_environment(database_url, workdir)
    if args.tiny:
        env["CONSOLE_EMBEDDER"] = "off"  # no model loaded in each worker: seconds, not more
    server: subprocess.Popen[bytes] | None = None
    try:
        print("preparing the database (migrate, knowledge fixtures, agent token) ...", flush=True)
        done = subprocess.run(  # noqa: S603 - this interpreter and this script
            [sys.executable, __file__, "--prepare", "--auth-samples", str(args.auth_samples)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            raise SystemExit(f"preparing the database failed:\n{done.stdout}\n{done.stderr}")
        prepared_answer = json.loads(done.stdout.strip().splitlines()[-1])
        token, auth = prepared_answer["token"], prepared_answer.get("auth", {})
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
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((HOST, 0))
            listener.listen(128)
            listener.set_inheritable(True)
            port = int(listener.getsockname()[1])
            server = subprocess.Popen(  # noqa: S603 - this interpreter running gunicorn, fixed arguments
                gunicorn_argv(listener),
                cwd=ROOT,
                env=env,
                pass_fds=(listener.fileno(),),
                start_new_session=True,
            )
        wait_until_serving(port, headers, server)
        meter = CpuMeter(server, database_url)
        if _bodies.get(SEARCH.label):
            print("statuses of the scope's queries:", answered(port, headers), flush=True)
        results: dict[str, list[Any]] = {PING.label: [], SEARCH.label: []}
        cpu = {PING.label: Cpu(), SEARCH.label: Cpu()}
        if generator == "wrk":
            print(
                f"gunicorn: {WORKERS} workers x {THREADS} threads on {HOST}:{port}; client: wrk, "
                f"{args.threads} connections, {args.rounds} x {args.duration:g} s per endpoint",
                flush=True,
            )
            scripts = {e.label: wrk_script(workdir, e, headers) for e in (PING, SEARCH)}
            for endpoint in (PING, SEARCH):
                run_wrk(port, scripts[endpoint.label], args.threads, 1)
            for _ in range(args.rounds):
                for endpoint in (PING, SEARCH):
                    script = scripts[endpoint.label]
                    results[endpoint.label].append(
                        meter.around(
                            lambda script=script: run_wrk(  # type: ignore[misc]
                                port, script, args.threads, args.duration
                            ),
                            cpu[endpoint.label],
                        )
                    )
            return results, cpu, auth
        print(
            f"gunicorn: {WORKERS} workers x {THREADS} threads on {HOST}:{port}; client: "
            f"{args.threads} threads, {args.rounds} x {args.requests} requests per endpoint, "
            f"cap {args.time_cap:g} s per phase",
            flush=True,
        )

        def phase(endpoint: Endpoint, count: int) -> Measurement:
            return run_phase(port, endpoint, headers, count, args.threads, args.time_cap)

        for endpoint in (PING, SEARCH):
            phase(endpoint, args.warmup)
        for round_ in range(args.rounds):
            for endpoint in (PING, SEARCH) if round_ % 2 == 0 else (SEARCH, PING):
                results[endpoint.label].append(
                    meter.around(
                        lambda endpoint=endpoint: phase(endpoint, args.requests),  # type: ignore[misc]
                        cpu[endpoint.label],
                    )
                )
        return results, cpu, auth
    finally:
        if server is not None:
            stop(server)


if __name__ == "__main__":
    raise SystemExit(main())
