"""Reads for the knowledge console pages."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Max, OuterRef, Prefetch, Q, QuerySet, Subquery

from knowledge.models import Document, DocumentStore, Synonym
from knowledge.schema import DocumentContent
from reviewconsole.models import Action, Event
from reviewconsole.permissions import APPROVE_DOCUMENT
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
        documents = documents.filter(approved=False, revoked=False, submitted_at__isnull=True)
    elif status == "submitted":
        documents = documents.filter(approved=False, revoked=False, submitted_at__isnull=False)
    elif status == "approved":
        documents = documents.filter(approved=True, revoked=False)
    elif status == "revoked":
        documents = documents.filter(revoked=True)
    stores = Prefetch("store_rows", queryset=DocumentStore.objects.order_by("store"))
    return with_current_version(documents.prefetch_related(stores)).order_by("doc_key", "-version")


def with_current_version(documents: QuerySet[Document]) -> QuerySet[Document]:
    """Each version annotated with ``current_version``: the highest approved, unrevoked version
    of its key in its tenant, which search answers with (``Document.currency`` reads it)."""
    current = (
        Document.objects.filter(
            tenant=OuterRef("tenant"), doc_key=OuterRef("doc_key"), approved=True, revoked=False
        )
        .values("tenant", "doc_key")
        .annotate(top=Max("version"))
        .values("top")
    )
    return documents.annotate(current_version=Subquery(current))


def document_approvers(document: Document) -> list[User]:
    """The active users who may approve ``document``: the approve permission (Django's answer,
    ``with_perm`` of the backend that grants it) and a tenant that lets them act on it, never its
    author (four eyes); by username, in two queries however many there are."""
    holders = (
        User.objects.with_perm(
            APPROVE_DOCUMENT, is_active=True, backend="reviewconsole.access.AccessBackend"
        )
        # Four eyes: never its author (no author, pk 0, excludes no one).
        .exclude(pk=int(document.created_by_id or 0))
        .prefetch_related("tenant_memberships")
        .order_by("username")
    )
    return [
        user
        for user in holders
        # No membership: deployment-wide (``reviewconsole.tenancy``).
        if not (tenants := {m.tenant for m in user.tenant_memberships.all()})
        or document.tenant in tenants
    ]


def _documents_shown() -> QuerySet[Document]:
    return Document.objects.select_related(
        "approved_by", "revoked_by", "created_by", "submitted_by"
    ).prefetch_related(Prefetch("store_rows", queryset=DocumentStore.objects.order_by("store")))


def document_get(tenant: str, doc_key: str, version: int) -> Document | None:
    """``doc:KEY@N`` of ``tenant``: keys are chosen per tenant, so a key names a row only there."""
    return _documents_shown().filter(tenant=tenant, doc_key=doc_key, version=version).first()


def document_versions(tenant: str, doc_key: str) -> QuerySet[Document]:
    """Every version of ``doc_key`` in ``tenant`` (another tenant's versions of that key are
    another document)."""
    return (
        with_current_version(Document.objects.filter(tenant=tenant, doc_key=doc_key))
        .select_related("created_by")
        .only(
            "tenant",
            "doc_key",
            "version",
            "title",
            "approved",
            "revoked",
            "submitted_at",
            "change_note",
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


def documents_visible(user: User | AnonymousUser, **filters: str) -> QuerySet[Document]:
    """``documents_filtered`` without the documents of tenants ``user`` may not see."""
    return visible(documents_filtered(**filters), user)


def document_get_visible(
    doc_key: str, version: int, user: User | AnonymousUser, tenant: str | None = None
) -> Document | None:
    """The version ``user`` means by ``doc:KEY@N`` (in ``tenant`` when given), or None when
    there is none, it is of a tenant ``user`` may not see, or ``user`` sees it in several
    tenants and none was named (``documents_named`` lists them)."""
    if tenant is not None:
        return document_get(tenant, doc_key, version) if may_access(user, tenant) else None
    named = documents_named(doc_key, version, user)
    return named[0] if len(named) == 1 else None


def documents_named(doc_key: str, version: int, user: User | AnonymousUser) -> list[Document]:
    """Every version ``doc:KEY@N`` names among the tenants ``user`` sees, by tenant: one for a
    tenant-limited user of one tenant, possibly several for a deployment-wide one."""
    named = _documents_shown().filter(doc_key=doc_key, version=version).order_by("tenant")
    return list(visible(named, user))


def document_stores(document: Document) -> list[str]:
    """The stores of a document from ``document_get`` (prefetched there, in store order)."""
    return [row.store for row in document.store_rows.all()]


def document_revocations(document: Document) -> QuerySet[Event]:
    """The audit events of revoking ``document``, each with the impact stored when it was.

    The target ``doc:KEY@N`` is shared by the tenants that have that key; an event names its
    tenant in its details. One written before keys were per tenant names none: it is of the
    tenant whose version was created first, the only one that could have that key then."""
    mine = Q(details__tenant=document.tenant)
    first = (
        Document.objects.filter(doc_key=document.doc_key, version=document.version)
        .order_by("created_at", "pk")
        .values_list("tenant", flat=True)
        .first()
    )
    if first == document.tenant:
        mine |= ~Q(details__has_key="tenant")
    return Event.objects.filter(
        mine, action=Action.DOCUMENT_REVOKE, target=document.public_id
    ).order_by("-created_at", "-id")
