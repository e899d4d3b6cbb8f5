"""A knowledge document's revocation, as knowledge's own edges reach it.

Revoking a version reaches the apps above knowledge: the runs of its tenant whose tool results
cited it are stored with the revocation and flagged for follow-up. So the revocation is
experience's write, ``experience.review.documents.document_revoke``, which names both parts in
one transaction: knowledge's (``knowledge.services.document_revoked_record``: the version marked
revoked, out of the search index, audited with the impact) and the impact stored.

Knowledge's edges sit below experience and cannot import it: the console's review and revoke
pages, the admin action and an import that attests a revoked version. Experience installs at
start-up (its ``AppConfig.ready``) the revocation they call and the previewer the revoke pages
(console and admin) show before a revocation is confirmed. No answer is merged: each is the one
function's.

Every call names the document's tenant beside its id: ``doc:KEY@N`` names a document only within
a tenant, so another tenant's runs that cited its own ``doc:KEY@N`` are not reached.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from knowledge.models import Document

# What a revocation reaches, as its audit event records it: ``{"skills": [...], "runs": [...]}``.
Impact = dict[str, list[str]]


class Revoker(Protocol):
    def __call__(
        self,
        *,
        document: Document,
        actor: User,
        reason: str,
        now: datetime | None = None,
        details: Mapping[str, Any] | None = None,
        take_over: bool = False,
    ) -> Any: ...


class Previewer(Protocol):
    def __call__(self, document_id: str, tenant: str) -> Impact: ...


@dataclass(frozen=True)
class DocumentRevocation:
    revoke: Revoker
    preview: Previewer


_installed: list[DocumentRevocation] = []


class RevocationNotInstalled(RuntimeError):
    pass


def document_revocation_install(revocation: DocumentRevocation) -> None:
    _installed[:] = [revocation]


def _revocation() -> DocumentRevocation:
    if not _installed:
        raise RevocationNotInstalled("experience installs the document revocation at start-up")
    return _installed[0]


def document_revoke(
    *,
    document: Document,
    actor: User,
    reason: str,
    now: datetime | None = None,
    details: Mapping[str, Any] | None = None,
    take_over: bool = False,
) -> Impact:
    """Revoke ``document`` through the installed revocation; answers what it reached.
    ``take_over``: withdraw a draft another operator holds a claim on (``reviewconsole.claims``)."""
    review = _revocation().revoke(
        document=document,
        actor=actor,
        reason=reason,
        now=now,
        details=details,
        take_over=take_over,
    )
    return dict(review.impact)


def revocation_preview(*, item_id: str, tenant: str) -> Impact:
    """What revoking ``item_id`` of ``tenant`` would reach now."""
    return _revocation().preview(item_id, tenant)
