"""Every write to the knowledge base: atomic, permission-checked and audited."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.db.models import Max, Q

from knowledge import hooks, postings
from knowledge.domain import expand, tokenize
from knowledge.events import DocumentSubmitted, LexiconChanged
from knowledge.lexicon import indexed_lexicon, searchable
from knowledge.models import Document, DocumentStore, Synonym, lexicon_stamp_renewed
from knowledge.schema import DocumentContent, parse_document
from knowledge.selectors import document_approvers, document_content
from knowledge.tasks import lexicon_reindex_task
from reviewconsole import accounts, clock
from reviewconsole.audit import event_record
from reviewconsole.dispatch import dispatch
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action
from reviewconsole.permissions import (
    ADD_DOCUMENT,
    APPROVE_DOCUMENT,
    CHANGE_SYNONYM,
    DELETE_SYNONYM,
    NOT_PERMITTED,
    REVOKE_DOCUMENT,
    permitted,
    refusals,
    require,
)
from reviewconsole.reasons import MAX_REASON, REASON_REQUIRED
from reviewconsole.tenancy import NOT_IN_TENANT, require_input_tenant

ALREADY_REVOKED = "is already revoked"
ALREADY_APPROVED = "is already approved"
CONTENT_DIFFERS = "already exists with other content; save the change as a new version"
STATE_DIFFERS = "exists with the same content but a different {flag} state; approve or revoke it instead of re-importing"
DUPLICATE_IN_FILE = "appears twice in this import"
NOTHING_CHANGED = "nothing changed; no new version saved"
SAVE_REFUSED = "saving documents needs the operator role"
IMPORT_REFUSED = "importing documents needs the operator role"
# One lexicon serves every tenant, so only an operator whom no tenant limits edits it.
LEXICON_REFUSED = "editing the lexicon needs an operator whom no tenant limits"
TENANT_KEPT = "a new version keeps its document's tenant {tenant!r}"
SUBMIT_REFUSED = "submitting documents needs the operator role"
CHANGE_NOTE_REQUIRED = "say what this version changes before submitting it"
CHANGE_NOTE_TOO_LONG = f"must be at most {MAX_REASON} characters"
NOT_A_DRAFT = "is not a draft: only a draft is submitted"
NOT_YOUR_DRAFT = "is another operator's draft: its author submits it"


def token_text(tokens: frozenset[str]) -> str:
    return " ".join(sorted(tokens))


def document_create(
    *,
    content: DocumentContent,
    actor: User,
    lexicon: dict[str, str] | None = None,
    now: datetime | None = None,
    change_note: str = "",
    submitted: bool = False,
) -> Document:
    """Save one new version. Callers hold the transaction and have checked permissions.

    ``submitted``: the version goes to reviewers at once (an import, which is its submission);
    otherwise it is a draft until ``document_submit``."""
    now = now or clock.now()
    text = searchable(content.title, content.text)
    # Tokenized under the search index's lexicon, which a lexicon change moves in the background.
    lexicon = indexed_lexicon() if lexicon is None else lexicon
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
        raw_tokens=token_text(tokenize(text)),
        expanded_tokens=token_text(tokenize(expand(text, lexicon))),
        created_by=actor,
        created_at=now,
        change_note=_change_note_checked(change_note, required=False),
        submitted_at=now if submitted else None,
        submitted_by=actor if submitted else None,
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
        details={
            "content_hash": document.content_hash,
            "stores": list(content.stores),
            "submitted": submitted,
        },
        at=now,
    )
    return document


def _change_note_checked(note: str, *, required: bool) -> str:
    clean = note.strip()
    if required and not clean:
        raise ValidationFailure("change_note", CHANGE_NOTE_REQUIRED)
    if len(clean) > MAX_REASON:
        raise ValidationFailure("change_note", CHANGE_NOTE_TOO_LONG)
    return clean


@dataclass(frozen=True)
class Submission:
    """A submitted version and the operators asked to approve it (by username)."""

    document: Document
    approvers: list[str]


@transaction.atomic
def document_submit(
    *, document: Document, actor: User, change_note: str, now: datetime | None = None
) -> Submission:
    """Submit a draft for review, with what it changes: it enters reviewers' queue, and the
    operators who may approve it are told (``DocumentSubmitted``: curation mails them).

    Only its author submits a draft, once; the change note is required."""
    document = Document.objects.select_for_update().get(pk=document.pk)
    require(actor, ADD_DOCUMENT, document.tenant, message=SUBMIT_REFUSED)
    if document.status != "draft":
        raise ValidationFailure("document", f"{document.public_id} {NOT_A_DRAFT}")
    if document.created_by_id != actor.pk:
        raise ValidationFailure("document", f"{document.public_id} {NOT_YOUR_DRAFT}")
    note = _change_note_checked(change_note, required=True)
    now = now or clock.now()
    document.change_note = note
    document.submitted_at = now
    document.submitted_by = actor
    document.save(update_fields=["change_note", "submitted_at", "submitted_by"])
    approvers = document_approvers(document)
    event_record(
        actor=actor,
        action=Action.DOCUMENT_SUBMIT,
        target=document.public_id,
        reason=note,
        details={"tenant": document.tenant, "approvers": [u.get_username() for u in approvers]},
        at=now,
    )
    dispatch(DocumentSubmitted(document=document, now=now))
    return Submission(document, [u.get_username() for u in approvers])


# Unmet conditions of approving or revoking a document, named as for cases and skills
# (``not_permitted`` and ``not_in_tenant`` are the core's names).
REASON_UNMET = "reason_required"
ALREADY_REVOKED_UNMET = "already_revoked"
ALREADY_APPROVED_UNMET = "already_approved"
NOT_SUBMITTED = "not_submitted"
OWN_SUBMISSION = "own_submission"
NOT_INDEPENDENT = accounts.NOT_INDEPENDENT

APPROVE_REFUSED = "approving documents needs the operator role"
REVOKE_REFUSED = "revoking documents needs the operator role"
OWN_VERSION = "was saved by you; another operator approves it"
DRAFT_NOT_SUBMITTED = "is a draft its author has not submitted for review"
NOT_INDEPENDENT_VERSION = (
    "was saved by an account that is one person's with yours (one was created with a password "
    "by the other, or by the same admin); another operator approves it"
)
ATTESTED_IMPORT = "attested import by the importer"


class DocumentRefusal(Exception):
    """An approve or revoke with unmet conditions (``conditions``, by name); nothing was written."""

    item_id: str
    status: str
    conditions: list[str]


class DocumentReviewRefused(DocumentRefusal, ValidationFailure):
    """The document's state, the reason or the four-eyes rule stands in the way."""

    def __init__(self, document: Document, unmet: list[tuple[str, str, str]]) -> None:
        ValidationFailure.__init__(self, unmet[0][1], "; ".join(message for *_, message in unmet))
        self.item_id, self.status = document.public_id, document.status
        self.conditions = [name for name, *_ in unmet]


