"""``scripts/cluster.py`` says what it needs (issue 39, item 17): without HAProxy it stops with
one sentence naming ``scripts/ensure_haproxy.sh``, not a ``FileNotFoundError`` after preparing
the database; its help names the ports it serves on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT


def cluster(*args: str, path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603
        [sys.executable, "scripts/cluster.py", *args],
        cwd=ROOT,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_without_haproxy_it_says_to_run_ensure_haproxy(tmp_path: Path) -> None:
    # A PATH with no haproxy on it; the database URL names nothing that answers, so a script
    # that went on to prepare the database would fail differently.
    done = cluster("--database", "postgres://nobody@127.0.0.1:9/none", path=str(tmp_path))

    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "FileNotFoundError" not in done.stderr
    assert "scripts/ensure_haproxy.sh" in done.stderr
    assert done.stderr.strip().count("\n") == 0  # one line


def test_the_help_names_the_ports() -> None:
    done = cluster("--help", path=os.environ.get("PATH", ""))

    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "--first-mcp-port" in text and "MCP server's port" in text
    assert "http://127.0.0.1:PORT/mcp" in text
