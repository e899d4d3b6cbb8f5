"""The retrieval index of reviewed memory: per exact scope, token → the entries that hold it.

Imported by ``experience.models`` so Django registers these models with the app. What they hold
and how they are kept is in ``experience.index.postings``.
"""

from __future__ import annotations

from django.db import models

from experience.core.models import ID_LENGTH, ScopeFields
from reviewconsole.scopes import SCOPE_FIELDS
from textsearch.models import (
    IndexedDelta,
    IndexedEntry,
    IndexedScope,
    Posting,
    posting_scope,
    posting_unique,
)


class IndexScope(ScopeFields, IndexedScope):
    """One exact five-field scope. ``stamp`` is the lexicon stamp its entries' expanded token
    sets (and expanded posting lists) were computed under; retrieval trusts them only while it
    equals the current stamp.

    ``arrays`` packs the gate times, token-set sizes, kind and tie order of every entry of the
    scope into one array (``experience.index.postings.ENTRY_DTYPE``, by entry id), kept in step
    with the entries in the writer's transaction: retrieval reads it with the query's posting
    lists in one statement. NULL when not packed (retrieval then ranks from the texts)."""

    stamp = models.CharField(max_length=32, blank=True)
    # NULL: not packed (retrieval then ranks from the texts), where knowledge's is empty.
    arrays = models.BinaryField(null=True)  # type: ignore[assignment]

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=list(SCOPE_FIELDS),
                name="experience_index_scope_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant}/{self.brand}/{self.store}/{self.campaign}/{self.deployment}"


class IndexEntry(IndexedEntry):
    """One approved item of one kind (case, skill, lesson, …) in its scope's index.

    Times are microseconds since the epoch, what the gate compares with ``now``.
    """

    scope = models.ForeignKey(IndexScope, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16)
    item_id = models.CharField(max_length=ID_LENGTH, unique=True)
    title = models.CharField(max_length=300)
    valid_from = models.BigIntegerField()
    valid_to = models.BigIntegerField()
    approved_at = models.BigIntegerField()
    # A lesson's confidence inputs as JSON (experience.index.lesson_inputs), kept in step with its cited
    # cases, incident merges and conflicts; empty when not written yet (recall reads the tables).
    evidence = models.TextField(default="", blank=True)
    # What a context block line shows after the title (a case's summary, else its search text; a
    # skill's "when"; a lesson's conclusion: ``experience.index.postings.Kind.brief``). Like the
    # title and the token sets, it is the approved item's and does not change.
    block_text = models.TextField(default="", blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["scope", "kind"], name="experience_index_entry_kind"),
            # Where a new entry falls in its scope's id order (the packed array's tie order).
            models.Index(fields=["scope", "item_id"], name="experience_index_entry_order"),
        ]

    def __str__(self) -> str:
        return f"{self.item_id} in {self.scope_id}"


class IndexPosting(Posting):
    """A retrieval scope's posting list of one token (``textsearch.models.Posting``)."""

    scope = posting_scope(IndexScope)

    class Meta:
        constraints = [posting_unique("experience_posting_unique")]


class IndexDelta(IndexedDelta):
    """One change to a retrieval scope's index since its last merge (``textsearch.models.
    IndexedDelta``; ``experience.index.postings``: "The delta"), folded by
    ``index_merge_task``."""

    scope = models.ForeignKey(IndexScope, on_delete=models.CASCADE, related_name="+")
    item_id = models.CharField(max_length=ID_LENGTH)

    class Meta:
        indexes = [models.Index(fields=["scope", "id"], name="experience_index_delta_scope")]
