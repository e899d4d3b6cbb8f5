"""``manage.py mcp_server`` over stdio, as an MCP client configuration would launch it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from mcp import Client, StdioServerParameters


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(  # noqa: S603 - this interpreter and manage.py, fixed arguments
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout.strip()


@pytest.fixture
def server_env(sqlite_database: Path) -> dict[str, str]:
    """A fresh SQLite database in its own file, with one agent and its token."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{sqlite_database}"}
    _manage(env, "add_user", "agent-9", "--role", "agent")
    env["CONSOLE_AGENT_TOKEN"] = _manage(env, "create_token", "agent-9")
    return env


def test_stdio_server_lists_and_calls_tools(server_env: dict[str, str]) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp_server"],
        env=server_env,
        cwd=str(settings.BASE_DIR),
    )

    async def scenario() -> tuple[list[str], Any]:
        async with Client(params) as client:
            tools = await client.list_tools()
            result = await client.call_tool(
                "search_knowledge", {"query": "优惠券无法使用", "store": "store-002"}
            )
            return [tool.name for tool in tools.tools], result

    names, result = asyncio.run(asyncio.wait_for(scenario(), timeout=300))  # a hang guard
    assert sorted(names) == [
        "experience_context",
        "investigate",
        "propose_case",
        "retrieve_experience",
        "run_outcome",
        "run_skill",
        "search_knowledge",
    ]
    assert not result.is_error
    assert result.structured_content["status"] == "needs_context"
    assert "campaign" in result.structured_content["missing"]
