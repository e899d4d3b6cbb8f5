"""The search index: per scope key, token → document versions, maintained at write time.

A document version is in the index while it is approved and not revoked. Per scope key
(tenant, brand, campaign, store) the index holds:

- one ``SearchEntry`` row per version (the gate's fields, token-set sizes, the hash of its
  requirements, the version and rule-group flags): the source the rest is derived from;
- the scope's ``arrays``: those fields packed as one array per scope (``ENTRY_DTYPE``), ordered by
  entry id, so the gate and both rankings run as vector operations over one read;
- one ``PostingList`` per token: the sorted ids of the entries whose raw (expanded) token set
  holds it. A search reads only the lists of the query's tokens; documents sharing no token with
  the query are never touched.

Writes happen inside the caller's transaction (approve, revoke, lexicon change), so a search
sees either the old index and the old lexicon or the new ones, never a mix: the search reads the
lexicon stamp in the same statement as the posting lists and runs again when it moved.

One approval or revocation into a scope that is packed does not rewrite the scope's array and
posting lists: it appends the change to the scope's delta (``SearchDelta``, ``textsearch.delta``;
docs/architecture.md, "Incremental indexes: the delta"), which :func:`search_merge_task` folds
in the background once it reaches :func:`merge_threshold`, and which a search applies on top of
the merged array and lists (:func:`with_delta`), so every change is visible at the next read.
An addition's record carries the ids of entries sharing its document, rule group and
requirements (:data:`REFS_DTYPE`): a reader numbers its ``group``, ``rule`` and
``requirements`` as theirs, or with a number no other entry holds. Bulk loads, lexicon changes
and rebuilds fold the delta first and rewrite the scope as before.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import Exists, OuterRef
from django_tasks import task

from knowledge.domain import REVIEWED_GATE, sha256_hex
from knowledge.models import (
    Document,
    DocumentStore,
    LexiconState,
    PostingList,
    SearchDelta,
    SearchEntry,
    SearchScope,
    Synonym,
    lexicon_stamp_renewed,
)
from reviewconsole.background import retrying
from reviewconsole.itemids import ItemId
from semantic.tasks import scopes_changed
from textsearch import delta as td
from textsearch import postings as ts
from textsearch.delta import Delta, DeltaRow
from textsearch.domain import gate_holds
from textsearch.postings import NEVER as NEVER
from textsearch.postings import Changes, changes_applied, micros

__all__ = ["lexicon_stamp_renewed"]

# One record per entry of a scope. Times are microseconds since the epoch (valid_to: NEVER when
# open); ``order`` is the rank of the entry's public id in id order (the ties' order); ``group``
# numbers the doc_keys of the scope (versions of one document share it), ``rule`` its rule_keys
# (-1: none) and ``requirements`` its distinct requirements (by hash).
ENTRY_DTYPE = np.dtype(
    [
        ("id", "<i8"),
        ("document_id", "<i8"),
        ("valid_from", "<i8"),
        ("valid_to", "<i8"),
        ("published_at", "<i8"),
        ("raw_size", "<i4"),
        ("expanded_size", "<i4"),
        ("version", "<i4"),
        ("group", "<i4"),
        ("order", "<i4"),
        ("rule", "<i4"),
        ("requirements", "<i4"),
        ("contested", "?"),
    ]
)


# The name of this index's vectors in ``semantic`` (knowledge/vectors.py registers it).
VECTOR_SPACE = "knowledge"


# After an addition's record in its delta row: the ids of an entry of the same scope sharing
# its doc_key, its rule_key and (in that rule group) its requirements; 0 when there is none
# (the reader gives it a number no entry holds; ``rule``: -1 without a rule_key).
REFS_DTYPE = np.dtype([("group", "<i8"), ("rule", "<i8"), ("requirements", "<i8")])


def entries_of(blob: bytes | memoryview | None) -> np.ndarray:
    return ts.entries_of(blob, ENTRY_DTYPE)


@dataclass(frozen=True)
class IndexModels(ts.IndexModels):
    """The models the index writes (the live ones, or a migration's historical ones): the
    engine's three and the documents they index."""

    scope: Any = SearchScope
    entry: Any = SearchEntry
    posting: Any = PostingList
    scope_fields: tuple[str, ...] = ("tenant", "brand", "campaign", "store")
    document: Any = Document
    # The delta's model (None: a migration's models, older than the delta, write eagerly).
    delta: Any = None


LIVE = IndexModels(delta=SearchDelta)


def scope_ids(
    keys: Iterable[tuple[str, ...]], models: IndexModels = LIVE, created: set[int] | None = None
) -> dict[tuple[str, ...], int]:
    """Ids of the scope keys (tenant, brand, campaign, store), created when missing."""
    return ts.scope_ids(keys, models, created)


def groups_refreshed(
    scopes: Sequence[int],
    doc_keys: Sequence[str] | None,
    rule_keys: Sequence[str] | None,
    models: IndexModels = LIVE,
) -> None:
    """Recompute, in ``scopes``, ``has_newer`` for the versions of ``doc_keys`` and
    ``rule_contested`` for the ``rule_keys`` groups (``None``: every key, for bulk loads)."""
    entries = models.entry.objects.filter(scope_id__in=set(scopes))
    versions = entries if doc_keys is None else entries.filter(doc_key__in=set(doc_keys))
    versions.update(
        has_newer=Exists(
            models.entry.objects.filter(
                scope_id=OuterRef("scope_id"),
                doc_key=OuterRef("doc_key"),
                version__gt=OuterRef("version"),
            )
        )
    )
    groups = entries.exclude(rule_key="")
    if rule_keys is not None:
        groups = groups.filter(rule_key__in={key for key in rule_keys if key})
    groups.update(
        rule_contested=Exists(
            models.entry.objects.filter(
                scope_id=OuterRef("scope_id"), rule_key=OuterRef("rule_key")
            )
            .exclude(doc_key=OuterRef("doc_key"))
            .exclude(requirements_hash=OuterRef("requirements_hash"))
        )
    )


def arrays_rebuilt(scopes: Iterable[int], models: IndexModels = LIVE) -> None:
    """Pack each scope's entries into its ``arrays`` (after any change to them; the scope's
    delta folded first), and queue the packing of their vectors (``semantic``) after the
    commit."""
    scopes = set(scopes)
    if models is LIVE:
        scopes_changed(VECTOR_SPACE, scopes)
    for scope_id in scopes:
        if models.delta is not None:
            # The entries hold the delta's changes already: its posting lists are written.
            td.postings_folded(models.delta, scope_id, models)
        _scope_packed(scope_id, models)


def _scope_packed(scope_id: int, models: IndexModels) -> None:
    rows = list(
        models.entry.objects.filter(scope_id=scope_id)
        .order_by("pk")
        .values_list(
            "pk",
            "document_id",
            "valid_from",
            "valid_to",
            "published_at",
            "raw_size",
            "expanded_size",
            "version",
            "doc_key",
            "public_id",
            "rule_contested",
            "rule_key",
            "requirements_hash",
        )
    )
    packed = np.zeros(len(rows), dtype=ENTRY_DTYPE)
    groups: dict[str, int] = {}
    rules: dict[str, int] = {}
    requirements: dict[str, int] = {}
    for i, row in enumerate(rows):
        group = groups.setdefault(row[8], len(groups))
        rule = rules.setdefault(row[11], len(rules)) if row[11] else -1
        packed[i] = (
            row[0],
            row[1],
            micros(row[2]),
            micros(row[3]),
            micros(row[4]),
            row[5],
            row[6],
            row[7],
            group,
            0,
            rule,
            requirements.setdefault(row[12], len(requirements)),
            row[10],
        )
    by_public_id = sorted(range(len(rows)), key=lambda i: rows[i][9])
    packed["order"][by_public_id] = np.arange(len(rows), dtype=np.int32)
    models.scope.objects.filter(pk=scope_id).update(
        arrays=packed.tobytes(), multi_version=len(groups) < len(rows)
    )


# --- the delta: changes since the last merge ----------------------------------------------------

# A scope's delta is merged once it holds this many changes, or an eighth of the merged array's
# entries if more (as retrieval's: ``experience.index.postings``).
DELTA_MIN = 64
DELTA_SHARE = 8


def merge_threshold(merged_entries: int) -> int:
    return max(DELTA_MIN, merged_entries // DELTA_SHARE)


def _scope_locked(scope_id: int, models: IndexModels) -> int:
    return td.scope_locked(models.scope, scope_id, ENTRY_DTYPE.itemsize) or 0


def _ref(entries: Any) -> int:
    """The id of one of ``entries`` (any: unordered, so the lookup stays on its index), or 0."""
    found = list(entries.order_by().values_list("pk", flat=True)[:1])
    return int(found[0]) if found else 0


def _addition_appended(
    scope_id: int,
    merged: int,
    entry: Any,
    document: Any,
    raw: set[str],
    expanded: set[str],
    models: IndexModels,
) -> None:
    """Append an added entry to its scope's delta: its record (``order``: its place among the
    merged array's entries) and the entries it shares numbers with (:data:`REFS_DTYPE`)."""
    record = np.zeros(1, dtype=ENTRY_DTYPE)
    record[0] = (
        entry.pk,
        document.pk,
        micros(document.valid_from),
        micros(document.valid_to),
        micros(document.published_at),
        len(raw),
        len(expanded),
        document.version,
        0,
        0,
        0 if document.rule_key else -1,
        0,
        False,
    )
    record["order"] = td.merged_order(
        models.entry, models.delta, scope_id, "public_id", entry.public_id
    )
    others = models.entry.objects.filter(scope_id=scope_id).exclude(pk=entry.pk)
    refs = np.zeros(1, dtype=REFS_DTYPE)
    refs["group"] = _ref(others.filter(doc_key=document.doc_key))
    if document.rule_key:
        same_rule = others.filter(rule_key=document.rule_key)
        refs["rule"] = _ref(same_rule)
        refs["requirements"] = _ref(same_rule.filter(requirements_hash=entry.requirements_hash))
    else:
        refs["rule"] = -1
    td.delta_appended(
        models.delta,
        scope_id,
        threshold=merge_threshold(merged),
        merge=search_merge_task.enqueue,
        entry_id=entry.pk,
        item_id=entry.public_id,
        record=record.tobytes() + refs.tobytes(),
        raw=raw,
        expanded=expanded,
        removed=False,
    )


def delta_merged(scope_id: int, models: IndexModels = LIVE) -> int:
    """Fold the scope's delta into its posting lists and array (the merge task). Returns the
    changes folded; nothing when there are none."""
    if models.delta is None:
        return 0
    _scope_locked(scope_id, models)
    folded = td.postings_folded(models.delta, scope_id, models)
    if folded:
        _scope_packed(scope_id, models)
    return folded


@task()
def search_merge_task(scope_id: int, attempt: int = 1) -> int:
    """Merge one scope's delta into its posting lists and array, in one transaction (queued by
    the change that filled the delta; the changes appended meanwhile are merged too, so a run
    after another finds nothing). Returns the changes merged."""
    with retrying(search_merge_task, attempt, scope_id), transaction.atomic():
        return delta_merged(scope_id)


def delta_row(seq: int, record: Any, public_id: str, raw: Any, expanded: Any, removed: Any) -> Any:
    """A delta row as read: the shared row, and an addition's refs (None for a removal)."""
    blob = bytes(record or b"")
    size = ENTRY_DTYPE.itemsize
    refs = np.frombuffer(blob[size:], dtype=REFS_DTYPE) if len(blob) > size else None
    row = td.delta_row(seq, entries_of(blob[:size]).copy(), public_id, raw, expanded, removed)
    return row, refs


def _numbered(entries: np.ndarray, rows: list[tuple[DeltaRow, Any]]) -> list[DeltaRow]:
    """The added records numbered as the entries they share a document, rule group or
    requirements with (in ``entries``, by id, or an earlier addition), or with a number no other
    entry holds."""
    ids = entries["id"]
    tops = {
        name: int(entries[name].max()) if len(entries) else -1
        for name in ("group", "rule", "requirements")
    }
    earlier: dict[int, np.ndarray] = {}
    numbered = []
    for row, refs in rows:
        if refs is not None:
            record = row.record
            for name in ("group", "rule", "requirements"):
                ref = int(refs[name][0])
                if ref < 0:
                    record[name] = -1
                    continue
                if ref in earlier:
                    record[name] = earlier[ref][name][0]
                    continue
                at = int(np.searchsorted(ids, ref))
                if ref and at < len(ids) and ids[at] == ref:
                    record[name] = entries[name][at]
                else:
                    tops[name] += 1
                    record[name] = tops[name]
            earlier[int(record["id"][0])] = record
        numbered.append(row)
    return numbered


def with_delta(
    merged: np.ndarray, held: Delta | None, rows: list[tuple[DeltaRow, Any]], version: str = ""
) -> Delta:
    """The merged array with the delta's changes applied (``textsearch.delta.with_delta``: a
    taken-out version stays, published at NEVER, so the gate refuses it), after those of
    ``held`` (the delta this process applied before to the same array): the added records
    numbered (:func:`_numbered`), and every entry of a rule group an addition joined marked
    ``contested`` (only then is it checked: the check itself is over the gated newest versions,
    so a mark too many changes no answer)."""
    base = held.entries if held is not None else merged
    fresh = _numbered(base, rows)
    delta = td.with_delta(
        merged, [*(held.rows if held else ()), *fresh], version, hidden="published_at"
    )
    rules = [int(row.record["rule"][0]) for row in delta.rows if not row.removed]
    rules = [rule for rule in rules if rule >= 0]
    if rules:
        delta.entries["contested"][np.isin(delta.entries["rule"], rules)] = True
    return delta


def _entry_fields(document: Any, raw: set[str], expanded: set[str]) -> dict[str, Any]:
    return {
        "public_id": str(ItemId.document(document.doc_key, document.version)),
        "doc_key": document.doc_key,
        "version": document.version,
        "rule_key": document.rule_key,
        "requirements_hash": sha256_hex(document.requirements),
        "valid_from": document.valid_from,
        "valid_to": document.valid_to,
        "published_at": document.published_at,
        "raw_size": len(raw),
        "expanded_size": len(expanded),
        "expanded_tokens": " ".join(sorted(expanded)),
    }


class _Batch(threading.local):
    pending: dict[int, Any] | None = None


_batch = _Batch()


@contextmanager
def batched() -> Iterator[None]:
    """Index the versions approved inside the block together when it ends (an import of many
    documents into one scope would otherwise repack the scope's array once per document).
    Use it inside the caller's transaction; nothing is written if the block raises."""
    if _batch.pending is not None:
        yield
        return
    _batch.pending = {}
    try:
        yield
        pending = list(_batch.pending.values())
    finally:
        _batch.pending = None
    if pending:
        stores: dict[int, list[str]] = {}
        for document_id, store in DocumentStore.objects.filter(
            document_id__in=[d.pk for d in pending]
        ).values_list("document_id", "store"):
            stores.setdefault(document_id, []).append(store)
        bulk_indexed([(d, sorted(stores.get(d.pk, []))) for d in pending])
        scopes = SearchEntry.objects.filter(document_id__in=[d.pk for d in pending])
        bulk_finished(set(scopes.values_list("scope_id", flat=True)))


def document_indexed(document: Any, models: IndexModels = LIVE) -> None:
    """Put an approved, unrevoked version into the index of every store it lists: appended to
    the delta of each scope that exists (written into a new scope's lists and array at once)."""
    if not gate_holds(REVIEWED_GATE, document, None):
        return
    if _batch.pending is not None and models is LIVE:
        _batch.pending[document.pk] = document
        return
    stores = list(document.store_rows.values_list("store", flat=True))
    created: set[int] = set()
    ids = scope_ids(
        ((document.tenant, document.brand, document.campaign, s) for s in stores),
        models,
        created,
    )
    raw = set(document.raw_tokens.split())
    expanded = set(document.expanded_tokens.split())
    changes = Changes()
    eager: list[int] = []
    appended: list[tuple[int, int, Any]] = []
    for scope_id in sorted(ids.values()):
        merged = _scope_locked(scope_id, models) if models.delta is not None else 0
        if models.entry.objects.filter(scope_id=scope_id, document_id=document.pk).exists():
            continue
        entry = models.entry.objects.create(
            scope_id=scope_id, document_id=document.pk, **_entry_fields(document, raw, expanded)
        )
        if models.delta is None or scope_id in created:
            changes.add(scope_id, entry.pk, raw, expanded)
            eager.append(scope_id)
        else:
            appended.append((scope_id, merged, entry))
    changes_applied(changes, models)
    groups_refreshed(list(ids.values()), [document.doc_key], [document.rule_key], models)
    arrays_rebuilt(eager, models)
    for scope_id, merged, entry in appended:
        _addition_appended(scope_id, merged, entry, document, raw, expanded, models)
    if appended and models is LIVE:
        scopes_changed(VECTOR_SPACE, [scope_id for scope_id, _, _ in appended])


def document_unindexed(document: Any, models: IndexModels = LIVE) -> None:
    """Take a version out of the index (it was revoked, or superseded by a newer one): its
    removal appended to each scope's delta, so searches leave it at their next read."""
    if _batch.pending is not None and _batch.pending.pop(document.pk, None) is not None:
        return
    entries = list(
        models.entry.objects.filter(document_id=document.pk)
        .order_by("scope_id")
        .values_list("pk", "scope_id", "expanded_tokens", "public_id")
    )
    if not entries:
        return
    raw = document.raw_tokens.split()
    scopes = [scope for _, scope, _, _ in entries]
    merged = {scope: _scope_locked(scope, models) for scope in scopes} if models.delta else {}
    models.entry.objects.filter(pk__in=[pk for pk, _, _, _ in entries]).delete()
    groups_refreshed(scopes, [document.doc_key], [document.rule_key], models)
    if models.delta is None:
        changes = Changes()
        for pk, scope_id, expanded, _ in entries:
            changes.remove(scope_id, pk, raw, expanded.split())
        changes_applied(changes, models)
        arrays_rebuilt(scopes, models)
        return
    for pk, scope_id, expanded, public_id in entries:
        record = np.zeros(1, dtype=ENTRY_DTYPE)
        record["id"] = pk
        td.delta_appended(
            models.delta,
            scope_id,
            threshold=merge_threshold(merged[scope_id]),
            merge=search_merge_task.enqueue,
            entry_id=pk,
            item_id=public_id,
            record=record.tobytes(),
            raw=raw,
            expanded=expanded.split(),
            removed=True,
        )
    if models is LIVE:
        scopes_changed(VECTOR_SPACE, scopes)


def expanded_changed(documents: Iterable[Any], models: IndexModels = LIVE) -> None:
    """The lexicon changed these documents' expanded token sets: move their postings."""
    by_id = {document.pk: document for document in documents}
    if not by_id:
        return
    if models.delta is not None:
        # The postings moved below are the merged ones: the delta is folded into them first.
        for scope_id in sorted(
            set(
                models.entry.objects.filter(document_id__in=list(by_id)).values_list(
                    "scope_id", flat=True
                )
            )
        ):
            td.postings_folded(models.delta, scope_id, models)
    changes = Changes()
    touched: list[Any] = []
    for entry in models.entry.objects.filter(document_id__in=list(by_id)).only(
        "pk", "scope_id", "document_id", "expanded_tokens"
    ):
        old = set(entry.expanded_tokens.split())
        new = set(by_id[entry.document_id].expanded_tokens.split())
        changes.remove(entry.scope_id, entry.pk, (), old - new)
        changes.add(entry.scope_id, entry.pk, (), new - old)
        entry.expanded_tokens = " ".join(sorted(new))
        entry.expanded_size = len(new)
        touched.append(entry)
    changes_applied(changes, models)
    models.entry.objects.bulk_update(touched, ["expanded_tokens", "expanded_size"], batch_size=1000)
    arrays_rebuilt({entry.scope_id for entry in touched}, models)


def bulk_indexed(documents: Sequence[tuple[Any, Sequence[str]]]) -> int:
    """Index many approved, unrevoked versions with their stores at once (bulk loads).

    Writes what ``document_indexed`` writes for each; returns the number of postings added.
    Callers refresh the groups and arrays of the scopes afterwards (``bulk_finished``).
    """
    keys = {(d.tenant, d.brand, d.campaign, s) for d, stores in documents for s in stores}
    fresh: set[int] = set()
    ids = scope_ids(keys, LIVE, created=fresh)
    entries = []
    tokens: dict[int, tuple[list[str], list[str]]] = {}
    for document, stores in documents:
        raw = set(document.raw_tokens.split())
        expanded = set(document.expanded_tokens.split())
        tokens[document.pk] = (sorted(raw), sorted(expanded))
        fields = _entry_fields(document, raw, expanded)
        for store in stores:
            entries.append(
                SearchEntry(
                    scope_id=ids[(document.tenant, document.brand, document.campaign, store)],
                    document_id=document.pk,
                    **fields,
                )
            )
    SearchEntry.objects.bulk_create(entries, batch_size=2000)
    if any(entry.pk is None for entry in entries):
        found = {
            (document_id, scope_id): pk
            for pk, document_id, scope_id in SearchEntry.objects.filter(
                document_id__in=list(tokens)
            ).values_list("pk", "document_id", "scope_id")
        }
        for entry in entries:
            entry.pk = found[(entry.document_id, entry.scope_id)]
    changes = Changes()
    added = 0
    for entry in entries:
        raw_list, expanded_list = tokens[entry.document_id]
        changes.add(entry.scope_id, entry.pk, raw_list, expanded_list)
        added += len(raw_list) + len(expanded_list)
    changes_applied(changes, LIVE, fresh=fresh)
    return added


@transaction.atomic
def bulk_finished(scopes: Iterable[int] | None = None) -> None:
    """Refresh the flags and arrays of ``scopes`` (default: all) after ``bulk_indexed``."""
    chosen = (
        list(SearchScope.objects.values_list("pk", flat=True)) if scopes is None else list(scopes)
    )
    groups_refreshed(chosen, None, None)
    arrays_rebuilt(chosen)


def rebuild(models: IndexModels = LIVE) -> int:
    """Rebuild the whole index from the documents (a migration, or a repair); returns versions."""
    if models.delta is not None:
        models.delta.objects.all().delete()
    models.posting.objects.all().delete()
    models.entry.objects.all().delete()
    # Written whole, not through the delta; every scope packed again (those left empty too).
    eager = replace(models, delta=None)
    count = 0
    for document in models.document.objects.filter(approved=True, revoked=False).iterator(
        chunk_size=500
    ):
        document_indexed(document, eager)
        count += 1
    arrays_rebuilt(models.scope.objects.values_list("pk", flat=True), models)
    return count


# --- the lexicon, cached per process and keyed by the stamp its every change renews -----------

_lexicon_cache: dict[str, dict[str, str]] = {}


def lexicon_stamp() -> str | None:
    return LexiconState.objects.filter(pk=1).values_list("stamp", flat=True).first()


def consistent_lexicon() -> tuple[str | None, dict[str, str]]:
    """The stamp and the lexicon it stands for, read so that no change fell between the two."""
    while True:
        stamp = lexicon_stamp()
        lexicon = dict(Synonym.objects.values_list("term", "canonical"))
        if lexicon_stamp() == stamp:
            break
    if stamp is not None:
        _lexicon_cache.clear()
        _lexicon_cache[stamp] = lexicon
    return stamp, lexicon


def lexicon_for(stamp: str | None) -> tuple[str | None, Mapping[str, str]]:
    """``(stamp, lexicon)``: from the cache when ``stamp`` is cached, else read afresh."""
    if stamp is not None:
        cached = _lexicon_cache.get(stamp)
        if cached is not None:
            return stamp, cached
    return consistent_lexicon()


def last_known_stamp() -> str | None:
    """The stamp this process saw last (no query); the search checks it against the database."""
    return next(iter(_lexicon_cache), None)
