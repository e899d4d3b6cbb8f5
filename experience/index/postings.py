"""The retrieval index of reviewed memory: candidates from the query's tokens, not the scope.

Every approved item of every registered kind (cases, skills and lessons; :data:`KINDS`) has one
``IndexEntry`` in the ``IndexScope`` of its exact five-field scope, with its gate times and the
sizes of its raw and expanded token sets; per scope and token an ``IndexPosting`` holds the
sorted entry ids whose raw (expanded) set contains the token. The posting lists are written by
the same machinery as knowledge search's (``knowledge.postings.Changes``/``changes_applied``).

Written at write time, in the writer's transaction: every review decision publishes the item's
new status (``reviewconsole.dispatch``, ``ITEM_STATUS_CHANGED``) and
:func:`item_status_followed` indexes an approved item and takes out one in any other status
(revoked, superseded, rejected). A lexicon change leaves the expanded postings of every scope
behind: each scope carries the lexicon stamp they were computed under, and retrieval uses its
postings only while that stamp is the current one, ranking from the items' texts otherwise
(correct, only slower). :func:`expanded_refreshed` (a background task queued by every lexicon
change) brings each scope to the current stamp, one scope per transaction, so searches are never
blocked.

:func:`ranked` gives the ids of a scope's items that share a token with the query, ranked
exactly as ``experience.core.domain.rank_items`` ranks the gated items' texts (raw and expanded
Jaccard, RRF k=60, ties by id): the gate runs on the candidates only.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from django.db import connection, transaction

from experience.cases.models import Case, Skill
from experience.core import domain
from experience.core.models import Status
from experience.index.lesson_inputs import evidence_refreshed
from experience.index.models import IndexEntry, IndexPosting, IndexScope
from experience.lessons.models import Lesson
from knowledge import postings as kp
from knowledge.domain import (
    RRF_K,
    exact_order,
    expand,
    reciprocal_rank_fusion,
    rrf_fraction,
    tokenize,
)
from knowledge.models import LexiconState

SCOPE_FIELDS = domain.SCOPE_FIELDS


@dataclass(frozen=True)
class Kind:
    """A kind of reviewed memory that retrieval ranks: its model and the text it is ranked by."""

    name: str
    model: Callable[[], Any]
    text: Callable[[Any], str]
    # The text's columns, for reading many items without their other fields.
    columns: tuple[str, ...]
    # Called with the ids of items just indexed (live models only): what else their entries keep.
    indexed: Callable[[list[str]], Any] | None = None


def _case_model() -> Any:

    return Case


def _skill_model() -> Any:

    return Skill


def _lesson_model() -> Any:

    return Lesson


def _lesson_evidence_refreshed(ids: list[str]) -> int:

    return evidence_refreshed(ids)


def skill_text(title: str, when: str) -> str:
    return f"{title}\n{when}"


KINDS: dict[str, Kind] = {
    "case": Kind("case", _case_model, lambda item: item.search_text, ("search_text",)),
    "skill": Kind(
        "skill", _skill_model, lambda item: skill_text(item.title, item.when), ("title", "when")
    ),
    "lesson": Kind(
        "lesson",
        _lesson_model,
        lambda item: item.search_text,
        ("search_text",),
        indexed=_lesson_evidence_refreshed,
    ),
}


def kind_of_model(model: Any) -> Kind | None:
    for kind in KINDS.values():
        if kind.model() is model:
            return kind
    return None


@dataclass(frozen=True)
class Models:
    """The models the index writes: the live ones, or a migration's historical ones."""

    scope: Any
    entry: Any
    posting: Any

    def knowledge(self) -> kp.IndexModels:
        return kp.IndexModels(
            scope=self.scope, entry=self.entry, posting=self.posting, scope_fields=SCOPE_FIELDS
        )


def live() -> Models:

    return Models(IndexScope, IndexEntry, IndexPosting)


def _key(item: Any) -> tuple[str, ...]:
    return tuple(getattr(item, name) for name in SCOPE_FIELDS)


def _stamp_text(stamp: str | None) -> str:
    return stamp or ""


def _entry(kind: str, item: Any, raw: frozenset[str], expanded: frozenset[str]) -> dict[str, Any]:
    return {
        "kind": kind,
        "item_id": item.pk,
        "title": item.title,
        "valid_from": kp.micros(item.valid_from),
        "valid_to": kp.micros(item.valid_to),
        "approved_at": kp.micros(item.approved_at),
        "raw_size": len(raw),
        "expanded_size": len(expanded),
        "expanded_tokens": " ".join(sorted(expanded)),
    }


def _stale_scope_refreshed(scope_id: int, models: Models) -> None:
    """Bring one scope's expanded postings to the current lexicon before writing into it."""
    stamp = models.scope.objects.filter(pk=scope_id).values_list("stamp", flat=True).first()
    current, _ = kp.lexicon_for(kp.lexicon_stamp())
    if stamp != _stamp_text(current):
        _scope_expanded_refresh(scope_id, models)


