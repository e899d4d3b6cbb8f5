"""Bearer-token authentication of agent service accounts for the HTTP API."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest
from ninja.security import HttpBearer

from agentapi.services import token_user


class AgentToken(HttpBearer):
    """``Authorization: Bearer rca_…``; a revoked token or an inactive user is a 401."""

    def authenticate(self, request: HttpRequest, token: str) -> User | None:
        user = token_user(token)
        if user is not None:
            request.user = user
        return user
