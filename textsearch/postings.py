"""Posting lists: per index scope, token → the sorted ids of the entries whose raw (expanded)
token set holds it, written inside the caller's transaction; and what every index packs.

Both indexes (knowledge's ``SearchScope``/``SearchEntry``/``PostingList``, experience's
``IndexScope``/``IndexEntry``/``IndexPosting``, concrete models of ``textsearch.models``) are
written by this code: :func:`scope_ids` finds or creates the scope rows, :class:`Changes`
gathers the entry ids to add to and take out of each token's lists, :func:`changes_applied`
writes them. Times are packed as microseconds since the epoch (:func:`micros`), entry ids as
``ID_DTYPE`` blobs (:func:`ids_of`), a scope's entries as one record array of the index's own
dtype (:func:`entries_of`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

# Tokens longer than this are stored (and looked up) by their hash, so every key fits an index.
MAX_TOKEN_KEY = 64
ID_DTYPE = np.dtype("<i8")
NEVER = np.iinfo(np.int64).max
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def token_key(token: str) -> str:
    if len(token) <= MAX_TOKEN_KEY:
        return token
    return "#" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:48]


def micros(moment: datetime | None) -> int:
    if moment is None:
        return int(NEVER)
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def moment(value: int) -> datetime:
    """The aware datetime :func:`micros` gave ``value`` for (exact to the microsecond; NEVER is
    the latest datetime there is)."""
    if value >= NEVER:
        return datetime.max.replace(tzinfo=UTC)
    return EPOCH + timedelta(microseconds=int(value))


def ids_of(blob: bytes | memoryview | None) -> np.ndarray:
    if not blob:
        return np.empty(0, dtype=ID_DTYPE)
    return np.frombuffer(bytes(blob), dtype=ID_DTYPE)


def entries_of(blob: bytes | memoryview | None, dtype: np.dtype[Any]) -> np.ndarray:
    """A scope's packed entries (records of ``dtype``) from their stored blob."""
    if not blob:
        return np.empty(0, dtype=dtype)
    return np.frombuffer(bytes(blob), dtype=dtype)


@dataclass(frozen=True)
class IndexModels:
    """The models an index writes (the live ones, or a migration's historical ones) and the
    columns of its scope key, in the order callers give them."""

    scope: Any
    entry: Any
    posting: Any
    scope_fields: tuple[str, ...] = ()


def scope_ids(
    keys: Iterable[tuple[str, ...]],
    models: IndexModels,
    created: set[int] | None = None,
) -> dict[tuple[str, ...], int]:
    """Ids of the scope keys (``models.scope_fields``: tenant, brand, campaign, store here),
    created when missing (their ids are added to ``created``)."""
    wanted = set(keys)
    found: dict[tuple[str, ...], int] = {}
    fields = models.scope_fields
    if len(wanted) <= 50:
        for key in wanted:
            # Without its packed array (a scope's megabytes at 10k entries, not needed here).
            scope, new = models.scope.objects.only("pk").get_or_create(
                **dict(zip(fields, key, strict=True))
            )
            found[key] = scope.pk
            if new and created is not None:
                created.add(scope.pk)
        return found
    # Many keys (a bulk load): read every scope once, create the missing ones together.
    known = {tuple(row[1:]): row[0] for row in models.scope.objects.values_list("pk", *fields)}
    missing = sorted(wanted - set(known))
    models.scope.objects.bulk_create(
        [models.scope(**dict(zip(fields, key, strict=True))) for key in missing], batch_size=2000
    )
    fresh = {
        tuple(row[1:]): row[0]
        for row in models.scope.objects.filter(pk__gt=max(known.values(), default=0)).values_list(
            "pk", *fields
        )
    }
    if created is not None:
        created.update(fresh[key] for key in missing)
    known.update(fresh)
    return {key: known[key] for key in wanted}


@dataclass
class Changes:
    """Entry ids to add to and remove from each token's raw and expanded lists, per scope."""

    by_scope: dict[int, dict[str, tuple[set[int], set[int], set[int], set[int]]]] = field(
        default_factory=dict
    )

    def _slot(self, scope_id: int, token: str) -> tuple[set[int], set[int], set[int], set[int]]:
        return self.by_scope.setdefault(scope_id, {}).setdefault(
            token_key(token), (set(), set(), set(), set())
        )

    def add(
        self, scope_id: int, entry_id: int, raw: Iterable[str], expanded: Iterable[str]
    ) -> None:
        for token in raw:
            self._slot(scope_id, token)[0].add(entry_id)
        for token in expanded:
            self._slot(scope_id, token)[2].add(entry_id)

    def remove(
        self, scope_id: int, entry_id: int, raw: Iterable[str], expanded: Iterable[str]
    ) -> None:
        for token in raw:
            self._slot(scope_id, token)[1].add(entry_id)
        for token in expanded:
            self._slot(scope_id, token)[3].add(entry_id)


def _merged(blob: Any, add: set[int], remove: set[int]) -> bytes:
    ids = ids_of(blob)
    if remove:
        ids = ids[~np.isin(ids, np.fromiter(remove, dtype=ID_DTYPE))]
    if add:
        ids = np.union1d(ids, np.fromiter(add, dtype=ID_DTYPE))
    return ids.astype(ID_DTYPE).tobytes()


def changes_applied(changes: Changes, models: IndexModels, fresh: set[int] | None = None) -> None:
    """Write ``changes`` into the posting lists (rows locked while they are rewritten).

    Scopes in ``fresh`` were created by the caller and have no lists yet: theirs are written
    without reading.
    """
    new_rows = []
    for scope_id in fresh or ():
        for key, (raw_add, _, expanded_add, _) in changes.by_scope.pop(scope_id, {}).items():
            new_rows.append(
                models.posting(
                    scope_id=scope_id,
                    token=key,
                    raw=_merged(b"", raw_add, set()),
                    expanded=_merged(b"", expanded_add, set()),
                )
            )
    models.posting.objects.bulk_create(new_rows, batch_size=2000)
    for scope_id, tokens in changes.by_scope.items():
        keys = sorted(tokens)
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            rows = {
                row.token: row
                for row in models.posting.objects.select_for_update().filter(
                    scope_id=scope_id, token__in=chunk
                )
            }
            created, updated, emptied = [], [], []
            for key in chunk:
                raw_add, raw_remove, expanded_add, expanded_remove = tokens[key]
                row = rows.get(key)
                raw = _merged(row.raw if row else b"", raw_add, raw_remove)
                expanded = _merged(row.expanded if row else b"", expanded_add, expanded_remove)
                if row is None:
                    if raw or expanded:
                        created.append(
                            models.posting(scope_id=scope_id, token=key, raw=raw, expanded=expanded)
                        )
                elif raw or expanded:
                    row.raw, row.expanded = raw, expanded
                    updated.append(row)
                else:
                    emptied.append(row.pk)
            models.posting.objects.bulk_create(created, batch_size=1000)
            models.posting.objects.bulk_update(updated, ["raw", "expanded"], batch_size=1000)
            models.posting.objects.filter(pk__in=emptied).delete()


def placeholders(count: int) -> str:
    """``count`` parameters of an ``IN (...)`` list. An empty ``IN ()`` is not SQL: a space,
    never part of a token, stands in and matches nothing."""
    return ", ".join(["%s"] * count) if count else "%s"
