"""``search_knowledge``: scope check, database gate, lexical ranking, conditions."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from django.contrib.auth.models import AnonymousUser, User
from django.db import connection

from knowledge import lexicon as index_lexicon
from knowledge import postings
from knowledge.domain import (
    CONFLICTING_SOURCES,
    DOCUMENT_GATE,
    INDEX_GATE,
    KNOWN,
    MATCH,
    NEEDS_CONTEXT,
    NO_MATCH,
    OCCURRED,
    RETRIEVED,
    UNKNOWN,
    Conditions,
    Quote,
    compare_conditions,
)
from knowledge.models import Document, DocumentStore
from knowledge.postings import VECTOR_SPACE
from reviewconsole.errors import ValidationFailure
from reviewconsole.itemids import ItemId
from reviewconsole.metrics import search_timed
from reviewconsole.permissions import SEARCH_KNOWLEDGE, require_scope
from reviewconsole.statements import prepared_cursor
from reviewconsole.timeparse import aware_required, to_utc_iso
from textsearch.arrays import (
    CACHE,
    KEPT_TOKENS,
    POSTING_VERSION,
    POSTINGS,
    ROW_VERSION,
    KeptLists,
    arrays_column,
    kept_list_column,
)
from textsearch.delta import APPLIED, DELTAS, Delta
from textsearch.domain import RRF_K as RRF_K
from textsearch.domain import (
    ParsedQuery,
    columns_admit,
    parse_query,
    reparsed,
    rrf_fractions,
)
from textsearch.gate import gate_q
from textsearch.postings import ids_of, micros, placeholders, token_key
from textsearch.ranking import (
    BRANCHES,
    EXACT_RATIO_BOUND,
    both_intersections,
    exact_head,
    jaccard_order,
)
from textsearch.ranking import shares as _shares
from textsearch.vector import OFF, fusion_columns, ranks_or_none, vector_branch
from textsearch.vector import votes as vector_votes

# This index's name in the engine's array cache (``textsearch.arrays``), and the cache.
INDEX_NAME = "knowledge"
_arrays_cache = CACHE
_postings_cache = POSTINGS
# The engine's exact orders, by the names this module's ranking (and its tests) use.
_jaccard_order = jaccard_order
_exact_head = exact_head

DEFAULT_LIMIT = 4
MAX_LIMIT = 50
MAX_QUERY_LENGTH = 2_000
# What a ticket must name for a search (knowledge has no deployment column).
CONTEXT_FIELDS = ("tenant", "brand", "store", "campaign")
SEARCH_REFUSED = f"searching the knowledge base needs the permission {SEARCH_KNOWLEDGE}"


@dataclass(frozen=True)
class KnowledgeContext:
    tenant: str | None
    brand: str | None
    store: str | None
    campaign: str | None
    occurred_at: datetime | None
    known_at: datetime | None
    facts: Mapping[str, object] = field(default_factory=dict)
    limit: int = DEFAULT_LIMIT


def _result(
    status: str,
    *,
    missing: list[str] | None = None,
    truncated: bool = False,
    evidence: list[dict[str, Any]] | None = None,
    semantic: str | None = None,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "status": status,
        "missing": missing or [],
        "truncated": truncated,
        "evidence": evidence or [],
    }
    if semantic is not None and semantic != OFF:
        # What the vector branch did (semantic.branch): used, partial, not_indexed or
        # unavailable. Absent when it is off (the lexical shape) or nothing was searched.
        result["semantic"] = semantic
    return result


def gated_rows(context: KnowledgeContext) -> Any:
    """The gate of step 2, entirely in the database: the scope, then ``DOCUMENT_GATE``
    (review, validity, knowledge time) as a filter."""
    return DocumentStore.objects.filter(
        gate_q(
            DOCUMENT_GATE,
            {OCCURRED: context.occurred_at, KNOWN: context.known_at},
            "document__",
        ),
        tenant=context.tenant,
        brand=context.brand,
        campaign=context.campaign,
        store=context.store,
    )


def _validate(query: str, context: KnowledgeContext) -> None:
    if not isinstance(query, str):
        raise ValidationFailure("query", "must be a string")
    if len(query) > MAX_QUERY_LENGTH:
        raise ValidationFailure("query", f"must be at most {MAX_QUERY_LENGTH} characters")
    if (
        isinstance(context.limit, bool)
        or not isinstance(context.limit, int)
        or not (1 <= context.limit <= MAX_LIMIT)
    ):
        raise ValidationFailure("limit", f"must be an integer from 1 to {MAX_LIMIT}")
    for name in ("occurred_at", "known_at"):
        value = getattr(context, name)
        if value is not None:
            aware_required(value, field=name)


@search_timed("knowledge")
def search_knowledge(
    query: str, context: KnowledgeContext, *, actor: User | AnonymousUser | None
) -> dict[str, Any]:
    """The search of one ticket's scope as ``actor``, who needs the search permission and the
    scope's tenant (which must exist: ``permissions.require_scope``), whoever calls: the console,
    ``research``, the API and MCP, skill steps, investigations and replays."""
    # A scope without a tenant is answered needs_context below; nothing of a tenant is read.
    require_scope(actor, SEARCH_KNOWLEDGE, context.tenant or None, message=SEARCH_REFUSED)
    _validate(query, context)
    missing = [name for name in CONTEXT_FIELDS if not getattr(context, name)]
    missing += [name for name in ("occurred_at", "known_at") if getattr(context, name) is None]
    if missing:
        # Never widen: without the full scope nothing is searched.
        return _result(NEEDS_CONTEXT, missing=missing)

    ranked = ranked_top(query, context)
    if not ranked.chosen:
        return _result(NO_MATCH, semantic=ranked.semantic)

    documents = _evidence_rows(ranked.chosen, ranked.versions)
    facts = {k: v for k, v in context.facts.items() if v is not None and v != ""}

    evidence = []
    for document_id, conflict, found_by, relevance in zip(
        ranked.chosen, ranked.conflicts, ranked.found_by, ranked.relevance, strict=True
    ):
        document = documents[document_id]
        conditions = compare_conditions(document["requirements"], facts)
        item = _evidence_item(document, conditions, conflict=conflict)
        item["found_by"] = found_by
        item.update(relevance)
        evidence.append(item)

    if any(item["conflict"] for item in evidence):
        status = CONFLICTING_SOURCES
        missing = []
    else:
        undecided = [item for item in evidence if item["conditions"]["status"] == UNKNOWN]
        missing = sorted({name for item in undecided for name in item["conditions"]["unknown"]})
        status = NEEDS_CONTEXT if undecided else RETRIEVED
    truncated = ranked.matched > context.limit
    return _result(
        status, missing=missing, truncated=truncated, evidence=evidence, semantic=ranked.semantic
    )


# --- ranking over the postings -----------------------------------------------------------------


@dataclass(frozen=True)
class Ranked:
    """The first ``limit`` fused documents (their ids), how many matched, which of the chosen
    ones are in conflict, which branches found each (``textsearch.ranking.BRANCHES``), and what the vector branch
    did (``semantic.branch`` statuses)."""

    chosen: list[int]
    matched: int
    conflicts: list[bool]
    versions: list[int] = field(default_factory=list)  # of the chosen, as the index holds them
    found_by: list[list[str]] = field(default_factory=list)
    semantic: str = OFF
    # Of the chosen: ``relevance`` and, where the vector branch scored it, ``similarity``.
    relevance: list[dict[str, float]] = field(default_factory=list)


NOTHING = Ranked([], 0, [])


# The evidence fields of document versions, per process. A version's content never changes (an
# edit saves a new version; approval and revocation change only flags, and the index, not this,
# decides what is returned), so a cached row is never stale; the version the index gives is
# checked against it all the same. Bounded, least recently used first out.
_evidence_cache: OrderedDict[int, dict[str, Any]] = OrderedDict()
_evidence_lock = threading.Lock()
EVIDENCE_CACHE_SIZE = 2048


def _evidence_rows(ids: list[int], versions: list[int]) -> dict[int, dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    with _evidence_lock:
        for document_id, version in zip(ids, versions, strict=True):
            row = _evidence_cache.get(document_id)
            if row is not None and row["version"] == version:
                _evidence_cache.move_to_end(document_id)
                found[document_id] = row
    missing = [document_id for document_id in ids if document_id not in found]
    if missing:
        rows = Document.objects.filter(pk__in=missing).values("id", *_EVIDENCE_FIELDS)
        with _evidence_lock:
            for row in rows:
                found[row["id"]] = _evidence_cache[row["id"]] = row
            while len(_evidence_cache) > EVIDENCE_CACHE_SIZE:
                _evidence_cache.popitem(last=False)
    return found


# One statement, so one snapshot: the scope's packed entries with the stamp of the lexicon the
# index was computed under (knowledge.lexicon; the current one while none is recorded), and the
# posting lists of the query's tokens (raw lists for raw tokens, expanded for expanded ones), and
# the scope's delta (``knowledge.postings``; on PostgreSQL only the changes after those this
# process holds for the array's row version: :data:`_DELTA_AFTER`), its token keys in one column.
_POSTINGS_SQL = """
SELECT 0, {version}, {arrays}, NULL, COALESCE(NULLIF(st.indexed_stamp, ''), st.stamp),
       s.multi_version, s.id
