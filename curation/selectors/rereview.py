"""Reads of the re-review queue and of what feeds it: cited documents' states, last reads and
confirmations."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from django.db.models import Max, Prefetch, Q, QuerySet

from curation.domain.staleness import cited_documents
from curation.models import ReReview, ReReviewResolution, ReReviewStatus
from experience.cases.models import Case, Evidence, Skill
from experience.runs.models import Reference, Run, RunCitation
from knowledge.models import Document, DocumentStore
from reviewconsole import itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.tenancy import may_access, visible

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

    Viewer = User | AnonymousUser | None


# --- re-review ---------------------------------------------------------------------------------

ACTIVE = (ReReviewStatus.OPEN, ReReviewStatus.PENDING)


def rereview_queue(user: Viewer, *, status: str = "", reason: str = "") -> QuerySet[ReReview]:
    """Open and pending entries by default; ``status`` narrows to one state."""
    entries = visible(ReReview.objects.select_related("resolved_by"), user)
    entries = entries.filter(status=status) if status else entries.filter(status__in=ACTIVE)
    if reason:
        entries = entries.filter(reason=reason)
    return entries.order_by("-detected_at", "-id")


def rereview_get(pk: int) -> ReReview | None:
    return ReReview.objects.filter(pk=pk).first()


DocumentStates = tuple[set[tuple[str, int]], dict[str, int]]


def document_states(cited: set[tuple[str, int]]) -> dict[str, DocumentStates]:
    """Per tenant: the revoked ``(doc_key, version)`` pairs and each key's newest approved version.

    Keyed by tenant because a source id is free text: a case may name a document of another
    tenant, whose state must never reach this tenant's queue.
    """
    keys = {key for key, _version in cited}
    states: dict[str, DocumentStates] = {}
    if not keys:
        return states
    for tenant, key, version in Document.objects.filter(doc_key__in=keys, revoked=True).values_list(
        "tenant", "doc_key", "version"
    ):
        states.setdefault(tenant, (set(), {}))[0].add((key, int(version)))
    for tenant, key, newest in (
        Document.objects.filter(doc_key__in=keys, approved=True, revoked=False)
        .values("tenant", "doc_key")
        .annotate(newest=Max("version"))
        .values_list("tenant", "doc_key", "newest")
    ):
        states.setdefault(tenant, (set(), {}))[1][key] = int(newest)
    return states


def last_reads(item_ids: list[str]) -> dict[str, datetime]:
    return dict(
        Reference.objects.filter(item_id__in=item_ids)
        .values("item_id")
        .annotate(last=Max("read_at"))
        .values_list("item_id", "last")
    )


def last_confirmations(item_ids: list[str]) -> dict[str, datetime]:
    return dict(
        ReReview.objects.filter(item_id__in=item_ids, resolution=ReReviewResolution.CONFIRMED)
        .values("item_id")
        .annotate(last=Max("resolved_at"))
        .values_list("item_id", "last")
    )


CitedDocuments = dict[str, set[tuple[str, int]]]


def cited_documents_of(
    cases: Sequence[Case], skills: Sequence[Skill]
) -> tuple[CitedDocuments, CitedDocuments]:
    """The documents each case's evidence cites, and each skill's runs cited, by item id."""
    case_documents: CitedDocuments = {c.id: set() for c in cases}
    for case_id, source_id in Evidence.objects.filter(case__in=cases).values_list(
        "case_id", "source_id"
    ):
        case_documents[case_id] |= cited_documents([source_id])
    skill_documents: CitedDocuments = {s.id: set() for s in skills}
    run_skill = dict(
        Run.objects.filter(skill_id__in=list(skill_documents)).values_list("pk", "skill_id")
    )
    for run_pk, document in RunCitation.objects.filter(run_id__in=list(run_skill)).values_list(
        "run_id", "document_id"
    ):
        skill_documents[run_skill[run_pk]] |= cited_documents([document])
    return case_documents, skill_documents


def rereview_documents(entries: Sequence[ReReview]) -> dict[tuple[str, str], Document]:
    """The document versions the entries name (``document_id``, and ``detail`` when it names
    the newer version), by (tenant, ``doc:KEY@N``): each entry's own tenant, in two queries
    (the versions, their stores)."""
    wanted: set[tuple[str, str, int]] = set()
    for entry in entries:
        for text in (entry.document_id, entry.detail):
            try:
                named = itemids.parse(text, kinds=(itemids.DOCUMENT,))
            except ValidationFailure:
                continue
            assert named.version is not None
            wanted.add((entry.tenant, named.key, named.version))
    if not wanted:
        return {}
    condition = Q()
    for tenant, key, version in wanted:
        condition |= Q(tenant=tenant, doc_key=key, version=version)
    found = Document.objects.filter(condition).prefetch_related(
        Prefetch("store_rows", queryset=DocumentStore.objects.order_by("store"))
    )
    return {(document.tenant, document.public_id): document for document in found}


def rereview_get_visible(pk: int, user: Viewer) -> ReReview | None:
    entry = rereview_get(pk)
    return entry if entry is not None and may_access(user, entry.tenant) else None
