"""Which ``Origin`` the MCP endpoint serves (DNS rebinding protection, which the MCP transport
specification requires of every server): a listed browser origin, or a page on one of the
server's own host names; never another host name, even when ``ALLOWED_HOSTS`` is ``*``."""

from __future__ import annotations

from typing import Any

import pytest

from agentapi.cors import BrowserOrigins
from agentapi.mcp_http import origin_allowed, transport_security

LISTED = "https://agents.example.com"


@pytest.mark.parametrize(
    ("hosts", "origin", "allowed"),
    [
        (["console.example.com"], "https://console.example.com", True),
        (["console.example.com"], "http://console.example.com:8100", True),
        (["console.example.com"], "https://rebound.example", False),
        (["console.example.com"], "null", False),
        (["console.example.com"], LISTED, True),
        (["*"], "https://rebound.example", False),
        (["*"], "http://127.0.0.1:8100", False),
        (["*"], LISTED, True),
    ],
)
def test_an_origin_is_served_only_from_a_named_host_or_the_list(
    settings: Any, hosts: list[str], origin: str, allowed: bool
) -> None:
    settings.ALLOWED_HOSTS = hosts
    assert origin_allowed(origin, BrowserOrigins(frozenset({LISTED}))) is allowed


def test_the_sdks_own_check_lets_the_listed_origins_through(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["console.example.com"]
    settings.CONSOLE_CORS_ALLOWED_ORIGINS = [LISTED]
    checks = transport_security()
    assert checks.enable_dns_rebinding_protection
    assert LISTED in checks.allowed_origins
