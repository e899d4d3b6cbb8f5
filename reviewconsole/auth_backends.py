"""Login throttling for people signing in through a page; scripts and tests are unaffected."""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.http import HttpRequest


class LoginThrottleBackend(AxesStandaloneBackend):  # type: ignore[misc]
    """django-axes' lockout check, applied when a login comes with a request.

    ``authenticate()`` without a request (a management command, the test client's ``login``)
    has no client address to throttle; it is left to the next backend instead of being refused.
    """

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if request is None:
            return None
        super().authenticate(request, username=username, password=password, **kwargs)
        return None
