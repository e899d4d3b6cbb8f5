#!/usr/bin/env python
"""Benchmark ``search_knowledge`` by the number of documents in one scope, next to floors.

Builds one synthetic corpus (many tenants, brands, campaigns and stores) holding several
measured scopes of different sizes (default 100, 1k, 10k and 50k documents that pass the gate,
each under its own store of one campaign) and at least ``--total`` documents in all. For each
measured scope it prints p50/p95, measured interleaved in the same run, of:

- ``search_knowledge`` in-process (gate, both lexical branches, RRF, conflicts, conditions);
- the bare gated query, ``list(gated_rows(ctx).values_list("document_id"))``;
- floor 1 (SQLite only): an FTS5 trigram index over the same scope's texts, top 50 by bm25;
- floor 2: Jaccard of the query's tokens against pre-tokenized token sets cached in memory,
  top 50;

and the ratios of search to each.

It never touches the project's own database: SQLite runs use a fresh temporary file, and
PostgreSQL runs use a dedicated database that the script creates and drops.

Usage::

    python bench/bench_knowledge.py                       # 100, 1k, 10k, 50k in scope; 100k total
    python bench/bench_knowledge.py --quick               # 100, 1k in scope; 20k total
    python bench/bench_knowledge.py --database postgres --scopes 100,1000,10000
    python bench/bench_knowledge.py --profile 200         # + cProfile at the largest scope
    python bench/bench_knowledge.py --tiny                # seconds: the test suite's run

It reports; it never fails on a missed target (exit status 0 once the run completes).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import heapq
import io
import math
import os
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import postgres_create, sqlite_prepared  # noqa: E402
from bench.seams import Seam  # noqa: E402

# --- targets (issue "Search that scales with the scope") -----------------------------------------

TARGET_FLOOR_RATIO_AT_10K = 2.0  # search p50 / FTS5 floor p50, 10k in scope
TARGET_P50_MS_AT_10K = 20.0
TARGET_GROWTH_10K_50K = 5.0
BEFORE_P50_MS_AT_100 = 2.9  # the scan implementation, same bench shape, SQLite (issue table)
FLOOR_TOP = 50

# --- the scope every query uses (the fixtures' identifiers) -----------------------------------

TENANT = "teahouse"
BRAND = "leaf-and-cup"
CAMPAIGN = "campaign-a"
# The n-th measured scope is CAMPAIGN at the n-th of these stores.
MEASURED_STORES = [f"store-{i:03d}" for i in range(1, 9)]

OCCURRED_AT = datetime(2026, 9, 10, 12, 0, tzinfo=UTC)
KNOWN_AT = datetime(2026, 9, 12, 12, 0, tzinfo=UTC)

OTHER_TENANTS = [f"tenant-{i:02d}" for i in range(40)]
BRANDS_PER_TENANT = 4
CAMPAIGNS = [f"campaign-{c}" for c in "abcdefghijkl"]
STORES = [f"store-{i:03d}" for i in range(1, 61)]
NEAR_SCOPE_SHARE = 0.10  # noise in the bench tenant/brand (other campaigns or other stores)

TEXT_POOL_SIZE = 4096
DOC_CHUNK = 20_000  # documents built and inserted per transaction

# --- synthetic vocabulary ---------------------------------------------------------------------

COUPONS = ["优惠券", "代金券", "抵扣券", "满减券", "折扣券", "coupon", "新人券", "会员券"]
PRODUCTS = [
    "果茶",
    "奶茶",
    "水果茶",
    "fruit-tea",
    "milk-tea",
    "柠檬茶",
    "芝士奶盖",
    "轻乳茶",
    "新品",
]
CHANNELS = ["小程序", "miniapp", "门店", "外卖", "app", "堂食", "POS收银"]
PROBLEMS = [
    "用不了",
    "不能用",
    "无法使用",
    "核销失败",
    "用不上",
    "没法用",
    "显示不可用",
    "提示未满足门槛",
]
CONDITIONS = [
    "满30元可用",
    "满50减10",
    "门槛30元",
    "basket 3000 cents",
    "仅限第二杯",
    "每人限领一张",
    "不可与其他优惠叠加",
    "适用门店以活动页为准",
    "门店范围见附表",
    "有效期7天",
    "仅限工作日",
    "限会员使用",
    "配送费不参与满减",
    "活动商品金额满30元",
    "threshold 5000",
]
ACTIONS = ["请检查", "需要确认", "排查", "核对", "建议客服说明", "请先确认"]
TOPICS = ["活动规则", "使用条件", "历史案例", "常见问题", "门店配置", "渠道限制"]

REQUIREMENT_PATTERNS: list[dict[str, Any]] = [
    {},
    {"channel": ["miniapp"]},
    {"channel": ["miniapp"], "product": ["fruit-tea", "milk-tea"], "basket_cents": {"min": 3000}},
    {"channel": ["miniapp"], "product": ["milk-tea"], "basket_cents": {"min": 3000}},
    {"product": ["fruit-tea"]},
    {"basket_cents": {"min": 5000}},
    {"channel": ["miniapp", "store"], "basket_cents": {"min": 2000, "max": 20000}},
]


def _sentence(rng: random.Random) -> tuple[str, str]:
    """A synthetic (title, text) pair in mixed Chinese and ASCII."""
    title = rng.choice(
        [
            f"{rng.choice(COUPONS)}{rng.choice(TOPICS)}",
            f"{rng.choice(PRODUCTS)}{rng.choice(COUPONS)}{rng.choice(PROBLEMS)}",
            f"{rng.choice(CHANNELS)}{rng.choice(COUPONS)}{rng.choice(CONDITIONS)}",
        ]
    )
    clauses = [
        f"{rng.choice(CHANNELS)}下单{rng.choice(PRODUCTS)}时{rng.choice(COUPONS)}{rng.choice(PROBLEMS)}",
        f"{rng.choice(COUPONS)}{rng.choice(CONDITIONS)}",
        f"{rng.choice(ACTIONS)}{rng.choice(CONDITIONS)}和{rng.choice(CHANNELS)}配置",
        f"适用于{rng.choice(PRODUCTS)}和{rng.choice(PRODUCTS)}",
        f"{rng.choice(CHANNELS)}{rng.choice(TOPICS)}：{rng.choice(CONDITIONS)}",
    ]
    rng.shuffle(clauses)
    text = "，".join(clauses[: rng.randint(2, 5)]) + "。"
    return title, text


def _query(rng: random.Random) -> str:
    parts = rng.sample(
        [
            rng.choice(CHANNELS),
            rng.choice(PRODUCTS),
            rng.choice(COUPONS),
            rng.choice(PROBLEMS),
            rng.choice(CONDITIONS),
            rng.choice(TOPICS),
        ],
        k=rng.randint(2, 5),
    )
    return (
        rng.choice(["", "顾客反馈", "为什么"]) + "".join(parts) + rng.choice(["", "？", "，怎么办"])
    )


def _facts(rng: random.Random) -> dict[str, object]:
    facts: dict[str, object] = {}
    if rng.random() < 0.7:
        facts["channel"] = rng.choice(["miniapp", "store", "delivery"])
    if rng.random() < 0.6:
        facts["product"] = rng.choice(["fruit-tea", "milk-tea", "lemon-tea"])
    if rng.random() < 0.6:
        facts["basket_cents"] = rng.choice([1800, 2800, 3000, 4500, 6000])
    return facts


# --- options and database selection -----------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scopes",
        default="100,1000,10000,50000",
        help="comma-separated sizes of the measured scopes (documents that pass the gate)",
    )
    parser.add_argument(
        "--total",
        type=int,
        default=100_000,
        help="documents in the whole corpus, at least (other scopes fill the rest)",
    )
    parser.add_argument("--queries", type=int, default=100, help="measured queries per scope")
    parser.add_argument("--warmup", type=int, default=10, help="unmeasured queries per scope")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="measure the queries this many times; report the median over rounds",
    )
    parser.add_argument(
        "--database",
        choices=["sqlite", "postgres"],
        default=None,
        help="default: postgres when DATABASE_URL is a PostgreSQL URL, else sqlite",
    )
    parser.add_argument(
        "--postgres-url",
        default=None,
        help="server to create the bench database on (default: DATABASE_URL's "
        "server, else postgres://postgres@127.0.0.1:5432/postgres)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: scopes 100,1000, 20k total, 30 queries"
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="after measuring, cProfile N searches at the largest scope",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="scopes 20,50, 300 total, 5 queries, 1 round: the test suite's check that the script still runs (its figures mean nothing)",
    )
    parser.add_argument("--seed", type=int, default=20260910)
    parser.add_argument("--rss-child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--keep", action="store_true", help="keep the bench database afterwards")
    args = parser.parse_args(argv)
    if args.quick:
        args.scopes = "100,1000"
        args.total = 20_000
        args.queries = 30
        args.warmup = min(args.warmup, 5)
    if args.tiny:
        args.scopes, args.total, args.queries, args.warmup, args.rounds = "20,50", 300, 5, 1, 1
    try:
        args.scope_list = sorted(
            {int(s.replace("_", "")) for s in args.scopes.split(",") if s.strip()}
        )
    except ValueError:
        parser.error("--scopes must be comma-separated integers")
    if not args.scope_list or min(*args.scope_list, args.queries, args.rounds) < 1:
        parser.error("--scopes, --queries and --rounds must be positive")
    if len(args.scope_list) > len(MEASURED_STORES):
        parser.error(f"at most {len(MEASURED_STORES)} measured scopes")
    env_url = os.environ.get("DATABASE_URL", "").strip()
    env_is_pg = env_url.startswith(("postgres://", "postgresql://", "pgsql://"))
    if args.database is None:
        args.database = "postgres" if env_is_pg else "sqlite"
    if args.postgres_url is None:
        args.postgres_url = env_url if env_is_pg else "postgres://postgres@127.0.0.1:5432/postgres"
    return args


def _with_dbname(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


@dataclass
class BenchDatabase:
    vendor: str
    url: str
    cleanup: Callable[[], None]


def prepare_database(args: argparse.Namespace, name: str = "") -> BenchDatabase:
    """Point DATABASE_URL at a database of the bench's own (PostgreSQL: ``name``, by default
    ``bench_knowledge_<pid>``); never the project's."""
    if args.database == "sqlite":
        directory = tempfile.mkdtemp(prefix="bench-knowledge-")
        url = f"sqlite:///{sqlite_prepared(Path(directory) / 'bench.sqlite3')}"

        def cleanup() -> None:
            if args.keep:
                print(f"kept {url}")
            else:
                shutil.rmtree(directory, ignore_errors=True)

        os.environ["DATABASE_URL"] = url
        return BenchDatabase("sqlite", url, cleanup)

    import psycopg
    from psycopg import sql

    name = name or f"bench_knowledge_{os.getpid()}"
    admin_url = _with_dbname(args.postgres_url, "postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        postgres_create(conn, name)
    url = _with_dbname(args.postgres_url, name)

    def drop() -> None:
        if args.keep:
            print(f"kept {url}")
            return
        from django.db import connections

        connections.close_all()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    os.environ["DATABASE_URL"] = url
    return BenchDatabase("postgres", url, drop)


# --- corpus ----------------------------------------------------------------------------------


@dataclass
class MeasuredScope:
    store: str
    size: int
    admitted: list[int]  # ids of the documents that pass the gate


class Corpus:
    """Builds the measured scopes first, then fills the corpus with other scopes' documents."""

    def __init__(self, seed: int) -> None:
        from knowledge.domain import expand, tokenize
        from knowledge.selectors import current_lexicon
        from knowledge.services import token_text

        self.rng = random.Random(seed)
        self.lexicon = current_lexicon()
        self._tokenize, self._expand, self._token_text = tokenize, expand, token_text
        self.next_id = 1
        self.documents = 0
        self.store_rows = 0
        self.postings = 0
        self.created_at = datetime(2026, 1, 1, tzinfo=UTC)
        self.pool = [self._tokens(*_sentence(self.rng)) for _ in range(TEXT_POOL_SIZE)]
        self.scopes: list[MeasuredScope] = []

    def _tokens(self, title: str, text: str) -> tuple[str, str, str, str]:
        # Same computation as knowledge.services.document_create.
        searchable = f"{title}\n{text}"
        raw = self._token_text(self._tokenize(searchable))
        expanded = self._token_text(self._tokenize(self._expand(searchable, self.lexicon)))
        return title, text, raw, expanded

    def _document(
        self,
        *,
        tenant: str,
        brand: str,
        campaign: str,
        stores: list[str],
        texts: tuple[str, str, str, str],
        approved: bool = True,
        revoked: bool = False,
        valid_from: datetime,
        valid_to: datetime | None,
        published_at: datetime,
        requirements: dict[str, Any],
        rule_key: str = "",
        kind: str = "rule",
    ) -> tuple[Any, list[str]]:
        from knowledge.models import Document

        doc_id = self.next_id
        self.next_id += 1
        title, text, raw, expanded = texts
        document = Document(
            id=doc_id,
            doc_key=f"bench-{doc_id}",
            version=1,
            tenant=tenant,
            brand=brand,
            campaign=campaign,
            kind=kind,
            rule_key=rule_key,
            title=title,
            text=text,
            source=f"bench://knowledge/{doc_id}",
            valid_from=valid_from,
            valid_to=valid_to,
            published_at=published_at,
            requirements=requirements,
            content_hash=format(doc_id, "064x"),
            raw_tokens=raw,
            expanded_tokens=expanded,
            approved=approved,
            revoked=revoked,
            revoked_reason="bench" if revoked else "",
            created_at=self.created_at,
        )
        return document, stores

    def _insert(self, batch: Iterator[tuple[Any, list[str]]]) -> None:
        """Documents, store rows and the search index, as approvals would write them."""
        from django.db import transaction

        from knowledge.models import Document, DocumentStore
        from knowledge.postings import bulk_indexed

        documents: list[tuple[Any, list[str]]] = list(batch)
        rows = [
            DocumentStore(
                document_id=d.id, tenant=d.tenant, brand=d.brand, campaign=d.campaign, store=s
            )
            for d, stores in documents
            for s in stores
        ]
        with transaction.atomic():
            Document.objects.bulk_create([d for d, _ in documents], batch_size=2000)
            DocumentStore.objects.bulk_create(rows, batch_size=2000)
            self.postings += bulk_indexed(
                [(d, stores) for d, stores in documents if d.approved and not d.revoked]
            )
        self.documents += len(documents)
        self.store_rows += len(rows)

    def build_scope(self, store: str, size: int) -> None:
        """One measured scope: ``size`` admitted documents plus ~20% gated-out ones."""
        rng = self.rng
        base = datetime(2026, 6, 1, tzinfo=UTC)
        rule_keys = [f"{CAMPAIGN}/{store}/rule-{i}" for i in range(max(3, size // 10))]
        scope = MeasuredScope(store, size, [])
        batch = []
        for i in range(size):
            texts = self._tokens(*_sentence(rng))
            extra = rng.sample(STORES[20:], k=rng.randint(0, 2))
            document, stores = self._document(
                tenant=TENANT,
                brand=BRAND,
                campaign=CAMPAIGN,
                stores=[store, *extra],
                texts=texts,
                valid_from=base + timedelta(days=rng.randint(0, 60)),
                valid_to=None
                if rng.random() < 0.7
                else OCCURRED_AT + timedelta(days=rng.randint(1, 90)),
                published_at=base
                - timedelta(days=rng.randint(1, 30))
                + timedelta(days=rng.randint(0, 60)),
                requirements=rng.choice(REQUIREMENT_PATTERNS),
                rule_key=rng.choice(rule_keys) if rng.random() < 0.15 else "",
                kind="case" if i % 5 == 4 else "rule",
            )
            # Never published after the time of knowledge nor valid after the occurrence.
            document.published_at = min(document.published_at, KNOWN_AT - timedelta(hours=1))
            document.valid_from = min(document.valid_from, OCCURRED_AT - timedelta(hours=1))
            scope.admitted.append(document.id)
            batch.append((document, stores))
        # Same scope, gated out: expired, not yet valid, published too late, draft, revoked.
        for i in range(max(5, size // 5)):
            kwargs: dict[str, Any] = {
                "valid_from": base,
                "valid_to": None,
                "published_at": base - timedelta(days=1),
            }
            reason = i % 5
            if reason == 0:
                kwargs["valid_to"] = OCCURRED_AT  # half-open: expired exactly at the occurrence
            elif reason == 1:
                kwargs["valid_from"] = OCCURRED_AT + timedelta(seconds=1)
            elif reason == 2:
                kwargs["published_at"] = KNOWN_AT + timedelta(seconds=1)
            batch.append(
                self._document(
                    tenant=TENANT,
                    brand=BRAND,
                    campaign=CAMPAIGN,
                    stores=[store],
                    texts=self._tokens(*_sentence(rng)),
                    approved=reason != 3,
                    revoked=reason == 4,
                    requirements=rng.choice(REQUIREMENT_PATTERNS),
                    **kwargs,
                )
            )
            if len(batch) >= DOC_CHUNK:
                self._insert(iter(batch))
                batch = []
        for start in range(0, len(batch), DOC_CHUNK):
            self._insert(iter(batch[start : start + DOC_CHUNK]))
        self.scopes.append(scope)

    def _noise(self, count: int) -> Iterator[tuple[Any, list[str]]]:
        rng = self.rng
        pool = self.pool
        measured = {s.store for s in self.scopes}
        starts = [datetime(2025, m, 1, tzinfo=UTC) for m in range(1, 13)]
        for _ in range(count):
            if rng.random() < NEAR_SCOPE_SHARE:
                tenant, brand = TENANT, BRAND
                campaign = rng.choice(CAMPAIGNS)
            else:
                tenant = rng.choice(OTHER_TENANTS)
                brand = f"brand-{rng.randrange(BRANDS_PER_TENANT)}"
                campaign = rng.choice(CAMPAIGNS)
            stores = rng.sample(STORES, k=rng.randint(1, 3))
            if tenant == TENANT and brand == BRAND and campaign == CAMPAIGN:
                # The measured scopes keep their sizes.
                stores = [s for s in stores if s not in measured] or [STORES[-1]]
            roll = rng.random()
            valid_from = rng.choice(starts)
            yield self._document(
                tenant=tenant,
                brand=brand,
                campaign=campaign,
                stores=stores,
                texts=pool[rng.randrange(TEXT_POOL_SIZE)],
                approved=roll < 0.9,
                revoked=roll > 0.97,
                valid_from=valid_from,
                valid_to=None
                if rng.random() < 0.6
                else valid_from + timedelta(days=rng.randint(30, 400)),
                published_at=valid_from - timedelta(days=2),
                requirements=REQUIREMENT_PATTERNS[rng.randrange(len(REQUIREMENT_PATTERNS))],
                rule_key="" if rng.random() < 0.7 else f"{campaign}/rule-{rng.randrange(10)}",
                kind="case" if rng.random() < 0.2 else "rule",
            )

    def grow_to(self, total: int, progress: Callable[[str], None]) -> None:
        while self.documents < total:
            count = min(DOC_CHUNK, total - self.documents)
            self._insert(self._noise(count))
            if self.documents % 100_000 < DOC_CHUNK:
                progress(f"  … {self.documents:,} documents")

    def finish_loading(self, vendor: str) -> None:
        from django.core.management.color import no_style
        from django.db import connection, transaction

        from knowledge.models import Document, SearchEntry
        from knowledge.postings import bulk_finished

        with transaction.atomic():
            bulk_finished()
        if vendor == "postgres":
            with connection.cursor() as cursor:
                for statement in connection.ops.sequence_reset_sql(
                    no_style(), [Document, SearchEntry]
                ):
                    cursor.execute(statement)
                # What autovacuum does on a live database shortly after a bulk load.
                for table in (
                    "knowledge_document",
                    "knowledge_documentstore",
                    "knowledge_searchscope",
                    "knowledge_searchentry",
                    "knowledge_postinglist",
                ):
                    cursor.execute(f"VACUUM ANALYZE {table}")
        else:
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")


# --- floors ----------------------------------------------------------------------------------


class Floors:
    """The two floors for one measured scope, built from the same texts."""

    def __init__(self, scope: MeasuredScope, vendor: str) -> None:
        from knowledge.domain import tokenize
        from knowledge.models import Document

        self.scope = scope
        self.tokenize = tokenize
        texts = list(
            Document.objects.filter(pk__in=scope.admitted).values_list(
                "pk", "title", "text", "raw_tokens"
            )
        )
        # Floor 2: token sets tokenized once and kept in memory.
        self.sets = [(pk, frozenset(raw.split())) for pk, _, _, raw in texts]
        self.fts: Any = None
        if vendor == "sqlite":
            import sqlite3

            self.fts = sqlite3.connect(":memory:")
            self.fts.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='trigram')")
            self.fts.executemany(
                "INSERT INTO t(rowid, body) VALUES (?, ?)",
                ((pk, f"{title}\n{text}") for pk, title, text, _ in texts),
            )
            self.fts.commit()

    def jaccard_top(self, query: str) -> list[int]:
        tokens = self.tokenize(query)
        size = len(tokens)
        scored = []
        for pk, doc in self.sets:
            inter = len(tokens & doc)
            if inter:
                scored.append((inter / (size + len(doc) - inter), pk))
        return [pk for _, pk in heapq.nlargest(FLOOR_TOP, scored)]

    def fts_top(self, query: str) -> list[int]:
        grams = {
            run[i : i + 3]
            for run in query.lower().replace('"', " ").split()
            for i in range(max(1, len(run) - 2))
            if len(run) >= 3
        }
        if not grams:
            return []
        match = " OR ".join(f'"{g}"' for g in sorted(grams))
        return [
            row[0]
            for row in self.fts.execute(
                "SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank LIMIT ?", (match, FLOOR_TOP)
            )
        ]


# --- measurement -----------------------------------------------------------------------------


def percentile(samples: list[int], p: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] / 1e6


# "sent": the search as it was before posting lists were kept per process (PostgreSQL only:
# every list the query names is sent on every search).
MEASURES = ("search", "bare", "fts", "jaccard", "sent")


@dataclass
class Row:
    size: int
    p50: dict[str, float]
    p95: dict[str, float]
    statuses: Counter[str]
    gated: int


def make_workload(seed: int, count: int, store: str) -> list[tuple[str, Any]]:
    from knowledge.search import KnowledgeContext

    rng = random.Random(seed + 1)
    return [
        (
            _query(rng),
            KnowledgeContext(
                tenant=TENANT,
                brand=BRAND,
                store=store,
                campaign=CAMPAIGN,
                occurred_at=OCCURRED_AT,
                known_at=KNOWN_AT,
                facts=_facts(rng),
                limit=rng.choice([4, 4, 4, 8, 10]),
            ),
        )
        for _ in range(count)
    ]


def searcher() -> Any:
    """The account the measured searches run as: an agent of the measured tenant, whose
    permission and tenant every search checks. One user object serves the whole run, so Django
    has its permissions after the first search, as within one API request; loading them per
    request is the API benchmark's (bench_api.py)."""
    from reviewconsole.roles import Role
    from reviewconsole.services import user_set_role
    from reviewconsole.tenancy import tenant_ensure

    tenant_ensure(name=TENANT, actor=None)
    return user_set_role(username="bench-searcher", role=Role.AGENT, tenants=[TENANT])


def measure_scope(
    workload: list[tuple[str, Any]], floors: Floors, warmup: int, rounds: int, actor: Any
) -> tuple[dict[str, list[float]], Counter[str], int]:
    """Per measure, the p50 and p95 of every round; statuses; the gate's count."""
    from django.db import connection

    from knowledge import search
    from knowledge.search import gated_rows, search_knowledge

    gated = 0
    statuses: Counter[str] = Counter()
    lists_sent = Seam(search, "_postings_kept", lambda: False)
    postgres = connection.vendor == "postgresql"

    def run(name: str, query: str, ctx: Any) -> None:
        nonlocal gated
        if name == "search":
            statuses[search_knowledge(query, ctx, actor=actor)["status"]] += 1
        elif name == "sent":
            if postgres:
                with lists_sent.applied():
                    search_knowledge(query, ctx, actor=actor)
        elif name == "bare":
            gated = len(list(gated_rows(ctx).values_list("document_id")))
        elif name == "fts":
            if floors.fts is not None:
                floors.fts_top(query)
        else:
            floors.jaccard_top(query)

    for query, ctx in workload[:warmup]:
        for name in MEASURES:
            run(name, query, ctx)
    clock = time.perf_counter_ns
    figures: dict[str, list[float]] = {f"{m} {p}": [] for m in MEASURES for p in (50, 95)}
    for _ in range(rounds):
        gc.collect()
        statuses.clear()
        samples: dict[str, list[int]] = {m: [] for m in MEASURES}
        for i, (query, ctx) in enumerate(workload):
            # Rotate the order so no measure always runs on a warmer cache.
            turn = i % len(MEASURES)
            order = MEASURES[turn:] + MEASURES[:turn]
            for name in order:
                t0 = clock()
                run(name, query, ctx)
                samples[name].append(clock() - t0)
        for name in MEASURES:
            figures[f"{name} 50"].append(percentile(samples[name], 50))
            figures[f"{name} 95"].append(percentile(samples[name], 95))
    lists_sent.require_called()
    return figures, statuses, gated


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM). Not ru_maxrss: on Linux that keeps the peak of
    the process it was forked from, here the one that loaded the corpus."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def profile(workload: list[tuple[str, Any]], count: int) -> None:
    from knowledge.search import search_knowledge

    runs = (workload * (count // len(workload) + 1))[:count]
    actor = searcher()
    profiler = cProfile.Profile()
    profiler.enable()
    for query, ctx in runs:
        search_knowledge(query, ctx, actor=actor)
    profiler.disable()
    stats = pstats.Stats(profiler)
    total = stats.total_tt  # type: ignore[attr-defined]
    groups: Counter[str] = Counter()
    for (filename, _line, name), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if (
            "psycopg" in filename
            or name in {"execute", "executemany", "fetchmany", "fetchall", "fetchone"}
            or "sqlite3" in name
        ):
            groups["database driver (execute/fetch)"] += tt
        elif "fractions" in filename:
            groups["fractions.Fraction arithmetic"] += tt
        elif filename.endswith(("knowledge/domain.py", "knowledge/search.py")):
            groups["knowledge/ (tokenize, rank, fuse, conditions)"] += tt
        elif "json" in filename or "rfc8785" in filename:
            groups["JSON decode / canonical JSON"] += tt
        elif "django" in filename:
            groups["Django ORM / query compilation"] += tt
        elif filename in {"~", ""} or filename.startswith("<"):
            groups["builtins (sort, split, frozenset, …)"] += tt
        else:
            groups["other"] += tt
    print(
        f"\ncProfile of {count} searches ({total * 1000 / count:.2f} ms/search under the profiler)"
    )
    print("  self time by area:")
    for group, tt in groups.most_common():
        print(f"    {tt / total:6.1%}  {group}")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime").print_stats(18)
    lines = out.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), len(lines))
    print("  top functions by self time:")
    for line in lines[start:]:
        if line.strip():
            print("    " + line.rstrip())


# --- report ----------------------------------------------------------------------------------


def busy_warning() -> None:
    """Timings are only as quiet as the machine: say so when something else is running."""
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load > max(1.0, cores - 1):
        print(f"  note: load average {load:.1f} on {cores} cores; figures may be noisy")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _ms(value: float | None) -> str:
    return "     n/a" if value is None else f"{value:8.2f}"


def _ratio(a: float, b: float | None) -> str:
    return "   n/a" if not b else f"{a / b:5.1f}×"


def report(rows: list[Row], rss: dict[int, float], args: argparse.Namespace, fts: bool) -> None:
    print()
    header = (
        f"{'in scope':>9} │ {'search p50':>10} {'p95':>8} │ {'bare p50':>8} │ {'FTS5 p50':>8} │"
        f" {'Jaccard p50':>11} │ {'÷FTS5':>6} {'÷Jacc.':>6} {'÷bare':>6} │ {'RSS MB':>6}"
    )
    print(header)
    print("─" * len(header))
    for r in rows:
        fts_p50 = r.p50["fts"] if fts else None
        print(
            f"{r.size:>9,} │ {r.p50['search']:>7.2f} ms {r.p95['search']:>8.2f} │"
            f" {_ms(r.p50['bare'])} │ {_ms(fts_p50)} │ {r.p50['jaccard']:>11.2f} │"
            f" {_ratio(r.p50['search'], fts_p50)} {_ratio(r.p50['search'], r.p50['jaccard'])}"
            f" {_ratio(r.p50['search'], r.p50['bare'])} │ {rss.get(r.size, 0):>6.0f}"
        )
    print(
        f"  (p50/p95 in ms, {args.queries} queries × {args.rounds} rounds per scope after"
        f" {args.warmup} warm-up, each figure the median over rounds; all four measured"
        f" interleaved in the same run; floors return the top {FLOOR_TOP};"
        " RSS: peak of a separate process that only searches that scope)"
    )
    for r in rows:
        mix = ", ".join(f"{k} {v}" for k, v in sorted(r.statuses.items()))
        print(f"  statuses at {r.size:,} in scope: {mix}")

    print("\nTargets")
    by_size = {r.size: r for r in rows}
    at_10k = by_size.get(10_000)
    if at_10k is not None:
        if fts:
            ratio = at_10k.p50["search"] / at_10k.p50["fts"]
            print(
                f"  search p50 at 10k in scope ≤ {TARGET_FLOOR_RATIO_AT_10K:g}× the FTS5 floor:"
                f" {ratio:.2f}×  {verdict(ratio <= TARGET_FLOOR_RATIO_AT_10K)}"
            )
        print(
            f"  search p50 at 10k in scope ≤ {TARGET_P50_MS_AT_10K:g} ms:"
            f" {at_10k.p50['search']:.2f} ms  {verdict(at_10k.p50['search'] <= TARGET_P50_MS_AT_10K)}"
        )
        at_50k = by_size.get(50_000)
        if at_50k is not None:
            growth = at_50k.p50["search"] / at_10k.p50["search"]
            print(
                f"  growth of search p50 10k→50k in scope ≤ {TARGET_GROWTH_10K_50K:g}×:"
                f" {growth:.2f}×  {verdict(growth <= TARGET_GROWTH_10K_50K)}"
            )
        if 100 in rss and 10_000 in rss:
            grown = rss[10_000] / rss[100]
            print(
                f"  peak RSS searching 10k in scope ≤ 1.2× that at 100: {grown:.2f}×"
                f"  {verdict(grown <= 1.2)}"
            )
    at_100 = by_size.get(100)
    if at_100 is not None:
        print(
            f"  search p50 at 100 in scope: {at_100.p50['search']:.2f} ms"
            f" (the scan implementation: {BEFORE_P50_MS_AT_100:g} ms on SQLite in the issue's run)"
        )


# --- a process that only searches, for its peak RSS ----------------------------------------------


def rss_child(store: str, queries: int, seed: int) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")
    import django

    django.setup()
    from knowledge.search import search_knowledge

    actor = searcher()
    for query, ctx in make_workload(seed, queries, store):
        search_knowledge(query, ctx, actor=actor)
    print(f"{peak_rss_mb():.1f}")
    return 0


def searching_rss(store: str, args: argparse.Namespace) -> float:
    import subprocess

    result = subprocess.run(  # noqa: S603
        [sys.executable, __file__, "--rss-child", store, "--queries", str(args.queries)],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ.copy(),
    )
    return float(result.stdout.strip().splitlines()[-1])


# --- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rss_child:
        return rss_child(args.rss_child, args.queries, args.seed)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")  # DEBUG would record every query
    started = time.perf_counter()
    database = prepare_database(args)
    try:
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0, interactive=False)
        connection.ensure_connection()
        if connection.vendor == "sqlite":
            import sqlite3

            version = sqlite3.sqlite_version
        else:
            pg_version: int = connection.pg_version  # type: ignore[attr-defined]
            version = f"{pg_version // 10000}.{pg_version % 10000}"
        print(
            f"knowledge search benchmark · {connection.vendor} {version} · DEBUG={settings.DEBUG}"
            f" · in scope: {', '.join(f'{s:,}' for s in args.scope_list)} · total ≥ {args.total:,}"
        )
        busy_warning()

        t0 = time.perf_counter()
        if connection.vendor == "sqlite":
            # Loading speed-ups for this throw-away file only; the next connection is
            # opened with the project's own settings (WAL, synchronous=NORMAL).
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA journal_mode=OFF")
                cursor.execute("PRAGMA synchronous=OFF")
                cursor.execute("PRAGMA cache_size=-262144")
        elif connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET synchronous_commit = off")
        corpus = Corpus(args.seed)
        for store, size in zip(MEASURED_STORES, args.scope_list, strict=False):
            corpus.build_scope(store, size)
            print(f"  scope {store}: {size:,} admitted ({corpus.documents:,} documents so far)")
        corpus.grow_to(args.total, print)
        vendor = "postgres" if connection.vendor == "postgresql" else "sqlite"
        corpus.finish_loading(vendor)
        connection.close()
        print(
            f"  loaded {corpus.documents:,} documents, {corpus.store_rows:,} store rows,"
            f" {corpus.postings:,} postings in {time.perf_counter() - t0:.0f} s"
        )

        rows: list[Row] = []
        actor = searcher()
        for scope in corpus.scopes:
            floors = Floors(scope, vendor)
            workload = make_workload(args.seed, args.queries, scope.store)
            figures, statuses, gated = measure_scope(
                workload, floors, args.warmup, args.rounds, actor
            )
            row = Row(
                size=scope.size,
                p50={m: statistics.median(figures[f"{m} 50"]) for m in MEASURES},
                p95={m: statistics.median(figures[f"{m} 95"]) for m in MEASURES},
                statuses=statuses,
                gated=gated,
            )
            rows.append(row)
            print(
                f"  {scope.size:,} in scope: search p50 {row.p50['search']:.2f} ms,"
                f" bare {row.p50['bare']:.2f} ms, Jaccard floor {row.p50['jaccard']:.2f} ms"
                + (f", FTS5 floor {row.p50['fts']:.2f} ms" if vendor == "sqlite" else "")
            )
            if vendor == "postgres":
                from knowledge import search

                kept = search._postings_cache
                print(
                    f"    lists sent every time: p50 {row.p50['sent']:.2f} ms"
                    f" (kept ÷ sent {row.p50['search'] / row.p50['sent']:.2f}×);"
                    f" posting lists kept so far: {len(kept):,}, {kept.nbytes / 2**20:.1f} MiB"
                    f" (bound {kept.limit_bytes / 2**20:.0f} MiB)"
                )
            if gated != scope.size:
                print(f"  WARNING: the gate admitted {gated} documents, expected {scope.size}")
        connection.close()
        rss = {scope.size: searching_rss(scope.store, args) for scope in corpus.scopes}
        report(rows, rss, args, fts=vendor == "sqlite")
        if args.profile:
            largest = corpus.scopes[-1]
            profile(make_workload(args.seed, args.queries, largest.store), args.profile)
        print(f"\ntotal run time {time.perf_counter() - started:.0f} s")
    finally:
        database.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
