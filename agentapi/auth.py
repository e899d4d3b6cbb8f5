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

import hashlib
from typing import Any

from django.contrib.auth.models import User
from django.db import connection
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer
from oauth2_provider.models import AccessToken

from agentapi import oauth
from agentapi.models import ApiToken
from agentapi.services import LAST_USED_RESOLUTION
from agentapi.tokens import digest_matches, token_prefix
from reviewconsole import clock
from reviewconsole.access import narrow_tenants
from reviewconsole.roles import TOKEN_ROLE
from reviewconsole.statements import Param, Statement

# What the statement reads of the token, then every column of its user (a whole ``User``).
_TOKEN_COLUMNS = ("id", "token_hash", "revoked_at", "last_used_at")
_USER_FIELDS = tuple(field.attname for field in User._meta.concrete_fields)

# Run on every request of the API and every MCP tool call: compiled once per process (building
# the queryset, its join and its SQL cost several times what the database takes to answer).
# ``prefix`` is unique, so there is at most one row.
_TOKEN_WITH_USER = Statement(
    lambda prefix: (
        ApiToken.objects.filter(prefix=prefix, user__groups__name=TOKEN_ROLE)
        .order_by()
        .values_list(*_TOKEN_COLUMNS, *(f"user__{name}" for name in _USER_FIELDS))[:1]
    ),
    [Param("prefix")],
)


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
        rows = _TOKEN_WITH_USER.rows(prefix=prefix) if prefix is not None else []
        row = _converted(rows[0]) if rows else None
        # Compared even when nothing matched, so a miss costs what a hit costs.
        if not digest_matches(text, row[1] if row is not None else None):
            return None
        assert row is not None
        token_pk, _hash, revoked_at, last_used_at = row[: len(_TOKEN_COLUMNS)]
        user = User.from_db(connection.alias, _USER_FIELDS, row[len(_TOKEN_COLUMNS) :])
        if revoked_at is not None or not user.is_active:
            return None
        now = clock.now()
        if last_used_at is None or now - last_used_at >= LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token_pk).update(last_used_at=now)
        return user

    def get_user(self, user_id: Any) -> User | None:
        return None


def _converted(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """The statement's raw row as the ORM gives it: each column through the converters the ORM
    applies (SQLite answers datetimes as texts and booleans as integers)."""
    converters = _CONVERTERS.get(connection.vendor)
    if converters is None:
        converters = _CONVERTERS[connection.vendor] = _column_converters()
    converted = list(row)
    for index, field, functions in converters:
        for convert in functions:
            converted[index] = convert(converted[index], field, connection)
    return tuple(converted)


def _column_converters() -> list[tuple[int, Any, list[Any]]]:
    """Per column of the statement's row that has any: its index, field and converters."""
    token_fields = {field.attname: field for field in ApiToken._meta.concrete_fields}
    fields = [*(token_fields[name] for name in _TOKEN_COLUMNS), *User._meta.concrete_fields]
    out = []
    for index, field in enumerate(fields):
        column = field.get_col(field.model._meta.db_table)
        functions = [
            *connection.ops.get_db_converters(column),
            *field.get_db_converters(connection),
        ]
        if functions:
            out.append((index, field, functions))
    return out


_CONVERTERS: dict[str, list[tuple[int, Any, list[Any]]]] = {}


_backend = TokenBackend()


def oauth_token_user(text: str, resource: str | None) -> User | None:
    """The agent an OAuth access token (``rco_…``, agentapi/oauth.py) acts as at ``resource``,
    narrowed to the token's tenants; None when the token is unknown, revoked (deleted),
    expired, issued for another resource, without the ``agent`` scope or any tenant the user
    still holds, or when its user is inactive or outside the agent role. Only the token's
    SHA-256 checksum is stored, so that is what is looked up."""
    if resource is None or not text.startswith(f"{oauth.ACCESS_TOKEN_SCHEME}_"):
        return None
    checksum = hashlib.sha256(text.encode("utf-8")).hexdigest()
    row = (
        AccessToken.objects.select_related("user")
        .filter(token_checksum=checksum, user__groups__name=TOKEN_ROLE)
        .only("expires", "scope", "resource", "user")
        .first()
    )
    if row is None or row.user is None or not row.user.is_active:
        return None
    if row.expires <= timezone.now():
        return None
    wanted = oauth.canonical(resource)
    if not any(oauth.canonical(str(named)) == wanted for named in row.resource or []):
        return None
    scopes = set(row.scope.split())
    if oauth.SCOPE_AGENT not in scopes:
        return None
    tenants = oauth.token_tenants(scopes)
    user: User = row.user
    if tenants is not None and not narrow_tenants(user, tenants):
        return None
    return user


def token_user(
    text: str, request: HttpRequest | None = None, *, resource: str | None = None
) -> User | None:
    """The active agent the token ``text`` acts as, or None for anything else (unknown,
    malformed, revoked, forged, an inactive user, a user outside the agent role). A static
    agent token (``rca_…``) is good anywhere; an OAuth access token only at the ``resource``
    it was issued for."""
    if text.strip().startswith(f"{oauth.ACCESS_TOKEN_SCHEME}_"):
        return oauth_token_user(text.strip(), resource)
    return _backend.authenticate(request, token=text)


class AgentToken(HttpBearer):
    """``Authorization: Bearer rca_…`` (or an OAuth access token issued for the API); a token
    that acts as no one is a 401."""

    def authenticate(self, request: HttpRequest, token: str) -> User | None:
        user = token_user(token, request, resource=oauth.api_resource())
        if user is not None:
            request.user = user
        return user
