"""Availability's pure rules: every code, the sentence the console shows for it, the boundaries
of the gate, and the kinds built on one another."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from django.utils import translation
from hypothesis import given
from hypothesis import strategies as st

from experience.core import availability
from experience.core.availability import (
    Availability,
    CitedCase,
    GateFields,
    case_availability,
    case_usable,
    item_available,
    lesson_availability,
    skill_availability,
)
from experience.index.postings import ENTRY_DTYPE
from experience.pages.availability import AvailabilityView, availability_view
from experience.retrieval import pipeline
from textsearch import postings as kp

SCOPE = {"tenant": "t", "brand": "b", "store": "s", "campaign": "c", "deployment": "d"}
NOW = datetime(2026, 10, 1, 4, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
CASE_ID = "case:" + "c" * 64
CASE_TITLE = "Coupon refused at store 2"


def gate(**changes: Any) -> GateFields:
    values: dict[str, Any] = {
        "status": "approved",
        "scope": SCOPE,
        "valid_from": NOW - timedelta(days=30),
        "valid_to": NOW + timedelta(days=30),
        "approved_at": NOW - timedelta(days=1),
    }
    values.update(changes)
    return GateFields(**values)


def cited(**changes: Any) -> CitedCase:
    values: dict[str, Any] = {
        "case_id": CASE_ID,
        "status": "approved",
        "scope": SCOPE,
        "incident": "INC-1",
        "valid_from": NOW - timedelta(days=30),
        "valid_to": NOW + timedelta(days=30),
    }
    values.update(changes)
    return CitedCase(**values)


def shown(found: Availability) -> AvailabilityView:
    """What an approved item's page says of ``found``, in English."""
    with translation.override("en"):
        return availability_view("approved", found, {CASE_ID: CASE_TITLE})


# --- one test per code: the code, the API's sentence, the console's sentence ------------------


def test_not_approved_now() -> None:
    found = case_availability(gate(status="revoked"), NOW)
    assert (found.available, found.code, found.status) == (False, "not_approved_now", "revoked")
    assert found.reason == "the case is revoked"
    assert shown(found) == AvailabilityView(False, "it is revoked", "not_approved_now")
    # An item that is not approved shows its status alone, never an availability.
    assert availability_view("revoked", found) == AvailabilityView(None)


@pytest.mark.parametrize("approved_at", [None, NOW + SECOND])
def test_not_yet_approved(approved_at: datetime | None) -> None:
    found = skill_availability(gate(approved_at=approved_at), [cited()], NOW)
    assert (found.available, found.code) == (False, "not_yet_approved")
    assert found.reason == "the skill was not yet approved at this time"
    assert shown(found) == AvailabilityView(
        False, "it was not yet approved at this time", "not_yet_approved"
    )


@pytest.mark.parametrize(
    "changes", [{"valid_from": NOW + SECOND}, {"valid_to": NOW}, {"valid_to": NOW - SECOND}]
)
def test_outside_validity(changes: dict[str, Any]) -> None:
    found = lesson_availability(gate(**changes), [cited()], NOW)
    assert (found.available, found.code) == (False, "outside_validity")
    assert found.reason == "the lesson is outside its validity window"
    assert shown(found) == AvailabilityView(
        False, "it is outside its validity window", "outside_validity"
    )


def test_cites_no_cases() -> None:
    found = skill_availability(gate(), [], NOW)
    assert (found.available, found.code) == (False, "cites_no_cases")
    assert found.reason == "the skill cites no cases"
    assert shown(found) == AvailabilityView(False, "it cites no cases", "cites_no_cases")


def test_cited_case_not_approved() -> None:
    found = skill_availability(gate(), [cited(case_id="case:ok"), cited(status="superseded")], NOW)
    assert (found.code, found.subject, found.status) == (
        "cited_case_not_approved",
        CASE_ID,
        "superseded",
    )
    assert found.reason == f"cited case {CASE_ID} is superseded"
    # The page names the cited case by its title.
    assert shown(found) == AvailabilityView(
        False, f"cited case “{CASE_TITLE}” is superseded", "cited_case_not_approved"
    )


@pytest.mark.parametrize("changes", [{"valid_to": NOW}, {"valid_from": NOW + SECOND}])
def test_cited_case_outside_validity(changes: dict[str, Any]) -> None:
    found = skill_availability(gate(), [cited(**changes)], NOW)
    assert (found.code, found.subject, found.status) == (
        "cited_case_outside_validity",
        CASE_ID,
        "",
    )
    assert found.reason == f"cited case {CASE_ID} is outside its validity window"
    assert shown(found) == AvailabilityView(
        False,
        f"cited case “{CASE_TITLE}” is outside its validity window",
        "cited_case_outside_validity",
    )


def test_no_usable_support() -> None:
    supports = [cited(status="revoked"), cited(case_id="case:old", valid_to=NOW)]
    found = lesson_availability(gate(), supports, NOW)
    assert (found.available, found.code) == (False, "no_usable_support")
    assert found.reason == "every supporting case is revoked, superseded or expired"
    assert shown(found) == AvailabilityView(
        False, "every supporting case is revoked, superseded or expired", "no_usable_support"
    )


