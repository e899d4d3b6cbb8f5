"""The retrieval index as a space of the semantic index: its scopes, and per scope each entry
with its item and the text the lexical branches rank it by (``Kind.text``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np

from experience.index.models import IndexEntry, IndexScope
from experience.index.postings import KINDS, VECTOR_SPACE, item_texts
from reviewconsole.scopes import SCOPE_FIELDS
from semantic import embedders
from semantic.branch import packed
from semantic.spaces import Entry, Space

logger = logging.getLogger(__name__)


def _scopes() -> list[int]:
    return list(IndexScope.objects.order_by("pk").values_list("pk", flat=True))


def _entries(scope: int) -> list[Entry]:
    rows = list(
        IndexEntry.objects.filter(scope_id=scope)
        .order_by("pk")
        .values_list("pk", "item_id", "kind")
    )
    texts: dict[str, str] = {}
    for kind in KINDS.values():
        texts.update(item_texts(kind, [item for _, item, k in rows if k == kind.name]))
    return [Entry(pk, item, texts[item]) for pk, item, _ in rows if item in texts]


SPACE = Space(VECTOR_SPACE, _scopes, _entries)


def nearest_approved(
    kind: str, scope: Mapping[str, str], text: str, threshold: float
) -> list[tuple[str, float]]:
    """The approved items of ``kind`` in exactly ``scope`` whose vector is at least
    ``threshold`` similar (cosine) to ``text``'s, best first: ``(item id, similarity)``.

    Compared as passages (an item's text against items' texts), with the scope's packed vectors
    of the configured model; nothing while the branch is off, the embedder is unavailable, or
    the scope is not packed yet (the lexical near-duplicates still are)."""
    if not embedders.enabled():
        return []
    scope_id = (
        IndexScope.objects.filter(**{name: scope[name] for name in SCOPE_FIELDS})
        .values_list("pk", flat=True)
        .first()
    )
    if scope_id is None:
        return []
    try:
        embedder = embedders.configured()
        if embedder is None:
            return []
        found = packed(VECTOR_SPACE, scope_id)
        if found is None or found.model != embedder.name or len(found.keys) == 0:
            return []
        vector = embedder.passages([text])[0]
    except (embedders.EmbedderUnavailable, ConnectionError, OSError, TimeoutError) as error:
        logger.warning("semantic near-duplicates skipped: %s", error)
        return []
    rows = list(
        IndexEntry.objects.filter(scope_id=scope_id, kind=kind).values_list("pk", "item_id")
    )
    if not rows:
        return []
    entry_ids = np.array([pk for pk, _ in rows], dtype=np.int64)
    at, hit = found.rows(entry_ids)
    if not hit.any() or found.matrix.shape[1] != vector.shape[0]:
        return []
    similarity = np.einsum("ij,j->i", found.matrix, vector)[at[hit]]
    items = [item for (_, item), ok in zip(rows, hit, strict=True) if ok]
    close = [(item, float(s)) for item, s in zip(items, similarity, strict=True) if s >= threshold]
    return sorted(close, key=lambda pair: (-pair[1], pair[0]))
