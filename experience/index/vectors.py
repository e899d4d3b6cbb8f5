"""The retrieval index as a space of the semantic index: its scopes, and per scope each entry
with its item and the text the lexical branches rank it by (``Kind.text``)."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np
from django.conf import settings

from experience.index.models import IndexEntry, IndexScope
from experience.index.postings import KINDS, VECTOR_SPACE, item_texts
from knowledge.lexicon import indexed_lexicon
from reviewconsole.scopes import SCOPE_FIELDS
from semantic import duplicates, embedders
from semantic.branch import packed
from semantic.duplicates import LANGUAGES
from semantic.spaces import Entry, Space

logger = logging.getLogger(__name__)


def _scopes() -> list[int]:
    return list(IndexScope.objects.order_by("pk").values_list("pk", flat=True))


def _entries(scope: int, among: Sequence[int] | None = None) -> list[Entry]:
    chosen = IndexEntry.objects.filter(scope_id=scope)
    if among is not None:
        chosen = chosen.filter(pk__in=list(among))
    rows = list(chosen.order_by("pk").values_list("pk", "item_id", "kind"))
    texts: dict[str, str] = {}
    for kind in KINDS.values():
        texts.update(item_texts(kind, [item for _, item, k in rows if k == kind.name]))
    return [Entry(pk, item, texts[item]) for pk, item, _ in rows if item in texts]


def _entries_after(scope: int, entry: int, limit: int) -> list[Entry]:
    after = IndexEntry.objects.filter(scope_id=scope, pk__gt=entry).order_by("pk")
    return _entries(scope, list(after.values_list("pk", flat=True)[:limit]))


def _entry_ids(scope: int) -> list[int]:
    return list(IndexEntry.objects.filter(scope_id=scope).values_list("pk", flat=True))


SPACE = Space(VECTOR_SPACE, _scopes, _entries, _entry_ids, _entries, _entries_after)

# Passage vectors of texts compared by the merge rule, per model and text, so a worker embeds an
# item's text before it opens its write transaction (``meaning_prepared``) and the comparison
# inside it embeds nothing: the model (loaded on first use, seconds on a busy machine) never runs
# while the database's write lock is held.
_passages: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_passages_lock = threading.Lock()
PASSAGE_CACHE_SIZE = 256


def _passage_vector(embedder: embedders.Embedder, text: str) -> np.ndarray:
    key = (embedder.name, text)
    with _passages_lock:
        kept = _passages.get(key)
        if kept is not None:
            _passages.move_to_end(key)
            return kept
    vector: np.ndarray = embedder.passages([text])[0]
    with _passages_lock:
        _passages[key] = vector
        while len(_passages) > PASSAGE_CACHE_SIZE:
            _passages.popitem(last=False)
    return vector


def meaning_prepared(text: str | None = None) -> None:
    """Load the model and embed its background and ``text`` now, outside any transaction, so
    that ``same_experience_approved(…, text)`` run next in a write transaction only reads (with
    no ``text``, only the model is readied: a text not known yet costs one short passage). Nothing
    while the branch is off; an unavailable embedder is left for the comparison to report."""
    if not embedders.enabled():
        return
    try:
        embedder = embedders.configured()
        if embedder is None:
            return
        duplicates.background(embedder)
        if text is not None:
            _passage_vector(embedder, text)
    except (embedders.EmbedderUnavailable, ConnectionError, OSError, TimeoutError):
        return


def same_experience_approved(
    kind: str, scope: Mapping[str, str], text: str
) -> list[tuple[str, float]]:
    """The approved items of ``kind`` in exactly ``scope`` that tell the same experience as
    ``text`` by the merge rule (``semantic.duplicates``): significant against the model's
    background on meaning alone, or, across languages, with the operator's lexicon naming the
    same concepts in both. ``(item id, cosine)``, the most significant first.

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
        vector = _passage_vector(embedder, text)
        reference = duplicates.background(embedder)
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
    peers = found.matrix[at[hit]]
    cosines = np.einsum("ij,j->i", peers, vector)
    items = [item for (_, item), ok in zip(rows, hit, strict=True) if ok]
    own = duplicates.language(text)
    own_means = {lang: float(reference.means(vector[None, :], lang)[0]) for lang in LANGUAGES}
    peer_means = reference.means(peers, own)
    bars = duplicates.thresholds(
        embedder.name,
        alone=getattr(settings, "SEMANTIC_DUPLICATE_SIGNIFICANCE", None),
        agree=getattr(settings, "SEMANTIC_DUPLICATE_AGREEING", None),
    )

    # Each peer's significance were it in either language (its language is read from its text
    # below, for the few that could pass the lower bar).
    scores = {
        lang: duplicates.significance(
            cosines,
            mean_first=own_means[lang],
            mean_second=peer_means,
            languages=(own, lang),
            sigma=reference.sigma,
        )
        for lang in LANGUAGES
    }
    lowest = min(bars.alone, bars.agree)
    best = np.max(np.stack([scores[lang] for lang in LANGUAGES]), axis=0)
    reachable = [int(row) for row in np.flatnonzero(best >= lowest)]
    if not reachable:
        return []
    texts = item_texts(KINDS[kind], [items[row] for row in reachable])
    compiled = duplicates.concept_pattern(indexed_lexicon())
    own_concepts = duplicates.concepts_in(text, compiled)
    chosen: list[tuple[float, str, float]] = []
    for row in reachable:
        other = texts.get(items[row])
        if other is None:
            continue
        lang = duplicates.language(other)
        score = float(scores[lang][row])
        agree = duplicates.concepts_agree(own_concepts, duplicates.concepts_in(other, compiled))
        if duplicates.same_experience(score, agree=agree, across=lang != own, bars=bars):
            chosen.append((score, items[row], float(cosines[row])))
    chosen.sort(key=lambda found: (-found[0], found[1]))
    return [(item, cosine) for _, item, cosine in chosen]
