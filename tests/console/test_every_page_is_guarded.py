"""Every console page is behind the one login-and-permission check (``console_view``).

The permission matrix in tests/ui/test_permissions.py exercises a list of pages; this walks the
URL configuration itself, so a page added later without the check fails here even before anyone
adds it to that list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver

# Pages that are public on purpose, and the areas with their own authentication.
# Logging in through the provider (the start and its answer) and the admin's login page (the
# admin's own, or the console's with passwords off) are how one logs in. The OAuth metadata
# documents are public by their RFCs (8414, 9728); the authorization server under oauth/
# authenticates by OAuth (its consent page by the console's login, for agent accounts only).
PUBLIC = {
    "login",
    "logout",
    "set_language",
    "favicon",
    "sso-login",
    "sso-callback",
    "admin-login",
    "oauth-server-metadata",
    "oauth-resource-metadata",
    "oauth-resource-metadata-api",
}
OWN_AUTHENTICATION = ("admin/", "api/v1/", "oauth/")


def patterns(resolver: URLResolver, prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            if not route.startswith(OWN_AUTHENTICATION):
                yield from patterns(entry, route)
        else:
            yield route, entry


def guarded(view: Callable[..., Any]) -> bool:
    """True when ``console_view`` wraps ``view`` somewhere along its decorator chain."""
    current: Any = view
    while current is not None:
        if isinstance(getattr(current, "__dict__", {}).get("console_permissions"), tuple):
            return True
        current = getattr(current, "__wrapped__", None)
    return False


def test_the_walk_finds_the_pages_of_every_app() -> None:
    routes = [route for route, _ in patterns(get_resolver())]
    for prefix in ("knowledge/", "curation/", "evaluation/", "investigations/", "audit/"):
        assert any(route.startswith(prefix) for route in routes), prefix


def test_every_console_page_requires_login_and_its_permissions() -> None:
    unguarded = [
        route
        for route, pattern in patterns(get_resolver())
        if pattern.name not in PUBLIC and not guarded(pattern.callback)
    ]
    assert unguarded == []


def test_the_check_recognises_an_unguarded_view() -> None:
    def bare(request: Any) -> None:
        return None

    assert not guarded(bare)
