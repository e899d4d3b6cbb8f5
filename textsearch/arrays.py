"""The caches of packed scope arrays and posting lists a process keeps (PostgreSQL).

A search statement sends a scope's packed array only when it differs from the one this process
kept: every update of the scope's row writes a new row version, named by the transaction that
wrote it (``xmin``) and its place (``ctid``, new for each version a transaction writes), so an
unchanged pair means an unchanged array. The statement reads :data:`ROW_VERSION` beside the
posting lists and selects the array only when the version differs from the one given
(:func:`arrays_column`). SQLite reads the blob in process memory and needs no such cache.
Bounded by bytes, least recently used first out.

Posting lists are kept the same way (:data:`POSTINGS`), per index, scope key, token and column,
each with the version of the posting row it was read from (:data:`POSTING_VERSION`): the
statement is given the version this process holds for each list it wants and sends the list only
when the row's version differs, so a list travels once per row version and process. A write that
changes a list (from any connection) writes a new row version, so a kept list is never served
past a change; the key holds the scope key, and the version compared is that of the row the
statement found for that scope and token, so a list is never served for another scope.
Both indexes ask for their lists the same way (:class:`KeptLists`: the tokens and the versions
held, as three array parameters of :data:`KEPT_TOKENS`, each list selected by
:func:`kept_list_column`), knowledge search and experience retrieval alike.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import numpy as np

# The row version of the scope row aliased ``s`` (PostgreSQL).
ROW_VERSION = "(s.xmin::text || ':' || s.ctid::text)"
# The row version of the posting row aliased ``p`` (PostgreSQL).
POSTING_VERSION = "(p.xmin::text || ':' || p.ctid::text)"
# Both indexes' arrays together (each had 32 MiB of its own).
ARRAYS_CACHE_BYTES = 64 * 1024 * 1024
# The posting lists kept per process (the ids' bytes; the bookkeeping adds about 200 bytes per
# list).
POSTINGS_CACHE_BYTES = 64 * 1024 * 1024


# The tokens a statement wants with the versions of the lists this process holds for them (''
# when none is held, NULL when that column's list is not wanted): :meth:`KeptLists.params`.
KEPT_TOKENS = "unnest(%s::text[], %s::text[], %s::text[]) AS k(token, raw, expanded)"


def kept_list_column(column: str, name: str) -> str:
    """The select expression of a posting row's ``column`` (``raw`` or ``expanded``, the
    column of :data:`KEPT_TOKENS` named ``name``): the list when it is wanted and the row's
    version differs from the one held, else NULL."""
    return (
        f"CASE WHEN k.{name} IS DISTINCT FROM {POSTING_VERSION} AND k.{name} IS NOT NULL"
        f" THEN {column} END"
    )


def arrays_column(column: str) -> str:
    """The select expression of a scope's array: NULL when the row's version is the one the
    statement's first parameter names (the kept array is current)."""
    return f"CASE WHEN {ROW_VERSION} = %s THEN NULL ELSE {column} END"


class ArraysCache:
    """Per scope key (the index's name first), the row version and the packed entries read
    with it. Reads as a mapping (what the tests inspect)."""

    def __init__(self, limit_bytes: int = ARRAYS_CACHE_BYTES) -> None:
        self._kept: OrderedDict[Hashable, tuple[str, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()
        self.limit_bytes = limit_bytes
        self.nbytes = 0

    def get(self, key: Hashable) -> tuple[str, np.ndarray] | None:
        with self._lock:
            cached = self._kept.get(key)
            if cached is not None:
                self._kept.move_to_end(key)
            return cached

    def keep(self, key: Hashable, version: str, entries: np.ndarray) -> None:
        with self._lock:
            former = self._kept.pop(key, None)
            if former is not None:
                self.nbytes -= former[1].nbytes
            self._kept[key] = (version, entries)
            self.nbytes += entries.nbytes
            while self.nbytes > self.limit_bytes:
                _, (_, dropped) = self._kept.popitem(last=False)
                self.nbytes -= dropped.nbytes

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self.nbytes = 0

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._kept)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self.keys())

    def __getitem__(self, key: Hashable) -> tuple[str, np.ndarray]:
        with self._lock:
            return self._kept[key]

    def __len__(self) -> int:
        return len(self._kept)

    @staticmethod
    def unchanged(
        sent: tuple[str, np.ndarray] | None, version: str | None, blob: object
    ) -> np.ndarray | None:
        """The entries kept with the version the statement was ``sent`` when it sent no array
        (``blob`` None) because the row is still at that ``version``; None otherwise (the
        caller unpacks ``blob``). Compared with what was sent, not with what the cache holds
        now: another search may have kept another version meanwhile."""
        if blob is None and sent is not None and version == sent[0]:
            return sent[1]
        return None


# The caches of this process: both indexes' scope arrays, and both indexes' posting lists.
CACHE = ArraysCache()
POSTINGS = ArraysCache(POSTINGS_CACHE_BYTES)

COLUMNS = ("raw", "expanded")


class KeptLists:
    """The posting lists one statement asks for, of one scope (``prefix``: the index's name and
    the scope key): per token of ``raw`` (``expanded``), its raw (expanded) list, with the
    version of the list this process holds. What was held when the statement was sent is
    remembered here: a list the server did not send is the one held then, never what the cache
    holds by the time the answer arrives (another search may have kept another version)."""

    def __init__(
        self,
        prefix: tuple[Hashable, ...],
        raw: list[str],
        expanded: list[str],
        cache: ArraysCache = POSTINGS,
    ) -> None:
        self.prefix = prefix
        self.cache = cache
        self.tokens = sorted(set(raw) | set(expanded))
        wanted = {"raw": set(raw), "expanded": set(expanded)}
        self.sent: dict[tuple[str, str], tuple[str, np.ndarray] | None] = {}
        for token in self.tokens:
            for column in COLUMNS:
                if token in wanted[column]:
                    self.sent[token, column] = cache.get((*prefix, token, column))

    def params(self) -> list[list[str] | list[str | None]]:
        """The three array parameters of :data:`KEPT_TOKENS`."""
        versions: dict[str, list[str | None]] = {
            column: [
                None if (token, column) not in self.sent else (self.sent[token, column] or ("",))[0]
                for token in self.tokens
            ]
            for column in COLUMNS
        }
        return [self.tokens, versions["raw"], versions["expanded"]]

    def received(
        self,
        token: str,
        version: str,
        blobs: tuple[Any, Any],
        ids_of: Callable[[Any], np.ndarray],
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The raw and expanded lists of ``token`` from its posting row at ``version`` (the
        statement's ``blobs``, NULL for a list it did not send): the list held when it was not
        sent, the one sent (then kept) otherwise; None for a column not wanted."""
        lists: list[np.ndarray | None] = []
        for column, blob in zip(COLUMNS, blobs, strict=True):
            if (token, column) not in self.sent:
                lists.append(None)
                continue
            kept = self.cache.unchanged(self.sent[token, column], version, blob)
            if kept is None:
                kept = ids_of(blob)
                self.cache.keep((*self.prefix, token, column), version, kept)
            lists.append(kept)
        return lists[0], lists[1]