FROM knowledge_searchscope s LEFT JOIN knowledge_lexiconstate st ON st.id = 1
WHERE s.tenant = %s AND s.brand = %s AND s.campaign = %s AND s.store = %s
UNION ALL
SELECT 1, p.token,
       CASE WHEN p.token {raw} THEN p.raw END,
       CASE WHEN p.token {expanded} THEN p.expanded END,
       NULL, NULL, NULL
FROM knowledge_postinglist p JOIN knowledge_searchscope s ON s.id = p.scope_id
WHERE s.tenant = %s AND s.brand = %s AND s.campaign = %s AND s.store = %s
  AND p.token {every}
UNION ALL
SELECT 2, d.item_id, d.record, NULL, d.raw_tokens || %s || d.expanded_tokens, d.removed, d.id
FROM knowledge_searchdelta d JOIN knowledge_searchscope s ON s.id = d.scope_id
WHERE s.tenant = %s AND s.brand = %s AND s.campaign = %s AND s.store = %s AND d.id > {after}
"""


# The delta's changes after the last this process holds (its first parameter: the row version
# of the array they were applied to; all of them when the array's row is at another version).
_DELTA_AFTER = f"CASE WHEN {ROW_VERSION} = %s THEN %s ELSE 0 END"
# Between a delta row's raw and expanded token keys (never within a key).
_KEYS_APART = "\n"
# What this process holds of each scope's delta (``textsearch.delta``), by the cache's key.
_deltas = DELTAS


class _Fetched(threading.local):
    """What this thread's last search read received (what the tests and the bench count): the
    bytes of the scope's array and of the delta's records, the delta's rows, and the bytes of
    the query's posting lists."""

    bytes: int = 0
    delta_rows: int = 0
    lists: int = 0


