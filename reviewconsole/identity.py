"""Who is acting: always the authenticated user of the request, never a field of its body."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest


def acting_user(request: HttpRequest) -> User:
    user = request.user
    if not isinstance(user, User) or not user.is_authenticated or not user.is_active:
        raise PermissionDenied("login required")
    return user
