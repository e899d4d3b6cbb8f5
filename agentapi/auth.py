"""Who an agent token acts as: one validator for the HTTP API and the MCP server.

``TokenBackend`` is a Django authentication backend: ``authenticate(request, token=…)`` answers
the active agent a valid, unrevoked token acts as. Both transports call it through
``token_user`` (the API's bearer scheme ``AgentToken`` on every request, the MCP server on every
tool call). What the user may then do is Django's own answer (``User.has_perm``, from
``ModelBackend``) and its tenants ``reviewconsole.tenancy``'s, both read for the user object of
this request only: nothing is kept between requests, so a revoked token, a removed membership,
a withdrawn permission or a changed role takes effect at the next one.

The backend is not in ``AUTHENTICATION_BACKENDS``: ``django.contrib.auth.authenticate`` would
also offer a token to the password backends and report a bad one as a failed login, which the
login throttle counts against people signing in. A token is not a session either, so
``get_user`` (which restores a session's user) answers no one.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest
from ninja.security import HttpBearer

from agentapi.models import ApiToken
from agentapi.services import LAST_USED_RESOLUTION
from agentapi.tokens import digest_matches, token_prefix
from reviewconsole import clock
from reviewconsole.roles import TOKEN_ROLE


class TokenBackend:
    """Authenticates ``token=`` credentials: one statement reads the token's row with its user,
    only while that user is in the agent role (``TOKEN_ROLE``), so a role change cannot turn an
    agent's token into a reviewer's or an admin's. ``last_used_at`` is written at most once per
    ``LAST_USED_RESOLUTION``."""

    def authenticate(self, request: HttpRequest | None, token: str | None = None) -> User | None:
        if token is None:
            return None
        text = token.strip()
        prefix = token_prefix(text)
        row = (
            ApiToken.objects.select_related("user")
            .filter(prefix=prefix, user__groups__name=TOKEN_ROLE)
            .first()
            if prefix is not None
            else None
        )
        # Compared even when nothing matched, so a miss costs what a hit costs.
        if not digest_matches(text, row.token_hash if row is not None else None):
            return None
        assert row is not None
        if row.revoked_at is not None or not row.user.is_active:
            return None
        now = clock.now()
        if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
        return row.user

    def get_user(self, user_id: Any) -> User | None:
        return None


_backend = TokenBackend()


def token_user(text: str, request: HttpRequest | None = None) -> User | None:
    """The active agent the token ``text`` acts as, or None for anything else (unknown,
    malformed, revoked, forged, an inactive user, a user outside the agent role)."""
    return _backend.authenticate(request, token=text)


class AgentToken(HttpBearer):
    """``Authorization: Bearer rca_…``; a token that acts as no one is a 401."""

    def authenticate(self, request: HttpRequest, token: str) -> User | None:
        user = token_user(token, request)
        if user is not None:
            request.user = user
        return user
