"""The indexed search answers exactly as the definition does, on random corpora and queries.

The reference is ``knowledge.domain.reference_search``: every gated document scanned, Fraction
scores, the newest gated version of each doc_key, conflicts among different documents. The gate
is ``knowledge.domain.admits`` over plain values, so neither side borrows from the other. The
corpora are small and repetitive on purpose: many equal scores, so ties by id are exercised.
Run on SQLite and on PostgreSQL (``DATABASE_URL``), the same corpora give the same answers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from experience.review.documents import document_revoke
from knowledge.domain import (
    DocumentGateFields,
    ReferenceDocument,
    Scope,
    admits,
    expand,
    reference_search,
    tokenize,
)
from knowledge.models import Document, PostingList, SearchEntry, SearchScope, Synonym
from knowledge.postings import (
    ENTRY_DTYPE,
    bulk_finished,
    bulk_indexed,
    delta_merged,
    entries_of,
    rebuild,
    scope_ids,
)
from knowledge.search import KnowledgeContext, search_knowledge
from knowledge.services import documents_import, synonym_delete, synonym_set
from reviewconsole.roles import Role
from textsearch.postings import ids_of

pytestmark = pytest.mark.django_db

TENANT, BRAND = settings.DEMO_TENANT, settings.DEMO_BRAND
CAMPAIGNS = ("campaign-p", "campaign-q")
STORES = ("store-1", "store-2", "store-3")
WORDS = (
    "优惠券",
    "代金券",
    "抵扣券",
    "用不了",
    "无法使用",
    "水果茶",
    "奶茶",
    "满30元",
    "小程序",
    "门店",
    "coupon",
    "miniapp",
    "fruit",
    "tea",
)
REQUIREMENTS: tuple[dict[str, Any], ...] = (
    {},
    {"channel": ["miniapp"]},
    {"basket_cents": {"min": 3000}},
    {"basket_cents": {"min": 4000}},
)
BASE = datetime(2026, 9, 1, tzinfo=UTC)


def at(hours: int) -> datetime:
    return BASE + timedelta(hours=hours)


@dataclass(frozen=True)
class Stored:
    """What the reference knows of a saved version."""

    item: dict[str, Any]

    def gate_fields(self, revoked: set[str]) -> DocumentGateFields:
        item = self.item
        return DocumentGateFields(
            tenant=item["tenant"],
            brand=item["brand"],
            stores=frozenset(item["stores"]),
            campaign=item["campaign"],
            approved=item["approved"],
            revoked=item["revoked"] or self.public_id in revoked,
            valid_from=datetime.fromisoformat(item["valid_from"]),
            valid_to=datetime.fromisoformat(item["valid_to"]) if item["valid_to"] else None,
            published_at=datetime.fromisoformat(item["published_at"]),
        )

    @property
    def public_id(self) -> str:
        return f"doc:{self.item['doc_key']}@{self.item['version']}"

    def reference(self, lexicon: dict[str, str]) -> ReferenceDocument:
        searchable = f"{self.item['title']}\n{self.item['text']}"
        return ReferenceDocument(
            public_id=self.public_id,
            doc_key=self.item["doc_key"],
            version=self.item["version"],
            rule_key=self.item.get("rule_key", ""),
            requirements=self.item["requirements"],
            raw_tokens=tokenize(searchable),
            expanded_tokens=tokenize(expand(searchable, lexicon)),
        )


def sentence(rng: random.Random, low: int = 1, high: int = 4) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def corpus(rng: random.Random, size: int) -> list[dict[str, Any]]:
    items = []
    keys = [f"doc-{i:02d}" for i in range(size)]
    for key in keys:
        for version in range(1, rng.choice((1, 1, 2, 3)) + 1):
            start = rng.randint(-48, 48)
            end = rng.choice((None, start + rng.randint(1, 96)))
            items.append(
                {
                    "doc_key": key,
                    "version": version,
                    "tenant": TENANT,
                    "brand": BRAND,
                    "stores": sorted(rng.sample(STORES, rng.randint(1, 2))),
                    "campaign": rng.choice(CAMPAIGNS),
                    "kind": rng.choice(("rule", "rule", "case")),
                    "rule_key": rng.choice(("", "", "slot-1", "slot-2")),
                    "title": sentence(rng, 1, 2),
                    "text": sentence(rng),
                    "source": f"test://{key}",
                    "valid_from": at(start).isoformat(),
                    "valid_to": at(end).isoformat() if end is not None else None,
                    "published_at": at(start - rng.randint(-24, 24)).isoformat(),
                    "approved": rng.random() < 0.85,
                    "revoked": rng.random() < 0.1,
                    "requirements": rng.choice(REQUIREMENTS),
                }
            )
    return items


def expected(
    stored: list[Stored],
    revoked: set[str],
    query: str,
    context: KnowledgeContext,
    lexicon: dict[str, str],
) -> tuple[list[str], list[bool], bool]:
    assert context.occurred_at is not None and context.known_at is not None
    scope = Scope(
        tenant=TENANT,
        brand=BRAND,
        store=str(context.store),
        campaign=str(context.campaign),
        occurred_at=context.occurred_at,
        known_at=context.known_at,
    )
    gated = [s.reference(lexicon) for s in stored if admits(s.gate_fields(revoked), scope)]
    ranked, in_conflict = reference_search(tokenize(query), tokenize(expand(query, lexicon)), gated)
    chosen = ranked[: context.limit]
    return chosen, [pid in in_conflict for pid in chosen], len(ranked) > context.limit


def random_context(rng: random.Random) -> tuple[str, KnowledgeContext]:
    occurred = rng.randint(-24, 96)
    context = KnowledgeContext(
        tenant=TENANT,
        brand=BRAND,
        store=rng.choice(STORES),
        campaign=rng.choice(CAMPAIGNS),
        occurred_at=at(occurred),
        known_at=at(occurred + rng.randint(-24, 48)),
        facts={},
        limit=rng.choice((1, 2, 4, 50)),
    )
    return sentence(rng, 1, 3), context


def check_queries(
    rng: random.Random, stored: list[Stored], revoked: set[str], count: int, actor: User
) -> int:
    lexicon = dict(Synonym.objects.values_list("term", "canonical"))
    answered = 0
    for _ in range(count):
        query, context = random_context(rng)
        ids, conflicts, truncated = expected(stored, revoked, query, context, lexicon)
        result = search_knowledge(query, context, actor=actor)
        got = [item["id"] for item in result["evidence"]]
        assert got == ids, (query, context)
        assert [item["conflict"] for item in result["evidence"]] == conflicts, (query, context)
        assert result["truncated"] is truncated
        if not ids:
            assert result["status"] == "no_match"
        elif any(conflicts):
            assert result["status"] == "conflicting_sources"
        answered += bool(ids)
    return answered


@pytest.mark.parametrize("seed", range(6))
def test_indexed_search_equals_the_definition_on_random_corpora(
    operator: User, make_user: Any, seed: int
) -> None:
    rng = random.Random(seed)
    items = corpus(rng, 24)
    documents_import(items=items, actor=operator)
    stored = [Stored(item) for item in items]

    answered = check_queries(rng, stored, set(), 60, operator)
    assert answered > 10  # the random queries do reach documents

    # Revocations take versions out of the index: older versions answer again, groups change.
    revoker = make_user("oscar", Role.OPERATOR)
    revoked: set[str] = set()
    live = list(Document.objects.filter(approved=True, revoked=False).order_by("pk"))
    for document in rng.sample(live, min(6, len(live))):
        document_revoke(document=document, actor=revoker, reason="test")
        revoked.add(document.public_id)
    check_queries(rng, stored, revoked, 40, operator)

    # A lexicon change rewrites the expanded postings.
    synonym_set(term="fruit", canonical="水果茶", actor=operator)
    synonym_delete(synonym=Synonym.objects.get(term="代金券"), actor=operator)
    check_queries(rng, stored, revoked, 40, operator)


def test_postings_hold_each_token_of_either_branch_once(operator: User) -> None:
    documents_import(
        items=[
            {
                **corpus(random.Random(1), 1)[0],
                "version": 1,
                "approved": True,
                "revoked": False,
                "stores": ["store-1", "store-2"],
                "title": "代金券",
                "text": "水果茶 coupon",
            }
        ],
        actor=operator,
    )
    lexicon = dict(Synonym.objects.values_list("term", "canonical"))
    raw = tokenize("代金券\n水果茶 coupon")
    expanded = tokenize(expand("代金券\n水果茶 coupon", lexicon))

    assert SearchEntry.objects.count() == 2  # one per store
    for entry in SearchEntry.objects.all():
        lists = PostingList.objects.filter(scope_id=entry.scope_id)
        assert {row.token for row in lists if entry.pk in ids_of(row.raw)} == raw
        assert {row.token for row in lists if entry.pk in ids_of(row.expanded)} == expanded
        assert (entry.raw_size, entry.expanded_size) == (len(raw), len(expanded))
        packed = entries_of(SearchScope.objects.get(pk=entry.scope_id).arrays)
        assert list(packed["id"]) == [entry.pk]


def test_a_draft_is_not_indexed_until_approved(operator: User) -> None:
    item = {**corpus(random.Random(2), 1)[0], "approved": False, "revoked": False}
    documents_import(items=[item], actor=operator)

    assert not SearchEntry.objects.exists()
    assert not PostingList.objects.exists()


def test_a_long_ascii_token_is_found_by_its_key(operator: User) -> None:
    word = "x" * 300
    item = {
        **corpus(random.Random(3), 1)[0],
        "version": 1,
        "approved": True,
        "revoked": False,
        "stores": ["store-1"],
        "campaign": "campaign-p",
        "valid_from": at(0).isoformat(),
        "valid_to": None,
        "published_at": at(0).isoformat(),
        "title": word,
        "text": "coupon",
    }
    documents_import(items=[item], actor=operator)
    context = KnowledgeContext(
        tenant=TENANT,
        brand=BRAND,
        store="store-1",
        campaign="campaign-p",
        occurred_at=at(1),
        known_at=at(1),
    )

    result = search_knowledge(word, context, actor=operator)

    assert [e["id"] for e in result["evidence"]] == [f"doc:{item['doc_key']}@1"]


def index_snapshot() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[Any]]:
    """The stored index once every scope's delta is merged (what the background merge does)."""
    for scope_id in SearchScope.objects.values_list("pk", flat=True):
        delta_merged(scope_id)
    public = dict(SearchEntry.objects.values_list("pk", "public_id"))
    keys = {scope.pk: str(scope) for scope in SearchScope.objects.all()}
    entries = sorted(
        (keys[row[0]], *row[1:])
        for row in SearchEntry.objects.values_list(
            "scope_id", "public_id", "raw_size", "expanded_size", "has_newer", "rule_contested"
        )
    )
    lists = sorted(
        (
            keys[row.scope_id],
            row.token,
            sorted(public[i] for i in ids_of(row.raw)),
            sorted(public[i] for i in ids_of(row.expanded)),
        )
        for row in PostingList.objects.all()
    )
    arrays = []
    for scope in SearchScope.objects.all():
        packed = entries_of(scope.arrays)
        names = [public[int(i)] for i in packed["id"]]
        # Ties are ordered by public id; versions of one doc_key share a group (numberings of
        # groups, rules and requirements follow the order entries were written in).
        assert [names[i] for i in np.argsort(packed["order"])] == sorted(names)
        groups = {(names[i].split("@")[0], int(g)) for i, g in enumerate(packed["group"])}
        assert len(groups) == len({name for name, _ in groups})
        fields = [
            f
            for f in ENTRY_DTYPE.names or ()
            if f not in {"id", "group", "order", "rule", "requirements"}
        ]
        arrays.append(
            (
                keys[scope.pk],
                sorted((names[i], *(r[f].item() for f in fields)) for i, r in enumerate(packed)),
            )
        )
    arrays.sort()
    return entries, lists, arrays


