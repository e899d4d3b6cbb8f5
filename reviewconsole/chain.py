"""The audit hash chain and its signed head. Pure: no Django imports.

Each event's hash is SHA-256 over the canonical JSON (RFC 8785) of its fields plus its
predecessor's hash, so rewriting, deleting or reordering any event breaks every later link.

Two formats exist. Version 1 (events written before it was replaced) covers the creation time,
actor name, action, target, reason and details. Version 2 covers every column: the event's id,
the actor's id and the format number too. A chain may move from version 1 to version 2 once; old
events are never rehashed.

A hash chain alone cannot show that events were cut from its end, nor that it was rehashed from
some point on. The chain's *head* (how many events it holds, the last one's id and hash) is
therefore signed with HMAC-SHA256 under a key kept outside the database and stored with every
event; optionally a copy of each head also goes to a file outside the database (the anchor).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import rfc8785

from reviewconsole.timeparse import to_utc_iso

GENESIS = "0" * 64
HASH_VERSION = 2
KNOWN_VERSIONS = (1, 2)


@dataclass(frozen=True)
class ChainedEvent:
    id: int
    created_at: datetime
    actor_id: int | None
    actor_name: str
    action: str
    target: str
    reason: str
    details: Any
    hash_version: int
    prev_hash: str
    hash: str


def event_hash_v1(
    *,
    prev_hash: str,
    created_at: datetime,
    actor_name: str,
    action: str,
    target: str,
    reason: str,
    details: Any,
) -> str:
    """The first format; kept so events written under it still verify."""
    payload = {
        "prev_hash": prev_hash,
        "created_at": to_utc_iso(created_at),
        "actor_name": actor_name,
        "action": action,
        "target": target,
        "reason": reason,
        "details": details,
    }
    return hashlib.sha256(rfc8785.dumps(payload)).hexdigest()


def event_hash(
    *,
    id: int,
    prev_hash: str,
    created_at: datetime,
    actor_id: int | None,
    actor_name: str,
    action: str,
    target: str,
    reason: str,
    details: Any,
) -> str:
    """The current format: every column of the event except the hash itself."""
    payload = {
        "hash_version": HASH_VERSION,
        "id": id,
        "prev_hash": prev_hash,
        "created_at": to_utc_iso(created_at),
        "actor_id": actor_id,
        "actor_name": actor_name,
        "action": action,
        "target": target,
        "reason": reason,
        "details": details,
    }
    return hashlib.sha256(rfc8785.dumps(payload)).hexdigest()


def sealed_hash(event: ChainedEvent) -> str:
    """The hash ``event``'s own content calls for, under the format it declares."""
    if event.hash_version == 1:
        return event_hash_v1(
            prev_hash=event.prev_hash,
            created_at=event.created_at,
            actor_name=event.actor_name,
            action=event.action,
            target=event.target,
            reason=event.reason,
            details=event.details,
        )
    return event_hash(
        id=event.id,
        prev_hash=event.prev_hash,
        created_at=event.created_at,
        actor_id=event.actor_id,
        actor_name=event.actor_name,
        action=event.action,
        target=event.target,
        reason=event.reason,
        details=event.details,
    )


@dataclass(frozen=True)
class Head:
    """The chain's state after its ``count``-th event (``event_id``, whose hash is ``hash``)."""

    count: int
    event_id: int
    hash: str
    signature: str = ""
    # In the anchor file only: the chain was replaced by a restore and starts over from here.
    restore: bool = False
    # In the anchor file only: ``backup`` wrote a copy of the chain ending here.
    backup: bool = False


def audit_key_bytes(*, hmac_key: str, secret_key: str) -> bytes:
    """The head-signing key: the configured one, else one derived from the secret key."""
    if hmac_key:
        return hmac_key.encode()
    return hashlib.sha256(b"reviewconsole audit chain head\x00" + secret_key.encode()).digest()


def head_signature(
    key: bytes,
    *,
    count: int,
    event_id: int,
    hash: str,
    restore: bool = False,
    backup: bool = False,
) -> str:
    fields: dict[str, Any] = {"count": count, "event_id": event_id, "hash": hash}
    if restore:
        fields["restore"] = True
    if backup:
        fields["backup"] = True
    return hmac.new(key, rfc8785.dumps(fields), hashlib.sha256).hexdigest()


def signed_head(
    key: bytes,
    *,
    count: int,
    event_id: int,
    hash: str,
    restore: bool = False,
    backup: bool = False,
) -> Head:
    signature = head_signature(
        key, count=count, event_id=event_id, hash=hash, restore=restore, backup=backup
    )
    return Head(count, event_id, hash, signature, restore, backup)


def head_is_genuine(key: bytes, head: Head) -> bool:
    expected = head_signature(
        key,
        count=head.count,
        event_id=head.event_id,
        hash=head.hash,
        restore=head.restore,
        backup=head.backup,
    )
    return hmac.compare_digest(expected, head.signature)


@dataclass(frozen=True)
class BrokenLink:
    event_id: int
    problem: str


NO_HEAD = "the chain has events but no signed head: head records were removed"
FORGED_HEAD = "the chain head's signature does not verify: forged, or signed with another key"
FORGED_ANCHOR = "a record in the anchor file does not verify: forged, or signed with another key"
EMPTY_LOG = (
    "the audit log is empty while the database holds audited data ({held}): events were removed"
)
NOT_ANCHORED = (
    "the chain passes through no head that the anchor file records: not a state of this log"
)
NOT_A_RECORDED_BACKUP = (
    "the backup ends at event {event_id} ({count} events), where no backup that the anchor file "
    "records ends: events were cut from its end, or `backup` did not write it with this anchor "
    "file"
)


