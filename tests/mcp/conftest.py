"""MCP tests reuse the API fixtures: the demo memory at a fixed time."""

from __future__ import annotations

from tests.api.conftest import at_now, demo

__all__ = ["at_now", "demo"]
