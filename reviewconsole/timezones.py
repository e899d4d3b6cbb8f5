"""One time zone for every time the console shows: the user's choice, else the deployment's.

The choice lives in the session (``SESSION_KEY``), set on the time zone page; without one, pages
show ``settings.TIME_ZONE``. ``TimeZoneMiddleware`` activates the zone for each request, so the
``date`` filter and every datetime a template renders use it, and the header names it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from zoneinfo import ZoneInfo, available_timezones

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

SESSION_KEY = "console_time_zone"


@cache
def zone_names() -> tuple[str, ...]:
    """Every zone the console offers: the IANA names this system knows, sorted."""
    return tuple(sorted(name for name in available_timezones() if "/" in name or name == "UTC"))


def chosen_zone(request: HttpRequest) -> str:
    """The zone ``request`` shows times in: the session's valid choice, else the deployment's."""
    session = getattr(request, "session", None)
    name = session.get(SESSION_KEY) if session is not None else None
    if isinstance(name, str) and name in zone_names():
        return name
    return str(settings.TIME_ZONE)


class TimeZoneMiddleware:
    """Activate the request's zone (after the session middleware)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        timezone.activate(ZoneInfo(chosen_zone(request)))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
