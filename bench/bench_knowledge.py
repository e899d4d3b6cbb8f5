#!/usr/bin/env python
"""Benchmark ``search_knowledge`` against the bare gated SQL query for the same scope.

Builds a synthetic corpus (many tenants, brands, campaigns and stores; a fixed number of
documents that pass the gate in the one scope every query uses), grows it through the
requested sizes, and at each size prints p50/p95 of ``search_knowledge`` in-process next to
p50/p95 of ``list(gated_rows(ctx).values_list("document_id"))`` measured in the same run.

It never touches the project's own database: SQLite runs use a fresh temporary file, and
PostgreSQL runs use a dedicated database that the script creates and drops.

Usage::

    python bench/bench_knowledge.py                       # 10k, 100k, 1M on SQLite
    python bench/bench_knowledge.py --quick               # 2k, 10k, 50 queries
    python bench/bench_knowledge.py --database postgres --sizes 10000,100000
    python bench/bench_knowledge.py --profile 200         # + cProfile of the largest size

It reports; it never fails on a missed target (exit status 0 once the run completes).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
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

# --- targets (issue "Benchmark" section) ------------------------------------------------------

TARGET_P50_MS_AT_100K = 10.0
TARGET_RATIO = 5.0
TARGET_GROWTH = 1.5

# --- the scope every query uses (the fixtures' identifiers) -----------------------------------

TENANT = "teahouse"
BRAND = "leaf-and-cup"
CAMPAIGN = "campaign-a"
STORE = "store-001"

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
        "--sizes",
        default="10000,100000,1000000",
        help="comma-separated total document counts, grown incrementally",
    )
    parser.add_argument(
        "--in-scope",
        type=int,
        default=100,
        help="documents that pass the gate in the queried scope",
    )
    parser.add_argument("--queries", type=int, default=200, help="measured queries per size")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured queries per size")
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
        "--quick", action="store_true", help="smoke run: sizes 2000,10000, 50 queries"
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="after measuring, cProfile N searches at the largest size",
    )
    parser.add_argument("--seed", type=int, default=20260910)
    parser.add_argument("--keep", action="store_true", help="keep the bench database afterwards")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes = "2000,10000"
        args.queries = 50
        args.warmup = min(args.warmup, 10)
    try:
        args.size_list = sorted(
            {int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()}
        )
    except ValueError:
        parser.error("--sizes must be comma-separated integers")
    if not args.size_list or min(args.in_scope, args.queries, args.rounds) < 1:
        parser.error("--sizes, --in-scope, --queries and --rounds must be positive")
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


def prepare_database(args: argparse.Namespace) -> BenchDatabase:
    """Point DATABASE_URL at a database of the bench's own; never the project's."""
    if args.database == "sqlite":
        directory = tempfile.mkdtemp(prefix="bench-knowledge-")
        url = f"sqlite:///{directory}/bench.sqlite3"

        def cleanup() -> None:
            if args.keep:
                print(f"kept {url}")
            else:
                shutil.rmtree(directory, ignore_errors=True)

        os.environ["DATABASE_URL"] = url
        return BenchDatabase("sqlite", url, cleanup)

    import psycopg
    from psycopg import sql

    name = f"bench_knowledge_{os.getpid()}"
    admin_url = _with_dbname(args.postgres_url, "postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
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


class Corpus:
    """Grows the corpus; the queried scope's documents are inserted once, first."""

    def __init__(self, seed: int, in_scope: int) -> None:
        from knowledge.domain import expand, tokenize
        from knowledge.selectors import current_lexicon
        from knowledge.services import token_text

        self.rng = random.Random(seed)
        self.in_scope = in_scope
        self.lexicon = current_lexicon()
        self._tokenize, self._expand, self._token_text = tokenize, expand, token_text
        self.next_id = 1
        self.documents = 0
        self.store_rows = 0
        self.created_at = datetime(2026, 1, 1, tzinfo=UTC)
        self.pool = [self._tokens(*_sentence(self.rng)) for _ in range(TEXT_POOL_SIZE)]
        self.gated_out = 0
        self.expected_ids: set[int] = set()

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
    ) -> tuple[Any, list[Any]]:
        from knowledge.models import Document, DocumentStore

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
        rows = [
            DocumentStore(
                document_id=doc_id, tenant=tenant, brand=brand, campaign=campaign, store=s
            )
            for s in stores
        ]
        return document, rows

    def _insert(self, batch: Iterator[tuple[Any, list[Any]]]) -> None:
        from django.db import transaction

        from knowledge.models import Document, DocumentStore

        documents: list[Any] = []
        rows: list[Any] = []
        for document, store_rows in batch:
            documents.append(document)
            rows.extend(store_rows)
        with transaction.atomic():
            Document.objects.bulk_create(documents, batch_size=2000)
            DocumentStore.objects.bulk_create(rows, batch_size=2000)
        self.documents += len(documents)
        self.store_rows += len(rows)

    def build_scope(self) -> None:
        """The queried scope: ``in_scope`` admitted documents plus ~20% gated-out noise."""
        rng = self.rng
        base = datetime(2026, 6, 1, tzinfo=UTC)
        rule_keys = [f"{CAMPAIGN}/rule-{i}" for i in range(max(3, self.in_scope // 10))]
        batch = []
        for i in range(self.in_scope):
            texts = self._tokens(*_sentence(rng))
            extra = rng.sample([s for s in STORES if s != STORE], k=rng.randint(0, 2))
            rule_key = rng.choice(rule_keys) if rng.random() < 0.15 else ""
            document, rows = self._document(
                tenant=TENANT,
                brand=BRAND,
                campaign=CAMPAIGN,
                stores=[STORE, *extra],
                texts=texts,
                valid_from=base + timedelta(days=rng.randint(0, 60)),
                valid_to=None
                if rng.random() < 0.7
                else OCCURRED_AT + timedelta(days=rng.randint(1, 90)),
                published_at=base
                - timedelta(days=rng.randint(1, 30))
                + timedelta(days=rng.randint(0, 60)),
                requirements=rng.choice(REQUIREMENT_PATTERNS),
                rule_key=rule_key,
                kind="case" if i % 5 == 4 else "rule",
            )
            # Never published after the time of knowledge nor valid after the occurrence.
            document.published_at = min(document.published_at, KNOWN_AT - timedelta(hours=1))
            document.valid_from = min(document.valid_from, OCCURRED_AT - timedelta(hours=1))
            self.expected_ids.add(document.id)
            batch.append((document, rows))
        # Same scope, gated out: expired, not yet valid, published too late, draft, revoked.
        noise = max(5, self.in_scope // 5)
        for i in range(noise):
            texts = self._tokens(*_sentence(rng))
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
                    stores=[STORE],
                    texts=texts,
                    approved=reason != 3,
                    revoked=reason == 4,
                    requirements=rng.choice(REQUIREMENT_PATTERNS),
                    **kwargs,
                )
            )
        self.gated_out = noise
        self._insert(iter(batch))

    def _noise(self, count: int) -> Iterator[tuple[Any, list[Any]]]:
        rng = self.rng
        pool = self.pool
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
            if tenant == TENANT and brand == BRAND and campaign == CAMPAIGN and STORE in stores:
                stores.remove(STORE)  # the queried scope keeps a fixed size
                if not stores:
                    stores = [STORES[-1]]
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
            if self.documents % 200_000 < DOC_CHUNK:
                progress(f"  … {self.documents:,} documents")

    def finish_loading(self, vendor: str) -> None:
        from django.core.management.color import no_style
        from django.db import connection

        from knowledge.models import Document

        if vendor == "postgres":
            with connection.cursor() as cursor:
                for statement in connection.ops.sequence_reset_sql(no_style(), [Document]):
                    cursor.execute(statement)
                # What autovacuum does on a live database shortly after a bulk load.
                cursor.execute("VACUUM ANALYZE knowledge_document")
                cursor.execute("VACUUM ANALYZE knowledge_documentstore")


# --- measurement -----------------------------------------------------------------------------


def percentile(samples: list[int], p: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] / 1e6


@dataclass
class Row:
    total: int
    store_rows: int
    build_s: float
    search_p50: float
    search_p95: float
    bare_p50: float
    bare_p95: float
    statuses: Counter[str]
    gated: int

    @property
    def ratio_p50(self) -> float:
        return self.search_p50 / self.bare_p50

    @property
    def ratio_p95(self) -> float:
        return self.search_p95 / self.bare_p95


def make_workload(seed: int, count: int) -> list[tuple[str, Any]]:
    from knowledge.search import KnowledgeContext

    rng = random.Random(seed + 1)
    return [
        (
            _query(rng),
            KnowledgeContext(
                tenant=TENANT,
                brand=BRAND,
                store=STORE,
                campaign=CAMPAIGN,
                occurred_at=OCCURRED_AT,
                known_at=KNOWN_AT,
                facts=_facts(rng),
                limit=rng.choice([4, 4, 4, 8, 10]),
            ),
        )
        for _ in range(count)
    ]


@dataclass
class Round:
    search_ns: list[int]
    bare_ns: list[int]
    statuses: Counter[str]
    gated: int


def measure(workload: list[tuple[str, Any]], warmup: int, rounds: int) -> list[Round]:
    from knowledge.search import gated_rows, search_knowledge

    for query, ctx in workload[:warmup] + workload[:warmup]:
        search_knowledge(query, ctx)
        list(gated_rows(ctx).values_list("document_id"))
    results = []
    for _ in range(rounds):
        gc.collect()
        results.append(_round(workload))
    return results


def _round(workload: list[tuple[str, Any]]) -> Round:
    from knowledge.search import gated_rows, search_knowledge

    clock = time.perf_counter_ns
    search_ns: list[int] = []
    bare_ns: list[int] = []
    statuses: Counter[str] = Counter()
    gated = -1
    for i, (query, ctx) in enumerate(workload):
        # Alternate the order so neither side always runs on a warmer cache.
        if i % 2:
            t0 = clock()
            ids = list(gated_rows(ctx).values_list("document_id"))
            t1 = clock()
            result = search_knowledge(query, ctx)
            t2 = clock()
            bare_ns.append(t1 - t0)
            search_ns.append(t2 - t1)
        else:
            t0 = clock()
            result = search_knowledge(query, ctx)
            t1 = clock()
            ids = list(gated_rows(ctx).values_list("document_id"))
            t2 = clock()
            search_ns.append(t1 - t0)
            bare_ns.append(t2 - t1)
        statuses[result["status"]] += 1
        gated = len(ids)
    return Round(search_ns, bare_ns, statuses, gated)


def profile(workload: list[tuple[str, Any]], count: int) -> None:
    from knowledge.search import search_knowledge

    runs = (workload * (count // len(workload) + 1))[:count]
    profiler = cProfile.Profile()
    profiler.enable()
    for query, ctx in runs:
        search_knowledge(query, ctx)
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


def report(rows: list[Row], args: argparse.Namespace) -> None:
    print()
    header = (
        f"{'documents':>11} {'store rows':>11} {'build s':>8} │ {'search p50':>10} {'p95':>7} │"
        f" {'bare p50':>8} {'p95':>7} │ {'ratio p50':>9} {'p95':>5} │ {'gated':>5}"
    )
    print(header)
    print("─" * len(header))
    for r in rows:
        print(
            f"{r.total:>11,} {r.store_rows:>11,} {r.build_s:>8.1f} │ {r.search_p50:>7.2f} ms {r.search_p95:>7.2f} │"
            f" {r.bare_p50:>5.2f} ms {r.bare_p95:>7.2f} │ {r.ratio_p50:>8.1f}× {r.ratio_p95:>4.1f}× │ {r.gated:>5}"
        )
    print(
        "  (times in ms; ratio = search / bare gated query, same run; "
        f"{args.queries} queries × {args.rounds} rounds per size after {args.warmup} warm-up;"
        " each figure is the median over rounds)"
    )
    for r in rows:
        mix = ", ".join(f"{k} {v}" for k, v in sorted(r.statuses.items()))
        print(f"  statuses at {r.total:,}: {mix}")

    print("\nTargets")
    at_100k = next((r for r in rows if r.total == 100_000), None)
    if at_100k is not None:
        print(
            f"  p50 search at 100k ≤ {TARGET_P50_MS_AT_100K:g} ms: {at_100k.search_p50:.2f} ms"
            f"  {verdict(at_100k.search_p50 <= TARGET_P50_MS_AT_100K)}"
        )
    else:
        print(f"  p50 search at 100k ≤ {TARGET_P50_MS_AT_100K:g} ms: n/a (100000 not in --sizes)")
    ratio_row = at_100k or rows[-1]
    worst = max(rows, key=lambda r: r.ratio_p50)
    print(
        f"  ratio p50 search/bare ≤ {TARGET_RATIO:g} (at {ratio_row.total:,}): {ratio_row.ratio_p50:.1f}×"
        f"  {verdict(ratio_row.ratio_p50 <= TARGET_RATIO)}"
        f"   [worst over sizes: {worst.ratio_p50:.1f}× at {worst.total:,}]"
    )
    first, last = rows[0], rows[-1]
    label = (
        "10k→1M"
        if (first.total, last.total) == (10_000, 1_000_000)
        else f"{first.total:,}→{last.total:,}"
    )
    if len(rows) > 1:
        growth = last.search_p50 / first.search_p50
        bare_growth = last.bare_p50 / first.bare_p50
        print(
            f"  growth p50 search {label} ≤ {TARGET_GROWTH:g}×: {growth:.2f}×  {verdict(growth <= TARGET_GROWTH)}"
            f"   [bare query: {bare_growth:.2f}×]"
        )
    else:
        print(f"  growth p50 search ≤ {TARGET_GROWTH:g}×: n/a (one size)")


# --- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
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
            f" · in scope: {args.in_scope} admitted · sizes {', '.join(f'{s:,}' for s in args.size_list)}"
        )

        busy_warning()
        corpus = Corpus(args.seed, args.in_scope)
        workload = make_workload(args.seed, args.queries)
        rows: list[Row] = []
        for size in args.size_list:
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
            if corpus.documents == 0:
                corpus.build_scope()
            if size < corpus.documents:
                print(
                    f"  {size:,} is smaller than the queried scope alone; measuring {corpus.documents:,}"
                )
            corpus.grow_to(size, print)
            corpus.finish_loading("postgres" if connection.vendor == "postgresql" else "sqlite")
            connection.close()
            build_s = time.perf_counter() - t0

            measured = measure(workload, args.warmup, args.rounds)
            # Each figure is the median over rounds, so one burst of load from elsewhere on
            # the machine does not decide the result.
            row = Row(
                total=corpus.documents,
                store_rows=corpus.store_rows,
                build_s=build_s,
                search_p50=statistics.median(percentile(r.search_ns, 50) for r in measured),
                search_p95=statistics.median(percentile(r.search_ns, 95) for r in measured),
                bare_p50=statistics.median(percentile(r.bare_ns, 50) for r in measured),
                bare_p95=statistics.median(percentile(r.bare_ns, 95) for r in measured),
                statuses=measured[0].statuses,
                gated=min(r.gated for r in measured),
            )
            rows.append(row)
            print(
                f"  {row.total:,} documents (+{build_s:.0f} s build): search p50 {row.search_p50:.2f} ms,"
                f" bare p50 {row.bare_p50:.2f} ms"
            )
            if row.gated != args.in_scope:
                print(
                    f"  WARNING: the gate admitted {row.gated} documents, expected {args.in_scope}"
                )
        report(rows, args)
        if args.profile:
            profile(workload, args.profile)
        print(f"\ntotal run time {time.perf_counter() - started:.0f} s")
    finally:
        database.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
