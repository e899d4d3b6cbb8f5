"""One availability state, phrased for people: every console page (item pages, review panels,
citing lists, the queue and the lesson list) shows an item's availability through these."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from experience.cases.models import Case
from experience.core.availability import (
    CITED_CASE_NOT_APPROVED,
    CITED_CASE_OUTSIDE_VALIDITY,
    CITES_NO_CASES,
    NO_USABLE_SUPPORT,
    NOT_APPROVED_NOW,
    NOT_YET_APPROVED,
    OUTSIDE_VALIDITY,
    Availability,
)
from experience.core.models import Status
from experience.pages.selectors import availabilities
from reviewconsole.templatetags.ids import shortened

# --- one availability state, phrased for people ----------------------------------------------

AVAILABILITY_TEXT = {
    NOT_APPROVED_NOW: _("it is %(status)s"),
    NOT_YET_APPROVED: _("it was not yet approved at this time"),
    OUTSIDE_VALIDITY: _("it is outside its validity window"),
    CITES_NO_CASES: _("it cites no cases"),
    CITED_CASE_NOT_APPROVED: _("cited case “%(title)s” is %(status)s"),
    CITED_CASE_OUTSIDE_VALIDITY: _("cited case “%(title)s” is outside its validity window"),
    NO_USABLE_SUPPORT: _("every supporting case is revoked, superseded or expired"),
}


@dataclass(frozen=True)
class AvailabilityView:
    """What every page shows of an item's availability (``experience.core.availability`` decides it)."""

    available: bool | None  # None: not an approved item, so availability does not apply
    text: str = ""
    code: str = ""


def availability_view(
    status: str,
    availability: Availability | None,
    titles: Mapping[str, str] | None = None,
) -> AvailabilityView:
    """How the console shows ``availability``: only approved items are available or not (a
    candidate, rejected or revoked item shows its status alone)."""
    if status != Status.APPROVED or availability is None:
        return AvailabilityView(None)
    if availability.available:
        return AvailabilityView(True)
    subject = availability.subject
    template = AVAILABILITY_TEXT.get(availability.code)
    if template is None:
        return AvailabilityView(False, availability.reason, availability.code)
    params = {
        "status": gettext(availability.status) if availability.status else "",
        # A sentence names a case by its title, never by its 64-hex id (which cannot wrap).
        "title": (titles or {}).get(subject) or shortened(subject),
    }
    return AvailabilityView(False, str(template) % params, availability.code)


CITED_CASE_CODES = frozenset({CITED_CASE_NOT_APPROVED, CITED_CASE_OUTSIDE_VALIDITY})


def cited_titles(
    found: Iterable[Availability], known: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The titles of the cited cases that ``found`` reasons name and ``known`` does not: one
    query, none when every reason is named already (a cited case shares its citer's tenant)."""
    wanted = {
        state.subject
        for state in found
        if not state.available and state.code in CITED_CASE_CODES and state.subject
    } - set(known or {})
    if not wanted:
        return {}
    return dict(Case.objects.filter(pk__in=sorted(wanted)).values_list("pk", "title"))


def availability_views(
    rows: Iterable[Mapping[str, Any]], now: Any, titles: Mapping[str, str] | None = None
) -> dict[str, AvailabilityView]:
    """The availability of each row (``id``, ``status``) of a list, read in constant queries;
    ``titles`` names the cited cases a reason may mention."""
    rows = list(rows)
    approved = [row["id"] for row in rows if row["status"] == Status.APPROVED]
    found = availabilities(approved, now) if approved else {}
    titles = {**cited_titles(found.values(), titles or {}), **(titles or {})}
    return {
        row["id"]: availability_view(row["status"], found.get(row["id"]), titles) for row in rows
    }
