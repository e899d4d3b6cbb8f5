"""Every write to the knowledge base: atomic, permission-checked and audited."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Max

from knowledge.domain import expand, tokenize
from knowledge.models import Document, DocumentStore, Synonym
from knowledge.schema import DocumentContent, parse_document
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action
from reviewconsole.tenancy import NOT_IN_TENANT, NOT_IN_TENANT_MESSAGE, may_access

REASON_REQUIRED = "a reason is required"
ALREADY_REVOKED = "is already revoked"
ALREADY_APPROVED = "is already approved"
CONTENT_DIFFERS = "already exists with other content; save the change as a new version"
STATE_DIFFERS = "exists with the same content but a different {flag} state; approve or revoke it instead of re-importing"
DUPLICATE_IN_FILE = "appears twice in this import"
NOTHING_CHANGED = "nothing changed; no new version saved"


def _require(user: User, perm: str, message: str) -> None:
    if not user.has_perm(perm):
        raise PermissionRefused(message, unmet="not_permitted")


def _require_tenant(user: User, tenant: str) -> None:
    if not may_access(user, tenant):
        raise PermissionRefused(f"tenant {tenant!r} {NOT_IN_TENANT_MESSAGE}", unmet=NOT_IN_TENANT)


def current_lexicon() -> dict[str, str]:
    return dict(Synonym.objects.values_list("term", "canonical"))


def token_text(tokens: frozenset[str]) -> str:
    return " ".join(sorted(tokens))


def _searchable(title: str, text: str) -> str:
    return f"{title}\n{text}"


def document_create(
    *,
    content: DocumentContent,
    actor: User,
    lexicon: dict[str, str] | None = None,
) -> Document:
    """Save one new version. Callers hold the transaction and have checked permissions."""
    searchable = _searchable(content.title, content.text)
    lexicon = current_lexicon() if lexicon is None else lexicon
    document = Document.objects.create(
        doc_key=content.doc_key,
        version=content.version,
        tenant=content.tenant,
        brand=content.brand,
        campaign=content.campaign,
        kind=content.kind,
        rule_key=content.rule_key,
        title=content.title,
        text=content.text,
        source=content.source,
        valid_from=content.valid_from,
        valid_to=content.valid_to,
        published_at=content.published_at,
        requirements=content.requirements,
        content_hash=content.content_hash(),
        raw_tokens=token_text(tokenize(searchable)),
        expanded_tokens=token_text(tokenize(expand(searchable, lexicon))),
        created_by=actor,
        created_at=clock.now(),
    )
    DocumentStore.objects.bulk_create(
        DocumentStore(
            document=document,
            tenant=content.tenant,
            brand=content.brand,
            campaign=content.campaign,
            store=store,
        )
        for store in content.stores
    )
    event_record(
        actor=actor,
        action=Action.DOCUMENT_CREATE,
        target=document.public_id,
        details={"content_hash": document.content_hash, "stores": list(content.stores)},
    )
    return document


def _approve(document: Document, actor: User, reason: str) -> None:
    document.approved = True
    document.approved_by = actor
    document.approved_at = clock.now()
    document.save(update_fields=["approved", "approved_by", "approved_at"])
    event_record(
        actor=actor, action=Action.DOCUMENT_APPROVE, target=document.public_id, reason=reason
    )


def _revoke(document: Document, actor: User, reason: str) -> None:
    document.revoked = True
    document.revoked_by = actor
    document.revoked_at = clock.now()
    document.revoked_reason = reason
    document.save(update_fields=["revoked", "revoked_by", "revoked_at", "revoked_reason"])
    event_record(
        actor=actor, action=Action.DOCUMENT_REVOKE, target=document.public_id, reason=reason
    )


@transaction.atomic
def document_approve(*, document: Document, actor: User, reason: str) -> Document:
    _require(actor, "knowledge.approve_document", "approving documents needs the operator role")
    _require_tenant(actor, document.tenant)
    if not reason.strip():
        raise ValidationFailure("reason", REASON_REQUIRED)
    document = Document.objects.select_for_update().get(pk=document.pk)
    if document.revoked:
        raise ValidationFailure("document", f"{document.public_id} {ALREADY_REVOKED}")
    if document.approved:
        raise ValidationFailure("document", f"{document.public_id} {ALREADY_APPROVED}")
    _approve(document, actor, reason.strip())
    return document


@transaction.atomic
def document_revoke(*, document: Document, actor: User, reason: str) -> Document:
    _require(actor, "knowledge.revoke_document", "revoking documents needs the operator role")
    _require_tenant(actor, document.tenant)
    if not reason.strip():
        raise ValidationFailure("reason", REASON_REQUIRED)
    document = Document.objects.select_for_update().get(pk=document.pk)
    if document.revoked:
        raise ValidationFailure("document", f"{document.public_id} {ALREADY_REVOKED}")
    _revoke(document, actor, reason.strip())
    return document


@transaction.atomic
def document_save_new_version(*, base: Document, changes: dict[str, Any], actor: User) -> Document:
    """Save ``base`` with ``changes`` applied as the next version of its key (a draft)."""
    _require(actor, "knowledge.add_document", "saving documents needs the operator role")
    _require_tenant(actor, base.tenant)
    latest = Document.objects.filter(doc_key=base.doc_key).aggregate(v=Max("version"))["v"] or 0
    stores = tuple(sorted(base.store_rows.values_list("store", flat=True)))
    content = replace(document_content(base, stores), version=latest + 1, **changes)
    if replace(content, version=base.version).content_hash() == base.content_hash:
        raise ValidationFailure("document", NOTHING_CHANGED)
    return document_create(content=content, actor=actor)


@transaction.atomic
def document_add(
    *, content: DocumentContent, actor: User, next_free_version: bool = False
) -> Document:
    """Save a new document (a draft); with ``next_free_version`` its version is assigned."""
    _require(actor, "knowledge.add_document", "saving documents needs the operator role")
    _require_tenant(actor, content.tenant)
    if next_free_version:
        latest = Document.objects.filter(doc_key=content.doc_key).aggregate(v=Max("version"))["v"]
        content = replace(content, version=(latest or 0) + 1)
    elif Document.objects.filter(doc_key=content.doc_key, version=content.version).exists():
        raise ValidationFailure("version", f"{content.public_id} already exists")
    return document_create(content=content, actor=actor)


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


@dataclass
class ImportResult:
    created: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


@transaction.atomic
def documents_import(*, items: object, actor: User) -> ImportResult:
    """Import a JSON array of documents: all or nothing, idempotent for identical content."""
    _require(actor, "knowledge.add_document", "importing documents needs the operator role")
    if not isinstance(items, list):
        raise ValidationFailure("$", "must be a JSON array of documents")
    parsed = []
    seen: set[tuple[str, int]] = set()
    for index, raw in enumerate(items):
        try:
            item = parse_document(raw)
        except ValidationFailure as failure:
            raise failure.at(f"[{index}]") from None
        if not may_access(actor, item.content.tenant):
            raise ValidationFailure(f"[{index}].tenant", NOT_IN_TENANT_MESSAGE)
        key = (item.content.doc_key, item.content.version)
        if key in seen:
            raise ValidationFailure(f"[{index}]", f"{item.content.public_id} {DUPLICATE_IN_FILE}")
        seen.add(key)
        if item.approved:
            _require(
                actor,
                "knowledge.approve_document",
                f"[{index}].approved needs the approve permission",
            )
        if item.revoked:
            _require(
                actor, "knowledge.revoke_document", f"[{index}].revoked needs the revoke permission"
            )
        parsed.append((index, item))

    existing = {
        (d.doc_key, d.version): d for d in Document.objects.filter(doc_key__in={k for k, _ in seen})
    }
    lexicon = current_lexicon()
    result = ImportResult()
    for index, item in parsed:
        content = item.content
        stored = existing.get((content.doc_key, content.version))
        if stored is not None:
            if stored.content_hash != content.content_hash():
                raise ValidationFailure(f"[{index}]", f"{content.public_id} {CONTENT_DIFFERS}")
            for flag in ("approved", "revoked"):
                if getattr(stored, flag) != getattr(item, flag):
                    raise ValidationFailure(
                        f"[{index}].{flag}",
                        f"{content.public_id} " + STATE_DIFFERS.format(flag=flag),
                    )
            result.unchanged.append(content.public_id)
            continue
        document = document_create(content=content, actor=actor, lexicon=lexicon)
        if item.approved:
            _approve(document, actor, "approved in import")
        if item.revoked:
            _revoke(document, actor, "revoked in import")
        result.created.append(document.public_id)
    return result


# --- the synonym lexicon ---------------------------------------------------------------------


def _rebuild_expanded_tokens(lexicon: dict[str, str]) -> int:
    """Recompute every document's expanded token set; the raw set does not depend on it."""
    changed = []
    for document in Document.objects.only("id", "title", "text", "expanded_tokens").iterator(
        chunk_size=2000
    ):
        tokens = token_text(tokenize(expand(_searchable(document.title, document.text), lexicon)))
        if tokens != document.expanded_tokens:
            document.expanded_tokens = tokens
            changed.append(document)
    Document.objects.bulk_update(changed, ["expanded_tokens"], batch_size=1000)
    return len(changed)


