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
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import Exists, OuterRef

from knowledge.domain import sha256_hex
from knowledge.models import (
    Document,
    DocumentStore,
    LexiconState,
    PostingList,
    SearchEntry,
    SearchScope,
    Synonym,
    lexicon_stamp_renewed,
)
from reviewconsole.itemids import ItemId
from semantic.tasks import scopes_changed

__all__ = ["lexicon_stamp_renewed"]

# Tokens longer than this are stored (and looked up) by their hash, so every key fits an index.
MAX_TOKEN_KEY = 64
ID_DTYPE = np.dtype("<i8")
NEVER = np.iinfo(np.int64).max
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

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


def entries_of(blob: bytes | memoryview | None) -> np.ndarray:
    if not blob:
        return np.empty(0, dtype=ENTRY_DTYPE)
    return np.frombuffer(bytes(blob), dtype=ENTRY_DTYPE)


@dataclass(frozen=True)
class IndexModels:
    """The models the index writes: the live ones, or a migration's historical ones."""

    document: Any = Document
    scope: Any = SearchScope
    entry: Any = SearchEntry
    posting: Any = PostingList
    # The columns of a scope key, in the order callers give them (other indexes key otherwise).
    scope_fields: tuple[str, ...] = ("tenant", "brand", "campaign", "store")


LIVE = IndexModels()


def scope_ids(
    keys: Iterable[tuple[str, ...]],
    models: IndexModels = LIVE,
    created: set[int] | None = None,
) -> dict[tuple[str, ...], int]:
    """Ids of the scope keys (``models.scope_fields``: tenant, brand, campaign, store here),
    created when missing (their ids are added to ``created``)."""
    wanted = set(keys)
    found: dict[tuple[str, ...], int] = {}
    fields = models.scope_fields
    if len(wanted) <= 50:
        for key in wanted:
            scope, new = models.scope.objects.get_or_create(**dict(zip(fields, key, strict=True)))
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


def changes_applied(
    changes: Changes, models: IndexModels = LIVE, fresh: set[int] | None = None
) -> None:
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
    """Pack each scope's entries into its ``arrays`` (after any change to them), and queue the
    packing of their vectors (``semantic``) after the commit."""
    scopes = set(scopes)
    if models is LIVE:
        scopes_changed(VECTOR_SPACE, scopes)
    for scope_id in scopes:
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
    """Put an approved, unrevoked version into the index of every store it lists."""
    if not document.approved or document.revoked:
        return
    if _batch.pending is not None and models is LIVE:
        _batch.pending[document.pk] = document
        return
    stores = list(document.store_rows.values_list("store", flat=True))
    ids = scope_ids(
        ((document.tenant, document.brand, document.campaign, s) for s in stores), models
    )
    raw = set(document.raw_tokens.split())
    expanded = set(document.expanded_tokens.split())
    changes = Changes()
    for scope_id in ids.values():
        if models.entry.objects.filter(scope_id=scope_id, document_id=document.pk).exists():
            continue
        entry = models.entry.objects.create(
            scope_id=scope_id, document_id=document.pk, **_entry_fields(document, raw, expanded)
        )
        changes.add(scope_id, entry.pk, raw, expanded)
    changes_applied(changes, models)
    groups_refreshed(list(ids.values()), [document.doc_key], [document.rule_key], models)
    arrays_rebuilt(ids.values(), models)


def document_unindexed(document: Any, models: IndexModels = LIVE) -> None:
    """Take a version out of the index (it was revoked)."""
    if _batch.pending is not None and _batch.pending.pop(document.pk, None) is not None:
        return
    entries = list(
        models.entry.objects.filter(document_id=document.pk).values_list(
            "pk", "scope_id", "expanded_tokens"
        )
    )
    if not entries:
        return
    raw = document.raw_tokens.split()
    changes = Changes()
    for pk, scope_id, expanded in entries:
        changes.remove(scope_id, pk, raw, expanded.split())
    changes_applied(changes, models)
    models.entry.objects.filter(pk__in=[pk for pk, _, _ in entries]).delete()
    scopes = [scope for _, scope, _ in entries]
    groups_refreshed(scopes, [document.doc_key], [document.rule_key], models)
    arrays_rebuilt(scopes, models)


def expanded_changed(documents: Iterable[Any], models: IndexModels = LIVE) -> None:
    """The lexicon changed these documents' expanded token sets: move their postings."""
    by_id = {document.pk: document for document in documents}
    if not by_id:
        return
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
    ids = scope_ids(keys, created=fresh)
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
    changes_applied(changes, fresh=fresh)
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
    models.posting.objects.all().delete()
    models.entry.objects.all().delete()
    count = 0
    for document in models.document.objects.filter(approved=True, revoked=False).iterator(
        chunk_size=500
    ):
        document_indexed(document, models)
        count += 1
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