class DocumentReviewForbidden(DocumentRefusal, PermissionRefused):
    """The actor may not approve or revoke this document (role or tenant)."""

    def __init__(self, document: Document, unmet: list[tuple[str, str, str]]) -> None:
        forbidden = [(name, message) for name, _, message in unmet if name in _FORBIDDING]
        PermissionRefused.__init__(
            self, "; ".join(message for _, message in forbidden), unmet=forbidden[0][0]
        )
        self.item_id, self.status = document.public_id, document.status
        self.conditions = [name for name, *_ in unmet]


_FORBIDDING = frozenset({NOT_PERMITTED, NOT_IN_TENANT})


@dataclass(frozen=True)
class DocumentReview:
    document: Document
    impact: dict[str, list[str]] = field(default_factory=lambda: {"skills": [], "runs": []})


def four_eyes_required() -> bool:
    """Whether the approver of a document version must be someone other than its author."""
    return bool(getattr(settings, "KNOWLEDGE_FOUR_EYES", True))


def _review_unmet(
    document: Document, actor: User, reason: str, *, approve: bool
) -> list[tuple[str, str, str]]:
    """Every unmet condition as ``(name, field, message)``, in the order the review shows them."""
    public_id = document.public_id
    unmet = [
        # The permission refusal names the actor, the tenant one the document.
        (refusal.unmet, "actor" if refusal.unmet == NOT_PERMITTED else "document", refusal.message)
        for refusal in refusals(
            actor,
            APPROVE_DOCUMENT if approve else REVOKE_DOCUMENT,
            document.tenant,
            message=APPROVE_REFUSED if approve else REVOKE_REFUSED,
        )
    ]
    if not reason.strip():
        unmet.append((REASON_UNMET, "reason", REASON_REQUIRED))
    if document.revoked:
        unmet.append((ALREADY_REVOKED_UNMET, "document", f"{public_id} {ALREADY_REVOKED}"))
    elif approve and document.approved:
        unmet.append((ALREADY_APPROVED_UNMET, "document", f"{public_id} {ALREADY_APPROVED}"))
    elif approve and document.submitted_at is None:
        unmet.append((NOT_SUBMITTED, "document", f"{public_id} {DRAFT_NOT_SUBMITTED}"))
    if approve and four_eyes_required():
        if document.created_by_id == actor.pk:
            unmet.append((OWN_SUBMISSION, "document", f"{public_id} {OWN_VERSION}"))
        elif document.created_by_id is not None and not accounts.independent(
            int(document.created_by_id), int(actor.pk)
        ):
            unmet.append((NOT_INDEPENDENT, "document", f"{public_id} {NOT_INDEPENDENT_VERSION}"))
    return unmet