def test_the_tests_above_cover_every_code() -> None:
    assert (
        set(availability.CODES)
        == set(availability.REASONS)
        == {
            "not_approved_now",
            "not_yet_approved",
            "outside_validity",
            "cites_no_cases",
            "cited_case_not_approved",
            "cited_case_outside_validity",
            "no_usable_support",
        }
    )


# --- the gate's boundaries and order ----------------------------------------------------------


def test_the_window_opens_at_valid_from_and_approval_and_closes_at_valid_to() -> None:
    assert item_available(gate(valid_from=NOW, approved_at=NOW), NOW)
    assert not item_available(gate(valid_to=NOW), NOW)
    assert case_usable(cited(valid_from=NOW), NOW)
    assert not case_usable(cited(valid_to=NOW), NOW)


def test_a_cited_case_is_usable_on_its_status_and_validity_alone() -> None:
    # CitedCase carries no approval time: a case supports what cites it once approved.
    assert {term.field for term in availability.CITED_CASE_GATE} == {
        "status",
        "valid_from",
        "valid_to",
    }


def test_the_first_unmet_term_names_the_code() -> None:
    # Revoked, approved later and expired at once: the status is what is said.
    found = case_availability(gate(status="revoked", approved_at=None, valid_to=NOW), NOW)
    assert found.code == "not_approved_now"
    found = case_availability(gate(approved_at=None, valid_to=NOW), NOW)
    assert found.code == "not_yet_approved"
    # A skill unavailable itself is not asked about its cases.
    assert skill_availability(gate(valid_to=NOW), [], NOW).code == "outside_validity"


def test_the_first_unusable_cited_case_is_named() -> None:
    cases = [
        cited(case_id="case:1"),
        cited(case_id="case:2", valid_to=NOW),
        cited(status="revoked"),
    ]
    found = skill_availability(gate(), cases, NOW)
    assert (found.code, found.subject) == ("cited_case_outside_validity", "case:2")


# --- kinds built on one another -------------------------------------------------------------

HOURS = st.integers(min_value=-2, max_value=2).map(lambda h: NOW + timedelta(hours=h))
STATUSES = st.sampled_from(["candidate", "approved", "rejected", "revoked", "superseded"])


@st.composite
def gates(draw: st.DrawFn) -> GateFields:
    start = draw(HOURS)
    return gate(
        status=draw(STATUSES),
        valid_from=start,
        valid_to=start + timedelta(hours=draw(st.integers(min_value=1, max_value=3))),
        approved_at=draw(st.none() | HOURS),
    )


@st.composite
def cited_cases(draw: st.DrawFn) -> CitedCase:
    start = draw(HOURS)
    return cited(
        case_id=f"case:{draw(st.integers(0, 9))}",
        status=draw(STATUSES),
        valid_from=start,
        valid_to=start + timedelta(hours=draw(st.integers(min_value=1, max_value=3))),
    )


@given(item=gates(), cases=st.lists(cited_cases(), max_size=4), now=HOURS)
def test_each_kind_adds_to_the_item_gate(
    item: GateFields, cases: list[CitedCase], now: datetime
) -> None:
    own = item_available(item, now)
    assert bool(case_availability(item, now)) == own
    assert bool(skill_availability(item, cases, now)) == (
        own and bool(cases) and all(case_usable(c, now) for c in cases)
    )
    assert bool(lesson_availability(item, cases, now)) == (
        own and any(case_usable(c, now) for c in cases)
    )


@given(item=gates(), now=HOURS)
def test_the_index_time_gate_over_microseconds_agrees(item: GateFields, now: datetime) -> None:
    """The retrieval index keeps times as microseconds (a missing approval as NEVER) and only
    approved items; the same terms give the same answer over them."""
    in_micros = availability.times_admit(
        valid_from=kp.micros(item.valid_from),
        valid_to=kp.micros(item.valid_to),
        approved_at=kp.micros(item.approved_at),
        now=kp.micros(now),
    )
    as_approved = gate(
        valid_from=item.valid_from, valid_to=item.valid_to, approved_at=item.approved_at
    )
    assert in_micros == item_available(as_approved, now)


@given(items=st.lists(gates(), min_size=1, max_size=12), now=HOURS)
def test_the_packed_gate_of_the_pipeline_agrees_item_by_item(
    items: list[GateFields], now: datetime
) -> None:
    """Retrieval gates a scope's packed entries as whole columns; entry by entry it admits
    exactly the approved items the pure predicate admits."""
    entries = np.zeros(len(items), dtype=ENTRY_DTYPE)
    for row, item in zip(entries, items, strict=True):
        row["valid_from"] = kp.micros(item.valid_from)
        row["valid_to"] = kp.micros(item.valid_to)
        row["approved_at"] = kp.micros(item.approved_at)
    expected = [
        item_available(
            gate(valid_from=i.valid_from, valid_to=i.valid_to, approved_at=i.approved_at), now
        )
        for i in items
    ]
    assert pipeline.available(entries, now).tolist() == expected