FETCHED = _Fetched()


def _token_test(values: list[str], *, array: bool) -> tuple[str, list[Any]]:
    """``p.token`` among ``values``: on PostgreSQL one array parameter, so the statement's text
    is the same for every query (the driver parses a new text each time, which cost more than
    the database's answer); elsewhere an ``IN`` list."""
    if array:
        return "= ANY(%s)", [values]
    return f"IN ({placeholders(len(values))})", values or [" "]


@dataclass
class _Read:
    found: bool
    stamp: str | None
    entries: np.ndarray
    multi_version: bool
    raw: list[np.ndarray]
    expanded: list[np.ndarray]
    scope_id: int | None = None
    # Whether ``entries`` is the array this process keeps for the scope's row version (the
    # same object search after search, so what is derived from it is kept too).
    kept: bool = False
    version: str | None = None  # the scope row's (PostgreSQL)
    blob: Any = None  # the merged array as read (SQLite)
    changes: list[tuple[Any, ...]] = field(default_factory=list)  # the delta's rows read


# On PostgreSQL the lists this process keeps are not sent again (``textsearch.arrays``): each
# wanted token comes with the version of the raw and of the expanded list kept for it ('' when
# none is kept; NULL when the list is not wanted), and a list is selected only when its row's
# version differs. The token travels in the stamp column, the row's version in the version one.
_KEPT_POSTINGS_SQL = """
SELECT 0, {version}, {arrays}, NULL, COALESCE(NULLIF(st.indexed_stamp, ''), st.stamp),
       s.multi_version, s.id
FROM knowledge_searchscope s LEFT JOIN knowledge_lexiconstate st ON st.id = 1
WHERE s.tenant = %s AND s.brand = %s AND s.campaign = %s AND s.store = %s
UNION ALL
SELECT 1, {posting_version}, {raw}, {expanded}, p.token, NULL, NULL
FROM {tokens}
JOIN knowledge_postinglist p ON p.token = k.token
JOIN knowledge_searchscope s ON s.id = p.scope_id
WHERE s.tenant = %s AND s.brand = %s AND s.campaign = %s AND s.store = %s
UNION ALL
SELECT 2, d.item_id, d.record, NULL, d.raw_tokens || %s || d.expanded_tokens, d.removed, d.id
FROM knowledge_searchdelta d JOIN knowledge_searchscope s ON s.id = d.scope_id
WHERE s.tenant = %s AND s.brand = %s AND s.campaign = %s AND s.store = %s AND d.id > {after}
"""


def _postings_kept() -> bool:
    """Whether this process keeps posting lists between searches (PostgreSQL: they travel from
    the server; SQLite reads them in process memory)."""
    return connection.vendor == "postgresql"


