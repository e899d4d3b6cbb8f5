#!/usr/bin/env python
"""The remote MCP endpoint checked by a client the project did not write: the MCP Inspector's CLI.

On a temporary SQLite database holding the demo, with an agent token made by ``create_token``,
it serves ``mcp_server --http`` on a free port of 127.0.0.1 and asks the Inspector (the npm
package ``@modelcontextprotocol/inspector``, installed once into ``var/mcp-inspector`` with the
machine's npm) to list the tools and to call ``search_knowledge`` with the token as a bearer
header, to call it for a tenant the agent may not use, then to list the tools with a wrong token.
It checks that all seven tools declare an output schema, that the search answers as the README
says, with structured content, that the refused call shows the server's message, and that the
wrong token is refused; it exits non-zero on any difference, and always stops the server.

Usage::

    .venv/bin/python scripts/check_mcp_inspector.py

It needs Node.js and npm (and the npm registry, the first time); the suite's own MCP tests use
the official Python SDK's client instead (tests/mcp/test_http.py).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
TOOLS = {
    "search_knowledge",
    "retrieve_experience",
    "run_skill",
    "propose_case",
    "investigate",
    "experience_context",
    "run_outcome",
}
SEARCH = {
    "query": "两杯水果茶，优惠券用不了",
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "occurred_at": "2026-09-18T14:00:00+08:00",
    "known_at": "2026-09-18T14:10:00+08:00",
}


def inspector() -> Path:
    """The Inspector's launcher, installed into var/mcp-inspector the first time."""
    home = ROOT / "var" / "mcp-inspector"
    launcher = home / "node_modules" / ".bin" / "mcp-inspector"
    if not launcher.exists():
        if shutil.which("npm") is None:
            sys.exit("npm is needed to install the MCP Inspector")
        home.mkdir(parents=True, exist_ok=True)
        subprocess.run(  # noqa: S603
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(home), INSPECTOR],  # noqa: S607
            check=True,
        )
    return launcher


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"manage.py {' '.join(args)} failed:\n{done.stderr}{done.stdout}")
    return done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, server: subprocess.Popen[bytes], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit("the MCP server stopped before it answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 - our own server
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    sys.exit(f"the MCP server did not answer {url} in {seconds:.0f} s")


def ask(launcher: Path, url: str, token: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(  # noqa: S603
        [str(launcher), "--cli", url, "--transport", "http",
         "--header", f"Authorization: Bearer {token}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    # An answer on stdout; a refusal (e.g. 401: it would start an OAuth flow) on stderr.
    for text in (done.stdout, done.stderr):
        try:
            answer: dict[str, Any] = json.loads(text)
        except json.JSONDecodeError:
            continue
        return answer
    sys.exit(f"the Inspector answered no JSON:\n{done.stdout}{done.stderr}")


def check(launcher: Path, url: str, token: str) -> list[str]:
    failures = []
    listed = ask(launcher, url, token, "--method", "tools/list")
    tools = {tool["name"]: tool for tool in listed.get("tools", [])}
    if set(tools) != TOOLS:
        failures.append(f"tools listed: {sorted(tools)}")
    failures += [
        f"{name} declares no outputSchema" for name, t in tools.items() if "outputSchema" not in t
    ]
    arguments = [f"{key}={value}" for key, value in SEARCH.items()]
    called = ask(launcher, url, token, "--method", "tools/call", "--tool-name", "search_knowledge",
                 "--tool-arg", *arguments)  # fmt: skip
    structured = called.get("structuredContent") or {}
    if called.get("isError") or structured.get("status") != "needs_context":
        failures.append(f"search_knowledge answered {json.dumps(called, ensure_ascii=False)[:300]}")
    elif not any(item.get("id") == "doc:rule-b@1" for item in structured.get("evidence", [])):
        failures.append("search_knowledge did not return campaign B's rule")
    # A refused call: isError with the server's message as text (no structured content that
    # the Inspector would check against the output schema and lose the message over).
    forbidden = ask(launcher, url, token, "--method", "tools/call", "--tool-name", "search_knowledge",
                    "--tool-arg", "query=x", "tenant=nope")  # fmt: skip
    texts = [block.get("text", "") for block in forbidden.get("content", [])]
    if not forbidden.get("isError") or not any("tenant 'nope'" in text for text in texts):
        failures.append(
            f"a refused call answered {json.dumps(forbidden, ensure_ascii=False)[:300]}"
        )
    refused = ask(launcher, url, "not-a-token", "--method", "tools/list")
    if "tools" in refused or refused.get("error", {}).get("code") != "auth_required":
        failures.append(f"a wrong token was answered: {json.dumps(refused)[:200]}")
    return failures


def main() -> int:
    launcher = inspector()
    folder = Path(tempfile.mkdtemp(prefix="mcp-inspector-check-"))
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{folder}/console.sqlite3",
           "CONSOLE_EMBEDDER": "off"}  # fmt: skip
    server = None
    try:
        manage(env, "migrate", "--noinput", "--verbosity", "0")
        manage(env, "load_demo", "--no-replay")
        token = json.loads(manage(env, "create_token", "agent-7", "--json"))["token"]
        port = free_port()
        server = subprocess.Popen(  # noqa: S603
            [sys.executable, "manage.py", "mcp_server", "--http", "--host", "127.0.0.1",
             "--port", str(port)],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_healthy(f"http://127.0.0.1:{port}/healthz", server)
        failures = check(launcher, f"http://127.0.0.1:{port}/mcp", token)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
    for failure in failures:
        print(f"FAIL {failure}")
    if not failures:
        print(
            "MCP Inspector: 7 tools with output schemas, search_knowledge answered, a refused "
            "call's message read, wrong token refused"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
