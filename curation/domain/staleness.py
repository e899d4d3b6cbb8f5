"""Staleness of approved items, over plain values: what the re-review queue is fed with.

- **A case cites a knowledge document** when one of its evidence items has the source id
  ``doc:KEY@VERSION`` (optionally followed by ``#…`` or ``/…`` naming a part of it). **A skill
  cites** the documents that the tool results of its stored runs cited.
- **Staleness**: an approved item is unused when neither its approval nor any read of it (a
  Reference) nor a reviewer's confirmation falls within the last N days; a cited document is
  outdated when an approved, unrevoked version with a higher number exists, and gone when the
  cited version is revoked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from reviewconsole import itemids
from reviewconsole.errors import ValidationFailure

# --- staleness ---------------------------------------------------------------------------------

UNUSED = "unused"
DOCUMENT_NEW_VERSION = "document_new_version"
DOCUMENT_REVOKED = "document_revoked"


def cited_documents(source_ids: Iterable[str]) -> set[tuple[str, int]]:
    """(key, version) of every knowledge document these evidence source ids cite."""
    found = set()
    for source_id in source_ids:
        try:
            cited, _part = itemids.parse_reference(source_id.strip())
        except ValidationFailure:
            continue
        if cited.kind is itemids.DOCUMENT:
            found.add(cited.key_version)
    return found


def document_id(key: str, version: int) -> str:
    return str(itemids.ItemId.document(key, version))


def unused(
    *,
    approved_at: datetime,
    last_read_at: datetime | None,
    last_confirmed_at: datetime | None,
    now: datetime,
    days: int,
) -> bool:
    """No approval, read or confirmation within the last ``days`` days."""
    latest = max(t for t in (approved_at, last_read_at, last_confirmed_at) if t is not None)
    return latest <= now - timedelta(days=days)


@dataclass(frozen=True)
class DocumentFinding:
    reason: str
    document_id: str
    detail: str = ""


def document_findings(
    cited: Iterable[tuple[str, int]],
    *,
    revoked: Iterable[tuple[str, int]],
    newest_approved: Mapping[str, int],
) -> list[DocumentFinding]:
    """Revoked cited versions, and cited versions that an approved newer version replaced."""
    revoked_set = set(revoked)
    findings = []
    for key, version in sorted(set(cited)):
        cited_id = document_id(key, version)
        if (key, version) in revoked_set:
            findings.append(DocumentFinding(DOCUMENT_REVOKED, cited_id))
        newest = newest_approved.get(key)
        if newest is not None and newest > version:
            findings.append(
                DocumentFinding(DOCUMENT_NEW_VERSION, cited_id, document_id(key, newest))
            )
    return findings