def _read(query: ParsedQuery, context: KnowledgeContext) -> _Read:
    raw = sorted({token_key(t) for t in query.raw})
    expanded = sorted({token_key(t) for t in query.expanded})
    every = sorted(set(raw) | set(expanded))
    scope = [context.tenant, context.brand, context.campaign, context.store]
    key = (INDEX_NAME, *scope)
    versioned = connection.vendor == "postgresql"
    cached = _arrays_cache.get(key) if versioned else None
    held = _deltas.get(key) if cached is not None else None
    if held is not None and held.version != cached[0]:  # type: ignore[index]
        held = None
    after = [cached[0] if cached is not None else "", held.seq if held else 0]
    if versioned and _postings_kept():
        read = _read_kept(key, scope, cached, raw, expanded, after)
        return _delta_applied(read, key, held, raw, expanded)
    raw_test, raw_params = _token_test(raw, array=versioned)
    expanded_test, expanded_params = _token_test(expanded, array=versioned)
    every_test, every_params = _token_test(every, array=versioned)
    sql = _POSTINGS_SQL.format(
        version=ROW_VERSION if versioned else "NULL",
        arrays=arrays_column("s.arrays") if versioned else "s.arrays",
        raw=raw_test,
        expanded=expanded_test,
        every=every_test,
        after=_DELTA_AFTER if versioned else "0",
    )
    params = [*scope, *raw_params, *expanded_params, *scope, *every_params, _KEYS_APART, *scope]
    if versioned:
        params.insert(0, cached[0] if cached is not None else "")
        params += after
    read = _Read(False, None, postings.entries_of(None), False, [], [])
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for row in cursor.fetchall():
            kind, version, first, second, stamp, multi_version, scope_id = row
            if kind == 0:
                _scope_row(read, key, cached, version, first, stamp, multi_version, scope_id)
            elif kind == 2:
                read.changes.append(row)
            else:
                if first is not None:
                    read.raw.append(ids_of(first))
                if second is not None:
                    read.expanded.append(ids_of(second))
    return _delta_applied(read, key, held, raw, expanded)


def _delta_applied(
    read: _Read,
    key: tuple[str | None, ...],
    held: Delta | None,
    raw: list[str],
    expanded: list[str],
) -> _Read:
    """``read`` with the scope's delta applied on top of its merged array (``knowledge.postings.
    with_delta``): the array with the changes, and the added entries' lists of the query's
    tokens. On PostgreSQL the delta applied is kept with the array's row version, and only the
    changes after it were read; SQLite read them all, applied again only when they changed."""
    changes = sorted(read.changes, key=lambda row: int(row[6]))
    FETCHED.delta_rows = len(changes)
    FETCHED.bytes = len(read.blob or b"") + sum(len(row[2] or b"") for row in changes)
    if not read.found:
        return read
    if held is not None and held.version != read.version:
        held = None  # the array's row moved: every change was read again
    if read.version is None:
        if not changes:
            return read
        stored = bytes(read.blob or b"")
        frozen = tuple(tuple(row) for row in changes)
        delta = APPLIED.get(key, stored, frozen)
        if delta is None:
            delta = postings.with_delta(read.entries, None, _delta_rows(changes))
            APPLIED.keep(key, stored, frozen, delta)
    elif held is not None and not changes:
        delta = held
    else:
        delta = postings.with_delta(read.entries, held, _delta_rows(changes), read.version)
        _deltas.keep(key, delta)
    read.entries = delta.entries
    read.raw += [delta.raw[token] for token in raw if token in delta.raw]
    read.expanded += [delta.expanded[token] for token in expanded if token in delta.expanded]
    read.multi_version = read.multi_version or delta.added
    return read


def _delta_rows(changes: list[tuple[Any, ...]]) -> list[tuple[Any, Any]]:
    rows = []
    for _, public_id, record, _, keys, removed, seq in changes:
        raw, _, expanded = (keys or "").partition(_KEYS_APART)
        rows.append(postings.delta_row(seq, record, public_id, raw, expanded, removed))
    return rows


def _scope_row(
    read: _Read,
    key: tuple[str | None, ...],
    cached: tuple[str, np.ndarray] | None,
    version: str | None,
    blob: object,
    stamp: str | None,
    multi_version: object,
    scope_id: int | None,
) -> None:
    read.found, read.stamp, read.scope_id = True, stamp, scope_id
    read.kept = version is not None
    read.version, read.blob = version, blob
    kept = _arrays_cache.unchanged(cached, version, blob)
    if kept is not None:
        read.entries = kept
    else:
        read.entries = postings.entries_of(blob)  # type: ignore[arg-type]
        if version is not None:
            _arrays_cache.keep(key, version, read.entries)
    read.multi_version = bool(multi_version)


_KEPT_SQL = _KEPT_POSTINGS_SQL.format(
    version=ROW_VERSION,
    arrays=arrays_column("s.arrays"),
    posting_version=POSTING_VERSION,
    raw=kept_list_column("p.raw", "raw"),
    expanded=kept_list_column("p.expanded", "expanded"),
    tokens=KEPT_TOKENS,
    after=_DELTA_AFTER,
)


