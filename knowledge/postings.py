"""The search index: per scope key, token → document version, maintained at write time.

A document version is in the index while it is approved and not revoked: one ``SearchEntry``
per store it lists (the gate's fields, its token-set sizes, the hash of its requirements) and one
``Posting`` per distinct token of its raw or expanded set. Search reads only the postings of the
query's tokens, so documents sharing no token with the query are never touched.

Writes happen inside the caller's transaction (approve, revoke, lexicon change), so a search
sees either the old index and the old lexicon or the new ones, never a mix: the lexicon stamp
that the search expanded its query with is read again by the ranking query itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Exists, OuterRef

from knowledge.domain import sha256_hex
from knowledge.models import (
    Document,
    LexiconState,
    Posting,
    SearchEntry,
    SearchScope,
    Synonym,
)
from reviewconsole.itemids import ItemId

# Tokens longer than this are stored (and looked up) by their hash, so every key fits an index.
MAX_TOKEN_KEY = 64


def token_key(token: str) -> str:
    if len(token) <= MAX_TOKEN_KEY:
        return token
    return "#" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:48]


@dataclass(frozen=True)
class IndexModels:
    """The models the index writes: the live ones, or a migration's historical ones."""

    document: Any = Document
    scope: Any = SearchScope
    entry: Any = SearchEntry
    posting: Any = Posting


LIVE = IndexModels()


def scope_ids(
    keys: Iterable[tuple[str, str, str, str]], models: IndexModels = LIVE
) -> dict[tuple[str, str, str, str], int]:
    """Ids of the scope keys ``(tenant, brand, campaign, store)``, created when missing."""
    wanted = set(keys)
    found: dict[tuple[str, str, str, str], int] = {}
    for key in wanted:
        tenant, brand, campaign, store = key
        scope, _ = models.scope.objects.get_or_create(
            tenant=tenant, brand=brand, campaign=campaign, store=store
        )
        found[key] = scope.pk
    return found


def _postings(
    entry_id: int, scope_id: int, raw: set[str], expanded: set[str], models: IndexModels
) -> list[Any]:
    raw_keys = {token_key(t) for t in raw}
    expanded_keys = {token_key(t) for t in expanded}
    return [
        models.posting(
            scope_id=scope_id,
            entry_id=entry_id,
            token=key,
            in_raw=key in raw_keys,
            in_expanded=key in expanded_keys,
        )
        for key in sorted(raw_keys | expanded_keys)
    ]


def document_indexed(document: Any, models: IndexModels = LIVE) -> None:
    """Put an approved, unrevoked version into the index of every store it lists."""
    if not document.approved or document.revoked:
        return
    stores = list(document.store_rows.values_list("store", flat=True))
    ids = scope_ids(
        ((document.tenant, document.brand, document.campaign, s) for s in stores), models
    )
    raw = set(document.raw_tokens.split())
    expanded = set(document.expanded_tokens.split())
    requirements_hash = sha256_hex(document.requirements)
    postings: list[Any] = []
    for scope_id in ids.values():
        entry, _ = models.entry.objects.update_or_create(
            scope_id=scope_id,
            document_id=document.pk,
            defaults={
                "public_id": str(ItemId.document(document.doc_key, document.version)),
                "doc_key": document.doc_key,
                "version": document.version,
                "rule_key": document.rule_key,
                "requirements_hash": requirements_hash,
                "valid_from": document.valid_from,
                "valid_to": document.valid_to,
                "published_at": document.published_at,
                "raw_size": len(raw),
                "expanded_size": len(expanded),
            },
        )
        models.posting.objects.filter(entry_id=entry.pk).delete()
        postings += _postings(entry.pk, scope_id, raw, expanded, models)
    models.posting.objects.bulk_create(postings, batch_size=2000)
    groups_refreshed(list(ids.values()), [document.doc_key], [document.rule_key], models)


def document_unindexed(document: Any, models: IndexModels = LIVE) -> None:
    """Take a version out of the index (it was revoked)."""
    entries = list(
        models.entry.objects.filter(document_id=document.pk).values_list("pk", "scope_id")
    )
    if not entries:
        return
    models.posting.objects.filter(entry_id__in=[pk for pk, _ in entries]).delete()
    models.entry.objects.filter(pk__in=[pk for pk, _ in entries]).delete()
    groups_refreshed(
        [scope for _, scope in entries], [document.doc_key], [document.rule_key], models
    )


