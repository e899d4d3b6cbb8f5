"""Reads for the knowledge console pages."""

from __future__ import annotations

import json
from collections.abc import Sequence

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Prefetch, Q, QuerySet

from knowledge.models import Document, DocumentStore, Synonym
from knowledge.schema import DocumentContent
from reviewconsole.models import Action, Event
from reviewconsole.tenancy import may_access, visible


def current_lexicon() -> dict[str, str]:
    return dict(Synonym.objects.values_list("term", "canonical"))


def documents_filtered(
    *,
    q: str = "",
    brand: str = "",
    campaign: str = "",
    store: str = "",
    kind: str = "",
    status: str = "",
) -> QuerySet[Document]:
    documents = Document.objects.defer("text", "raw_tokens", "expanded_tokens")
    if q:
        documents = documents.filter(Q(title__icontains=q) | Q(doc_key__icontains=q))
    if brand:
        documents = documents.filter(brand=brand)
    if campaign:
        documents = documents.filter(campaign=campaign)
    if store:
        documents = documents.filter(store_rows__store=store)
    if kind:
        documents = documents.filter(kind=kind)
    if status == "draft":
        documents = documents.filter(approved=False, revoked=False)
    elif status == "approved":
        documents = documents.filter(approved=True, revoked=False)
    elif status == "revoked":
        documents = documents.filter(revoked=True)
    stores = Prefetch("store_rows", queryset=DocumentStore.objects.order_by("store"))
    return documents.prefetch_related(stores).order_by("doc_key", "-version")


def document_get(doc_key: str, version: int) -> Document | None:
    return (
        Document.objects.select_related("approved_by", "revoked_by", "created_by")
        .prefetch_related(Prefetch("store_rows", queryset=DocumentStore.objects.order_by("store")))
        .filter(doc_key=doc_key, version=version)
        .first()
    )


def document_versions(doc_key: str) -> QuerySet[Document]:
    return (
        Document.objects.filter(doc_key=doc_key)
        .select_related("created_by")
        .only(
            "doc_key",
            "version",
            "title",
            "approved",
            "revoked",
            "created_at",
            "created_by__username",
            "published_at",
            "valid_from",
            "valid_to",
        )
        .order_by("-version")
    )


def document_content(document: Document, stores: Sequence[str] | None = None) -> DocumentContent:
    if stores is None:
        stores = [row.store for row in document.store_rows.all()]
    return DocumentContent(
        doc_key=document.doc_key,
        version=document.version,
        tenant=document.tenant,
        brand=document.brand,
        stores=tuple(sorted(stores)),
        campaign=document.campaign,
        kind=document.kind,
        rule_key=document.rule_key,
        title=document.title,
        text=document.text,
        source=document.source,
        valid_from=document.valid_from,
        valid_to=document.valid_to,
        published_at=document.published_at,
        requirements=document.requirements,
    )


def document_lines(document: Document) -> list[str]:
    """The content of a version as lines of text, in a stable order, for a line diff."""
    canonical = document_content(document).canonical()
    lines = []
    for name in (
        "title",
        "kind",
        "rule_key",
        "tenant",
        "brand",
        "campaign",
        "stores",
        "valid_from",
        "valid_to",
        "published_at",
        "source",
    ):
        value = canonical[name]
        shown = ", ".join(value) if isinstance(value, list) else ("—" if value is None else value)
        lines.append(f"{name}: {shown}")
    lines.append("requirements:")
    lines += json.dumps(
        canonical["requirements"], ensure_ascii=False, indent=2, sort_keys=True
    ).splitlines()
    lines.append("text:")
    lines += canonical["text"].splitlines()
    return lines


def documents_visible(user: User | AnonymousUser, **filters: str) -> QuerySet[Document]:
    """``documents_filtered`` without the documents of tenants ``user`` may not see."""
    return visible(documents_filtered(**filters), user)


def document_get_visible(doc_key: str, version: int, user: User | AnonymousUser) -> Document | None:
    """The version, or None when there is none or it is of a tenant ``user`` may not see."""
    document = document_get(doc_key, version)
    if document is None or not may_access(user, document.tenant):
        return None
    return document


def document_stores(document: Document) -> list[str]:
    """The stores of a document from ``document_get`` (prefetched there, in store order)."""
    return [row.store for row in document.store_rows.all()]


def document_revocations(public_id: str) -> QuerySet[Event]:
    """The audit events of revoking ``public_id``, each with the impact stored when it was."""
    return Event.objects.filter(action=Action.DOCUMENT_REVOKE, target=public_id).order_by(
        "-created_at", "-id"
    )
