"""Availability: whether a reviewed item may be reused now, and if not, why.

One definition, :data:`ITEM_GATE`: an item (case, skill or lesson) is available when it is
approved, was approved at or before ``now``, and ``valid_from <= now < valid_to``. A cited case
supports a skill or lesson on its status and validity alone (:data:`CITED_CASE_GATE`); the
retrieval index holds only approved items, so it checks the times alone (:data:`TIME_GATE`).

Each gate is a tuple of :class:`Term` (a field compared with ``now`` or a value). The Python
predicates here evaluate the terms; ``experience.core.gate`` turns the same terms into the ORM
expression, so a query filters exactly what the predicate admits (``tests/experience/
test_availability.py`` holds the two together). A term also names the availability code an
item failing it gets; the console phrases each code (``experience.pages.availability``,
``AVAILABILITY_TEXT``).

No Django imports: the clock is passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from textsearch.domain import Comparison as Comparison
from textsearch.domain import GateFields as GateFields
from textsearch.domain import Term as Term
from textsearch.domain import columns_admit, values_admit
from textsearch.domain import first_failed as first_failed
from textsearch.domain import gate_holds as gate_holds

APPROVED = "approved"

# Why an item is unavailable (Availability.code); the console phrases each one.
NOT_APPROVED_NOW = "not_approved_now"
NOT_YET_APPROVED = "not_yet_approved"
OUTSIDE_VALIDITY = "outside_validity"
CITES_NO_CASES = "cites_no_cases"
CITED_CASE_NOT_APPROVED = "cited_case_not_approved"
CITED_CASE_OUTSIDE_VALIDITY = "cited_case_outside_validity"
NO_USABLE_SUPPORT = "no_usable_support"

CODES = (
    NOT_APPROVED_NOW,
    NOT_YET_APPROVED,
    OUTSIDE_VALIDITY,
    CITES_NO_CASES,
    CITED_CASE_NOT_APPROVED,
    CITED_CASE_OUTSIDE_VALIDITY,
    NO_USABLE_SUPPORT,
)

# The English sentence the API returns with each code (``Availability.reason``).
REASONS = {
    NOT_APPROVED_NOW: "the {kind} is {status}",
    NOT_YET_APPROVED: "the {kind} was not yet approved at this time",
    OUTSIDE_VALIDITY: "the {kind} is outside its validity window",
    CITES_NO_CASES: "the {kind} cites no cases",
    CITED_CASE_NOT_APPROVED: "cited case {subject} is {status}",
    CITED_CASE_OUTSIDE_VALIDITY: "cited case {subject} is outside its validity window",
    NO_USABLE_SUPPORT: "every supporting case is revoked, superseded or expired",
}


# --- the gate, declared once -----------------------------------------------------------------


STATUS = Term("status", Comparison.IS, NOT_APPROVED_NOW, CITED_CASE_NOT_APPROVED, APPROVED)
APPROVAL = Term("approved_at", Comparison.AT_OR_BEFORE_NOW, NOT_YET_APPROVED)
STARTED = Term(
    "valid_from", Comparison.AT_OR_BEFORE_NOW, OUTSIDE_VALIDITY, CITED_CASE_OUTSIDE_VALIDITY
)
NOT_ENDED = Term("valid_to", Comparison.AFTER_NOW, OUTSIDE_VALIDITY, CITED_CASE_OUTSIDE_VALIDITY)

# An item's own availability, in the order its code is chosen (the first term it fails).
ITEM_GATE = (STATUS, APPROVAL, STARTED, NOT_ENDED)
# What a cited case needs to support a skill or a lesson: approved and within its validity.
CITED_CASE_GATE = (STATUS, STARTED, NOT_ENDED)
# What the retrieval index checks of an entry: it holds approved items only.
TIME_GATE = (APPROVAL, STARTED, NOT_ENDED)


def times_admit(*, valid_from: Any, valid_to: Any, approved_at: Any, now: Any) -> bool:
    """:data:`TIME_GATE` over plain comparable values (datetimes, or the index's microseconds)."""
    values = {"valid_from": valid_from, "valid_to": valid_to, "approved_at": approved_at}
    return values_admit(TIME_GATE, values, now)


def case_usable_values(*, status: Any, valid_from: Any, valid_to: Any, now: Any) -> bool:
    """:data:`CITED_CASE_GATE` over plain values: :func:`case_usable` of a case read as
    columns, without building a :class:`CitedCase` for it."""
    values = {"status": status, "valid_from": valid_from, "valid_to": valid_to}
    return values_admit(CITED_CASE_GATE, values, now)


def times_admit_columns(columns: Any, now: Any) -> Any:
    """:data:`TIME_GATE` over whole columns (``columns[field]``: numpy arrays of the index's
    microseconds, where a missing time is stored as a value after every ``now``): the
    elementwise *and* of the same terms :func:`times_admit` checks one item at a time."""
    return columns_admit(TIME_GATE, columns, now)


# --- what the gate reads -----------------------------------------------------------------------


@dataclass(frozen=True)
class CitedCase:
    """A cited case as a skill sees it at the time of the check."""

    case_id: str
    status: str
    scope: Mapping[str, str]
    incident: str
    valid_from: datetime
    valid_to: datetime


@dataclass(frozen=True)
class Availability:
    """Whether an approved item may be reused now. ``reason`` is the English sentence the API
    returns; ``code``, ``subject`` (the cited case it is about, if any) and ``status`` (the
    status that makes it unavailable, if any) let a page say it in the reader's language."""

    available: bool
    reason: str = ""
    code: str = ""
    subject: str = ""
    status: str = ""

    def __bool__(self) -> bool:
        return self.available


AVAILABLE = Availability(True)


def unavailable(code: str, *, kind: str = "", subject: str = "", status: str = "") -> Availability:
    reason = REASONS[code].format(kind=kind, subject=subject, status=status)
    return Availability(False, reason, code, subject, status)


# --- the predicates ------------------------------------------------------------------------------


def item_available(item: GateFields, now: datetime) -> bool:
    return gate_holds(ITEM_GATE, item, now)


def case_usable(case: CitedCase, now: datetime) -> bool:
    """Whether a cited case supports the skill or lesson citing it at ``now``."""
    return gate_holds(CITED_CASE_GATE, case, now)


def own_availability(kind: str, item: GateFields, now: datetime) -> Availability:
    """The checks every kind shares: approved, approved by ``now``, within its validity."""
    failed = first_failed(ITEM_GATE, item, now)
    if failed is None:
        return AVAILABLE
    status = item.status if failed is STATUS else ""
    return unavailable(failed.code, kind=kind, status=status)


def cited_case_availability(case: CitedCase, now: datetime) -> Availability:
    """Whether a cited case leaves the item citing it available, and if not, why."""
    failed = first_failed(CITED_CASE_GATE, case, now)
    if failed is None:
        return AVAILABLE
    status = case.status if failed is STATUS else ""
    return unavailable(failed.cited_code, subject=case.case_id, status=status)


def case_availability(case: GateFields, now: datetime) -> Availability:
    """Whether a case may be reused now, and if not, why."""
    return own_availability("case", case, now)


def skill_availability(
    skill: GateFields, cases: Sequence[CitedCase], now: datetime
) -> Availability:
    """Whether a skill may be used now: itself available, and every case it cites usable."""
    own = own_availability("skill", skill, now)
    if not own:
        return own
    if not cases:
        return unavailable(CITES_NO_CASES, kind="skill")
    return next(
        (found for found in (cited_case_availability(c, now) for c in cases) if not found),
        AVAILABLE,
    )


def lesson_availability(
    lesson: GateFields, supports: Iterable[CitedCase], now: datetime
) -> Availability:
    """Usable now: approved, valid, and at least one supporting case still approved and valid."""
    own = own_availability("lesson", lesson, now)
    if not own:
        return own
    if not any(case_usable(case, now) for case in supports):
        return unavailable(NO_USABLE_SUPPORT)
    return AVAILABLE
