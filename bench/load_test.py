"""Headless load test: reviewers browsing and agents searching, against gunicorn on loopback.

Bounded in count and time, loopback only, and it stops by itself:

    .venv/bin/python bench/load_test.py                       # PostgreSQL (a scratch database)
    .venv/bin/python bench/load_test.py --database sqlite     # a temporary SQLite file
    .venv/bin/python bench/load_test.py --users 20 --requests 60 --seconds 90
    .venv/bin/python bench/load_test.py --database sqlite --tiny   # seconds: the test suite's run

Each virtual user is a thread with its own HTTP connection. Reviewers sign in through the login
form before the measured phase begins, then read the dashboard, the review queue, case pages,
runs and the knowledge list; agents call the search and retrieval endpoints with a bearer token. The report gives throughput,
p50/p99 latency and errors per kind and overall; targets: zero errors, p99 < 200 ms at 20 users.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import postgres_create, sqlite_prepared  # noqa: E402

PYTHON = sys.executable
PG_SERVER = "postgres://postgres@127.0.0.1:5432"
LOAD_DB = f"console_load_test_{os.getpid()}"
STARTED = time.monotonic()


@dataclass
class Samples:
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    error_examples: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    slow: list[str] = field(default_factory=list)

    def add(self, ms: float, ok: bool, what: str) -> None:
        with self.lock:
            self.latencies_ms.append(ms)
            if ms > 200 and len(self.slow) < 10:
                self.slow.append(f"{what} {ms:.0f} ms at +{time.monotonic() - STARTED:.1f}s")
            if not ok:
                self.errors += 1
                if len(self.error_examples) < 5:
                    self.error_examples.append(what)


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(  # noqa: S603
        [PYTHON, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if result.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{result.stderr}{result.stdout}")
    return result.stdout


@contextmanager
def scratch_database(kind: str, server: str = PG_SERVER) -> Iterator[str]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{sqlite_prepared(Path(folder) / 'load.sqlite3')}"
        return
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {LOAD_DB} WITH (FORCE)")
        postgres_create(conn, LOAD_DB)
    try:
        yield f"{server}/{LOAD_DB}"
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {LOAD_DB} WITH (FORCE)")


@contextmanager
def gunicorn(env: dict[str, str], workers: int) -> Iterator[int]:
    """gunicorn serving on a loopback port (yielded) that is listening before it starts
    (``fd://``): a first request waits in the backlog until a worker takes it, so nothing
    polls for the server on a timer."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        listener.set_inheritable(True)
        port = int(listener.getsockname()[1])
        process = subprocess.Popen(  # noqa: S603
            [
                PYTHON,
                "-m",
                "gunicorn",
                "console.wsgi:application",
                "--bind",
                f"fd://{listener.fileno()}",
                "--workers",
                str(workers),
                "--threads",
                "4",
                "--log-level",
                "warning",
                "--preload",
            ],
            cwd=ROOT,
            env=env,
            pass_fds=(listener.fileno(),),
        )
    try:
        while True:
            if process.poll() is not None:
                raise SystemExit(f"gunicorn exited with status {process.returncode}")
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.request("GET", "/healthz", headers={"Host": "127.0.0.1"})
                conn.getresponse().read()
                break
            except TimeoutError:
                continue
            finally:
                conn.close()
        yield port
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


class Browser:
    """A minimal cookie-keeping client on one keep-alive connection."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.cookies: dict[str, str] = {}

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes, float]:
        all_headers = {"Host": "127.0.0.1", **(headers or {})}
        if self.cookies:
            all_headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        began = time.perf_counter()
        try:
            self.conn.request(method, path, body=body, headers=all_headers)
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # The server closed the idle keep-alive connection (gunicorn's keepalive is 2 s): a
            # browser opens a new one and sends the request again, and so do we, once, timed.
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            self.conn.request(method, path, body=body, headers=all_headers)
            response = self.conn.getresponse()
        data = response.read()
        elapsed = (time.perf_counter() - began) * 1000
        for header, value in response.getheaders():
            if header.lower() == "set-cookie":
                name, _, rest = value.partition("=")
                self.cookies[name.strip()] = rest.split(";", 1)[0]
        return response.status, data, elapsed

    def login(self, username: str, password: str) -> None:
        status, page, _ = self.request("GET", "/accounts/login/")
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        if status != 200 or token is None:
            raise RuntimeError(f"login page: {status}")
        body = urllib.parse.urlencode(
            {
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": token.group(1).decode(),
            }
        ).encode()
        status, _, _ = self.request(
            "POST",
            "/accounts/login/",
            body,
            {"Content-Type": "application/x-www-form-urlencoded", "Referer": "http://127.0.0.1/"},
        )
        if status != 302:
            raise RuntimeError(f"login failed: {status}")


def case_paths(browser: Browser) -> list[str]:
    _, page, _ = browser.request("GET", "/queue/?status=approved")
    paths = sorted(set(re.findall(rb'href="(/cases/[0-9a-f]{64}/)"', page)))
    _, page, _ = browser.request("GET", "/queue/")
    paths += sorted(set(re.findall(rb'href="(/cases/[0-9a-f]{64}/)"', page)))
    return [p.decode() for p in paths] or ["/queue/"]


SEARCH = {
    "query": "两杯水果茶，优惠券用不了",
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "occurred_at": "2026-09-18T14:00:00+08:00",
    "known_at": "2026-09-18T14:10:00+08:00",
    "facts": {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200},
}
RETRIEVE = {
    "query": "优惠券无法使用",
    "run_id": "load-run",
    "scope": {
        "tenant": "teahouse",
        "brand": "leaf-and-cup",
        "store": "store-002",
        "campaign": "campaign-b",
        "deployment": "release-1",
    },
}


def think(rng: random.Random, think_ms: tuple[float, float]) -> None:
    """A person reads a page, an agent reasons between calls: a pause as locust's ``between``."""
    time.sleep(rng.uniform(*think_ms) / 1000)


def signed_in(port: int, name: str, password: str) -> tuple[Browser, list[str]]:
    """A reviewer's browser after login, and the pages it will visit."""
    browser = Browser(port)
    browser.login(name, password)
    return browser, ["/", "/queue/", *case_paths(browser), "/runs/", "/knowledge/"]


def reviewer(
    port: int,
    requests: int,
    stop_at: float,
    samples: Samples,
    think_ms: tuple[float, float],
    name: str,
    password: str,
    session: tuple[Browser, list[str]] | None = None,
) -> None:
    """One reviewer's requests; ``session`` is a browser signed in beforehand (the measured
    phase then holds no login: password hashing is deliberately slow and would stall workers)."""
    rng = random.Random(name)
    browser, pages = session or signed_in(port, name, password)
    for n in range(requests):
        if time.monotonic() > stop_at:
            return
        think(rng, think_ms)
        path = pages[n % len(pages)]
        began = time.perf_counter()
        try:
            status, _, ms = browser.request("GET", path)
        except (OSError, http.client.HTTPException) as exc:
            ms = (time.perf_counter() - began) * 1000
            samples.add(ms, False, f"GET {path} -> {type(exc).__name__}")
            continue
        samples.add(ms, status == 200, f"GET {path} -> {status}")


def agent(
    port: int,
    requests: int,
    stop_at: float,
    samples: Samples,
    think_ms: tuple[float, float],
    token: str,
) -> None:
    rng = random.Random(threading.get_ident())
    browser = Browser(port)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    for n in range(requests):
        if time.monotonic() > stop_at:
            return
        think(rng, think_ms)
        if n % 2:
            body = {**RETRIEVE, "run_id": f"load-{threading.get_ident()}-{n}"}
            path = "/api/v1/experience/retrieve"
        else:
            body, path = SEARCH, "/api/v1/knowledge/search"
        began = time.perf_counter()
        try:
            status, _, ms = browser.request("POST", path, json.dumps(body).encode(), headers)
        except (OSError, http.client.HTTPException) as exc:
            ms = (time.perf_counter() - began) * 1000
            samples.add(ms, False, f"POST {path} -> {type(exc).__name__}")
            continue
        samples.add(ms, status == 200, f"POST {path} -> {status}")


def report(kind: str, samples: Samples, seconds: float) -> dict[str, float]:
    lat = sorted(samples.latencies_ms)
    if not lat:
        return {}
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    row = {
        "requests": len(lat),
        "rps": len(lat) / seconds,
        "p50_ms": statistics.median(lat),
        "p99_ms": p99,
        "errors": samples.errors,
    }
    print(
        f"{kind:<10} {row['requests']:>8} {row['rps']:>8.1f} {row['p50_ms']:>9.1f} "
        f"{row['p99_ms']:>9.1f} {row['errors']:>7}"
    )
    for example in samples.error_examples:
        print(f"           error: {example}")
    for example in samples.slow:
        print(f"           slow: {example}")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument(
        "--postgres-server",
        default=PG_SERVER,
        help="the PostgreSQL server for --database postgres (no database name)",
    )
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--requests", type=int, default=60, help="requests per user")
    parser.add_argument("--seconds", type=float, default=90, help="time cap for the load phase")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--think-ms",
        default="250,750",
        help="pause before each request, MIN,MAX milliseconds (0,0 for none)",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="2 users of 3 requests, 1 worker, no pauses: the test suite's check that the script"
        " still runs (its figures mean nothing)",
    )
    args = parser.parse_args()
    if args.tiny:
        args.users, args.requests, args.seconds, args.workers = 2, 3, 60, 1
        args.think_ms = "0,0"
    low, high = (float(x) for x in args.think_ms.split(","))

    with scratch_database(args.database, args.postgres_server.rstrip("/")) as url:
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "DJANGO_DEBUG": "0",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            # Every simulated agent shares one token: the per-account limit would measure itself.
            "CONSOLE_API_RATE": "",
        }
        manage(env, "migrate", "--noinput")
        # --tiny: no stored replay report (half a minute); no page the load visits shows it.
        demo = json.loads(
            manage(env, "load_demo", "--json", *(["--no-replay"] if args.tiny else []))
        )
        passwords = {u["username"]: u["password"] for u in demo["users"]}
        token = json.loads(manage(env, "create_token", "agent-7", "--json"))["token"]
        with gunicorn(env, args.workers) as port:
            # Warm-up, not measured: as many concurrent clients as the load has, so every worker
            # thread has opened its database connection and run each view once.
            warm = Samples()
            warmers = [
                threading.Thread(
                    target=agent, args=(port, 4, time.monotonic() + 30, warm, (0, 0), token)
                )
                for _ in range(args.users // 2)
            ] + [
                threading.Thread(
                    target=reviewer,
                    args=(port, 4, time.monotonic() + 30, warm, (0, 0), "rita", passwords["rita"]),
                )
                for _ in range(args.users // 2)
            ]
            for thread in warmers:
                thread.start()
            for thread in warmers:
                thread.join(timeout=60)
            # Every reviewer signs in before the measured phase begins, in parallel.
            names = {i: "rita" if i % 4 == 0 else "ravi" for i in range(0, args.users, 2)}
            sessions: dict[int, tuple[Browser, list[str]]] = {}

            def sign_in(i: int) -> None:
                sessions[i] = signed_in(port, names[i], passwords[names[i]])

            logins = [threading.Thread(target=sign_in, args=(i,)) for i in names]
            for thread in logins:
                thread.start()
            for thread in logins:
                thread.join(timeout=120)
            reviewers, agents = Samples(), Samples()
            threads = []
            stop_at = time.monotonic() + args.seconds
            for i in range(args.users):
                user_args: tuple[Any, ...]
                if i % 2:
                    target: Callable[..., None] = agent
                    user_args, samples = (token,), agents
                else:
                    name = names[i]
                    target = reviewer
                    user_args = (name, passwords[name], sessions.get(i))
                    samples = reviewers
                threads.append(
                    threading.Thread(
                        target=target,
                        args=(port, args.requests, stop_at, samples, (low, high), *user_args),
                    )
                )
            began = time.monotonic()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=args.seconds + 60)
            seconds = time.monotonic() - began

        print(
            f"database={args.database} users={args.users} workers={args.workers} "
            f"think={args.think_ms}ms wall={seconds:.1f}s"
        )
        print(
            f"{'kind':<10} {'requests':>8} {'req/s':>8} {'p50 ms':>9} {'p99 ms':>9} {'errors':>7}"
        )
        report("reviewer", reviewers, seconds)
        report("agent", agents, seconds)
        total = Samples(
            reviewers.latencies_ms + agents.latencies_ms, reviewers.errors + agents.errors
        )
        row = report("all", total, seconds)
        ok = row.get("errors", 1) == 0 and row.get("p99_ms", 1e9) < 200
        print(f"target (zero errors, p99 < 200 ms): {'PASS' if ok else 'MISS'}")


if __name__ == "__main__":
    main()
