"""The retrieval index of reviewed memory: per exact scope, token → the entries that hold it.

Imported by ``experience.models`` so Django registers these models with the app. What they hold
and how they are kept is in ``experience.postings``.
"""

from __future__ import annotations

from django.db import models

from experience.core.models import ID_LENGTH, ScopeFields
from reviewconsole.scopes import SCOPE_FIELDS


class IndexScope(ScopeFields):
    """One exact five-field scope. ``stamp`` is the lexicon stamp its entries' expanded token
    sets (and expanded posting lists) were computed under; retrieval trusts them only while it
    equals the current stamp."""

    stamp = models.CharField(max_length=32, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=list(SCOPE_FIELDS),
                name="experience_index_scope_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant}/{self.brand}/{self.store}/{self.campaign}/{self.deployment}"


class IndexEntry(models.Model):
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
    raw_size = models.PositiveIntegerField()
    expanded_size = models.PositiveIntegerField()
    # The expanded set the postings hold for this entry (what a lexicon change compares with).
    expanded_tokens = models.TextField(default="")
    # A lesson's confidence inputs as JSON (experience.lesson_index), kept in step with its cited
    # cases, incident merges and conflicts; empty when not written yet (recall reads the tables).
    evidence = models.TextField(default="", blank=True)

    class Meta:
        indexes = [models.Index(fields=["scope", "kind"], name="experience_index_entry_kind")]

    def __str__(self) -> str:
        return f"{self.item_id} in {self.scope_id}"


class IndexPosting(models.Model):
    """Token → the sorted entry ids of one scope whose raw (expanded) token set holds it."""

    scope = models.ForeignKey(
        IndexScope, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    token = models.CharField(max_length=100)
    raw = models.BinaryField(default=b"")
    expanded = models.BinaryField(default=b"")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "token"], name="experience_posting_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.scope_id}:{self.token}"
