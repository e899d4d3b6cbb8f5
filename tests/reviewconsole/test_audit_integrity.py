"""Audit integrity: every column is sealed, the chain's head is signed, erasure is refused.

Editing any column of an event, deleting an event (in the middle or at the end), emptying the
table and forging a head must all make ``verify_audit`` fail; the database refuses UPDATE, DELETE
and TRUNCATE of the audit tables outright.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from importlib import import_module
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, transaction

from reviewconsole.audit import event_record
from reviewconsole.models import Action, Event
from reviewconsole.roles import Role
from tests.helpers import run_json

pytestmark = pytest.mark.django_db

AUDIT_TABLES = ("reviewconsole_event", "reviewconsole_chainhead")


def record(actor: User | None, n: int) -> Event:
    with transaction.atomic():
        return event_record(
            actor=actor,
            action=Action.LEXICON_CHANGE,
            target=f"synonym:{n}",
            reason=f"reason {n}",
            details={"n": n},
        )


@pytest.fixture
def rita(make_user: Callable[[str, str], User]) -> User:
    return make_user("rita", Role.REVIEWER)


@pytest.fixture
def mallory(make_user: Callable[[str, str], User]) -> User:
    return make_user("mallory", Role.REVIEWER)


@pytest.fixture
def chain(rita: User, mallory: User) -> list[Event]:
    """Three events by rita at the end of the chain (after the users' own role events)."""
    for n in range(3):
        record(rita, n)
    return list(Event.objects.order_by("id"))[-3:]


def existing_audit_tables() -> list[str]:
    names = set(connection.introspection.table_names())
    return [t for t in AUDIT_TABLES if t in names]


@pytest.fixture
def tamperable() -> Iterator[None]:
    """Act as someone with raw database access who first removes the tables' guards.

    The test's transaction rolls the guards back in afterwards.
    """
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Deferred foreign-key checks must fire before a table can be altered.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            for table in existing_audit_tables():
                cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN (%s, %s)",
                list(AUDIT_TABLES),
            )
            for (name,) in cursor.fetchall():
                cursor.execute(f'DROP TRIGGER "{name}"')
    yield
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            for table in existing_audit_tables():
                cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")


def raw(sql: str, params: list[Any] | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])


def json_placeholder() -> str:
    return "CAST(%s AS jsonb)" if connection.vendor == "postgresql" else "%s"


def tampered_values(event: Event, mallory: User) -> dict[str, tuple[str, Any]]:
    """For every column of the events table: a SET clause changing it, and its parameter."""
    return {
        "id": ("id = %s", event.pk + 1000),
        "created_at": ("created_at = %s", event.created_at - timedelta(seconds=1)),
        "actor_id": ("actor_id = %s", mallory.pk),
        "actor_name": ("actor_name = %s", "mallory"),
        "action": ("action = %s", str(Action.CASE_APPROVE)),
        "target": ("target = %s", "synonym:other"),
        "reason": ("reason = %s", "edited"),
        "details": (f"details = {json_placeholder()}", json.dumps({"n": 99})),
        "hash_version": ("hash_version = %s", 1),
        "prev_hash": ("prev_hash = %s", "f" * 64),
        "hash": ("hash = %s", "e" * 64),
    }


def test_the_tamper_list_names_every_column(chain: list[Event], mallory: User) -> None:
    columns = {field.column for field in Event._meta.concrete_fields}
    assert set(tampered_values(chain[1], mallory)) == columns


@pytest.mark.parametrize(
    "column",
    [
        "id",
        "created_at",
        "actor_id",
        "actor_name",
        "action",
        "target",
        "reason",
        "details",
        "hash_version",
        "prev_hash",
        "hash",
    ],
)
def test_an_edit_of_any_column_is_detected(
    chain: list[Event], mallory: User, tamperable: None, column: str
) -> None:
    middle = chain[1]
    clause, value = tampered_values(middle, mallory)[column]
    raw(f"UPDATE reviewconsole_event SET {clause} WHERE id = %s", [value, middle.pk])  # noqa: S608

    status, result = run_json("verify_audit")

    assert status != 0
    assert result["ok"] is False
    if column != "id":  # a moved event breaks the chain where the order changed
        assert result["broken_at"] == middle.pk


