"""Navigation by role: each console user sees the pages their permissions open."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.urls import reverse
from django.utils.functional import SimpleLazyObject
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from reviewconsole import permissions as P

# Lifecycle and result words that templates translate with {% translate value %}.
TRANSLATED_VALUES = (
    gettext_noop("candidate"),
    gettext_noop("approved"),
    gettext_noop("rejected"),
    gettext_noop("revoked"),
    gettext_noop("superseded"),
    gettext_noop("outdated"),
    gettext_noop("draft"),
    gettext_noop("submitted"),
    gettext_noop("current"),
    gettext_noop("case"),
    gettext_noop("skill"),
    gettext_noop("rule"),
    gettext_noop("document"),
    gettext_noop("retrieved"),
    gettext_noop("needs_context"),
    gettext_noop("conflicting_sources"),
    gettext_noop("no_match"),
    gettext_noop("match"),
    gettext_noop("mismatch"),
    gettext_noop("unknown"),
    gettext_noop("needs_review"),
    gettext_noop("fallback"),
    gettext_noop("passed"),
    gettext_noop("failed"),
    gettext_noop("not_run"),
    gettext_noop("expired"),
    gettext_noop("console"),
    gettext_noop("import"),
    gettext_noop("api"),
    gettext_noop("reviewer"),
    gettext_noop("operator"),
    gettext_noop("admin"),
    gettext_noop("agent"),
)


@dataclass(frozen=True)
class NavItem:
    url: str
    label: str
    current: bool


def _items(request: HttpRequest) -> list[NavItem]:
    user = request.user
    entries: list[tuple[str, Any, tuple[str, ...]]] = [
        ("home", _("Dashboard"), ()),
        ("experience:queue", _("Review queue"), (P.VIEW_CASE,)),
        ("experience:run-list", _("Runs"), (P.VIEW_RUN, P.VIEW_CASE)),
        ("experience:lesson-list", _("Lessons"), (P.VIEW_LESSON,)),
        ("knowledge:document-list", _("Knowledge"), (P.VIEW_DOCUMENT,)),
        (
            "knowledge:search-preview",
            _("Search preview"),
            (P.VIEW_DOCUMENT, P.SEARCH_KNOWLEDGE),
        ),
        ("curation:home", _("Curation"), (P.VIEW_CASE,)),
        ("investigations:investigation-new", _("Investigations"), (P.VIEW_INVESTIGATION,)),
        ("evaluation:report-list", _("Replays"), ()),
        ("user-list", _("Users"), (P.CHANGE_USER,)),
        ("event-list", _("Audit log"), (P.VIEW_EVENT,)),
        ("admin:index", _("Admin"), ()),
    ]
    allowed = [
        (reverse(name), str(label)) for name, label, perms in entries if user.has_perms(perms)
    ]
    # The deepest section containing the current path is the current one.
    containing = [
        url
        for url, _label in allowed
        if request.path == url or (url != "/" and request.path.startswith(url))
    ]
    current = max(containing, key=len, default=None)
    return [NavItem(url=url, label=label, current=url == current) for url, label in allowed]


def _role(request: HttpRequest) -> str:
    from reviewconsole.services import user_role

    return user_role(request.user) or ""  # type: ignore[arg-type]


def navigation(request: HttpRequest) -> dict[str, Any]:
    """Evaluated only when a template shows the navigation, so fragments cost no queries."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not user.is_staff:
        return {"nav": [], "console_role": ""}
    return {
        "nav": SimpleLazyObject(lambda: _items(request)),
        "console_role": SimpleLazyObject(lambda: _role(request)),
    }
