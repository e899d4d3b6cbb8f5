"""Knowledge documents reviewed from the experience console, answered like reviewed items."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import User

from experience.core.review import Impact, ReviewOutcome, ReviewRefused
from knowledge.models import Document
from knowledge.services import DocumentRefusal, document_approve, document_revoke


def document_revoke_with_impact(
    *, document: Document, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    """Revoke a knowledge document (its service stores the impact), as a review outcome."""
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
