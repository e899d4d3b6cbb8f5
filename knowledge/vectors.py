"""The search index as a space of the semantic index: its scopes, and per scope each entry with
its document version and the text the lexical branches read (title and text)."""

from __future__ import annotations

from collections.abc import Sequence

from knowledge.lexicon import searchable
from knowledge.models import SearchEntry, SearchScope
from knowledge.postings import VECTOR_SPACE
from semantic.spaces import Entry, Space


def _scopes() -> list[int]:
    return list(SearchScope.objects.order_by("pk").values_list("pk", flat=True))


def _entries(scope: int, among: Sequence[int] | None = None) -> list[Entry]:
    chosen = SearchEntry.objects.filter(scope_id=scope)
    if among is not None:
        chosen = chosen.filter(pk__in=list(among))
    rows = chosen.order_by("pk").values_list(
        "pk", "document_id", "document__title", "document__text"
    )
    return [Entry(pk, str(document), searchable(title, text)) for pk, document, title, text in rows]


def _entries_after(scope: int, entry: int, limit: int) -> list[Entry]:
    after = SearchEntry.objects.filter(scope_id=scope, pk__gt=entry).order_by("pk")
    return _entries(scope, list(after.values_list("pk", flat=True)[:limit]))


def _entry_ids(scope: int) -> list[int]:
    return list(SearchEntry.objects.filter(scope_id=scope).values_list("pk", flat=True))


SPACE = Space(VECTOR_SPACE, _scopes, _entries, _entry_ids, _entries, _entries_after)