def _read_kept(
    key: tuple[str | None, ...],
    scope: list[str | None],
    cached: tuple[str, np.ndarray] | None,
    raw: list[str],
    expanded: list[str],
    after: list[Any],
) -> _Read:
    """:func:`_read` on PostgreSQL: the posting lists this process keeps for their row's
    version are not sent again (``textsearch.arrays.KeptLists``), nor the delta's changes this
    process holds (``after``)."""
    lists = KeptLists(key, raw, expanded, _postings_cache)
    params = [
        cached[0] if cached is not None else "",
        *scope,
        *lists.params(),
        *scope,
        _KEYS_APART,
        *scope,
        *after,
    ]
    read = _Read(False, None, postings.entries_of(None), False, [], [])
    # Prepared: the statement's text never changes, so the server plans it once per connection.
    with prepared_cursor() as cursor:
        cursor.execute(_KEPT_SQL, params)
        for row in cursor.fetchall():
            kind, version, first, second, stamp, multi_version, scope_id = row
            if kind == 0:
                _scope_row(read, key, cached, version, first, stamp, multi_version, scope_id)
                continue
            if kind == 2:
                read.changes.append(row)
                continue
            # (A posting row's token travels in the stamp column.)
            kept_raw, kept_expanded = lists.received(stamp, version, (first, second), ids_of)
            if kept_raw is not None:
                read.raw.append(kept_raw)
            if kept_expanded is not None:
                read.expanded.append(kept_expanded)
    return read


def ranked_top(query: str | ParsedQuery, context: KnowledgeContext) -> Ranked:
    """The head of the fused ranking, exactly as the definition orders it. ``query`` is parsed
    once (its raw tokens); it is expanded again only when the index moved to another lexicon."""
    stamp = index_lexicon.last_indexed_stamp()
    stamp, lexicon = index_lexicon.indexed_for(stamp)
    if isinstance(query, str):
        parsed = parse_query(query, lexicon, stamp)
    else:
        parsed = reparsed(query, lexicon, stamp)
    for _attempt in range(5):
        if parsed.empty:
            return NOTHING
        read = _read(parsed, context)
        if not read.found:
            return NOTHING
        if read.stamp == parsed.stamp:
            return _ranked(read, len(parsed.raw), len(parsed.expanded), context, parsed.text)
        # The index moved to another lexicon since it was read: expand the query again with it.
        stamp, lexicon = index_lexicon.indexed_for(read.stamp)
        parsed = reparsed(parsed, lexicon, stamp)
    raise RuntimeError("the lexicon kept changing during one search")


# The columns of a scope's packed entries a search reads, contiguous and in the types the ranking
# computes in (the records interleave them, so every pass over a field strides over the others).
# Kept per process for the arrays the process keeps (PostgreSQL: the same array object search
# after search, until its row changes), by the array's identity; bounded by bytes, least
# recently used first out. SQLite reads a new array per search: its columns are taken each time.
_COLUMNS = ("id", "order", "raw_size", "expanded_size", "valid_from", "valid_to", "published_at")
COLUMNS_CACHE_BYTES = 48 * 1024 * 1024
_columns_kept: OrderedDict[int, tuple[np.ndarray, dict[str, np.ndarray]]] = OrderedDict()
_columns_lock = threading.Lock()


def _columns(entries: np.ndarray, *, kept: bool) -> dict[str, np.ndarray]:
    if kept:
        with _columns_lock:
            found = _columns_kept.get(id(entries))
            if found is not None and found[0] is entries:
                _columns_kept.move_to_end(id(entries))
                return found[1]
    if not kept:
        # Read once: the int64 fields as they lie in the records (a copy would cost a pass).
        return {
            name: entries[name]
            if entries.dtype[name] == np.int64
            else entries[name].astype(np.int64)
            for name in _COLUMNS
        }
    columns = {name: entries[name].astype(np.int64) for name in _COLUMNS}
    with _columns_lock:
        _columns_kept[id(entries)] = (entries, columns)
        # The entries count too: kept here, they outlive their eviction from the array cache.
        size = sum(_kept_bytes(*held) for held in _columns_kept.values())
        while size > COLUMNS_CACHE_BYTES and len(_columns_kept) > 1:
            _, dropped = _columns_kept.popitem(last=False)
            size -= _kept_bytes(*dropped)
    return columns


def _kept_bytes(entries: np.ndarray, columns: dict[str, np.ndarray]) -> int:
    return int(entries.nbytes) + sum(int(column.nbytes) for column in columns.values())


def _found_by(index: int, ranks: Sequence[np.ndarray]) -> list[str]:
    # The vector branch's repeated columns come last: the names stop at its first.
    return [name for name, rank in zip(BRANCHES, ranks, strict=False) if rank[index]]


