"""A knowledge document's revocation, with what it reaches in experience; documents reviewed
from the experience console, answered like reviewed items.

:func:`document_revoke` is the one revocation of a document version, wherever it is asked (the
``review`` command, and, through ``knowledge.hooks``, the knowledge console's pages, its admin
action and an import that attests a revoked version).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from experience.core.models import ItemType
from experience.core.review import Impact, ReviewOutcome, ReviewRefused
from experience.review.impact import impact_store, revocation_impact
from knowledge.models import Document
from knowledge.services import (
    DocumentRefusal,
    DocumentReview,
    document_approve,
    document_revoke_locked,
    document_revoked_record,
)
from reviewconsole import claims, clock


@transaction.atomic
def document_revoke(
    *,
    document: Document,
    actor: User,
    reason: str,
    now: datetime | None = None,
    details: Mapping[str, Any] | None = None,
    take_over: bool = False,
) -> DocumentReview:
    """Revoke a knowledge document version (an operator of its tenant, with a reason). In one
    transaction: the runs of its tenant whose tool results cited it are what it reaches; the
    version is marked revoked, leaves the search index and is audited with that impact
    (``knowledge.services.document_revoked_record``); the impact is stored and those runs are
    flagged for follow-up. Refused with nothing written when a condition is unmet.

    ``details``: what the audit event adds (an import's attestation). A draft another
    operator holds a claim on is withdrawn only with ``take_over`` (``reviewconsole.claims``)."""
    now = now or clock.now()
    document = document_revoke_locked(
        document=document, actor=actor, reason=reason, now=now, take_over=take_over
    )
    # A draft withdrawn this way is no longer under review: its claim ends (audited as taken
    # over when it was someone else's).
    claims.decision_settle(actor=actor, item_id=document.public_id, tenant=document.tenant, now=now)
    reason = reason.strip()
    impact = revocation_impact(document.public_id, tenant=document.tenant, now=now)
    document_revoked_record(
        document, actor=actor, reason=reason, impact=impact.as_json(), details=details, now=now
    )
    impact_store(document.public_id, ItemType.DOCUMENT, impact, actor=actor, reason=reason, now=now)
    return DocumentReview(document, impact.as_json())


def document_revocation_preview(document_id: str, tenant: str) -> dict[str, list[str]]:
    """What revoking a knowledge document would reach (the revoke pages ask before confirming)."""
    return revocation_impact(document_id, tenant=tenant).as_json()


def document_revoke_with_impact(
    *, document: Document, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    """:func:`document_revoke`, answered as a review outcome (the ``review`` command)."""
    try:
        review = document_revoke(document=document, actor=actor, reason=reason, now=now)
    except DocumentRefusal as refusal:
        raise ReviewRefused(refusal.item_id, refusal.status, refusal.conditions) from None
    return ReviewOutcome(
        review.document.public_id, review.document.status, Impact.from_json(review.impact)
    )


def document_approve_reviewed(
    *, document: Document, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    try:
        review = document_approve(document=document, actor=actor, reason=reason, now=now)
    except DocumentRefusal as refusal:
        raise ReviewRefused(refusal.item_id, refusal.status, refusal.conditions) from None
    return ReviewOutcome(review.document.public_id, review.document.status)