def document_review_unmet(
    *, document: Document, actor: User, reason: str, approve: bool
) -> list[str]:
    """The names of what stands in the way of approving (or revoking) ``document``."""
    return [name for name, *_ in _review_unmet(document, actor, reason, approve=approve)]


def _refuse_if_unmet(document: Document, actor: User, reason: str, *, approve: bool) -> None:
    unmet = _review_unmet(document, actor, reason, approve=approve)
    if any(name in _FORBIDDING for name, *_ in unmet):
        raise DocumentReviewForbidden(document, unmet)
    if unmet:
        raise DocumentReviewRefused(document, unmet)


def _approve(
    document: Document,
    actor: User,
    reason: str,
    details: dict[str, Any] | None = None,
    *,
    now: datetime,
) -> None:
    document.approved = True
    document.approved_by = actor
    document.approved_at = now
    document.save(update_fields=["approved", "approved_by", "approved_at"])
    postings.document_indexed(document)
    event_record(
        actor=actor,
        action=Action.DOCUMENT_APPROVE,
        target=document.public_id,
        reason=reason,
        details={**(details or {}), **accounts.provenance(actor)},
        at=now,
    )


def document_revoked_record(
    document: Document,
    *,
    actor: User,
    reason: str,
    impact: Mapping[str, list[str]],
    details: Mapping[str, Any] | None = None,
    now: datetime,
) -> None:
    """Knowledge's part of a revocation (the whole is ``experience.review.documents.
    document_revoke``, which computes and stores ``impact``, what it reached): the version
    marked revoked, taken out of the search index, and audited with the impact."""
    document.revoked = True
    document.revoked_by = actor
    document.revoked_at = now
    document.revoked_reason = reason
    document.save(update_fields=["revoked", "revoked_by", "revoked_at", "revoked_reason"])
    postings.document_unindexed(document)
    event_record(
        actor=actor,
        action=Action.DOCUMENT_REVOKE,
        target=document.public_id,
        reason=reason,
        # The tenant names which ``doc:KEY@N`` this is (keys are per tenant).
        details={**(details or {}), "tenant": document.tenant, "impact": dict(impact)},
        at=now,
    )


@transaction.atomic
def document_approve(
    *, document: Document, actor: User, reason: str, now: datetime | None = None
) -> DocumentReview:
    """Approve a draft version: an operator of its tenant, with a reason, not its author."""
    document = Document.objects.select_for_update().get(pk=document.pk)
    _refuse_if_unmet(document, actor, reason, approve=True)
    _approve(document, actor, reason.strip(), now=now or clock.now())
    return DocumentReview(document)


def document_revoke(
    *, document: Document, actor: User, reason: str, now: datetime | None = None
) -> DocumentReview:
    """Revoke a version with a reason, for callers that import knowledge alone: the one
    revocation, ``experience.review.documents.document_revoke``, reached through the revocation
    experience installs (``knowledge.hooks``), which stores what it reached with it."""
    impact = hooks.document_revoke(document=document, actor=actor, reason=reason, now=now)
    document.refresh_from_db()
    return DocumentReview(document, impact)


def document_revoke_locked(*, document: Document, actor: User, reason: str) -> Document:
    """The version locked for its revocation; refused, nothing written, when a condition is
    unmet (``DocumentReviewRefused``, ``DocumentReviewForbidden``)."""
    document = Document.objects.select_for_update().get(pk=document.pk)
    _refuse_if_unmet(document, actor, reason, approve=False)
    return document


