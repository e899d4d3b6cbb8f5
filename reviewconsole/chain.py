"""The audit hash chain. Pure: no Django imports.

Each event's hash is SHA-256 over the canonical JSON (RFC 8785) of its own fields plus its
predecessor's hash, so rewriting, deleting or reordering any event breaks every later link.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import rfc8785

from reviewconsole.timeparse import to_utc_iso

GENESIS = "0" * 64


@dataclass(frozen=True)
class ChainedEvent:
    id: int
    created_at: datetime
    actor_name: str
    action: str
    target: str
    reason: str
    details: Any
    prev_hash: str
    hash: str


def event_hash(
    *,
    prev_hash: str,
    created_at: datetime,
    actor_name: str,
    action: str,
    target: str,
    reason: str,
    details: Any,
) -> str:
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


@dataclass(frozen=True)
class BrokenLink:
    event_id: int
    problem: str


def first_broken_link(events: Iterable[ChainedEvent]) -> BrokenLink | None:
    """Walk events in id order; the first whose link or own hash does not hold."""
    expected_prev = GENESIS
    for event in events:
        if event.prev_hash != expected_prev:
            return BrokenLink(event.id, "prev_hash does not match the previous event's hash")
        recomputed = event_hash(
            prev_hash=event.prev_hash,
            created_at=event.created_at,
            actor_name=event.actor_name,
            action=event.action,
            target=event.target,
            reason=event.reason,
            details=event.details,
        )
        if recomputed != event.hash:
            return BrokenLink(event.id, "hash does not match the event's content")
        expected_prev = event.hash
    return None
