"""The retrieval index of reviewed memory: candidates from the query's tokens, not the scope.

Every approved item of every registered kind (cases, skills and lessons; :data:`KINDS`) has one
``IndexEntry`` in the ``IndexScope`` of its exact five-field scope, with its gate times and the
sizes of its raw and expanded token sets; per scope and token an ``IndexPosting`` holds the
sorted entry ids whose raw (expanded) set contains the token. The posting lists are written by
the engine under knowledge search too (``textsearch.postings.Changes``/``changes_applied``).
Each scope also packs its entries' gate times, set sizes, kind and tie order into one array
(``IndexScope.arrays``, :data:`ENTRY_DTYPE`), so that a retrieval reads what ranking needs for
the whole scope and the query's posting lists in one statement (:func:`scope_read`).

Written at write time, in the writer's transaction: every review decision calls
:func:`item_status_followed` with the item's new status (``experience.review.lifecycle``), which
indexes an approved item and takes out one in any other status
(revoked, superseded, rejected). Both lock the scope's row first (concurrent writers into one
scope queue on it) and append the change to the scope's delta (``IndexDelta``) instead of
rewriting its array and posting lists; :func:`index_merge_task` folds the delta in the background
once it reaches :func:`merge_threshold`, and :func:`scope_read` applies it on top of the merged
array and lists (:func:`with_delta`), so every change is visible at the next read
(docs/architecture.md, "Incremental indexes"). A lexicon
change leaves the expanded postings of every scope behind: each scope carries the lexicon stamp
they were computed under, and retrieval uses its postings only while that stamp is the current
one, ranking from the items' texts otherwise (correct, only slower). :func:`expanded_refreshed`
(a background task queued by every lexicon change) brings each scope to the current stamp, one
scope per transaction, so searches are never blocked; it also packs any scope whose array is
missing.

Ranking, the gate and hydration are the retrieval pipeline's (``experience.retrieval.pipeline``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from django.db import connection, transaction
from django.db.models import Q
from django_tasks import task

from experience.cases.models import Case, Skill
from experience.core.models import Status
from experience.index.lesson_inputs import evidence_refreshed
from experience.index.models import IndexDelta, IndexEntry, IndexPosting, IndexScope
from experience.lessons.models import Lesson
from knowledge import postings as kp
from knowledge.models import LexiconState
from reviewconsole.background import retrying
from reviewconsole.scopes import SCOPE_FIELDS
from reviewconsole.statements import prepared_cursor
from semantic.tasks import scopes_changed, space_reset
from textsearch import delta as delta_mod
from textsearch import postings as ts
from textsearch.arrays import CACHE as _arrays_cache
from textsearch.arrays import (
    KEPT_TOKENS,
    POSTING_VERSION,
    ROW_VERSION,
    KeptLists,
    arrays_column,
    kept_list_column,
)
from textsearch.delta import APPLIED, DELTAS, Delta, DeltaRow, delta_row
from textsearch.delta import with_delta as shared_with_delta
from textsearch.domain import ParsedQuery, expand, parse_query, reparsed, tokenize
from textsearch.postings import (
    Changes,
    changes_applied,
    ids_of,
    micros,
    moment,
    placeholders,
    scope_ids,
    token_key,
)


@dataclass(frozen=True)
class Kind:
    """A kind of reviewed memory that retrieval ranks: its model, the text it is ranked by, and
    the text a context block shows for it."""

    name: str
    model: Callable[[], Any]
    text: Callable[[Any], str]
    # The text's columns, for reading many items without their other fields.
    columns: tuple[str, ...]
    # What a context block line shows after the title, and its columns (kept on the entry).
    brief: Callable[[Any], str]
    brief_columns: tuple[str, ...]
    # Called with the ids of items just indexed (live models only): what else their entries keep.
    indexed: Callable[[list[str]], Any] | None = None

    def brief_of(self, values: Sequence[Any]) -> str:
        """:attr:`brief` of an item read as the values of its :attr:`brief_columns`."""
        return self.brief(_Row(self.brief_columns, values))


def _case_model() -> Any:

    return Case


def _skill_model() -> Any:

    return Skill


def _lesson_model() -> Any:

    return Lesson


def _lesson_evidence_refreshed(ids: list[str]) -> int:

    return evidence_refreshed(ids)


# The name of this index's vectors in ``semantic`` (experience/index/vectors.py registers it).
VECTOR_SPACE = "experience"


def skill_text(title: str, when: str) -> str:
    return f"{title}\n{when}"


KINDS: dict[str, Kind] = {
    "case": Kind(
        "case",
        _case_model,
        lambda item: item.search_text,
        ("search_text",),
        brief=lambda item: item.summary or item.search_text,
        brief_columns=("summary", "search_text"),
    ),
    "skill": Kind(
        "skill",
        _skill_model,
        lambda item: skill_text(item.title, item.when),
        ("title", "when"),
        brief=lambda item: item.when,
        brief_columns=("when",),
    ),
    "lesson": Kind(
        "lesson",
        _lesson_model,
        lambda item: item.search_text,
        ("search_text",),
        brief=lambda item: item.conclusion,
        brief_columns=("conclusion",),
        indexed=_lesson_evidence_refreshed,
    ),
}


def kind_of_model(model: Any) -> Kind | None:
    for kind in KINDS.values():
        if kind.model() is model:
            return kind
    return None


@dataclass(frozen=True)
class Models(ts.IndexModels):
    """The models the index writes (the live ones, or a migration's historical ones), keyed by
    the five scope fields."""

    scope_fields: tuple[str, ...] = SCOPE_FIELDS
    # The delta's model (None: a migration's models, older than the delta, write eagerly).
    delta: Any = None


def live() -> Models:

    return Models(IndexScope, IndexEntry, IndexPosting, delta=IndexDelta)


def _key(item: Any) -> tuple[str, ...]:
    return tuple(getattr(item, name) for name in SCOPE_FIELDS)


def _stamp_text(stamp: str | None) -> str:
    return stamp or ""


def _entry(
    kind: str, item: Any, raw: frozenset[str], expanded: frozenset[str], models: Models
) -> dict[str, Any]:
    fields = {
        "kind": kind,
        "item_id": item.pk,
        "title": item.title,
        "valid_from": micros(item.valid_from),
        "valid_to": micros(item.valid_to),
        "approved_at": micros(item.approved_at),
        "raw_size": len(raw),
        "expanded_size": len(expanded),
        "expanded_tokens": " ".join(sorted(expanded)),
        "block_text": KINDS[kind].brief(item),
    }
    # (A migration's model older than a column is written without it.)
    columns = {f.name for f in models.entry._meta.get_fields()}
    return {name: value for name, value in fields.items() if name in columns}


# --- the packed arrays -------------------------------------------------------------------------

# Positions in KINDS (append new kinds at the end: the packed arrays store these codes).
KIND_CODES: dict[str, int] = {name: code for code, name in enumerate(KINDS)}
KIND_NAMES: tuple[str, ...] = tuple(KINDS)

# One record per entry of a scope, ordered by entry id. Times are microseconds since the epoch
# (``textsearch.postings.micros``; valid_to NEVER when open, approved_at NEVER when unknown);
# ``order`` is the rank of the entry's item id among the scope's item ids (ties are ordered by
# id); ``kind`` a code of :data:`KIND_CODES`.
ENTRY_DTYPE = np.dtype(
    [
        ("id", "<i8"),
        ("valid_from", "<i8"),
        ("valid_to", "<i8"),
        ("approved_at", "<i8"),
        ("raw_size", "<i4"),
        ("expanded_size", "<i4"),
        ("order", "<i4"),
        ("kind", "i1"),
    ]
)
_PACKED_FIELDS = (
    "pk",
    "kind",
    "item_id",
    "valid_from",
    "valid_to",
    "approved_at",
    "raw_size",
    "expanded_size",
)


def entries_of(blob: bytes | memoryview | None) -> np.ndarray:
    return ts.entries_of(blob, ENTRY_DTYPE)


def _records(rows: Sequence[tuple[Any, ...]]) -> np.ndarray:
    """``rows`` (:data:`_PACKED_FIELDS`, by entry id) as records, ``order`` left at zero."""
    packed = np.zeros(len(rows), dtype=ENTRY_DTYPE)
    for i, (pk, kind, _item, start, end, approved, raw, expanded) in enumerate(rows):
        packed[i] = (pk, start, end, approved, raw, expanded, 0, KIND_CODES[kind])
    return packed


def _packed(rows: Sequence[tuple[Any, ...]]) -> bytes:
    """The array of a scope whose entries are ``rows`` (:data:`_PACKED_FIELDS`, by entry id)."""
    packed = _records(rows)
    by_item = sorted(range(len(rows)), key=lambda i: rows[i][2])
    packed["order"][by_item] = np.arange(len(rows), dtype=np.int32)
    return packed.tobytes()


def arrays_packed(scope_ids: Iterable[int] | None = None, models: Models | None = None) -> int:
    """Pack the arrays of ``scope_ids`` (default: every scope) from their entries; returns the
    scopes packed. What a rebuild, a lexicon refresh and the migration that added the arrays
    call; a single approval or revocation changes its scope's array in place instead."""
    models = models or live()
    scopes = models.scope.objects.all()
    if scope_ids is not None:
        scopes = scopes.filter(pk__in=list(scope_ids))
    wanted = list(scopes.values_list("pk", flat=True))
    by_scope: dict[int, list[tuple[Any, ...]]] = {pk: [] for pk in wanted}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        for scope_id, *row in (
            models.entry.objects.filter(scope_id__in=chunk)
            .order_by("scope_id", "pk")
            .values_list("scope_id", *_PACKED_FIELDS)
            .iterator(chunk_size=5000)
        ):
            by_scope[scope_id].append(tuple(row))
    for scope_id, rows in by_scope.items():
        models.scope.objects.filter(pk=scope_id).update(arrays=_packed(rows))
    return len(by_scope)


def _scope_locked(scope_id: int, models: Models) -> int | None:
    """Lock the scope's row (``textsearch.delta.scope_locked``); the entries its array holds."""
    return delta_mod.scope_locked(models.scope, scope_id, ENTRY_DTYPE.itemsize)


# --- the delta: changes since the last merge ----------------------------------------------------

# A scope's delta is merged once it holds this many changes, or an eighth of the merged array's
# entries if more: a reader keeps the merged array and fetches only the changes after those it
# holds, so a merge (which every reader fetches whole again) comes once per so many changes.
DELTA_MIN = 64
DELTA_SHARE = 8
REMOVED = -1  # the kind code of a removal's record


def merge_threshold(merged_entries: int) -> int:
    return max(DELTA_MIN, merged_entries // DELTA_SHARE)


def _delta_appended(
    scope_id: int,
    merged_entries: int,
    *,
    entry_id: int,
    item_id: str,
    record: np.ndarray,
    raw: Iterable[str],
    expanded: Iterable[str],
    removed: bool,
    models: Models,
) -> None:
    """Append one change to the scope's delta (``textsearch.delta.delta_appended``)."""
    delta_mod.delta_appended(
        models.delta,
        scope_id,
        threshold=merge_threshold(merged_entries),
        merge=index_merge_task.enqueue,
        entry_id=entry_id,
        item_id=item_id,
        record=record.tobytes(),
        raw=raw,
        expanded=expanded,
        removed=removed,
    )


def _merged_order(scope_id: int, item_id: str, models: Models) -> int:
    return delta_mod.merged_order(models.entry, models.delta, scope_id, "item_id", item_id)


def delta_merged(scope_id: int, models: Models | None = None) -> int:
    """Fold the scope's delta into its posting lists and array (the merge task; the lexicon
    refresh first). Returns the changes folded; nothing when there are none."""
    models = models or live()
    if models.delta is None:
        return 0
    _scope_locked(scope_id, models)
    return _delta_folded(scope_id, models)


@task()
def index_merge_task(scope_id: int, attempt: int = 1) -> int:
    """Merge one scope's delta into its posting lists and array, in one transaction (queued by
    the change that filled the delta; the changes appended meanwhile are merged too, so a run
    after another finds nothing). Returns the changes merged."""
    with retrying(index_merge_task, attempt, scope_id), transaction.atomic():
        return delta_merged(scope_id)


def _delta_folded(scope_id: int, models: Models) -> int:
    folded = delta_mod.postings_folded(models.delta, scope_id, models)
    if folded:
        arrays_packed([scope_id], models)
    return folded


# --- writing entries ----------------------------------------------------------------------------


def _stale_scope_refreshed(scope_id: int, models: Models) -> None:
    """Bring one scope's expanded postings to the current lexicon before writing into it."""
    stamp = models.scope.objects.filter(pk=scope_id).values_list("stamp", flat=True).first()
    current, _ = kp.lexicon_for(kp.lexicon_stamp())
    if stamp != _stamp_text(current):
        _scope_expanded_refresh(scope_id, models)


def item_indexed(kind: str, item: Any, models: Models | None = None) -> None:
    """Index an approved item (nothing when it is already in the index): its entry, and the
    entry added to the scope's delta (or, in a scope not packed yet, to its posting lists and
    array at once)."""
    models = models or live()
    if models.entry.objects.filter(item_id=item.pk).exists():
        return
    created: set[int] = set()
    (scope_id,) = scope_ids([_key(item)], models, created).values()
    merged = _scope_locked(scope_id, models)  # writers into one scope queue here
    stamp, lexicon = kp.lexicon_for(kp.lexicon_stamp())
    if scope_id in created:
        models.scope.objects.filter(pk=scope_id).update(stamp=_stamp_text(stamp))
    else:
        _stale_scope_refreshed(scope_id, models)
    text = KINDS[kind].text(item)
    raw, expanded = tokenize(text), tokenize(expand(text, lexicon))
    entry = models.entry.objects.create(
        scope_id=scope_id, **_entry(kind, item, raw, expanded, models)
    )
    if merged is None or models.delta is None:
        if models.delta is not None:
            _delta_folded(scope_id, models)
        changes = Changes()
        changes.add(scope_id, entry.pk, raw, expanded)
        changes_applied(changes, models)
        arrays_packed([scope_id], models)
    else:
        record = _records([tuple(getattr(entry, name) for name in _PACKED_FIELDS)])
        record["order"] = _merged_order(scope_id, entry.item_id, models)
        _delta_appended(
            scope_id,
            merged,
            entry_id=entry.pk,
            item_id=entry.item_id,
            record=record,
            raw=raw,
            expanded=expanded,
            removed=False,
            models=models,
        )
    if models.entry is live().entry:
        scopes_changed(VECTOR_SPACE, [scope_id])  # the worker embeds the new entry
    hook = KINDS[kind].indexed
    if hook is not None and models.entry is live().entry:
        hook([item.pk])


def item_unindexed(kind: str, item: Any, models: Models | None = None) -> None:
    """Take an item out of the index (revoked, superseded, or no longer approved): its entry
    goes, and its removal is added to the scope's delta (or, in a scope not packed, its posting
    lists and array are written at once). Retrieval stops returning it at its next read."""
    models = models or live()
    row = (
        models.entry.objects.filter(item_id=item.pk)
        .values_list("pk", "scope_id", "expanded_tokens")
        .first()
    )
    if row is None:
        return
    pk, scope_id, expanded = row
    merged = _scope_locked(scope_id, models)
    raw = tokenize(KINDS[kind].text(item))
    models.entry.objects.filter(pk=pk).delete()
    if merged is None or models.delta is None:
        if models.delta is not None:
            _delta_folded(scope_id, models)
        changes = Changes()
        changes.remove(scope_id, pk, raw, expanded.split())
        changes_applied(changes, models)
        arrays_packed([scope_id], models)
        return
    record = np.zeros(1, dtype=ENTRY_DTYPE)
    record["id"], record["kind"] = pk, REMOVED
    _delta_appended(
        scope_id,
        merged,
        entry_id=pk,
        item_id=item.pk,
        record=record,
        raw=raw,
        expanded=expanded.split(),
        removed=True,
        models=models,
    )


def item_status_followed(*, item: Any) -> None:
    """A review decision saved the status of a case, skill or lesson: keep its entry in step
    with it, in the decision's transaction."""

    kind = kind_of_model(type(item))
    if kind is None:
        return
    if item.status == Status.APPROVED:
        item_indexed(kind.name, item)
    else:
        item_unindexed(kind.name, item)


# --- the lexicon: a stamp per scope, refreshed in the background --------------------------------


def _scope_expanded_refresh(scope_id: int, models: Models) -> int:
    """Recompute the expanded sets of one scope's entries under the current lexicon and move
    their postings; stamps the scope and packs its array again. Returns the entries whose set
    changed."""
    _scope_locked(scope_id, models)
    if models.delta is not None:
        _delta_folded(scope_id, models)  # the postings it moves are the merged ones
    stamp, lexicon = kp.consistent_lexicon()
    entries = list(
        models.entry.objects.select_for_update().filter(scope_id=scope_id).order_by("pk")
    )
    changes = Changes()
    touched = []
    by_kind: dict[str, list[Any]] = {}
    for entry in entries:
        by_kind.setdefault(entry.kind, []).append(entry)
    for kind_name, group in by_kind.items():
        kind = KINDS[kind_name]
        texts: dict[str, tuple[Any, ...]] = {}
        for start in range(0, len(group), 900):
            chunk = [e.item_id for e in group[start : start + 900]]
            rows = kind.model().objects.filter(pk__in=chunk).values_list("pk", *kind.columns)
            texts.update((row[0], row[1:]) for row in rows)
        for entry in group:
            columns = texts.get(entry.item_id)
            if columns is None:
                continue
            text = kind.text(_Row(kind.columns, columns))
            new = tokenize(expand(text, lexicon))
            old = frozenset(entry.expanded_tokens.split())
            if new != old:
                changes.remove(scope_id, entry.pk, (), old - new)
                changes.add(scope_id, entry.pk, (), new - old)
                entry.expanded_tokens = " ".join(sorted(new))
                entry.expanded_size = len(new)
                touched.append(entry)
    changes_applied(changes, models)
    models.entry.objects.bulk_update(touched, ["expanded_tokens", "expanded_size"], batch_size=1000)
    models.scope.objects.filter(pk=scope_id).update(stamp=_stamp_text(stamp))
    arrays_packed([scope_id], models)
    return len(touched)


def _has(model: Any, column: str) -> bool:
    """Whether ``model`` (a migration's model, maybe older than ``column``) has the column."""
    return any(f.name == column for f in model._meta.get_fields())


def block_texts_filled(
    models: Models | None = None, *, historical: Mapping[str, Any] | None = None
) -> int:
    """Write each entry's ``block_text`` from its item (the migration that added the column);
    returns the entries written. ``historical`` maps kind names to a migration's models."""
    models = models or live()
    written = 0
    for kind in KINDS.values():
        model = (historical or {}).get(kind.name) or kind.model()
        entries = list(models.entry.objects.filter(kind=kind.name).only("pk", "item_id"))
        for start in range(0, len(entries), 900):
            chunk = entries[start : start + 900]
            rows = model.objects.filter(pk__in=[e.item_id for e in chunk])
            texts = {
                row[0]: kind.brief_of(row[1:])
                for row in rows.values_list("pk", *kind.brief_columns)
            }
            for entry in chunk:
                entry.block_text = texts.get(entry.item_id, "")
            models.entry.objects.bulk_update(chunk, ["block_text"], batch_size=900)
            written += len(chunk)
    return written


def item_texts(kind: Kind, ids: Sequence[str]) -> dict[str, str]:
    """The ranked text (:attr:`Kind.text`) of the items ``ids`` of ``kind``, read by columns."""
    texts: dict[str, str] = {}
    for start in range(0, len(ids), 900):
        rows = kind.model().objects.filter(pk__in=list(ids[start : start + 900]))
        for pk, *values in rows.values_list("pk", *kind.columns):
            texts[pk] = kind.text(_Row(kind.columns, values))
    return texts


class _Row:
    """An item's text columns read as attributes (what :attr:`Kind.text` reads)."""

    def __init__(self, columns: Sequence[str], values: Any) -> None:
        for name, value in zip(columns, values, strict=True):
            setattr(self, name, value)


def expanded_refreshed(models: Models | None = None) -> int:
    """Bring every scope whose expanded postings are behind the lexicon to the current stamp,
    or whose array is not packed, one scope per transaction; returns the scopes refreshed."""
    models = models or live()
    refreshed = 0
    while True:
        current = _stamp_text(kp.lexicon_stamp())
        behind = list(
            models.scope.objects.filter(~Q(stamp=current) | Q(arrays__isnull=True)).values_list(
                "pk", flat=True
            )[:500]
        )
        if not behind:
            return refreshed
        for scope_id in behind:
            with transaction.atomic():
                _scope_expanded_refresh(scope_id, models)
            refreshed += 1


def rebuild(models: Models | None = None, *, historical: Mapping[str, Any] | None = None) -> int:
    """Rebuild the whole index from the approved items (a migration, a bulk load, a repair);
    returns the entries written. ``historical`` maps kind names to a migration's models."""
    models = models or live()
    models.posting.objects.all().delete()
    models.entry.objects.all().delete()
    models.scope.objects.all().delete()
    stamp, lexicon = kp.consistent_lexicon()
    items: list[tuple[str, tuple[str, ...], Any, frozenset[str], frozenset[str]]] = []
    for kind in KINDS.values():
        model = (historical or {}).get(kind.name) or kind.model()
        texts = dict.fromkeys(
            c for c in (*kind.columns, *kind.brief_columns) if c != "title" and _has(model, c)
        )
        fields = ("pk", *SCOPE_FIELDS, "title", "valid_from", "valid_to", "approved_at", *texts)
        for values in (
            model.objects.filter(status="approved").values_list(*fields).iterator(chunk_size=2000)
        ):
            row = _Row(fields, values)
            text = kind.text(row)
            items.append(
                (kind.name, _key(row), row, tokenize(text), tokenize(expand(text, lexicon)))
            )
    created: set[int] = set()
    ids = scope_ids({key for _, key, _, _, _ in items}, models, created)
    models.scope.objects.all().update(stamp=_stamp_text(stamp))
    entries = [
        models.entry(scope_id=ids[key], **_entry(kind, row, raw, expanded, models))
        for kind, key, row, raw, expanded in items
    ]
    models.entry.objects.bulk_create(entries, batch_size=2000)
    if any(entry.pk is None for entry in entries):
        found = dict(models.entry.objects.values_list("item_id", "pk"))
        for entry in entries:
            entry.pk = found[entry.item_id]
    changes = Changes()
    for entry, (_, _, _, raw, expanded) in zip(entries, items, strict=True):
        changes.add(entry.scope_id, entry.pk, raw, expanded)
    changes_applied(changes, models, fresh=created)
    if _has(models.scope, "arrays"):
        arrays_packed(None, models)  # (a migration older than the arrays has none to pack)
    if historical is None:
        for kind in KINDS.values():
            if kind.indexed is not None:
                kind.indexed([e.item_id for e in entries if e.kind == kind.name])
        # The scopes are new rows: their vectors are packed again (the items' own are kept).
        space_reset(VECTOR_SPACE, ids.values())
    return len(entries)


# --- the read of one retrieval ------------------------------------------------------------------


@dataclass(frozen=True)
class ScopeRead:
    """What one statement read for a query: the scope's packed entries and, per query token,
    the entry ids of its raw and of its expanded posting list."""

    scope_id: int
    entries: np.ndarray
    raw: list[np.ndarray]
    expanded: list[np.ndarray]
    raw_size: int  # of the query's token sets
    expanded_size: int


STALE = None  # what :func:`scope_read` answers when the scope's index cannot answer the query


def _read_sql(raw: int, expanded: int, every: int, versioned: bool) -> str:
    q = connection.ops.quote_name
    scope, posting, lexicon = (
        q(model._meta.db_table) for model in (IndexScope, IndexPosting, LexiconState)
    )
    where = " AND ".join(f"s.{q(name)} = %s" for name in SCOPE_FIELDS)
    version = ROW_VERSION if versioned else "NULL"
    arrays = arrays_column(f"s.{q('arrays')}") if versioned else f"s.{q('arrays')}"
    # One statement, so one snapshot: the scope's stamps and array, the query's lists (raw
    # lists for raw tokens, expanded for expanded ones) and the delta's changes. Only quoted
    # names are formatted in.
    return (
        f"SELECT 0, s.{q('id')}, s.{q('stamp')},"  # noqa: S608
        f" (SELECT l.{q('stamp')} FROM {lexicon} l WHERE l.{q('id')} = 1), {version},"
        f" {arrays}, NULL"
        f" FROM {scope} s WHERE {where}"
        f" UNION ALL SELECT 1, NULL, p.{q('token')}, NULL, NULL,"
        f" CASE WHEN p.{q('token')} IN ({placeholders(raw)}) THEN p.{q('raw')} END,"
        f" CASE WHEN p.{q('token')} IN ({placeholders(expanded)}) THEN p.{q('expanded')} END"
        f" FROM {posting} p JOIN {scope} s ON s.{q('id')} = p.{q('scope_id')}"
        f" WHERE {where} AND p.{q('token')} IN ({placeholders(every)})"
        f"{_delta_sql(versioned)}"
    )


def _delta_sql(versioned: bool) -> str:
    """The scope's delta changes after the last this process holds for the array it keeps (all
    of them when it keeps none, or not that version): a ``UNION ALL`` arm of both reads, its
    parameters the scope's key, then (versioned) the array's version and the last change held."""
    q = connection.ops.quote_name
    scope, delta = (q(model._meta.db_table) for model in (IndexScope, IndexDelta))
    where = " AND ".join(f"s.{q(name)} = %s" for name in SCOPE_FIELDS)
    newer = f"CASE WHEN {ROW_VERSION} = %s THEN %s ELSE 0 END" if versioned else "0"
    return (
        f" UNION ALL SELECT 2, d.{q('id')}, d.{q('raw_tokens')}, d.{q('expanded_tokens')},"  # noqa: S608
        f" d.{q('item_id')}, d.{q('record')}, NULL"
        f" FROM {delta} d JOIN {scope} s ON s.{q('id')} = d.{q('scope_id')}"
        f" WHERE {where} AND d.{q('id')} > {newer}"
    )


def _kept_read_sql() -> str:
    """:func:`_read_sql` on PostgreSQL with the posting lists this process keeps not sent again
    (``textsearch.arrays.KeptLists``): each wanted token comes with the versions of the lists
    held for it, and a list is selected only when its row's version differs. A posting row's
    version travels in the version column, its token in the stamp one. The text never changes:
    the statement is prepared once per connection."""
    q = connection.ops.quote_name
    scope, posting, lexicon = (
        q(model._meta.db_table) for model in (IndexScope, IndexPosting, LexiconState)
    )
    where = " AND ".join(f"s.{q(name)} = %s" for name in SCOPE_FIELDS)
    arrays = arrays_column(f"s.{q('arrays')}")
    raw = kept_list_column(f"p.{q('raw')}", "raw")
    expanded = kept_list_column(f"p.{q('expanded')}", "expanded")
    return (
        f"SELECT 0, s.{q('id')}, s.{q('stamp')},"  # noqa: S608
        f" (SELECT l.{q('stamp')} FROM {lexicon} l WHERE l.{q('id')} = 1), {ROW_VERSION},"
        f" {arrays}, NULL"
        f" FROM {scope} s WHERE {where}"
        f" UNION ALL SELECT 1, NULL, p.{q('token')}, NULL, {POSTING_VERSION}, {raw}, {expanded}"
        f" FROM {KEPT_TOKENS} JOIN {posting} p ON p.{q('token')} = k.token"
        f" JOIN {scope} s ON s.{q('id')} = p.{q('scope_id')}"
        f" WHERE {where}"
        f"{_delta_sql(True)}"
    )


def _postings_kept() -> bool:
    """Whether this process keeps posting lists between retrievals (PostgreSQL: they travel
    from the server; SQLite reads them in process memory)."""
    return connection.vendor == "postgresql"


# This index's name in the engine's array cache (``textsearch.arrays``: on PostgreSQL a scope's
# array is sent only when it differs from the one this process kept, and so is each posting
# list).
INDEX_NAME = "experience"


def _delta_row(row: Sequence[Any]) -> DeltaRow:
    _, seq, raw, expanded, item_id, record, _ = row
    entries = entries_of(record)
    return delta_row(seq, entries, item_id, raw, expanded, int(entries["kind"][0]) == REMOVED)


def with_delta(merged: np.ndarray, rows: Sequence[DeltaRow], version: str = "") -> Delta:
    """The merged array with the delta's changes applied (``textsearch.delta.with_delta``):
    a taken-out entry stays, approved at NEVER (the gate refuses it)."""
    return shared_with_delta(merged, rows, version, hidden="approved_at")


def _applied_in_process(
    key: Hashable, merged: np.ndarray, blob: Any, changes: tuple[Any, ...]
) -> Delta:
    """The delta applied on SQLite, where the array and the delta are read at every search:
    applied again only when they changed (``textsearch.delta.APPLIED``)."""
    stored = bytes(blob)
    kept = APPLIED.get(key, stored, changes)
    if kept is not None:
        return kept
    fresh = sorted((_delta_row(row) for row in changes), key=lambda r: r.seq)
    delta = with_delta(merged, fresh)
    APPLIED.keep(key, stored, changes, delta)
    return delta


class _Fetched(threading.local):
    """What this thread's last :func:`scope_read` received (what the tests and the bench
    count): the bytes of the scope's array and of the delta's records, the delta's rows, and
    the bytes of the query's posting lists (sent with every read)."""

    bytes: int = 0
    delta_rows: int = 0
    lists: int = 0


FETCHED = _Fetched()


def query_parsed(query: str) -> ParsedQuery:
    """``query`` parsed once for a retrieval: its raw tokens, and its expanded ones under the
    lexicon this process saw last (:func:`scope_read` expands again under another)."""
    stamp, lexicon = kp.lexicon_for(kp.last_known_stamp())
    return parse_query(query, lexicon, stamp)


def current_lexicon() -> tuple[str | None, Mapping[str, str]]:
    """The current lexicon's stamp (read now) and the lexicon."""
    return kp.lexicon_for(kp.lexicon_stamp())


def scope_read(scope: Mapping[str, str], query: str | ParsedQuery) -> ScopeRead | None:
    """The scope's packed entries and the posting lists of ``query``'s tokens, in one statement,
    with the scope's delta applied (:func:`with_delta`); STALE (None) when the scope has no
    index, its array is not packed or its expanded postings are behind the lexicon (the caller
    ranks from the texts then). On PostgreSQL the merged array and the delta's changes this
    process holds are not sent again: after one change, one delta row travels."""
    if isinstance(query, str):
        query = query_parsed(query)
    key = tuple(scope[name] for name in SCOPE_FIELDS)
    cache_key = (INDEX_NAME, *key)
    versioned = connection.vendor == "postgresql"
    for _attempt in range(4):
        raw = sorted({token_key(t) for t in query.raw})
        expanded = sorted({token_key(t) for t in query.expanded})
        every = sorted({*raw, *expanded})
        cached = _arrays_cache.get(cache_key) if versioned else None
        held = DELTAS.get(cache_key) if cached is not None else None
        if held is not None and held.version != cached[0]:  # type: ignore[index]
            held = None
        params: list[Any] = [cached[0] if cached is not None else ""] if versioned else []
        newer = [cached[0] if cached is not None else "", held.seq if held else 0]
        lists = KeptLists(cache_key, raw, expanded) if versioned and _postings_kept() else None
        if lists is not None:
            params += [*key, *lists.params(), *key, *key, *newer]
            with prepared_cursor() as cursor:
                cursor.execute(_kept_read_sql(), params)
                rows = cursor.fetchall()
        else:
            params += [*key, *(raw or [" "]), *(expanded or [" "]), *key, *(every or [" "])]
            params += [*key, *newer] if versioned else key
            with connection.cursor() as cursor:
                cursor.execute(_read_sql(len(raw), len(expanded), len(every), versioned), params)
                rows = cursor.fetchall()
        head = next((row for row in rows if row[0] == 0), None)
        FETCHED.bytes = sum(len(row[5] or b"") for row in rows if row[0] != 1)
        FETCHED.lists = sum(len(row[5] or b"") + len(row[6] or b"") for row in rows if row[0] == 1)
        FETCHED.delta_rows = sum(1 for row in rows if row[0] == 2)
        if head is None:
            return STALE
        _, scope_id, scope_stamp, lexicon_stamp, version, blob, _ = head
        if scope_stamp != _stamp_text(lexicon_stamp):
            return STALE
        if lexicon_stamp != query.stamp:
            # The query was expanded under another lexicon: again, under the one read.
            stamp, lexicon = kp.lexicon_for(lexicon_stamp)
            query = reparsed(query, lexicon, stamp)
            continue
        kept = _arrays_cache.unchanged(cached, version, blob)
        if kept is not None:
            merged = kept
        elif blob is None:
            return STALE
        else:
            merged = entries_of(blob)
            held = None
            if versioned:
                _arrays_cache.keep(cache_key, version, merged)
        changes = tuple(row for row in rows if row[0] == 2)
        if held is not None and not changes:
            delta = held
        elif not versioned and changes:
            delta = _applied_in_process(cache_key, merged, blob, changes)
        else:
            fresh = sorted((_delta_row(row) for row in changes), key=lambda r: r.seq)
            delta = with_delta(merged, [*(held.rows if held else ()), *fresh], version or "")
            if versioned:
                DELTAS.keep(cache_key, delta)
        if lists is None:
            raw_lists = [ids_of(row[5]) for row in rows if row[0] == 1 and row[5] is not None]
            expanded_lists = [ids_of(row[6]) for row in rows if row[0] == 1 and row[6] is not None]
        else:
            raw_lists, expanded_lists = [], []
            for row in rows:
                if row[0] == 1:
                    kept_raw, kept_expanded = lists.received(row[2], row[4], row[5:7], ids_of)
                    if kept_raw is not None:
                        raw_lists.append(kept_raw)
                    if kept_expanded is not None:
                        expanded_lists.append(kept_expanded)
        return ScopeRead(
            scope_id,
            delta.entries,
            raw_lists + [delta.raw[token] for token in raw if token in delta.raw],
            expanded_lists
            + [delta.expanded[token] for token in expanded if token in delta.expanded],
            len(query.raw),
            len(query.expanded),
        )
    return STALE


@dataclass(frozen=True)
class EntryRow:
    """What an entry keeps beyond its packed record: the item's id and title, and a lesson's
    confidence inputs (``experience.index.lesson_inputs``; empty when not written)."""

    entry: int
    scope_id: int
    kind: str
    item_id: str
    title: str
    valid_from: int
    valid_to: int
    approved_at: int
    evidence: str
    block_text: str  # what a context block shows after the title (``Kind.brief``)

    def gate_times(self) -> tuple[datetime, datetime, datetime]:
        """``(valid_from, valid_to, approved_at)`` as the item's aware datetimes."""
        return moment(self.valid_from), moment(self.valid_to), moment(self.approved_at)


def entry_rows(entry_ids: Iterable[int]) -> dict[int, EntryRow]:
    """The rows of the entries ``entry_ids`` that exist, by entry id (one statement)."""
    wanted = sorted(set(entry_ids))
    found: dict[int, EntryRow] = {}
    q = connection.ops.quote_name
    columns = ", ".join(q(name) for name in _ROW_COLUMNS)
    table = q(IndexEntry._meta.db_table)
    with connection.cursor() as cursor:
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            cursor.execute(
                f"SELECT {columns} FROM {table}"  # noqa: S608 (quoted names only)
                f" WHERE {q('id')} IN ({placeholders(len(chunk))})",
                chunk,
            )
            for row in cursor.fetchall():
                found[row[0]] = EntryRow(*row)
    return found


_ROW_COLUMNS = (
    "id",
    "scope_id",
    "kind",
    "item_id",
    "title",
    "valid_from",
    "valid_to",
    "approved_at",
    "evidence",
    "block_text",
)