def _ranked(
    read: _Read, raw_size: int, expanded_size: int, context: KnowledgeContext, query: str = ""
) -> Ranked:
    """The head of the ranking over ``read``: the sizes of the query's raw and expanded token
    sets and its text (what the vector branch embeds) come from the query parsed once."""
    entries = read.entries
    count = len(entries)
    if count == 0:
        return NOTHING
    instants = {OCCURRED: micros(context.occurred_at), KNOWN: micros(context.known_at)}
    columns = _columns(entries, kept=read.kept)
    gated = np.asarray(columns_admit(INDEX_GATE, columns, instants), dtype=bool)
    if read.multi_version:
        # Only the newest gated version of each doc_key goes on to ranking.
        index = np.nonzero(gated)[0]
        # ufunc.at takes its fast path only for native index and matching value types.
        groups = entries["group"][index].astype(np.intp)
        versions = entries["version"][index].astype(np.int64)
        newest = np.zeros(int(entries["group"].max()) + 1, dtype=np.int64)
        np.maximum.at(newest, groups, versions)
        gated[index[versions < newest[groups]]] = False
    order = columns["order"]
    ids = columns["id"]
    # The array and the lists come from one statement (or the kept array of the same row
    # version): they agree, so the count is not checked.
    inters = both_intersections(ids, read.raw, read.expanded)
    branches = []
    hits = []
    for inter, query_size, sizes in (
        (inters[0], raw_size, columns["raw_size"]),
        (inters[1], expanded_size, columns["expanded_size"]),
    ):
        hit = gated & (inter > 0)
        hits.append(hit)
        candidates = np.nonzero(hit)[0]
        # The counts come narrow (textsearch.ranking.both_intersections): widened here, for
        # the candidates only.
        common = inter[candidates].astype(np.int64)
        branches.append((candidates, common, query_size + sizes[candidates] - common))
    # The vector branch, over exactly the entries past the gate and the newest-version rule.
    vector = vector_branch(VECTOR_SPACE, read.scope_id, ids, gated, order, query)
    if vector.ranked:
        assert vector.ranks is not None
        hits.append(vector.ranks > 0)

    def described(chosen: list[int]) -> list[dict[str, float]]:
        # The relevance of the chosen only: the shares of every entry cost a pass over the scope.
        at = np.asarray(chosen, dtype=np.intp)
        shares = _shares([inter[at] for inter in inters], (raw_size, expanded_size))
        return [
            vector.described(i, float(share) or None)
            for i, share in zip(chosen, shares, strict=True)
        ]

    if max(len(c) for c, _, _ in branches) >= PARTIAL_FROM:
        partial = _partial_head(
            branches,
            order,
            count,
            context.limit,
            ranks_or_none(vector),
            vector_votes(),
            hits[:2],
        )
        if partial is not None:
            picked_head, matched = partial
            return Ranked(
                chosen=[int(entries["document_id"][i]) for i in picked_head],
                matched=matched,
                conflicts=[_in_conflict(entries, gated, i) for i in picked_head],
                versions=[int(entries["version"][i]) for i in picked_head],
                found_by=[_found_by(i, hits) for i in picked_head],
                semantic=vector.status,
                relevance=described(picked_head),
            )
    ranks = []
    for candidates, common, union in branches:
        by_rank = candidates[_jaccard_order(common, union, order[candidates])]
        rank = np.zeros(count, dtype=np.int64)
        rank[by_rank] = np.arange(1, len(by_rank) + 1)
        ranks.append(rank)
    ranks.extend(fusion_columns(vector, vector_votes()))
    fused = np.nonzero(np.logical_or.reduce([rank > 0 for rank in ranks]))[0]
    if len(fused) == 0:
        return Ranked([], 0, [], semantic=vector.status)
    # The fused score as one division (the fraction Σ 1/(k + rank), integers exact in a double
    # for the ranks a scope holds): correctly rounded, so ordered as the exact values, but for
    # runs of equal floats, which _exact_head orders exactly.
    numerator, denominator = rrf_fractions([rank[fused] for rank in ranks])
    value = numerator / denominator
    fetch = context.limit + 16
    while True:
        if fetch < len(fused):
            picked = np.argpartition(-value, fetch - 1)[:fetch]
            top, head_value = fused[picked], value[picked]
        else:
            top, head_value = fused, value
        by_float = top[np.lexsort((order[top], -head_value))]
        head = [
            (int(order[i]), *(int(rank[i]) or None for rank in ranks), int(i)) for i in by_float
        ]
        chosen = _exact_head(head, context.limit, complete=len(top) == len(fused))
        if chosen is not None:
            break
        fetch *= 8
    return Ranked(
        chosen=[int(entries["document_id"][i]) for i in chosen],
        matched=len(fused),
        conflicts=[_in_conflict(entries, gated, i) for i in chosen],
        versions=[int(entries["version"][i]) for i in chosen],
        found_by=[_found_by(i, ranks) for i in chosen],
        semantic=vector.status,
        relevance=described(chosen),
    )