def item_indexed(kind: str, item: Any, models: Models | None = None) -> None:
    """Index an approved item (nothing when it is already in the index)."""
    models = models or live()
    if models.entry.objects.filter(item_id=item.pk).exists():
        return
    created: set[int] = set()
    (scope_id,) = kp.scope_ids([_key(item)], models.knowledge(), created).values()
    stamp, lexicon = kp.lexicon_for(kp.lexicon_stamp())
    if scope_id in created:
        models.scope.objects.filter(pk=scope_id).update(stamp=_stamp_text(stamp))
    else:
        _stale_scope_refreshed(scope_id, models)
    text = KINDS[kind].text(item)
    raw, expanded = tokenize(text), tokenize(expand(text, lexicon))
    entry = models.entry.objects.create(scope_id=scope_id, **_entry(kind, item, raw, expanded))
    changes = kp.Changes()
    changes.add(scope_id, entry.pk, raw, expanded)
    kp.changes_applied(changes, models.knowledge())
    hook = KINDS[kind].indexed
    if hook is not None and models.entry is live().entry:
        hook([item.pk])


def item_unindexed(kind: str, item: Any, models: Models | None = None) -> None:
    """Take an item out of the index (revoked, superseded, or no longer approved)."""
    models = models or live()
    row = (
        models.entry.objects.filter(item_id=item.pk)
        .values_list("pk", "scope_id", "expanded_tokens")
        .first()
    )
    if row is None:
        return
    pk, scope_id, expanded = row
    changes = kp.Changes()
    changes.remove(scope_id, pk, tokenize(KINDS[kind].text(item)), expanded.split())
    kp.changes_applied(changes, models.knowledge())
    models.entry.objects.filter(pk=pk).delete()


def item_status_followed(*, item: Any) -> None:
    """``ITEM_STATUS_CHANGED`` of a case, skill or lesson: keep its entry in step with its
    status, in the writer's transaction."""

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
    their postings; stamps the scope. Returns the entries whose set changed."""
    stamp, lexicon = kp.consistent_lexicon()
    entries = list(
        models.entry.objects.select_for_update().filter(scope_id=scope_id).order_by("pk")
    )
    changes = kp.Changes()
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
    kp.changes_applied(changes, models.knowledge())
    models.entry.objects.bulk_update(touched, ["expanded_tokens", "expanded_size"], batch_size=1000)
    models.scope.objects.filter(pk=scope_id).update(stamp=_stamp_text(stamp))
    return len(touched)


class _Row:
    """An item's text columns read as attributes (what :attr:`Kind.text` reads)."""

    def __init__(self, columns: Sequence[str], values: Any) -> None:
        for name, value in zip(columns, values, strict=True):
            setattr(self, name, value)