def _missing(head: Head, checked: int, where: str) -> str:
    return (
        f"events are missing: the {where} records {head.count} events ending at event "
        f"{head.event_id}, the table holds {checked}"
    )


def _disagrees(head: Head, where: str) -> str:
    return (
        f"the chain disagrees with the {where}: the event at position {head.count} is not "
        f"event {head.event_id} with the recorded hash"
    )


def first_broken_link(
    events: Iterable[ChainedEvent],
    *,
    key: bytes | None = None,
    head: Head | None = None,
    anchor: Head | None = None,
) -> tuple[int, BrokenLink | None]:
    """(events walked, the first problem or None) for events in id order.

    With ``key``, the chain must end exactly where the latest signed ``head`` says (no head is
    right only for an empty chain), and, if an ``anchor`` from outside the database is given, the
    chain must hold that anchor's event at its position. The anchor may lag behind the head (it is
    written after commit), never run ahead of it.
    """
    expected_prev = GENESIS
    highest_version = 1
    checked = 0
    last: ChainedEvent | None = None
    at_anchor: ChainedEvent | None = None
    for event in events:
        checked += 1
        if event.prev_hash != expected_prev:
            return checked, BrokenLink(
                event.id, "prev_hash does not match the previous event's hash"
            )
        if event.hash_version not in KNOWN_VERSIONS or event.hash_version < highest_version:
            return checked, BrokenLink(event.id, "hash_version is not a valid format here")
        if sealed_hash(event) != event.hash:
            return checked, BrokenLink(event.id, "hash does not match the event's content")
        highest_version = event.hash_version
        expected_prev = event.hash
        last = event
        if anchor is not None and checked == anchor.count:
            at_anchor = event
    if key is None:
        return checked, None
    return checked, _head_problem(key, checked, last, head, anchor, at_anchor)


def _head_problem(
    key: bytes,
    checked: int,
    last: ChainedEvent | None,
    head: Head | None,
    anchor: Head | None,
    at_anchor: ChainedEvent | None,
) -> BrokenLink | None:
    if anchor is not None:
        if not head_is_genuine(key, anchor):
            return BrokenLink(anchor.event_id, FORGED_ANCHOR)
        if at_anchor is None:
            return BrokenLink(anchor.event_id, _missing(anchor, checked, "anchor file"))
        if (at_anchor.id, at_anchor.hash) != (anchor.event_id, anchor.hash):
            return BrokenLink(at_anchor.id, _disagrees(anchor, "anchor file"))
    if head is None:
        return BrokenLink(last.id, NO_HEAD) if last is not None else None
    if not head_is_genuine(key, head):
        return BrokenLink(head.event_id, FORGED_HEAD)
    if checked < head.count:
        return BrokenLink(head.event_id, _missing(head, checked, "signed head"))
    assert last is not None  # head.count >= 1 whenever a head exists
    if checked > head.count or (last.id, last.hash) != (head.event_id, head.hash):
        return BrokenLink(last.id, _disagrees(head, "signed head"))
    return None


def latest_anchor(key: bytes, records: Sequence[Head]) -> tuple[Head | None, Head | None]:
    """(the anchor to check, the first record whose signature fails) of an anchor file.

    The anchor to check is the longest head recorded since the last restore: a restore replaces
    the chain with a backup's, which may be shorter than what was recorded before it.
    """
    since_restore: list[Head] = []
    for record in records:
        if not head_is_genuine(key, record):
            return None, record
        if record.restore:
            since_restore = []
        since_restore.append(record)
    return max(since_restore, key=lambda h: h.count, default=None), None


def empty_log_problem(
    checked: int, head: Head | None, held: Mapping[str, int]
) -> BrokenLink | None:
    """The problem of an empty chain (no events, no head) beside ``held`` rows (by model) that
    are only ever written together with an audit event; None when nothing such is held.

    An empty log verifies on its own (a fresh database), so emptying both tables would otherwise
    pass wherever no anchor file is kept.
    """
    if checked or head is not None:
        return None
    present = {name: rows for name, rows in sorted(held.items()) if rows}
    if not present:
        return None
    listed = ", ".join(f"{name}: {rows}" for name, rows in present.items())
    return BrokenLink(0, EMPTY_LOG.format(held=listed))


def passes_through_anchor(events: Iterable[ChainedEvent], records: Sequence[Head]) -> bool:
    """Whether the chain holds, at its position, a head that one of the anchor file's
    ``records`` names (trivially so when there are none): a backup is then a state the log
    once had. Any record counts, of any lineage, since restores start the log over from a
    backup's head."""
    if not records:
        return True
    wanted: dict[int, set[tuple[int, str]]] = {}
    for record in records:
        wanted.setdefault(record.count, set()).add((record.event_id, record.hash))
    for position, event in enumerate(events, start=1):
        if (event.id, event.hash) in wanted.get(position, set()):
            return True
    return False


def backup_tail_problem(head: Head | None, records: Sequence[Head]) -> str | None:
    """The problem of a backup's chain ending at ``head`` where no backup recorded in the anchor
    file's ``records`` ended; None when one did, when the file records nothing yet, or when the
    backup has no head (``passes_through_anchor`` judges an empty chain).

    A backup cut at its end still passes through anchored heads (every head is recorded), so
    only the record ``backup`` wrote of the head it copied shows that its tail is whole.
    """
    if not records or head is None:
        return None
    recorded = {(r.count, r.event_id, r.hash) for r in records if r.backup}
    if (head.count, head.event_id, head.hash) in recorded:
        return None
    return NOT_A_RECORDED_BACKUP.format(event_id=head.event_id, count=head.count)
