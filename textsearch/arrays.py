"""The one cache of packed scope arrays a process keeps (PostgreSQL).

A search statement sends a scope's packed array only when it differs from the one this process
kept: every update of the scope's row writes a new row version, named by the transaction that
wrote it (``xmin``) and its place (``ctid``, new for each version a transaction writes), so an
unchanged pair means an unchanged array. The statement reads :data:`ROW_VERSION` beside the
posting lists and selects the array only when the version differs from the one given
(:func:`arrays_column`). SQLite reads the blob in process memory and needs no such cache.
Bounded by bytes, least recently used first out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np

# The row version of the scope row aliased ``s`` (PostgreSQL).
ROW_VERSION = "(s.xmin::text || ':' || s.ctid::text)"
# Both indexes' arrays together (each had 32 MiB of its own).
ARRAYS_CACHE_BYTES = 64 * 1024 * 1024


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

    def get(self, key: Hashable) -> tuple[str, np.ndarray] | None:
        with self._lock:
            cached = self._kept.get(key)
            if cached is not None:
                self._kept.move_to_end(key)
            return cached

    def keep(self, key: Hashable, version: str, entries: np.ndarray) -> None:
        with self._lock:
            self._kept[key] = (version, entries)
            self._kept.move_to_end(key)
            while sum(e.nbytes for _, e in self._kept.values()) > self.limit_bytes:
                self._kept.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._kept)

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


# The one cache of this process: knowledge search's and retrieval's scope arrays.
CACHE = ArraysCache()
