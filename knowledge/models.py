from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from reviewconsole.errors import ImmutableContentError
from reviewconsole.itemids import ItemId
from textsearch.models import (
    IndexedDelta,
    IndexedEntry,
    IndexedScope,
    Posting,
    posting_scope,
    posting_unique,
)


class DocumentKind(models.TextChoices):
    RULE = "rule", _("rule")
    CASE = "case", _("historical case")


# Fields that may change after a version is saved: its lifecycle, never its content.
LIFECYCLE_FIELDS = frozenset(
    {
        "approved",
        "approved_by",
        "approved_at",
        "revoked",
        "revoked_by",
        "revoked_at",
        "revoked_reason",
        "expanded_tokens",
        # A draft's change note is written until it is submitted; the submission is lifecycle.
        "change_note",
        "submitted_at",
        "submitted_by",
    }
)


class Document(models.Model):
    """One version of a business rule or confirmed historical case. Content is immutable."""

    doc_key = models.SlugField(max_length=100)
    version = models.PositiveIntegerField()
    tenant = models.CharField(max_length=64)
    brand = models.CharField(max_length=64)
    campaign = models.CharField(max_length=64)
    kind = models.CharField(max_length=8, choices=DocumentKind.choices)
    rule_key = models.CharField(max_length=100, blank=True)
    title = models.CharField(max_length=300)
    text = models.TextField()
    source = models.CharField(max_length=500)
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField(null=True, blank=True)
    published_at = models.DateTimeField()
    requirements = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64)
    # Token sets of title + text, space-separated, computed when the version is saved.
    raw_tokens = models.TextField(editable=False)
    expanded_tokens = models.TextField(editable=False)

    approved = models.BooleanField(default=False)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    revoked = models.BooleanField(default=False)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_reason = models.TextField(blank=True)
    # What this version changes, in its author's words: required to submit it for review.
    change_note = models.TextField(blank=True)
    # A draft is its author's until submitted; only a submitted version is in reviewers' queue
    # (an import submits what it stores).
    submitted_at = models.DateTimeField(null=True, blank=True)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["doc_key", "-version"]
        constraints = [
            # Keys are chosen by the importing tenant: each tenant has its own key space
            # (docs/architecture.md, Tenancy), so ``doc:KEY@N`` names a row only within a tenant.
            models.UniqueConstraint(
                fields=["tenant", "doc_key", "version"], name="document_tenant_key_version"
            ),
            models.CheckConstraint(
                condition=models.Q(version__gte=1), name="document_version_positive"
            ),
            models.CheckConstraint(
                condition=models.Q(valid_to__isnull=True)
                | models.Q(valid_to__gt=models.F("valid_from")),
                name="document_validity_ordered",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "brand", "campaign"]),
            # ``doc:KEY@N`` resolved among every tenant a deployment-wide user sees.
            models.Index(fields=["doc_key", "version"], name="document_key_version_idx"),
        ]
        permissions = [
            ("approve_document", "Can approve knowledge documents"),
            ("revoke_document", "Can revoke knowledge documents"),
            ("search_knowledge", "Can search the knowledge base"),
        ]

    def __str__(self) -> str:
        return self.public_id

    def save(self, *args: Any, **kwargs: Any) -> None:
        update_fields = kwargs.get("update_fields")
        if self.pk is not None and not (update_fields and set(update_fields) <= LIFECYCLE_FIELDS):
            raise ImmutableContentError(
                f"{self.public_id} is saved; a change must be saved as a new version"
            )
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        """The tenant-qualified page: ``/knowledge/<key>/v<N>/`` is ambiguous for a user who
        sees two tenants with that key."""
        return reverse("knowledge:tenant-document-detail", args=self.url_args)

    @property
    def url_args(self) -> tuple[str, str, int]:
        """What every tenant-qualified document URL takes: tenant, key, version."""
        return (self.tenant, self.doc_key, self.version)

    @property
    def item_id(self) -> ItemId:
        return ItemId.document(self.doc_key, self.version)

    @property
    def public_id(self) -> str:
        return str(self.item_id)

    @property
    def status(self) -> str:
        """``draft`` (its author's, in no queue), ``submitted`` (awaiting approval),
        ``approved`` or ``revoked``."""
        if self.revoked:
            return "revoked"
        if self.approved:
            return "approved"
        return "submitted" if self.submitted_at is not None else "draft"

    @property
    def currency(self) -> str:
        """``current`` for the approved version search answers with, ``superseded`` for an
        approved one a later approved version replaced, else empty; read from the
        ``current_version`` annotation (``knowledge.selectors.with_current_version``)."""
        current = getattr(self, "current_version", None)
        if not self.approved or self.revoked or current is None:
            return ""
        return "current" if self.version == current else "superseded"

    def valid_from_passed(self, now: Any) -> bool:
        """A version not yet approved whose ``valid_from`` is already past: it applies from its
        approval, not from that time."""
        return not self.approved and not self.revoked and self.valid_from < now