# From this many candidates in a branch, the head is first sought from each branch's best
# (:func:`_partial_head`) rather than from both branches ranked whole.
PARTIAL_FROM = 2_048
# A head the bounds leave this many rows or more undecided is found by the full ranking.
MAX_CONTENDERS = 64


def _depth(limit: int) -> int:
    """How many of each branch's best are ranked: enough that an entry outside both (its fused
    score at most 2/(k+depth+1)) falls below the ``limit``-th of a branch's own first ``limit``
    (each at least 1/(k+limit)): depth > k + 2*limit - 1, with room to spare."""
    return 4 * (RRF_K + 2 * limit)


def _partial_head(
    branches: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    order: np.ndarray,
    count: int,
    limit: int,
    vector: np.ndarray | None = None,
    votes: int = 1,
    members: list[np.ndarray] | None = None,
) -> tuple[list[int], int] | None:
    """The first ``limit`` entries of the fused ranking, exactly as the full ranking orders
    them, and how many entries matched, from each branch's best only; None when the bounds do
    not decide the head (the caller then ranks every candidate).

    Each branch ranks exactly its ``depth`` best candidates: those with a Jaccard ratio above its
    ``depth``-th best, and of the tie at that ratio those first by ``order`` (so those ranks are
    the full ranking's); every other candidate of the branch ranks below them. An entry's fused score is then known, or known within the
    bound 1/(k+m+1) of the branch whose rank it lacks (m the ranks known there). The entries
    whose upper bound reaches the ``limit``-th best lower bound are the only ones that can be in
    the head; their missing ranks are counted exactly, and the head is ordered exactly by
    ``_exact_head`` over all of them.

    The vector branch's ranks (``vector``, counted ``votes`` times), when it ran, are known
    whole: an entry it ranks is a contender like one a lexical branch ranks, and an entry it
    does not rank gains nothing from it, so the bounds hold as they are.
    """
    depth = _depth(limit)
    # Everything below works on each branch's candidates and on the few entries ranked, never
    # on arrays as long as the scope (but for the members' masks, one byte per entry).
    ranked_by: list[np.ndarray] = []  # per branch: the entries ranked, best first
    values_by: list[np.ndarray] = []  # per branch: each candidate's ratio
    bounds: list[float] = []  # per branch: the most an unranked candidate adds
    for candidates, common, union in branches:
        if len(candidates):
            if int(union.max()) >= EXACT_RATIO_BOUND:
                return None
            values = common / union
            if len(candidates) > depth:
                threshold = _kth_best(common, union, values, depth)
                above = np.nonzero(values > threshold)[0]
                tied = np.nonzero(values == threshold)[0]
                # A tie at the boundary is ordered by ``order``: its first (those with the
                # least order) are exactly the full ranking's next ranks, the rest rank below
                # them. The tie grows with the scope (the distinct ratios do not), so it is
                # cut to what the depth needs rather than ranked whole.
                room = depth - len(above)
                if len(tied) > room:
                    tied = tied[np.argpartition(order[candidates[tied]], room - 1)[:room]]
                best = np.concatenate([above, tied])
                ranked = candidates[best][
                    _jaccard_order(common[best], union[best], order[candidates[best]])
                ]
            else:
                ranked = candidates[_jaccard_order(common, union, order[candidates])]
            unranked = len(candidates) - len(ranked)
        else:
            values, ranked, unranked = np.zeros(0), candidates, 0
        ranked_by.append(ranked)
        values_by.append(values)
        bounds.append(1.0 / (RRF_K + len(ranked) + 1) if unranked else 0.0)
    if members is None:
        members = []
        for candidates, _, _ in branches:
            member = np.zeros(count, dtype=bool)
            member[candidates] = True
            members.append(member)
    by_vector = vector if vector is not None else None
    every = members[0] | members[1]
    if by_vector is not None:
        every |= by_vector > 0
    matched = int(np.count_nonzero(every))
    listed = list(ranked_by)
    if by_vector is not None:
        listed.append(np.nonzero(by_vector)[0])
    ranked_any = np.unique(np.concatenate(listed)) if listed else np.zeros(0, dtype=np.intp)
    lower = np.zeros(len(ranked_any), dtype=np.float64)
    upper = np.zeros(len(ranked_any), dtype=np.float64)
    if by_vector is not None:
        r = by_vector[ranked_any]
        lower += np.where(r > 0, votes / (RRF_K + np.maximum(r, 1)), 0.0)
    upper += lower
    known: list[np.ndarray] = []  # per branch: the rank of each of ranked_any, else 0
    for ranked, member, bound in zip(ranked_by, members, bounds, strict=True):
        r = _ranks_among(ranked_any, ranked)
        known.append(r)
        part = np.where(r > 0, 1.0 / (RRF_K + np.maximum(r, 1)), 0.0)
        lower += part
        upper += part + np.where((r == 0) & member[ranked_any], bound, 0.0)
    if len(ranked_any) < limit:
        return None
    # Floats with a margin far above their rounding, in the direction that keeps more rows.
    floor = float(-np.partition(-lower, limit - 1)[limit - 1]) * (1 - 1e-9)
    if not sum(bounds) < floor:
        return None
    at_contender = np.nonzero(upper >= floor)[0]
    if len(at_contender) > MAX_CONTENDERS:
        return None
    rows = []
    for at in (int(i) for i in at_contender):
        index = int(ranked_any[at])
        ranks: list[int | None] = []
        for rank, member, (candidates, _, _), values in zip(
            known, members, branches, values_by, strict=True
        ):
            if rank[at] > 0:
                ranks.append(int(rank[at]))
            elif member[index]:
                place = int(np.searchsorted(candidates, index))
                ranks.append(_rank_of(place, values, None, order[candidates]))
            else:
                ranks.append(None)
        if by_vector is not None:
            ranks.extend([int(by_vector[index]) or None] * votes)
        rows.append((int(order[index]), *ranks, index))
    head = _exact_head(rows, limit, complete=True)
    return (head, matched) if head is not None else None


