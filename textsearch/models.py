"""The index's tables, as Django abstract models: each client app declares its concrete scope,
entry and posting models on these (knowledge: ``SearchScope``, ``SearchEntry``,
``PostingList``; experience: ``IndexScope``, ``IndexEntry``, ``IndexPosting``), so the tables
stay the apps' own (their names, migrations and permissions) while what every index holds is
declared once. ``textsearch.postings`` writes them.

A concrete posting model adds its ``scope`` (a foreign key to its scope model, ``related_name``
"+", no index of its own: the unique (scope, token) constraint serves) and that constraint.
"""

from __future__ import annotations

from typing import Any

from django.db import models


class IndexedScope(models.Model):
    """One scope key of an index (the concrete model declares its key's columns). ``arrays``
    packs, per entry of the scope, what the gate and the ranking need, in the index's own
    record dtype, by entry id."""

    arrays = models.BinaryField(default=b"")

    class Meta:
        abstract = True


class IndexedEntry(models.Model):
    """One indexed item version in one scope: the sizes of its raw and expanded token sets, and
    the expanded set the postings hold for it (what a lexicon change compares with)."""

    raw_size = models.PositiveIntegerField()
    expanded_size = models.PositiveIntegerField()
    expanded_tokens = models.TextField(default="")

    class Meta:
        abstract = True


def posting_scope(scope_model: Any) -> Any:
    """A concrete posting model's ``scope``: no index of its own (the constraint serves)."""
    return models.ForeignKey(
        scope_model, on_delete=models.CASCADE, related_name="+", db_index=False
    )


def posting_unique(name: str) -> models.UniqueConstraint:
    """A concrete posting model's constraint: one list per scope and token."""
    return models.UniqueConstraint(fields=["scope", "token"], name=name)


class Posting(models.Model):
    """Token → the sorted entry ids of one scope whose raw (expanded) token set holds it."""

    token = models.CharField(max_length=100)
    raw = models.BinaryField(default=b"")
    expanded = models.BinaryField(default=b"")

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.scope_id}:{self.token}"  # type: ignore[attr-defined]


class IndexedDelta(models.Model):
    """One change to a scope's index since its array and posting lists were last merged
    (``textsearch.delta``): an entry added (its packed record, whose ``order`` is its place
    among the merged array's entries, and its raw and expanded token keys) or taken out
    (``removed``; the tokens its posting lists still hold it under). The concrete model adds
    its ``scope`` and the entry's tie key (``item_id``: the item's public id). Appended in the
    writer's transaction, folded into the scope's array and posting lists by the index's merge
    task; the id orders a scope's changes (its writers queue on the scope's row)."""

    entry = models.BigIntegerField()  # the entry's id (a removal outlives its entry's row)
    removed = models.BooleanField(default=False)
    record = models.BinaryField(default=b"")
    raw_tokens = models.TextField(default="", blank=True)
    expanded_tokens = models.TextField(default="", blank=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{'-' if self.removed else '+'}{self.item_id} in {self.scope_id}"  # type: ignore[attr-defined]
