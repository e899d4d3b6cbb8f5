"""The README's endpoint table and MCP tool list name exactly what the code serves."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

from agentapi.api import api
from agentapi.mcp_server import TOOLS

README = (Path(settings.BASE_DIR) / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"### {title}\n")
    following = re.search(r"\n#{2,3} ", README[start + 1 :])
    return README[start : start + 1 + following.start()] if following else README[start:]


def _normalised(path: str) -> str:
    # Path parameters by position, whatever they are called ({id}, {agentapi_text:run_id}).
    return re.sub(r"\{[^}]*\}", "{}", path)


def test_the_endpoint_table_lists_every_endpoint_and_no_other() -> None:
    table = [line for line in _section("HTTP").splitlines() if line.startswith("| `")]
    listed = {
        (method, _normalised(path))
        for line in table
        for method, path in re.findall(r"`(GET|POST|PUT|PATCH|DELETE) (/api/v1/[^`\s]*)`", line)
    }
    schema = api.get_openapi_schema()
    served = {
        (method.upper(), _normalised("/api/v1" + path.removeprefix("/api/v1")))
        for path, operations in schema["paths"].items()
        for method in operations
    }
    assert listed == served


def test_the_mcp_section_names_every_tool_and_no_other() -> None:
    sentence = _section("MCP").split("over stdio", 1)[0]
    assert set(re.findall(r"`([a-z_]+)`", sentence)) - {"mcp_server"} == {
        spec.name for spec in TOOLS
    }