def document_unchanged(*, base: Document, content: DocumentContent, published_given: bool) -> bool:
    """Whether ``content`` says nothing ``base`` does not; a default publication time is no change."""
    same = replace(content, version=base.version)
    if not published_given:
        same = replace(same, published_at=base.published_at)
    return same.content_hash() == base.content_hash


def require_tenant_kept(*, base: Document, tenant: str) -> None:
    """A new version of ``base`` stays in its tenant: a key names a document within a tenant, so
    another tenant's version would be another tenant's document written by this one's operator.
    Refused as ``not_in_tenant`` on every path (console, admin, imports go through here)."""
    if tenant != base.tenant:
        raise PermissionRefused(TENANT_KEPT.format(tenant=base.tenant), unmet=NOT_IN_TENANT)


def latest_version(*, tenant: str, doc_key: str) -> int:
    """The highest version of ``doc_key`` in ``tenant`` (0 when it has none): keys and their
    versions are per tenant."""
    versions = Document.objects.filter(tenant=tenant, doc_key=doc_key)
    return versions.aggregate(v=Max("version"))["v"] or 0


@transaction.atomic
def document_save_new_version(
    *,
    base: Document,
    changes: dict[str, Any],
    actor: User,
    change_note: str = "",
    now: datetime | None = None,
) -> Document:
    """Save ``base`` with ``changes`` applied as the next version of its key (a draft).

    The new version's ``published_at`` is the one in ``changes`` (its author's), else the moment
    it is saved: a new version is never known before it existed. Its tenant is ``base``'s.
    """
    require(actor, ADD_DOCUMENT, base.tenant, message=SAVE_REFUSED)
    require_tenant_kept(base=base, tenant=changes.get("tenant", base.tenant))
    now = now or clock.now()
    changes = dict(changes)
    published_at = changes.pop("published_at", None)
    latest = latest_version(tenant=base.tenant, doc_key=base.doc_key)
    stores = tuple(sorted(base.store_rows.values_list("store", flat=True)))
    content = replace(
        document_content(base, stores),
        version=latest + 1,
        **changes,
        published_at=published_at or now,
    )
    if document_unchanged(base=base, content=content, published_given=published_at is not None):
        raise ValidationFailure("document", NOTHING_CHANGED)
    return document_create(content=content, actor=actor, now=now, change_note=change_note)


@transaction.atomic
def document_add(
    *,
    content: DocumentContent,
    actor: User,
    next_free_version: bool = False,
    change_note: str = "",
    now: datetime | None = None,
) -> Document:
    """Save a new document (a draft); with ``next_free_version`` its version is assigned."""
    require(actor, ADD_DOCUMENT, content.tenant, message=SAVE_REFUSED)
    require_input_tenant(actor, content.tenant, field="tenant")
    if next_free_version:
        latest = latest_version(tenant=content.tenant, doc_key=content.doc_key)
        content = replace(content, version=latest + 1)
    elif Document.objects.filter(
        tenant=content.tenant, doc_key=content.doc_key, version=content.version
    ).exists():
        raise ValidationFailure("version", f"{content.public_id} already exists")
    return document_create(content=content, actor=actor, now=now, change_note=change_note)


# An imported document may attest a state reached elsewhere; each needs its permission.
_ATTESTED_STATES = (
    ("approved", APPROVE_DOCUMENT, "approve"),
    ("revoked", REVOKE_DOCUMENT, "revoke"),
)


@dataclass
class ImportResult:
    created: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