def groups_refreshed(
    scopes: Sequence[int],
    doc_keys: Sequence[str] | None,
    rule_keys: Sequence[str] | None,
    models: IndexModels = LIVE,
) -> None:
    """Recompute, in ``scopes``, ``has_newer`` for the versions of ``doc_keys`` and
    ``rule_contested`` for the ``rule_keys`` groups (``None``: every key, for bulk loads).

    ``rule_contested`` holds when another document (doc_key) of the same rule_key in the scope
    has other requirements: only then can this entry ever be in conflict.
    """
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


def bulk_indexed(documents: Sequence[tuple[Any, Sequence[str]]]) -> int:
    """Index many approved, unrevoked versions with their stores at once (bulk loads, rebuilds).

    Writes the same rows as ``document_indexed``; returns the number of postings written.
    """
    keys = {(d.tenant, d.brand, d.campaign, s) for d, stores in documents for s in stores}
    ids = scope_ids(keys)
    entries = []
    for document, stores in documents:
        raw = document.raw_tokens.split()
        expanded = document.expanded_tokens.split()
        for store in stores:
            entries.append(
                SearchEntry(
                    scope_id=ids[(document.tenant, document.brand, document.campaign, store)],
                    document_id=document.pk,
                    public_id=str(ItemId.document(document.doc_key, document.version)),
                    doc_key=document.doc_key,
                    version=document.version,
                    rule_key=document.rule_key,
                    requirements_hash=sha256_hex(document.requirements),
                    valid_from=document.valid_from,
                    valid_to=document.valid_to,
                    published_at=document.published_at,
                    raw_size=len(raw),
                    expanded_size=len(expanded),
                )
            )
    SearchEntry.objects.bulk_create(entries, batch_size=2000)
    by_key = {(e.document_id, e.scope_id): e.pk for e in entries}
    if any(pk is None for pk in by_key.values()):
        by_key = {
            (document_id, scope_id): pk
            for pk, document_id, scope_id in SearchEntry.objects.filter(
                document_id__in={d.pk for d, _ in documents}
            ).values_list("pk", "document_id", "scope_id")
        }
    rows: list[tuple[int, int, str, bool, bool]] = []
    for document, stores in documents:
        raw_keys = {token_key(t) for t in document.raw_tokens.split()}
        expanded_keys = {token_key(t) for t in document.expanded_tokens.split()}
        tokens = sorted(raw_keys | expanded_keys)
        for store in stores:
            scope_id = ids[(document.tenant, document.brand, document.campaign, store)]
            entry_id = by_key[(document.pk, scope_id)]
            rows.extend((scope_id, entry_id, t, t in raw_keys, t in expanded_keys) for t in tokens)
    table = quote_name(Posting._meta.db_table)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} (scope_id, entry_id, token, in_raw, in_expanded)"  # noqa: S608
            " VALUES (%s, %s, %s, %s, %s)",
            rows,
        )
    return len(rows)


def expanded_changed(documents: Iterable[Any], models: IndexModels = LIVE) -> None:
    """The lexicon changed these documents' expanded token sets: rewrite their postings."""
    by_id = {document.pk: document for document in documents}
    if not by_id:
        return
    postings: list[Any] = []
    for entry in models.entry.objects.filter(document_id__in=list(by_id)).only(
        "pk", "scope_id", "document_id"
    ):
        document = by_id[entry.document_id]
        raw = set(
            models.document.objects.filter(pk=document.pk)
            .values_list("raw_tokens", flat=True)
            .get()
            .split()
        )
        expanded = set(document.expanded_tokens.split())
        models.entry.objects.filter(pk=entry.pk).update(expanded_size=len(expanded))
        models.posting.objects.filter(entry_id=entry.pk).delete()
        postings += _postings(entry.pk, entry.scope_id, raw, expanded, models)
    models.posting.objects.bulk_create(postings, batch_size=2000)


def rebuild(models: IndexModels = LIVE) -> int:
    """Rebuild the whole index from the documents (a migration, or a repair); returns entries."""
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


def lexicon_for(stamp: str | None) -> tuple[str | None, dict[str, str]]:
    """``(stamp, lexicon)``: from the cache when ``stamp`` is cached, else read afresh."""
    if stamp is not None:
        cached = _lexicon_cache.get(stamp)
        if cached is not None:
            return stamp, cached
    return consistent_lexicon()


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


def last_known_stamp() -> str | None:
    """The stamp this process saw last (no query); the search checks it against the database."""
    return next(iter(_lexicon_cache), None)


def quote_name(name: str) -> str:
    return connection.ops.quote_name(name)
