"""A refused tool call read by MCP clients the project did not write, on Node.js: the TypeScript
SDK 1.x client (``@modelcontextprotocol/sdk``, still the most installed) and the MCP Inspector's
CLI. Both check a result's structured content against the tool's ``outputSchema`` even when the
result is an error; each must show the server's own message (issue 41.3).

The clients are pinned by ``tests/mcp/node_clients/package.json`` and ``package-lock.json`` and
installed with ``npm ci`` into ``var/node-clients/`` the first time (Node.js, npm and the npm
registry are needed then)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, made_once
from tests.mcp.http_deployment import Deployment

PINNED = Path(__file__).with_name("node_clients")
REFUSED = {"query": "x", "tenant": "nope"}
# The message the API and every MCP transport give for a tenant the caller may not use.
FORBIDDEN_MESSAGE = "tenant 'nope' is a tenant this user is not a member of"


def _installed() -> Path:
    """The pinned clients, installed once per lock file (pytest-xdist workers take turns)."""
    lock = (PINNED / "package-lock.json").read_bytes()
    home = ROOT / "var" / "node-clients" / hashlib.sha256(lock).hexdigest()[:16]
    home.mkdir(parents=True, exist_ok=True)

    def install(building: Path) -> None:
        npm = shutil.which("npm")
        assert npm is not None, "npm is needed to install the pinned MCP clients"
        for name in ("package.json", "package-lock.json", "call_tool.mjs"):
            shutil.copyfile(PINNED / name, home / name)
        done = subprocess.run(  # noqa: S603 - npm ci of a pinned lock file
            [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
            cwd=home,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr + done.stdout
        building.write_text("installed\n", encoding="utf-8")

    made_once(home / "installed", install)
    return home


@pytest.fixture(scope="module")
def clients() -> Path:
    return _installed()


def _node(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    assert node is not None, "Node.js is needed for the outside MCP clients"
    return subprocess.run(  # noqa: S603 - node with fixed arguments
        [node, *args], cwd=home, capture_output=True, text=True, timeout=120, check=False
    )


def _text_detail(result: dict[str, Any]) -> dict[str, Any]:
    """The refusal's detail, from the text block every client shows."""
    texts = [block["text"] for block in result["content"] if block["type"] == "text"]
    assert len(texts) == 1, result
    detail: dict[str, Any] = json.loads(texts[0])
    return detail


def test_the_typescript_sdk_1x_reads_the_servers_message(
    clients: Path, deployment: Deployment
) -> None:
    token = deployment.token("agent-7")["token"]
    done = _node(
        clients, "call_tool.mjs", deployment.url, token, "search_knowledge", json.dumps(REFUSED)
    )
    answer = json.loads(done.stdout)
    assert "thrown" not in answer, answer
    assert answer["result"]["isError"] is True
    assert _text_detail(answer["result"]) == {"error": "forbidden", "message": FORBIDDEN_MESSAGE}


def test_the_typescript_sdk_1x_still_checks_a_successful_answer(
    clients: Path, deployment: Deployment
) -> None:
    """A successful call keeps its structured content, which the client validated."""
    token = deployment.token("agent-7")["token"]
    done = _node(
        clients, "call_tool.mjs", deployment.url, token, "search_knowledge", '{"query": "x"}'
    )
    answer = json.loads(done.stdout)
    assert "thrown" not in answer, answer
    assert answer["result"]["structuredContent"]["status"] == "needs_context"


def test_the_inspector_cli_reads_the_servers_message(clients: Path, deployment: Deployment) -> None:
    token = deployment.token("agent-7")["token"]
    launcher = clients / "node_modules" / ".bin" / "mcp-inspector"
    done = subprocess.run(  # noqa: S603 - the pinned Inspector, fixed arguments
        [str(launcher), "--cli", deployment.url, "--transport", "http",
         "--header", f"Authorization: Bearer {token}",
         "--method", "tools/call", "--tool-name", "search_knowledge",
         "--tool-arg", *(f"{key}={value}" for key, value in REFUSED.items())],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    # The Inspector prints the result on stdout, then says on stderr that it was an error.
    result = json.loads(done.stdout)
    assert result["isError"] is True, done.stdout + done.stderr
    assert _text_detail(result)["message"] == FORBIDDEN_MESSAGE
