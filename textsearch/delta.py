"""The delta of a lexical index: changes to a scope since its array and posting lists were merged.

Both lexical indexes (retrieval's, ``experience.index.postings``; knowledge search's,
``knowledge.postings``) append each addition or removal to their scope's delta instead of
rewriting the scope's packed array and posting lists; a background task folds the delta in.
A reader applies the delta on top of the merged array it holds (:func:`with_delta`): added
entries take their places, taken-out ones stay in the array but are never admitted (a gate
field set to NEVER), so the posting lists that still hold them stay consistent with it. On
PostgreSQL a reader keeps, per scope key, the merged array's row version and the delta it
applied (:data:`DeltaCache`), and fetches only the delta's rows after the last it holds
(docs/architecture.md, "Incremental indexes: the delta").
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection
from django.db.models.functions import Collate, Length

from textsearch.postings import ID_DTYPE, NEVER, Changes, changes_applied, token_key


def token_keys(tokens: Iterable[str]) -> str:
    """A delta row's token column: the tokens' keys, sorted, space-separated."""
    return " ".join(sorted({token_key(t) for t in tokens}))


# --- the writer's side --------------------------------------------------------------------------


def scope_locked(scope_model: Any, scope_id: int, itemsize: int) -> int | None:
    """Lock the scope's row until the transaction ends: every writer of a scope's entries takes
    this lock first, so its changes are written one writer at a time. Returns the entries its
    array holds (None: not packed). Locking writes no new row version: readers keep theirs."""
    size = (
        scope_model.objects.select_for_update()
        .filter(pk=scope_id)
        .annotate(size=Length("arrays"))
        .values_list("size", flat=True)
        .get()
    )
    return None if size is None else int(size) // itemsize


def _order_of(entry_model: Any, scope_id: int, tie_field: str, tie_key: str) -> int:
    """How many of the scope's entries have a tie key before ``tie_key`` (code point order, as
    Python compares them, whatever the database's collation)."""
    binary = "C" if connection.vendor == "postgresql" else "BINARY"
    before: int = (
        entry_model.objects.filter(scope_id=scope_id)
        .annotate(binary_id=Collate(tie_field, binary))
        .filter(binary_id__lt=tie_key)
        .count()
    )
    return before


def merged_order(
    entry_model: Any, delta_model: Any, scope_id: int, tie_field: str, tie_key: str
) -> int:
    """Where ``tie_key`` falls among the tie keys of the scope's merged array (the entries it
    held at the last merge, taken out since or not): the entries now before it, less those
    added since the merge, plus those taken out since."""
    added: dict[int, str] = {}
    removed: dict[int, str] = {}
    for entry, item, gone in delta_model.objects.filter(scope_id=scope_id).values_list(
        "entry", "item_id", "removed"
    ):
        (removed if gone else added)[entry] = item
    return (
        _order_of(entry_model, scope_id, tie_field, tie_key)
        - sum(1 for entry, item in added.items() if item < tie_key and entry not in removed)
        + sum(1 for entry, item in removed.items() if item < tie_key and entry not in added)
    )


def delta_appended(
    delta_model: Any,
    scope_id: int,
    *,
    threshold: int,
    merge: Callable[[int], object],
    entry_id: int,
    item_id: str,
    record: bytes,
    raw: Iterable[str],
    expanded: Iterable[str],
    removed: bool,
) -> None:
    """Append one change to the scope's delta (its row locked); queue the merge (``merge``
    with the scope's id) when the delta reaches ``threshold`` changes (once: later changes wait
    for that merge)."""
    delta_model.objects.create(
        scope_id=scope_id,
        entry=entry_id,
        item_id=item_id,
        removed=removed,
        record=record,
        raw_tokens=token_keys(raw),
        expanded_tokens=token_keys(expanded),
    )
    waiting = delta_model.objects.filter(scope_id=scope_id).count()
    if waiting == threshold:
        # Once, as the delta reaches the threshold: the changes appended until the merge runs
        # are merged with them (the delta counts one change at a time under the lock).
        merge(scope_id)


def postings_folded(delta_model: Any, scope_id: int, models: Any) -> int:
    """Write the scope's delta into its posting lists and delete it (the caller packs the
    array again from the entries). Returns the changes folded."""
    rows = list(
        delta_model.objects.filter(scope_id=scope_id)
        .order_by("pk")
        .values_list("pk", "entry", "removed", "raw_tokens", "expanded_tokens")
    )
    if not rows:
        return 0
    added = {entry for _, entry, gone, _, _ in rows if not gone}
    removed = {entry for _, entry, gone, _, _ in rows if gone}
    changes = Changes()
    for _, entry, gone, raw, expanded in rows:
        if gone and entry not in added:
            changes.remove(scope_id, entry, raw.split(), expanded.split())
        elif not gone and entry not in removed:
            changes.add(scope_id, entry, raw.split(), expanded.split())
    changes_applied(changes, models)
    delta_model.objects.filter(pk__lte=rows[-1][0], scope_id=scope_id).delete()
    return len(rows)


# --- the reader's side --------------------------------------------------------------------------


