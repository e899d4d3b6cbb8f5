"""The MCP HTTP server of the tests that drive it from outside (tests/mcp/test_http.py,
test_http_edges.py, test_node_clients.py): one demo world with its agents' tokens, made once
per run, and ``manage.py mcp_server --http`` on a free loopback port, one per test session and
worker (tests/mcp/conftest.py)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    ROOT,
    copy_database,
    json_made_once,
    manage_many_on_sqlite,
    manage_on_sqlite,
)

# The per-account rate the server runs with: the session below stays under it, the flood over it.
RATE = 40
# The server's rate limiter reads a clock standing still 30 s into a clock minute
# (tests/mcp/manage_with_rate_clock.py): every call of the module counts in that one window,
# which no slowness of the machine can end, and a refused call waits exactly 30 s.
RATE_CLOCK_AT = "2026-09-18T06:00:30+00:00"
RATE_WAIT = 30
MANAGE_WITH_RATE_CLOCK = Path(__file__).with_name("manage_with_rate_clock.py")
SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "deployment": "release-1",
}
OCCURRED_AT = "2026-09-18T14:00:00+08:00"
KNOWN_AT = "2026-09-18T14:10:00+08:00"
FACTS = {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200}
QUERY = "小程序优惠券无法使用"
SEARCH = {
    "query": QUERY,
    **{key: SCOPE[key] for key in ("tenant", "brand", "store", "campaign")},
    "occurred_at": OCCURRED_AT,
    "known_at": KNOWN_AT,
    "facts": FACTS,
}


# The tokens the module's tests take, issued with the world in one process before the server
# starts (``Deployment.token`` issues another in a process of its own once these are used up).
# Every pytest worker copies the same world, tokens included: each copy is a database of its own.
TOKENS = [*["agent-7"] * 10, "agent-h", "agent-flood"]
# The one browser origin the server allows (CONSOLE_CORS_ALLOWED_ORIGINS).
BROWSER_ORIGIN = "https://agents.example.com"


@dataclass
class Deployment:
    url: str
    database: Path
    issued: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    def manage(self, *args: str) -> str:
        done = manage_on_sqlite(self.database, *args, CONSOLE_EMBEDDER="off")
        assert done.returncode == 0, done.stderr + done.stdout
        return done.stdout.strip()

    def set_up(self, *commands: list[str]) -> dict[str, list[dict[str, str]]]:
        """The world's commands and the ``TOKENS``, in one process; the tokens issued."""
        tokens = [["create_token", user, "--json"] for user in TOKENS]
        done = manage_many_on_sqlite(self.database, *commands, *tokens, CONSOLE_EMBEDDER="off")
        for result in done:
            assert result.returncode == 0, (result.args, result.stderr + result.stdout)
        for user, result in zip(TOKENS, done[len(commands) :], strict=True):
            self.issued.setdefault(user, []).append(json.loads(result.stdout))
        return self.issued

    def token(self, user: str) -> dict[str, str]:
        """A token of its own for ``user``."""
        if self.issued.get(user):
            return self.issued[user].pop()
        issued: dict[str, str] = json.loads(self.manage("create_token", user, "--json"))
        return issued


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
            return int(response.status)
    except urllib.error.HTTPError as refused:
        return refused.code


def _wait_until_serving(server: subprocess.Popen[bytes], health: str, log: Path) -> None:
    """Poll the health endpoint until it answers (or the process dies, or five minutes pass: a
    deadline for a hang only, however loaded the machine)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"mcp_server --http exited: {log.read_text(encoding='utf-8')}")
        try:
            if http_status(health) == 200:
                return
        except OSError:
            pass  # not listening yet
        time.sleep(0.1)
    pytest.fail(f"mcp_server --http did not serve {health}: {log.read_text(encoding='utf-8')}")


def _world(migrated_sqlite: Path, shared_folder: Path) -> tuple[Path, dict[str, Any]]:
    """The demo world with a second tenant, its agent, a flooding agent and the ``TOKENS``, in
    a SQLite file made once per run (pytest-xdist workers share it; each copies it)."""
    template = shared_folder / "mcp-http-world.sqlite3"

    def build() -> dict[str, Any]:
        building = copy_database(migrated_sqlite, shared_folder / "mcp-http-world.building")
        issued = Deployment(url="", database=building).set_up(
            ["load_demo", "--no-replay", "--json"],
            ["add_tenant", "harbor"],
            ["add_user", "agent-h", "--role", "agent", "--tenant", "harbor"],
            ["add_user", "agent-flood", "--role", "agent", "--tenant", "teahouse"],
        )
        # Fold the write-ahead log into the file, so the file alone is the whole database.
        with closing(sqlite3.connect(building)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        building.rename(template)
        return issued

    issued = json_made_once(shared_folder / "mcp-http-world.json", build)
    return template, issued


@contextmanager
def serving(
    migrated_sqlite: Path,
    shared_folder: Path,
    tmp_path_factory: pytest.TempPathFactory,
    **extra_env: str,
) -> Iterator[Deployment]:
    """The world of ``_world`` in a SQLite file of its own, and the HTTP server (with
    ``extra_env`` in its environment) on a free loopback port; stopped on leaving."""
    template, issued = _world(migrated_sqlite, shared_folder)
    folder = tmp_path_factory.mktemp("mcp-http")
    database = copy_database(template, folder / "console.sqlite3")
    port = _free_port()
    world = Deployment(url=f"http://127.0.0.1:{port}/mcp", database=database, issued=issued)
    log = folder / "server.log"
    with log.open("wb") as output:
        server = subprocess.Popen(  # noqa: S603 - this interpreter and manage.py, fixed arguments
            [
                sys.executable,
                str(MANAGE_WITH_RATE_CLOCK),
                "mcp_server",
                "--http",
                "--port",
                str(port),
            ],
            cwd=ROOT,
            env={
                **os.environ,
                "DATABASE_URL": f"sqlite:///{database}",
                "CONSOLE_EMBEDDER": "off",
                "CONSOLE_API_RATE": f"{RATE}/m",
                "RATE_CLOCK_AT": RATE_CLOCK_AT,
                **extra_env,
            },
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_until_serving(server, f"http://127.0.0.1:{port}/healthz", log)
        yield world
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