def test_a_rehashed_edit_of_the_last_event_is_detected(
    chain: list[Event], tamperable: None
) -> None:
    # The forger recomputes the last event's hash so every link holds; only the signed head,
    # whose key is not in the database, still records the original hash.
    from reviewconsole.audit import chained_events
    from reviewconsole.chain import sealed_hash

    last = chain[-1]
    raw("UPDATE reviewconsole_event SET reason = %s WHERE id = %s", ["forged", last.pk])
    forged = next(e for e in chained_events() if e.id == last.pk)
    raw("UPDATE reviewconsole_event SET hash = %s WHERE id = %s", [sealed_hash(forged), last.pk])

    status, result = run_json("verify_audit")

    assert status != 0 and result["ok"] is False
    assert result["broken_at"] == last.pk


def test_a_deleted_middle_event_is_detected(chain: list[Event], tamperable: None) -> None:
    raw("DELETE FROM reviewconsole_event WHERE id = %s", [chain[1].pk])

    status, result = run_json("verify_audit")

    assert status != 0 and result["ok"] is False
    assert result["broken_at"] == chain[2].pk


def test_a_deleted_last_event_is_detected(chain: list[Event], tamperable: None) -> None:
    total = Event.objects.count()
    raw("DELETE FROM reviewconsole_event WHERE id = %s", [chain[-1].pk])

    status, result = run_json("verify_audit")

    assert status != 0 and result["ok"] is False
    assert result["checked"] == total - 1
    assert result["broken_at"] == chain[-1].pk
    assert "missing" in result["problem"]


def test_an_emptied_events_table_is_detected(chain: list[Event], tamperable: None) -> None:
    if connection.vendor == "postgresql":
        raw("TRUNCATE reviewconsole_event")
    else:
        raw("DELETE FROM reviewconsole_event")

    status, result = run_json("verify_audit")

    assert status != 0
    assert result["ok"] is False and result["checked"] == 0
    assert result["broken_at"] == chain[-1].pk


def test_events_without_a_signed_head_are_detected(chain: list[Event], tamperable: None) -> None:
    raw("DELETE FROM reviewconsole_chainhead")

    status, result = run_json("verify_audit")

    assert status != 0 and result["ok"] is False
    assert "head" in result["problem"]


def test_a_head_signed_without_the_key_is_detected(chain: list[Event], tamperable: None) -> None:
    # Cut the last event and write a head that agrees with the shorter chain, signed with a guess.
    last, new_last = chain[-1], chain[-2]
    raw("DELETE FROM reviewconsole_event WHERE id = %s", [last.pk])
    raw(
        "INSERT INTO reviewconsole_chainhead (count, event_id, hash, signature) "
        "VALUES (%s, %s, %s, %s)",
        [Event.objects.count(), new_last.pk, new_last.hash, "0" * 64],
    )

    status, result = run_json("verify_audit")

    assert status != 0 and result["ok"] is False
    assert "signature" in result["problem"]


def test_a_fresh_database_verifies_with_no_events() -> None:
    status, result = run_json("verify_audit")

    assert status == 0
    assert result == {"ok": True, "checked": 0, "broken_at": None, "problem": None}


def test_an_intact_chain_verifies(chain: list[Event]) -> None:
    status, result = run_json("verify_audit")

    assert status == 0
    assert result == {
        "ok": True,
        "checked": Event.objects.count(),
        "broken_at": None,
        "problem": None,
    }


