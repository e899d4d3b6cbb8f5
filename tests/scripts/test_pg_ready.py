"""``make test`` says what the PostgreSQL half needs (issue 39, item 18): a database named in
``TEST_POSTGRES_URL`` that the server does not have is created, or, when it cannot be, reported
as a missing database, never as an unreachable server; a server that does not answer is
reported as unreachable."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from tests.helpers import ROOT

SERVER = "postgres://postgres@127.0.0.1:5432"


def pg_ready(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603
        [sys.executable, "scripts/pg_ready.py", url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def server() -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    try:
        connection = psycopg.connect(f"{SERVER}/postgres", connect_timeout=3, autocommit=True)
    except psycopg.OperationalError as error:
        pytest.skip(f"no PostgreSQL server at {SERVER}: {error}")
    with connection:
        yield connection


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_missing_database_is_created_and_said_so(
    server: psycopg.Connection[tuple[object, ...]],
) -> None:
    name = f"console_missing_{uuid.uuid4().hex[:12]}"
    try:
        result = pg_ready(f"{SERVER}/{name}")

        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.strip().startswith(f"created database {name!r}")
        assert server.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        again = pg_ready(f"{SERVER}/{name}")
        assert again.returncode == 0 and again.stdout.startswith("PostgreSQL ready")
    finally:
        server.execute(f'DROP DATABASE IF EXISTS "{name}"')


def test_a_missing_database_that_cannot_be_created_is_named_not_called_unreachable(
    server: psycopg.Connection[tuple[object, ...]],
) -> None:
    role = f"console_nocreate_{uuid.uuid4().hex[:8]}"
    name = f"console_missing_{uuid.uuid4().hex[:12]}"
    server.execute(f'CREATE ROLE "{role}" LOGIN NOCREATEDB')
    try:
        result = pg_ready(f"postgres://{role}@127.0.0.1:5432/{name}")
    finally:
        server.execute(f'DROP ROLE "{role}"')

    assert result.returncode == 2, result.stdout + result.stderr
    line = result.stdout.strip()
    assert line.startswith(f"database {name!r} does not exist at ")
    assert "could not be created: permission denied" in line
    assert "unreachable" not in line


def test_a_server_that_does_not_answer_is_unreachable() -> None:
    result = pg_ready(f"postgres://postgres@127.0.0.1:{unused_port()}/test")

    assert result.returncode == 1
    assert result.stdout.startswith("PostgreSQL unreachable at postgres://postgres@127.0.0.1:")
