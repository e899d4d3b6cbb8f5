"""Writing and verifying audit events. Write inside the transaction of the change recorded.

Every event is sealed by a hash over all its columns and its predecessor's hash; every append
also writes a signed head (count, last event, its hash) in the same transaction, and, when
``AUDIT_ANCHOR_FILE`` is set, a copy of that head to a file outside the database after commit.
See reviewconsole/chain.py for what each of these detects.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import connection, models, transaction

from reviewconsole import clock
from reviewconsole.chain import (
    GENESIS,
    HASH_VERSION,
    BrokenLink,
    ChainedEvent,
    Head,
    audit_key_bytes,
    empty_log_problem,
    event_hash,
    first_broken_link,
    latest_anchor,
    signed_head,
)
from reviewconsole.guard import guard_problem
from reviewconsole.models import Action, ChainHead, Event
from reviewconsole.reasons import reason_within_cap

logger = logging.getLogger(__name__)

# An arbitrary constant naming the PostgreSQL advisory lock that serialises chain appends.
CHAIN_LOCK_KEY = 7_300_415_001

UNREADABLE_ANCHOR = "the anchor file cannot be read"


def audit_key() -> bytes:
    return audit_key_bytes(hmac_key=settings.AUDIT_HMAC_KEY, secret_key=settings.SECRET_KEY)


def _lock_chain() -> None:
    """Hold the chain's tail until commit so two writers never link to the same predecessor.

    SQLite needs nothing: its IMMEDIATE transactions already admit one writer at a time.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK_KEY])


def _latest_head() -> Head | None:
    row = ChainHead.objects.order_by("-id").first()
    if row is None:
        return None
    return Head(row.count, row.event_id, row.hash, row.signature)


def event_record(
    *,
    actor: User | AnonymousUser | None,
    action: Action,
    target: str,
    reason: str = "",
    details: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> Event:
    """Append one event to the chain, in the caller's transaction; ``at`` is the moment of the
    write it records (the writer's own ``now``, taken once), else the clock's."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit events must be written inside the transaction they record")
    # Every decision's reason ends here, whichever path it came by: the one cap holds for all.
    reason_within_cap(reason)
    real_actor = actor if isinstance(actor, User) else None
    actor_name = real_actor.get_username() if real_actor is not None else "system"
    details = details or {}
    _lock_chain()
    last = Event.objects.order_by("-id").values_list("id", "hash").first()
    last_id, prev_hash = last if last is not None else (0, GENESIS)
    head = _latest_head()
    count = (head.count if head is not None else Event.objects.count()) + 1
    # The id is chosen here, under the chain's lock, because the hash covers it.
    event_id = last_id + 1
    created_at = at if at is not None else clock.now()
    actor_id = real_actor.pk if real_actor is not None else None
    event = Event.objects.create(
        id=event_id,
        created_at=created_at,
        actor=real_actor,
        actor_name=actor_name,
        action=action,
        target=target,
        reason=reason,
        details=details,
        hash_version=HASH_VERSION,
        prev_hash=prev_hash,
        hash=event_hash(
            id=event_id,
            prev_hash=prev_hash,
            created_at=created_at,
            actor_id=actor_id,
            actor_name=actor_name,
            action=str(action),
            target=target,
            reason=reason,
            details=details,
        ),
    )
    new_head = signed_head(audit_key(), count=count, event_id=event.pk, hash=event.hash)
    ChainHead.objects.create(
        count=new_head.count,
        event_id=new_head.event_id,
        hash=new_head.hash,
        signature=new_head.signature,
    )
    if settings.AUDIT_ANCHOR_FILE:
        transaction.on_commit(lambda: anchor_append(new_head), robust=True)
    return event


# The anchor file: one JSON object per line, each a signed head.


def anchor_append(head: Head) -> None:
    record: dict[str, Any] = {
        "count": head.count,
        "event_id": head.event_id,
        "hash": head.hash,
        "signature": head.signature,
    }
    if head.restore:
        record["restore"] = True
    if head.backup:
        record["backup"] = True
    line = json.dumps(record, separators=(",", ":")) + "\n"
    # One write of a short line to a file opened for appending: concurrent writers never
    # interleave within a line.
    with open(settings.AUDIT_ANCHOR_FILE, "a", encoding="utf-8") as handle:
        handle.write(line)


def anchor_records() -> list[Head] | None:
    """The anchor file's heads in file order; [] without one; None if it cannot be parsed."""
    if not settings.AUDIT_ANCHOR_FILE:
        return []
    path = Path(settings.AUDIT_ANCHOR_FILE)
    if not path.exists():
        return []
    records = []
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            records.append(
                Head(
                    count=int(item["count"]),
                    event_id=int(item["event_id"]),
                    hash=str(item["hash"]),
                    signature=str(item["signature"]),
                    restore=bool(item.get("restore", False)),
                    backup=bool(item.get("backup", False)),
                )
            )
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError):
        return None
    return records


def chained_events() -> Iterator[ChainedEvent]:
    rows = Event.objects.order_by("id").values_list(
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
    )
    for row in rows.iterator(chunk_size=5000):
        yield ChainedEvent(*row)


# Models whose rows are only ever written together with an audit event (apps register theirs in
# ``AppConfig.ready``): rows of them beside an empty log mean the log was emptied.
_audited_models: list[type[models.Model]] = []


def audited_models_register(*audited: type[models.Model]) -> None:
    for model in audited:
        if model not in _audited_models:
            _audited_models.append(model)


def audited_models() -> list[type[models.Model]]:
    return list(_audited_models)


def audited_rows() -> dict[str, int]:
    """Rows per registered model (``app_label.model``) in the live database."""
    return {model._meta.label_lower: model._default_manager.count() for model in _audited_models}


def audit_verify() -> tuple[int, BrokenLink | None]:
    """(events checked, the first problem or None).

    Every link, every event's hash, the latest signed head, (if configured) the anchor file, an
    empty log beside data that is only written with events, and the tables' guard (triggers).
    """
    key = audit_key()
    records = anchor_records()
    if records is None:
        return 0, BrokenLink(0, UNREADABLE_ANCHOR)
    anchor, forged = latest_anchor(key, records)
    if forged is not None:
        # Let the walk report it: a forged record is checked like an anchor and fails.
        anchor = forged
    # An append between reading the head and walking the chain (or counting the audited rows)
    # looks like tampering; if the head moved meanwhile, look again.
    for _ in range(3):
        head = _latest_head()
        checked, broken = first_broken_link(chained_events(), key=key, head=head, anchor=anchor)
        if broken is None:
            broken = empty_log_problem(checked, head, audited_rows())
        if broken is None or _latest_head() == head:
            break
    if broken is None:
        missing = guard_problem(connection)
        if missing is not None:
            broken = BrokenLink(0, missing)
    return checked, broken


def record_restore_anchor(head: Head | None) -> None:
    """Tell the anchor file that the chain was replaced by a backup's, which ends at ``head``."""
    if not settings.AUDIT_ANCHOR_FILE or head is None:
        return
    anchor_append(
        signed_head(
            audit_key(), count=head.count, event_id=head.event_id, hash=head.hash, restore=True
        )
    )


def record_backup_anchor(head: Head | None) -> bool:
    """Tell the anchor file that ``backup`` wrote a copy of the chain ending at ``head``, so a
    restore can tell that copy from one cut at its end; whether a record was written."""
    if not settings.AUDIT_ANCHOR_FILE or head is None:
        return False
    anchor_append(
        signed_head(
            audit_key(), count=head.count, event_id=head.event_id, hash=head.hash, backup=True
        )
    )
    return True
