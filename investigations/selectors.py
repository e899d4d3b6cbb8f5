"""Reads of investigations: tenant-filtered lists and pages, and what a run may still cite."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from django.db.models import Q, QuerySet

from experience.cases.models import Case, Skill
from experience.core.models import Status
from investigations.models import Investigation, InvestigationRequest, RequestState
from knowledge.models import Document
from reviewconsole import itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.tenancy import visible

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

RECENT = 20


def investigations_for(user: User | AnonymousUser) -> QuerySet[Investigation]:
    return visible(Investigation.objects.select_related("actor"), user)


def investigation_get(pk: int, user: User | AnonymousUser) -> Investigation | None:
    return investigations_for(user).filter(pk=pk).first()


def investigation_request_get(pk: int, user: User | AnonymousUser) -> InvestigationRequest | None:
    """A ticket's background run, for whoever may see its tenant (like its investigation)."""
    return (
        visible(InvestigationRequest.objects.select_related("investigation__actor"), user)
        .filter(pk=pk)
        .first()
    )


def investigation_requests_pending(user: User | AnonymousUser) -> QuerySet[InvestigationRequest]:
    """Tickets entered on the console whose runs have not ended, for whoever may see them."""
    return visible(
        InvestigationRequest.objects.filter(state__in=[RequestState.QUEUED, RequestState.RUNNING]),
        user,
    )


def unusable_items(ids: Collection[str], *, tenant: str) -> set[str]:
    """Which of ``ids`` are not usable now (revoked, or no longer approved).

    Ids that name nothing known are left to the citation check (an id not returned in the run).
    """
    parsed: dict[str, itemids.ItemId] = {}
    for text in ids:
        try:
            parsed[text] = itemids.parse(text)
        except ValidationFailure:
            continue
    unusable: set[str] = set()
    cases = [t for t, i in parsed.items() if i.kind is itemids.CASE]
    skills = [t for t, i in parsed.items() if i.kind is itemids.SKILL]
    if cases:
        usable = set(
            Case.objects.filter(pk__in=cases, status=Status.APPROVED).values_list("pk", flat=True)
        )
        unusable |= set(cases) - usable
    if skills:
        usable = set(
            Skill.objects.filter(pk__in=skills, status=Status.APPROVED).values_list("pk", flat=True)
        )
        unusable |= set(skills) - usable
    documents = {t: i for t, i in parsed.items() if i.kind is itemids.DOCUMENT}
    if documents:
        wanted = Q()
        for item in documents.values():
            wanted |= Q(doc_key=item.key, version=item.version)
        usable_docs = {
            str(itemids.ItemId.document(key, version))
            # ``doc:KEY@N`` of the run's tenant: another tenant's version of the key is not it.
            for key, version in Document.objects.filter(
                wanted, tenant=tenant, approved=True, revoked=False
            ).values_list("doc_key", "version")
        }
        unusable |= set(documents) - usable_docs
    return unusable