def test_events_of_the_first_format_still_verify_and_the_chain_continues() -> None:
    # A database from before the current format: its events keep their version-1 hashes and the
    # migration signs the head as it stands; new events continue the chain in version 2.
    from django.apps import apps

    from reviewconsole import clock
    from reviewconsole.chain import GENESIS, event_hash_v1

    prev = GENESIS
    for n in range(2):
        fields: dict[str, Any] = {
            "created_at": clock.now(),
            "actor_name": "system",
            "action": str(Action.LEXICON_CHANGE),
            "target": f"legacy:{n}",
            "reason": "",
            "details": {"n": n},
        }
        legacy = Event.objects.create(
            **fields, hash_version=1, prev_hash=prev, hash=event_hash_v1(prev_hash=prev, **fields)
        )
        prev = legacy.hash
    migration = import_module("reviewconsole.migrations.0006_audit_integrity")
    migration.anchor_existing(apps, SimpleNamespace(connection=connection))
    newest = record(None, 2)

    status, result = run_json("verify_audit")

    assert newest.hash_version == 2 and newest.prev_hash == prev
    assert status == 0, result
    assert result["checked"] == 3


# The anchor file: a copy of the signed head outside the database.


@pytest.fixture
def anchored_chain(
    settings: Any,
    tmp_path: Path,
    rita: User,
    django_capture_on_commit_callbacks: Any,
) -> list[Event]:
    settings.AUDIT_ANCHOR_FILE = str(tmp_path / "audit-anchor.jsonl")
    for n in range(3):
        with django_capture_on_commit_callbacks(execute=True):
            record(rita, n)
    return list(Event.objects.order_by("id"))[-3:]


def test_the_anchor_file_records_each_committed_event(
    anchored_chain: list[Event], settings: Any
) -> None:
    lines = Path(settings.AUDIT_ANCHOR_FILE).read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    assert len(lines) == 3
    assert last["event_id"] == anchored_chain[-1].pk
    assert last["hash"] == anchored_chain[-1].hash
    assert run_json("verify_audit")[0] == 0


def test_a_cut_tail_with_its_heads_is_detected_by_the_anchor_file(
    anchored_chain: list[Event], tamperable: None
) -> None:
    last = anchored_chain[-1]
    raw("DELETE FROM reviewconsole_event WHERE id = %s", [last.pk])
    raw("DELETE FROM reviewconsole_chainhead WHERE event_id = %s", [last.pk])

    status, result = run_json("verify_audit")

    assert status != 0 and result["ok"] is False
    assert result["broken_at"] == last.pk
    assert "anchor" in result["problem"]


def test_both_audit_tables_emptied_are_detected_by_the_anchor_file(
    anchored_chain: list[Event], tamperable: None
) -> None:
    for table in AUDIT_TABLES:
        raw(f"DELETE FROM {table}")  # noqa: S608

    status, result = run_json("verify_audit")

    assert status != 0 and result["ok"] is False and result["checked"] == 0
    assert "anchor" in result["problem"]


# The guards: the database itself refuses to change or erase audit rows.


@pytest.fixture
def flush_refused() -> None:
    """Pending foreign-key checks would otherwise refuse a TRUNCATE before the trigger can."""
    if connection.vendor == "postgresql":
        raw("SET CONSTRAINTS ALL IMMEDIATE")


@pytest.mark.parametrize("table", AUDIT_TABLES)
@pytest.mark.parametrize("verb", ["UPDATE", "DELETE", "TRUNCATE"])
def test_the_database_refuses_changes_to_audit_rows(
    chain: list[Event], flush_refused: None, table: str, verb: str
) -> None:
    if verb == "TRUNCATE" and connection.vendor != "postgresql":
        verb = "DELETE"  # SQLite's TRUNCATE is an unconditional DELETE
    sql = {
        "UPDATE": f"UPDATE {table} SET hash = 'x'",  # noqa: S608
        "DELETE": f"DELETE FROM {table}",  # noqa: S608
        "TRUNCATE": f"TRUNCATE {table}",
    }[verb]
    before = Event.objects.count()

    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        raw(sql)

    assert Event.objects.count() == before
    assert run_json("verify_audit")[0] == 0
