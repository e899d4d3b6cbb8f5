"""How a claim finds each kind of item under review, for ``reviewconsole.claims``.

Registered at start-up (``ExperienceConfig.ready``), beside the item titles: cases, skills and
lessons (a candidate is under review; reviewing needs ``experience.review_case``) and knowledge
document versions (a draft is under review; approving needs ``knowledge.approve_document``).
Each lookup locks the item's row, so a claim and a decision on one item never interleave.
"""

from __future__ import annotations

from django.urls import reverse

from experience.cases.models import Case, Skill
from experience.core.models import Status
from experience.lessons.models import Lesson
from knowledge.models import Document
from reviewconsole import itemids
from reviewconsole.claims import Claimable, ClaimSubject, claimable_register
from reviewconsole.itemids import ItemId
from reviewconsole.links import item_page
from reviewconsole.permissions import APPROVE_DOCUMENT, REVIEW_CASE


def _reviewed(model: type[Case] | type[Skill] | type[Lesson]) -> Claimable:
    def lookup(item: ItemId, tenant: str) -> ClaimSubject | None:
        manager = model._default_manager
        row = (
            manager.select_for_update()
            .filter(pk=str(item), tenant=tenant)
            .values("tenant", "title", "status")
            .first()
        )
        if row is None:
            return None
        return ClaimSubject(
            tenant=row["tenant"],
            title=row["title"],
            under_review=row["status"] == Status.CANDIDATE,
            permission=REVIEW_CASE,
        )

    return Claimable(lookup=lookup, url=lambda item, _tenant: item_page(item))


def _document(item: ItemId, tenant: str) -> ClaimSubject | None:
    key, version = item.key_version
    row = (
        Document.objects.select_for_update()
        .filter(tenant=tenant, doc_key=key, version=version)
        .values("tenant", "title", "approved", "revoked")
        .first()
    )
    if row is None:
        return None
    return ClaimSubject(
        tenant=row["tenant"],
        title=row["title"],
        under_review=not row["approved"] and not row["revoked"],
        permission=APPROVE_DOCUMENT,
    )


def _document_url(item: ItemId, tenant: str) -> str:
    key, version = item.key_version
    return reverse("knowledge:tenant-document-detail", args=(tenant, key, version))


def claimables_install() -> None:
    claimable_register(itemids.CASE, _reviewed(Case))
    claimable_register(itemids.SKILL, _reviewed(Skill))
    claimable_register(itemids.LESSON, _reviewed(Lesson))
    claimable_register(itemids.DOCUMENT, Claimable(lookup=_document, url=_document_url))
