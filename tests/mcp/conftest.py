"""MCP tests reuse the API fixtures: the demo memory at a fixed time; the tests that reach the
HTTP server from outside share one server per session and worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.conftest import at_now, demo
from tests.mcp.http_deployment import BROWSER_ORIGIN, Deployment, serving

__all__ = ["at_now", "demo"]


@pytest.fixture(scope="session")
def deployment(
    migrated_sqlite: Path, shared_folder: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """``mcp_server --http`` on the demo world, with one browser origin allowed."""
    with serving(
        migrated_sqlite,
        shared_folder,
        tmp_path_factory,
        CONSOLE_CORS_ALLOWED_ORIGINS=BROWSER_ORIGIN,
    ) as world:
        yield world