def expanded_refreshed(models: Models | None = None) -> int:
    """Bring every scope whose expanded postings are behind the lexicon to the current stamp,
    one scope per transaction; returns the scopes refreshed."""
    models = models or live()
    refreshed = 0
    while True:
        current = _stamp_text(kp.lexicon_stamp())
        behind = list(
            models.scope.objects.exclude(stamp=current).values_list("pk", flat=True)[:500]
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
        fields = (
            "pk",
            *SCOPE_FIELDS,
            "title",
            "valid_from",
            "valid_to",
            "approved_at",
            *(c for c in kind.columns if c != "title"),
        )
        for values in (
            model.objects.filter(status="approved").values_list(*fields).iterator(chunk_size=2000)
        ):
            row = _Row(fields, values)
            text = kind.text(row)
            items.append(
                (kind.name, _key(row), row, tokenize(text), tokenize(expand(text, lexicon)))
            )
    created: set[int] = set()
    ids = kp.scope_ids({key for _, key, _, _, _ in items}, models.knowledge(), created)
    models.scope.objects.all().update(stamp=_stamp_text(stamp))
    entries = [
        models.entry(scope_id=ids[key], **_entry(kind, row, raw, expanded))
        for kind, key, row, raw, expanded in items
    ]
    models.entry.objects.bulk_create(entries, batch_size=2000)
    if any(entry.pk is None for entry in entries):
        found = dict(models.entry.objects.values_list("item_id", "pk"))
        for entry in entries:
            entry.pk = found[entry.item_id]
    changes = kp.Changes()
    for entry, (_, _, _, raw, expanded) in zip(entries, items, strict=True):
        changes.add(entry.scope_id, entry.pk, raw, expanded)
    kp.changes_applied(changes, models.knowledge(), fresh=created)
    if historical is None:
        for kind in KINDS.values():
            if kind.indexed is not None:
                kind.indexed([e.item_id for e in entries if e.kind == kind.name])
    return len(entries)


# --- retrieval --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """An indexed item sharing a token with the query, with its intersection counts."""

    entry: int
    kind: str
    item_id: str
    title: str
    raw_size: int
    expanded_size: int
    raw_hits: int
    expanded_hits: int
    # The gate times the entry holds (microseconds since the epoch; valid_to NEVER when open).
    valid_from: int = 0
    valid_to: int = int(kp.NEVER)
    approved_at: int = 0
    # A lesson's confidence inputs (experience.lesson_index); empty when not written.
    evidence: str = ""

    def gate_times(self) -> tuple[datetime, datetime, datetime]:
        """``(valid_from, valid_to, approved_at)`` as the item's aware datetimes."""
        return kp.moment(self.valid_from), kp.moment(self.valid_to), kp.moment(self.approved_at)


STALE = None  # what :func:`candidates` answers when the scope's postings cannot be trusted


def _posting_rows(scope: Mapping[str, str], keys: Sequence[str]) -> list[tuple[Any, ...]]:

    quote = connection.ops.quote_name
    scope_table = quote(IndexScope._meta.db_table)
    posting_table = quote(IndexPosting._meta.db_table)
    lexicon_table = quote(LexiconState._meta.db_table)
    where = " AND ".join(f"s.{quote(name)} = %s" for name in SCOPE_FIELDS)
    tokens = ", ".join(["%s"] * len(keys)) or "NULL"
    # One statement, so the scope's stamp, the lexicon's stamp and the lists are one snapshot.
    sql = (
        f"SELECT s.{quote('id')}, s.{quote('stamp')},"  # noqa: S608 (quoted names only)
        f" (SELECT l.{quote('stamp')} FROM {lexicon_table} l WHERE l.{quote('id')} = 1),"
        f" p.{quote('token')}, p.{quote('raw')}, p.{quote('expanded')}"
        f" FROM {scope_table} s LEFT JOIN {posting_table} p"
        f" ON p.{quote('scope_id')} = s.{quote('id')} AND p.{quote('token')} IN ({tokens})"
        f" WHERE {where}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*keys, *(scope[name] for name in SCOPE_FIELDS)])
        return list(cursor.fetchall())


def _counts(lists: Iterable[Any]) -> dict[int, int]:
    arrays = [kp.ids_of(blob) for blob in lists if blob]
    if not arrays:
        return {}
    ids, counts = np.unique(np.concatenate(arrays), return_counts=True)
    return dict(zip(ids.tolist(), counts.tolist(), strict=True))


def _entries(scope_id: int, ids: Sequence[int]) -> list[tuple[Any, ...]]:
    """The entries ``ids`` of one scope, each with the scope's stamp; read by id when they are
    few, else as the whole scope in one statement (filtered here)."""

    quote = connection.ops.quote_name
    columns = ", ".join(
        f"e.{quote(name)}"
        for name in (
            "id",
            "kind",
            "item_id",
            "title",
            "raw_size",
            "expanded_size",
            "valid_from",
            "valid_to",
            "approved_at",
            "evidence",
        )
    )
    sql = (
        f"SELECT {columns}, s.{quote('stamp')}"  # noqa: S608 (quoted names only)
        f" FROM {quote(IndexEntry._meta.db_table)} e JOIN {quote(IndexScope._meta.db_table)} s"
        f" ON s.{quote('id')} = e.{quote('scope_id')} WHERE e.{quote('scope_id')} = %s"
    )
    few = len(ids) <= _BY_ID
    if few:
        sql += f" AND e.{quote('id')} IN ({', '.join(['%s'] * len(ids)) or 'NULL'})"
    with connection.cursor() as cursor:
        cursor.execute(sql, [scope_id, *ids] if few else [scope_id])
        rows = cursor.fetchall()
    if few:
        return list(rows)
    wanted = set(ids)
    return [row for row in rows if row[0] in wanted]


# Candidates up to this many are read by id; more, with their whole scope.
_BY_ID = 500


@dataclass
class Found:
    """What :func:`candidates` read: the query's token counts and the candidates."""

    raw_size: int
    expanded_size: int
    items: list[Candidate]
    _branches: tuple[list[str], list[str]] | None = field(default=None, repr=False)

    def ranked(self, admitted: Collection[str], limit: int | None = None) -> list[str]:
        """:func:`ranked_candidates` of the ``admitted`` items: the branches are ordered once
        per call however many subsets are ranked."""
        raw, expanded = self.branches()
        return _fused(
            [i for i in raw if i in admitted], [i for i in expanded if i in admitted], limit
        )

    def leading(self, admitted: Collection[str], n: int) -> list[str]:
        """The first ``n`` admitted items of each branch, without fusing them: where the first
        of the ranking almost always are, for a caller that only guesses."""
        raw, expanded = self.branches()
        first = [i for i in raw if i in admitted][:n]
        return list(dict.fromkeys([*first, *[i for i in expanded if i in admitted][:n]]))

    def branches(self) -> tuple[list[str], list[str]]:
        if self._branches is None:
            self._branches = _branches(self.items, self.raw_size, self.expanded_size)
        return self._branches


def candidates(scope: Mapping[str, str], now: datetime, query: str) -> Found | None:
    """The scope's indexed items sharing a token with ``query``, past the time gate at ``now``;
    None when the scope has no index or its expanded postings are behind the lexicon (the
    caller ranks from the texts then)."""
    stamp = kp.last_known_stamp()
    for _attempt in range(4):
        raw_query, expanded_query, used = query_tokens(query, stamp)
        raw_keys = {kp.token_key(t) for t in raw_query}
        expanded_keys = {kp.token_key(t) for t in expanded_query}
        rows = _posting_rows(scope, sorted(raw_keys | expanded_keys))
        if not rows:
            return STALE
        scope_id, scope_stamp, lexicon_stamp, *_ = rows[0]
        if scope_stamp != _stamp_text(lexicon_stamp):
            return STALE
        if lexicon_stamp != used:
            stamp = lexicon_stamp  # the query was expanded under another lexicon: again
            continue
        raw = _counts(row[4] for row in rows if row[3] in raw_keys)
        expanded = _counts(row[5] for row in rows if row[3] in expanded_keys)
        entries = _entries(scope_id, sorted(set(raw) | set(expanded)))
        if any(entry[10] != scope_stamp for entry in entries):
            continue  # the scope's postings moved between the two reads: read again
        at = kp.micros(now)
        return Found(
            len(raw_query),
            len(expanded_query),
            [
                Candidate(
                    pk,
                    kind,
                    item,
                    title,
                    raw_size,
                    expanded_size,
                    raw.get(pk, 0),
                    expanded.get(pk, 0),
                    start,
                    end,
                    approved,
                    evidence,
                )
                for (
                    pk,
                    kind,
                    item,
                    title,
                    raw_size,
                    expanded_size,
                    start,
                    end,
                    approved,
                    evidence,
                    _,
                ) in entries
                if start <= at < end and approved <= at
            ],
        )
    return STALE


def ranked_candidates(
    found: Sequence[Candidate],
    raw_size: int,
    expanded_size: int,
    limit: int | None = None,
    k: int = RRF_K,
) -> list[str]:
    """Item ids of ``found`` (all past the gate) ranked as ``rank_items`` ranks their texts; the
    first ``limit`` of them when given."""
    raw, expanded = _branches(found, raw_size, expanded_size)
    return _fused(raw, expanded, limit, k)


def _branches(
    found: Sequence[Candidate], raw_size: int, expanded_size: int
) -> tuple[list[str], list[str]]:
    """The raw and the expanded branch of ``found``, each best first (exact Jaccard, ties by id).
    Each item's place depends on its own counts only, so a subset's branch is this one with the
    others left out."""
    raw = exact_order(
        (c.raw_hits, raw_size + c.raw_size - c.raw_hits, c.item_id) for c in found if c.raw_hits
    )
    expanded = exact_order(
        (c.expanded_hits, expanded_size + c.expanded_size - c.expanded_hits, c.item_id)
        for c in found
        if c.expanded_hits
    )
    return raw, expanded


def _fused(raw: list[str], expanded: list[str], limit: int | None, k: int = RRF_K) -> list[str]:
    """The two branches fused by RRF (ties by id); the first ``limit`` when given.

    With a limit, only items ranked within ``k + 2 * limit`` in either branch are fused: the
    first ``limit`` of one branch score at least 1/(k + limit) each, an item ranked below that
    bound in both branches at most 2/(k + bound + 1), which is less, so it cannot be among them.
    """
    if limit is None:
        return reciprocal_rank_fusion([raw, expanded], k)
    bound = k + 2 * limit
    ranks: dict[str, list[int]] = {}
    for ranking in (raw, expanded):
        for item_id in ranking[:bound]:
            ranks.setdefault(item_id, [])
    for ranking in (raw, expanded):
        for rank, item_id in enumerate(ranking, start=1):
            if item_id in ranks:
                ranks[item_id].append(rank)
    fused = exact_order((*rrf_fraction(parts, k), item_id) for item_id, parts in ranks.items())
    return fused[:limit]


def query_tokens(
    query: str, stamp: str | None
) -> tuple[frozenset[str], frozenset[str], str | None]:
    """The query's raw and expanded token sets, and the lexicon stamp they were expanded under."""
    current, lexicon = kp.lexicon_for(stamp)
    return tokenize(query), tokenize(expand(query, lexicon)), current