def _ranks_among(entries: np.ndarray, ranked: np.ndarray) -> np.ndarray:
    """Per entry of ``entries``, its rank (from 1) in ``ranked`` (entries best first), else 0."""
    if len(ranked) == 0:
        return np.zeros(len(entries), dtype=np.int64)
    by_entry = np.argsort(ranked)
    sorted_ranked = ranked[by_entry]
    at = np.minimum(np.searchsorted(sorted_ranked, entries), len(ranked) - 1)
    found = sorted_ranked[at] == entries
    return np.where(found, by_entry[at] + 1, 0).astype(np.int64)


def _kth_best(common: np.ndarray, union: np.ndarray, values: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``values`` (each ``common / union``, as computed there): the
    distinct (common, union) pairs are few, so they are counted, ordered by their ratio and
    accumulated, instead of partitioning every candidate's float."""
    width = int(union.max()) + 1
    cells = (int(common.max()) + 1) * width
    if cells > 4 * len(common) + 65_536:
        return float(-np.partition(-values, k - 1)[k - 1])
    counts = np.bincount(common * width + union, minlength=cells)
    present = np.nonzero(counts)[0]
    pair_values = (present // width) / (present % width)
    by_value = np.argsort(-pair_values, kind="stable")
    reached = np.cumsum(counts[present][by_value])
    return float(pair_values[by_value][np.searchsorted(reached, k)])


def _rank_of(index: int, ratio: np.ndarray, member: np.ndarray | None, order: np.ndarray) -> int:
    """The rank of candidate ``index`` in its branch's full ranking (ratio descending, then
    ``order``): the candidates before it, plus one. ``member``: which entries are candidates
    (None: all of them, the arrays being the branch's candidates only)."""
    better = (ratio > ratio[index]) | ((ratio == ratio[index]) & (order < order[index]))
    if member is not None:
        better &= member
    return int(np.count_nonzero(better)) + 1


def _in_conflict(entries: np.ndarray, gated: np.ndarray, index: int) -> bool:
    """Whether the gated members of this entry's rule group (newest versions of different
    documents) hold more than one set of requirements. ``contested`` (kept at write time)
    says whether the group can disagree at all."""
    if not entries["contested"][index]:
        return False
    members = gated & (entries["rule"] == entries["rule"][index])
    return len(np.unique(entries["requirements"][members])) > 1


_EVIDENCE_FIELDS = (
    "doc_key",
    "version",
    "source",
    "kind",
    "title",
    "rule_key",
    "requirements",
    "text",
    "valid_from",
    "valid_to",
    "published_at",
    "content_hash",
)


def _evidence_item(
    document: Mapping[str, Any], conditions: Conditions, *, conflict: bool
) -> dict[str, Any]:
    quote = Quote(
        kind=document["kind"],
        title=document["title"],
        version=document["version"],
        conditions=conditions,
        conflict=conflict,
    )
    return {
        "id": str(ItemId.document(document["doc_key"], document["version"])),
        "source": document["source"],
        "kind": document["kind"],
        "title": document["title"],
        "version": document["version"],
        "rule_key": document["rule_key"] or None,
        "quote": quote.render(),
        "conditions": conditions.as_json(),
        "conflict": conflict,
        "text": document["text"],
        "valid_from": to_utc_iso(document["valid_from"]),
        "valid_to": to_utc_iso(document["valid_to"]),
        "published_at": to_utc_iso(document["published_at"]),
        "content_hash": document["content_hash"],
    }


def evidence_supports(evidence: list[dict[str, Any]]) -> bool:
    """True when every item matched and none conflicts (what a skill step needs to pass)."""
    return bool(evidence) and all(
        item["conditions"]["status"] == MATCH and not item["conflict"] for item in evidence
    )
