"""The lexicon the search index was computed under, and its rebuild after a lexicon change.

A synonym change commits at once (the lexicon's stamp is renewed in its transaction) and queues
:func:`knowledge.tasks.lexicon_reindex_task`; it does not rewrite any document or posting list
itself. Until that task commits, the index's expanded token sets are those of the lexicon recorded
in ``LexiconState.indexed_stamp``/``indexed_lexicon``, and searches expand their queries with that
same lexicon, so every answer is the exact answer under one lexicon. New versions are tokenized
under it too. :func:`reindexed` recomputes the expanded sets of every version under the current
lexicon, moves their postings and records the new lexicon as the index's, in one transaction:
searches never wait for it (they read the last committed index) and switch lexicon when it
commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction

from knowledge import postings
from knowledge.domain import expand, tokenize
from knowledge.models import Document, LexiconState

# Stamp → lexicon, per process. A stamp always names the same lexicon, so entries never go
# stale; only the last few are kept.
_cache: dict[str, dict[str, str]] = {}
_KEPT = 4


def _remember(stamp: str | None, lexicon: dict[str, str]) -> None:
    if stamp is None:
        return
    _cache.pop(stamp, None)
    _cache[stamp] = lexicon
    while len(_cache) > _KEPT:
        del _cache[next(iter(_cache))]


def indexed_read() -> tuple[str | None, dict[str, str]]:
    """The index's stamp and lexicon, read now. An index that recorded none (a database whose
    state row was emptied) follows the current lexicon."""
    row = LexiconState.objects.filter(pk=1).values_list("indexed_stamp", "indexed_lexicon").first()
    if row is None or not row[0]:
        stamp, lexicon = postings.consistent_lexicon()
    else:
        stamp, lexicon = row[0], dict(row[1])
    _remember(stamp, lexicon)
    return stamp, lexicon


def indexed_for(stamp: str | None) -> tuple[str | None, Mapping[str, str]]:
    """``(stamp, lexicon)`` of the index: from the cache when ``stamp`` is cached, else read."""
    if stamp is not None:
        cached = _cache.get(stamp)
        if cached is not None:
            return stamp, cached
    return indexed_read()


def last_indexed_stamp() -> str | None:
    """The index stamp this process saw last (no query); searches check it in their statement."""
    return next(reversed(_cache), None)


def indexed_lexicon() -> dict[str, str]:
    """The lexicon new versions are tokenized under (the index's), read now."""
    return indexed_read()[1]


def searchable(title: str, text: str) -> str:
    return f"{title}\n{text}"


def _expanded_recomputed(documents: Iterable[Any], lexicon: Mapping[str, str]) -> list[Any]:
    changed = []
    for document in documents:
        tokens = " ".join(
            sorted(tokenize(expand(searchable(document.title, document.text), lexicon)))
        )
        if tokens != document.expanded_tokens:
            document.expanded_tokens = tokens
            changed.append(document)
    Document.objects.bulk_update(changed, ["expanded_tokens"], batch_size=1000)
    postings.expanded_changed(changed)
    return changed


def _documents(after: int = 0) -> Any:
    return (
        Document.objects.filter(pk__gt=after)
        .only("id", "title", "text", "expanded_tokens")
        .order_by("pk")
    )


@transaction.atomic
def reindexed() -> int:
    """Bring the index to the current lexicon; returns the versions whose expanded set changed.

    Running it again writes nothing (the index already records the current stamp). A run that
    finds, when it is about to record, that the lexicon changed again in the meantime writes
    nothing: the later change queued a run of its own, which brings the index to it.
    """
    stamp, lexicon = postings.consistent_lexicon()
    if stamp is None:
        return 0
    recorded = LexiconState.objects.filter(pk=1).values_list("indexed_stamp", flat=True).first()
    if recorded == stamp:
        return 0
    last = _documents().values_list("pk", flat=True).last() or 0
    changed = _expanded_recomputed(_documents().filter(pk__lte=last).iterator(2000), lexicon)
    # Hold the state row while recording: a version written meanwhile was tokenized under the
    # index's old lexicon and is looked at again; a lexicon change meanwhile waits, or won.
    state = LexiconState.objects.select_for_update().get(pk=1)
    if state.stamp != stamp:
        transaction.set_rollback(True)
        return 0
    changed += _expanded_recomputed(_documents(after=last), lexicon)
    state.indexed_stamp, state.indexed_lexicon = stamp, lexicon
    state.save(update_fields=["indexed_stamp", "indexed_lexicon"])
    return len(changed)
