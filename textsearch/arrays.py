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
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator

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


# The caches of this process: knowledge search's and retrieval's scope arrays, and knowledge
# search's posting lists.
CACHE = ArraysCache()
POSTINGS = ArraysCache(POSTINGS_CACHE_BYTES)
