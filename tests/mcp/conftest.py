"""MCP tests reuse the API fixtures: the demo memory at a fixed time and fast test passwords."""

from __future__ import annotations

from tests.api.conftest import at_now, demo, fast_password_hashing

__all__ = ["at_now", "demo", "fast_password_hashing"]