@dataclass(frozen=True)
class DeltaRow:
    """One change of a scope's delta as a reader holds it."""

    seq: int
    record: np.ndarray  # one record of the index's dtype (a removal: its ``id`` only)
    tie_key: str  # what orders the entry's ties (the item's public id)
    raw: frozenset[str]  # token keys
    expanded: frozenset[str]
    removed: bool


@dataclass(frozen=True)
class Delta:
    """The changes a process holds on top of one merged array (by its row version), the array
    with them applied and, per token key, the added entries whose raw (expanded) set holds it."""

    version: str
    seq: int
    rows: tuple[DeltaRow, ...]
    entries: np.ndarray
    raw: Mapping[str, np.ndarray]
    expanded: Mapping[str, np.ndarray]

    @property
    def nbytes(self) -> int:
        return int(self.entries.nbytes) + 64 * len(self.rows)

    @property
    def added(self) -> bool:
        return any(not row.removed for row in self.rows)


def delta_row(
    seq: int,
    record: np.ndarray,
    tie_key: str,
    raw: str | None,
    expanded: str | None,
    removed: bool,
) -> DeltaRow:
    """A delta row read from the database (its token columns as stored)."""
    return DeltaRow(
        int(seq),
        record,
        str(tie_key),
        frozenset((raw or "").split()),
        frozenset((expanded or "").split()),
        bool(removed),
    )


def with_delta(
    merged: np.ndarray, rows: Sequence[DeltaRow], version: str = "", *, hidden: str
) -> Delta:
    """The merged array with the delta's changes applied: added entries in their places (by id,
    their tie order (``order``) among the merged ones from the place the writer recorded, among
    each other by tie key), taken-out ones kept but never admitted (their ``hidden`` gate time
    set to NEVER: the gate refuses them, and the posting lists that still hold them stay
    consistent with the array)."""
    added = [row for row in rows if not row.removed]
    gone = np.array([int(row.record["id"][0]) for row in rows if row.removed], dtype=np.int64)
    if not added and not len(gone):
        return Delta(version, rows[-1].seq if rows else 0, tuple(rows), merged, {}, {})
    fresh = np.concatenate([row.record for row in added]) if added else merged[:0]
    entries = np.concatenate([merged, fresh])
    by_tie = sorted(range(len(added)), key=lambda i: added[i].tie_key)
    among = np.zeros(len(added), dtype=np.int64)
    among[by_tie] = np.arange(1, len(added) + 1)
    first = np.concatenate(
        [2 * merged["order"].astype(np.int64), 2 * fresh["order"].astype(np.int64) - 1]
    )
    second = np.concatenate([np.zeros(len(merged), dtype=np.int64), among])
    ranked = np.lexsort((second, first))
    entries["order"][ranked] = np.arange(len(entries), dtype=np.int32)
    entries = entries[np.argsort(entries["id"], kind="stable")]
    if len(gone):
        entries[hidden][np.isin(entries["id"], gone)] = NEVER
    raw: dict[str, list[int]] = {}
    expanded: dict[str, list[int]] = {}
    for row in added:
        entry = int(row.record["id"][0])
        for token in row.raw:
            raw.setdefault(token, []).append(entry)
        for token in row.expanded:
            expanded.setdefault(token, []).append(entry)
    return Delta(
        version,
        rows[-1].seq,
        tuple(rows),
        entries,
        {token: np.sort(np.array(ids, dtype=ID_DTYPE)) for token, ids in raw.items()},
        {token: np.sort(np.array(ids, dtype=ID_DTYPE)) for token, ids in expanded.items()},
    )


class DeltaCache:
    """Per scope key (the index's name first), the :class:`Delta` this process holds
    (PostgreSQL), least recently used first out."""

    LIMIT = 1024

    def __init__(self) -> None:
        self._kept: OrderedDict[Hashable, Delta] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Delta | None:
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
            return kept

    def keep(self, key: Hashable, delta: Delta) -> None:
        with self._lock:
            self._kept[key] = delta
            self._kept.move_to_end(key)
            while len(self._kept) > self.LIMIT:
                self._kept.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


# Both indexes' deltas (their keys start with the index's name).
DELTAS = DeltaCache()


class AppliedInProcess:
    """SQLite reads the array and the delta from the file at every search; applying the delta
    again each time (an array's copy and sort) would cost more than the read. Kept per scope
    key with the array's bytes and the delta's rows it was applied to, compared whole (ids are
    reused after a rollback, so nothing shorter identifies them)."""

    def __init__(self, limit: int = DeltaCache.LIMIT // 4) -> None:
        self._kept: OrderedDict[Hashable, tuple[bytes, tuple[object, ...], Delta]] = OrderedDict()
        self._lock = threading.Lock()
        self.limit = limit

    def get(self, key: Hashable, stored: bytes, changes: tuple[object, ...]) -> Delta | None:
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and kept[1] == changes and kept[0] == stored:
            return kept[2]
        return None

    def keep(self, key: Hashable, stored: bytes, changes: tuple[object, ...], delta: Delta) -> None:
        with self._lock:
            self._kept[key] = (stored, changes, delta)
            self._kept.move_to_end(key)
            while len(self._kept) > self.limit:
                self._kept.popitem(last=False)


APPLIED = AppliedInProcess()