def _check_term(value: str, field_name: str) -> str:
    text = value.strip()
    if not text or len(text) > 50:
        raise ValidationFailure(field_name, "must be 1-50 characters")
    return text


@transaction.atomic
def synonym_set(*, term: str, canonical: str, actor: User) -> Synonym:
    _require(actor, "knowledge.change_synonym", "editing the lexicon needs the operator role")
    term, canonical = _check_term(term, "term"), _check_term(canonical, "canonical")
    if term == canonical:
        raise ValidationFailure("canonical", "must differ from the term")
    synonym, _ = Synonym.objects.update_or_create(term=term, defaults={"canonical": canonical})
    rebuilt = _rebuild_expanded_tokens(current_lexicon())
    event_record(
        actor=actor,
        action=Action.LEXICON_CHANGE,
        target=f"synonym:{term}",
        details={"canonical": canonical, "documents_reindexed": rebuilt},
    )
    return synonym


@transaction.atomic
def synonym_delete(*, synonym: Synonym, actor: User) -> None:
    _require(actor, "knowledge.delete_synonym", "editing the lexicon needs the operator role")
    term = synonym.term
    Synonym.objects.filter(pk=synonym.pk).delete()
    rebuilt = _rebuild_expanded_tokens(current_lexicon())
    event_record(
        actor=actor,
        action=Action.LEXICON_CHANGE,
        target=f"synonym:{term}",
        details={"deleted": True, "documents_reindexed": rebuilt},
    )
