"""The audit hash chain: every event links to its predecessor; tampering is detected."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import DatabaseError, connection, transaction

from reviewconsole.audit import audit_verify, event_record
from reviewconsole.chain import GENESIS
from reviewconsole.models import Action, Event
from tests.helpers import run_json

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_events() -> list[Event]:
    events = []
    for n in range(3):
        with transaction.atomic():
            events.append(
                event_record(
                    actor=None,
                    action=Action.LEXICON_CHANGE,
                    target=f"synonym:{n}",
                    reason=f"reason {n}",
                    details={"n": n},
                )
            )
    return events


def test_events_link_to_their_predecessor(three_events: list[Event]) -> None:
    first, second, third = three_events
    assert first.prev_hash == GENESIS
    assert second.prev_hash == first.hash
    assert third.prev_hash == second.hash
    assert len({e.hash for e in three_events}) == 3


def test_an_intact_chain_verifies(three_events: list[Event]) -> None:
    status, result = run_json("verify_audit")
    assert status == 0
    assert result == {"ok": True, "checked": 3, "broken_at": None, "problem": None}


@pytest.fixture
def tamperable() -> Iterator[None]:
    """Let raw SQL change the events table (its triggers refuse it otherwise)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Deferred foreign-key checks must fire before the table can be altered.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("ALTER TABLE reviewconsole_event DISABLE TRIGGER USER")
        else:
            # Dropped inside the test's transaction, which puts them back when it rolls back.
            cursor.execute(
                "SELECT name FROM sqlite_master "
                "WHERE type = 'trigger' AND tbl_name = 'reviewconsole_event'"
            )
            for (name,) in cursor.fetchall():
                cursor.execute(f'DROP TRIGGER "{name}"')
    yield
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("ALTER TABLE reviewconsole_event ENABLE TRIGGER USER")


def raw(sql: str, params: list[str | int]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def test_a_rewritten_reason_is_detected_at_its_event(
    three_events: list[Event], tamperable: None
) -> None:
    raw("UPDATE reviewconsole_event SET reason = %s WHERE id = %s", ["edited", three_events[1].pk])

    status, result = run_json("verify_audit")

    assert status != 0
    assert result["ok"] is False
    assert result["broken_at"] == three_events[1].pk
    assert "content" in result["problem"]


def test_a_deleted_event_is_detected_at_its_successor(
    three_events: list[Event], tamperable: None
) -> None:
    raw("DELETE FROM reviewconsole_event WHERE id = %s", [three_events[1].pk])

    _, broken = audit_verify()

    assert broken is not None
    assert broken.event_id == three_events[2].pk
    assert "prev_hash" in broken.problem


def test_a_rehashed_forgery_still_breaks_the_next_link(
    three_events: list[Event], tamperable: None
) -> None:
    # A forger who recomputes the edited event's own hash still breaks its successor's link.
    from reviewconsole.chain import event_hash

    edited = three_events[0]
    new_hash = event_hash(
        id=edited.pk,
        prev_hash=edited.prev_hash,
        created_at=edited.created_at,
        actor_id=edited.actor_id,
        actor_name=edited.actor_name,
        action=edited.action,
        target=edited.target,
        reason="forged",
        details=edited.details,
    )
    raw(
        "UPDATE reviewconsole_event SET reason = %s, hash = %s WHERE id = %s",
        ["forged", new_hash, edited.pk],
    )

    _, broken = audit_verify()

    assert broken is not None and broken.event_id == three_events[1].pk


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the trigger is PostgreSQL's")
@pytest.mark.parametrize(
    "sql", ["UPDATE reviewconsole_event SET reason = 'x'", "DELETE FROM reviewconsole_event"]
)
def test_postgresql_refuses_update_and_delete(three_events: list[Event], sql: str) -> None:
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        raw(sql, [])
    assert Event.objects.count() == 3