class DocumentStore(models.Model):
    """Store membership, one row per store, with the scope copied for an index-only gate."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="store_rows")
    tenant = models.CharField(max_length=64)
    brand = models.CharField(max_length=64)
    campaign = models.CharField(max_length=64)
    store = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["document", "store"], name="document_store_unique"),
        ]
        indexes = [
            models.Index(
                fields=["tenant", "brand", "campaign", "store", "document"],
                name="document_store_scope",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.document_id}:{self.store}"


class Synonym(models.Model):
    """One lexicon entry: ``term`` is rewritten to ``canonical`` in the expanded branch."""

    term = models.CharField(max_length=50, unique=True)
    canonical = models.CharField(max_length=50)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["canonical", "term"]

    def __str__(self) -> str:
        return f"{self.term} → {self.canonical}"


# --- the search index: postings per scope, maintained when documents are approved or revoked ---


class SearchScope(IndexedScope):
    """One scope key (tenant, brand, campaign, store) that postings and entries hang from.

    ``arrays`` packs, per entry of the scope, what the gate and the ranking need (see
    ``knowledge.postings.ENTRY_DTYPE``), rewritten when the scope's delta
    (``SearchDelta``) is merged.
    """

    tenant = models.CharField(max_length=64)
    brand = models.CharField(max_length=64)
    campaign = models.CharField(max_length=64)
    store = models.CharField(max_length=64)
    multi_version = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "brand", "campaign", "store"], name="search_scope_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant}/{self.brand}/{self.campaign}/{self.store}"


class SearchEntry(IndexedEntry):
    """One approved, unrevoked document version in one scope: what the gate and ranking read.

    ``has_newer``: another approved, unrevoked version of the same doc_key with a higher version
    is in this scope. ``rule_contested``: another document (doc_key) of the same ``rule_key`` in
    this scope has other requirements (only then can this entry be in conflict).
    """

    scope = models.ForeignKey(SearchScope, on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="+")
    public_id = models.CharField(max_length=120)
    doc_key = models.SlugField(max_length=100, db_index=False)
    version = models.PositiveIntegerField()
    rule_key = models.CharField(max_length=100, blank=True)
    requirements_hash = models.CharField(max_length=64)
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField(null=True, blank=True)
    published_at = models.DateTimeField()
    has_newer = models.BooleanField(default=False)
    rule_contested = models.BooleanField(default=False)

    class Meta:
        verbose_name_plural = "search entries"
        constraints = [
            models.UniqueConstraint(fields=["scope", "document"], name="search_entry_unique"),
        ]
        indexes = [
            models.Index(fields=["scope", "doc_key", "version"], name="search_entry_versions"),
            models.Index(fields=["scope", "rule_key"], name="search_entry_rules"),
            # Where a new entry falls in its scope's public id order (the array's tie order).
            models.Index(fields=["scope", "public_id"], name="search_entry_order"),
        ]

    def __str__(self) -> str:
        return f"{self.public_id} in {self.scope_id}"


class PostingList(Posting):
    """A search scope's posting list of one token (``textsearch.models.Posting``)."""

    scope = posting_scope(SearchScope)

    class Meta:
        constraints = [posting_unique("posting_list_unique")]


class SearchDelta(IndexedDelta):
    """One change to a search scope's index since its last merge (``textsearch.models.
    IndexedDelta``; ``knowledge.postings``: "The delta"): ``item_id`` is the version's public
    id (what orders its ties), and an addition's record is followed by the ids of the entries
    whose document, rule group and requirements it shares (``knowledge.postings.REFS_DTYPE``),
    so a reader numbers them as the merged array does. Folded by ``search_merge_task``."""

    scope = models.ForeignKey(SearchScope, on_delete=models.CASCADE, related_name="+")
    item_id = models.CharField(max_length=120)

    class Meta:
        verbose_name_plural = "search deltas"
        indexes = [models.Index(fields=["scope", "id"], name="knowledge_delta_scope")]


class LexiconState(models.Model):
    """A stamp that changes with every lexicon change, for caches and the postings they match.

    ``indexed_stamp`` and ``indexed_lexicon`` are the lexicon the search index's expanded token
    sets were computed under: searches expand queries with it, so they stay consistent while a
    background task (``knowledge.lexicon.reindexed``) brings the index to the current lexicon.
    """

    stamp = models.CharField(max_length=32)
    indexed_stamp = models.CharField(max_length=32, blank=True)
    indexed_lexicon = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return self.stamp


def lexicon_stamp_renewed(model: Any = LexiconState) -> str:
    """Give the lexicon a new stamp (in the caller's transaction); returns it."""
    stamp = uuid.uuid4().hex
    if not model.objects.filter(pk=1).update(stamp=stamp):
        model.objects.create(pk=1, stamp=stamp)
    return stamp