@transaction.atomic
def documents_import(*, items: object, actor: User, now: datetime | None = None) -> ImportResult:
    """Import a JSON array of documents: all or nothing, idempotent for identical content."""
    require(actor, ADD_DOCUMENT, message=IMPORT_REFUSED)
    now = now or clock.now()
    if not isinstance(items, list):
        raise ValidationFailure("$", "must be a JSON array of documents")
    parsed = []
    # Keys are per tenant: another tenant's document of the same key is not looked at, so an
    # import answers for it exactly as for a key nobody has.
    seen: set[tuple[str, str, int]] = set()
    checked: set[str] = set()  # each permission is asked once per import
    for index, raw in enumerate(items):
        try:
            item = parse_document(raw)
        except ValidationFailure as failure:
            raise failure.at(f"[{index}]") from None
        require_input_tenant(
            actor, item.content.tenant, field=f"[{index}].tenant", create=True, now=now
        )
        key = (item.content.tenant, item.content.doc_key, item.content.version)
        if key in seen:
            raise ValidationFailure(f"[{index}]", f"{item.content.public_id} {DUPLICATE_IN_FILE}")
        seen.add(key)
        for flag, permission, verb in _ATTESTED_STATES:
            if getattr(item, flag) and permission not in checked:
                message = f"[{index}].{flag} needs the {verb} permission"
                require(actor, permission, message=message)
                checked.add(permission)
        parsed.append((index, item))

    keys_by_tenant: dict[str, set[str]] = {}
    for tenant, doc_key, _version in seen:
        keys_by_tenant.setdefault(tenant, set()).add(doc_key)
    wanted = Q(pk__in=[])
    for tenant, doc_keys in keys_by_tenant.items():
        wanted |= Q(tenant=tenant, doc_key__in=sorted(doc_keys))
    existing = {(d.tenant, d.doc_key, d.version): d for d in Document.objects.filter(wanted)}
    lexicon = indexed_lexicon()
    result = ImportResult()
    with postings.batched():
        for index, item in parsed:
            content = item.content
            stored = existing.get((content.tenant, content.doc_key, content.version))
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
            # An import is the submission of what it stores (the file was reviewed to be sent).
            document = document_create(
                content=content, actor=actor, lexicon=lexicon, now=now, submitted=True
            )
            # The file attests a state reached before the import (a migrated, already-approved
            # rulebook); four eyes governs approvals given inside the product, not this.
            attested = {"attested_import": True, "importer": actor.get_username()}
            if item.approved:
                _approve(
                    document, actor, f"approved in import ({ATTESTED_IMPORT})", attested, now=now
                )
            if item.revoked:
                # Through the revocation experience installs, which stores what it reached.
                hooks.document_revoke(
                    document=document,
                    actor=actor,
                    reason=f"revoked in import ({ATTESTED_IMPORT})",
                    details=attested,
                    now=now,
                )
            result.created.append(document.public_id)
    return result


# --- the synonym lexicon ---------------------------------------------------------------------


def _check_term(value: str, field_name: str) -> str:
    text = value.strip()
    if not text or len(text) > 50:
        raise ValidationFailure(field_name, "must be 1-50 characters")
    return text


def lexicon_editable(actor: User | AnonymousUser | None, permission: str) -> bool:
    """Whether ``actor`` may change the lexicon with ``permission`` (what the admin offers):
    the rule ``synonym_set`` and ``synonym_delete`` enforce."""
    return permitted(actor, permission, deployment_wide=True)


@transaction.atomic
def synonym_set(*, term: str, canonical: str, actor: User, now: datetime | None = None) -> Synonym:
    require(actor, CHANGE_SYNONYM, deployment_wide=True, message=LEXICON_REFUSED)
    now = now or clock.now()
    term, canonical = _check_term(term, "term"), _check_term(canonical, "canonical")
    if term == canonical:
        raise ValidationFailure("canonical", "must differ from the term")
    synonym, _ = Synonym.objects.update_or_create(term=term, defaults={"canonical": canonical})
    # A new stamp tells caches and the indexes that the lexicon changed; the indexes follow in
    # the background (searches use the lexicon each was computed under until then).
    lexicon_stamp_renewed()
    # The experience retrieval index, above: its expanded postings follow, queued.
    dispatch(LexiconChanged(now=now))
    lexicon_reindex_task.enqueue()
    event_record(
        actor=actor,
        action=Action.LEXICON_CHANGE,
        target=f"synonym:{term}",
        details={"canonical": canonical},
        at=now,
    )
    return synonym


@transaction.atomic
def synonym_delete(*, synonym: Synonym, actor: User, now: datetime | None = None) -> None:
    require(actor, DELETE_SYNONYM, deployment_wide=True, message=LEXICON_REFUSED)
    now = now or clock.now()
    term = synonym.term
    Synonym.objects.filter(pk=synonym.pk).delete()
    lexicon_stamp_renewed()
    dispatch(LexiconChanged(now=now))
    lexicon_reindex_task.enqueue()
    event_record(
        actor=actor,
        action=Action.LEXICON_CHANGE,
        target=f"synonym:{term}",
        details={"deleted": True},
        at=now,
    )