def test_a_bulk_load_writes_the_rows_that_approvals_write(operator: User) -> None:
    items = corpus(random.Random(7), 20)
    documents_import(items=items, actor=operator)
    written = index_snapshot()
    assert written[0] and written[1]

    PostingList.objects.all().delete()
    SearchEntry.objects.all().delete()
    SearchScope.objects.all().delete()
    live = Document.objects.filter(approved=True, revoked=False).prefetch_related("store_rows")
    bulk_indexed([(d, [row.store for row in d.store_rows.all()]) for d in live])
    bulk_finished()

    assert index_snapshot() == written


def test_scope_ids_of_many_keys_are_read_once_and_created_together() -> None:
    some = [("t", "b", "c", f"store-{i}") for i in range(80)]
    first: set[int] = set()
    ids = scope_ids(some[:30], created=first)
    assert len(first) == 30

    created: set[int] = set()
    more = scope_ids(some, created=created)

    assert {key: more[key] for key in some[:30]} == ids
    assert created == {more[key] for key in some[30:]}
    assert {str(s) for s in SearchScope.objects.filter(pk__in=created)} == {
        "/".join(key) for key in some[30:]
    }


@pytest.mark.parametrize("model", ["searchscope", "searchentry", "postinglist", "lexiconstate"])
def test_the_index_is_listed_read_only_in_the_admin(
    operator: User, admin_user: User, model: str
) -> None:
    documents_import(items=corpus(random.Random(5), 3), actor=operator)
    admin_client = Client(raise_request_exception=False)
    admin_client.force_login(admin_user)

    listing = admin_client.get(f"/admin/knowledge/{model}/")
    adding = admin_client.get(f"/admin/knowledge/{model}/add/")

    assert listing.status_code == 200
    assert adding.status_code == 403


def test_a_rebuild_from_the_documents_writes_what_approvals_wrote(operator: User) -> None:
    # What the migration runs on a database that holds documents already.
    documents_import(items=corpus(random.Random(9), 15), actor=operator)
    written = index_snapshot()

    rebuild()

    assert index_snapshot() == written
