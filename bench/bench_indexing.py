"""Adding one item to a scope: what the retrieval index and the vector index pay, by scope size.

    python bench/bench_indexing.py                          # scopes of 100 and 10k cases, SQLite
    python bench/bench_indexing.py --database postgres      # the same on PostgreSQL
    python bench/bench_indexing.py --tiny                   # seconds: the test suite's run

Two scopes of approved cases are loaded (rows inserted, then the retrieval index rebuilt and each
scope's vectors packed whole). Then, round after round and alternating the scopes, one new
approved case is added to each and timed twice:

- **lexical**: ``experience.index.postings.item_indexed`` in its own committed transaction (what
  a review decision calls once it saved the status: the entry, and the change appended to the
  scope's delta);
- **vector**: ``semantic.packing.scope_packed`` (the worker's task body: the new entry's text
  embedded and appended to the scope's vector delta). The embedder is the tokens' hashed vectors
  (``bench.common.HashedEmbedder``, microseconds a text) unless ``--model local``: with the
  model, one passage embedding (20–170 ms) is the same at every size and would hide what the
  index itself pays.

Merges are left to the background (the task backend here queues and never runs them); after the
rounds, one merge of each scope's delta is timed beside them. Last, as many additions again
without the delta (the array and posting lists rewritten in the writer's transaction, the
matrix packed whole: what every addition cost before) give the baseline. After each addition a reader that
had read the scope before reads it again (``scope_read`` and the vector branch's ``packed``): the
bytes it received and the delta rows among them are printed. On SQLite the retrieval index's
array is read from the file on every search (no process cache: nothing travels), so its
figure is the array's size; on PostgreSQL both readers keep what they read by version.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import postgres_create, sqlite_prepared  # noqa: E402

TARGET_RATIO = 1.3
WORDS = ("优惠券", "无法使用", "门店范围", "活动配置", "缓存", "商品列表", "金额门槛", "小程序",
         "核销失败", "新品", "渠道", "刷新", "coupon", "refund", "printer", "menu")  # fmt: skip
SCOPE = {"tenant": "teahouse", "brand": "leaf-and-cup", "campaign": "campaign-b",
         "deployment": "release-1"}  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100,10000", help="the two scope sizes, small,large")
    parser.add_argument("--rounds", type=int, default=15, help="additions per scope (timed)")
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument(
        "--postgres-url",
        default="postgres://postgres@127.0.0.1:5432/postgres",
        help="server to create the bench database on",
    )
    parser.add_argument(
        "--model",
        choices=["hashed", "local"],
        default="hashed",
        help="embedder: the tokens' hashed vectors (default) or the local model",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="scopes of 20 and 200, 2 rounds: the test suite's check that the script runs",
    )
    parser.add_argument("--keep", action="store_true", help="keep the bench database")
    args = parser.parse_args(argv)
    if args.tiny:
        args.sizes, args.rounds = "20,200", 2
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if len(sizes) != 2 or min(sizes) < 1 or args.rounds < 1:
        parser.error("--sizes takes two positive sizes and --rounds a positive count")
    args.small, args.large = sorted(sizes)
    return args


def _with_dbname(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def prepare_database(args: argparse.Namespace) -> Callable[[], None]:
    """Point DATABASE_URL at a database of the bench's own; returns its cleanup."""
    if args.database == "sqlite":
        directory = tempfile.mkdtemp(prefix="bench-indexing-")
        os.environ["DATABASE_URL"] = (
            f"sqlite:///{sqlite_prepared(Path(directory) / 'bench.sqlite3')}"
        )
        return lambda: None if args.keep else shutil.rmtree(directory, ignore_errors=True)
    import psycopg
    from psycopg import sql

    name = f"bench_indexing_{os.getpid()}"
    admin = _with_dbname(args.postgres_url, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        postgres_create(conn, name)
    os.environ["DATABASE_URL"] = _with_dbname(args.postgres_url, name)

    def drop() -> None:
        if args.keep:
            return
        from django.db import connections

        connections.close_all()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    return drop


class Cases:
    """Approved cases written as rows (as an import leaves them), numbered across scopes."""

    def __init__(self) -> None:
        from django.contrib.auth import get_user_model

        from reviewconsole.models import Tenant

        Tenant.objects.get_or_create(name="teahouse", defaults={"created_at": datetime.now(UTC)})
        user_model = get_user_model()
        self.user, _ = user_model.objects.get_or_create(username="bench-indexing")
        self.now = datetime.now(UTC)
        self.made = 0

    def rows(self, store: str, count: int) -> list[Any]:
        from experience.cases.models import Case
        from experience.core import domain
        from reviewconsole import itemids

        cases = []
        for _ in range(count):
            n = self.made
            self.made += 1
            scope = {**SCOPE, "store": store}
            words = [WORDS[(n * 7 + k * 3) % len(WORDS)] for k in range(3)]
            title = " ".join(words) + f" #{n}"
            content = {"type": "case", "scope": scope, "incident": f"INC-{n}", "title": title}
            case_id = domain.content_id(domain.CASE_PREFIX, content)
            cases.append(
                Case(
                    id=case_id,
                    **scope,
                    title=title,
                    valid_from=self.now - timedelta(days=30),
                    valid_to=self.now + timedelta(days=365),
                    content_hash=itemids.digest_of(case_id),
                    content=content,
                    submitted_by=self.user,
                    submitted_via="import",
                    submitted_at=self.now,
                    status="approved",
                    approved_by=self.user,
                    approved_at=self.now - timedelta(days=1),
                    incident=f"INC-{n}",
                    search_text=f"{title} {' '.join(words)}",
                )
            )
        return cases


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")
    # Merges run in the background: queued here, never run inside a timed addition.
    os.environ["CONSOLE_TASKS_BACKEND"] = "django_tasks.backends.dummy.DummyBackend"
    os.environ["CONSOLE_EMBEDDER"] = (
        "local" if args.model == "local" else "bench.common.HashedEmbedder"
    )
    cleanup = prepare_database(args)
    try:
        return run(args)
    finally:
        cleanup()


def run(args: argparse.Namespace) -> int:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    from experience.cases.models import Case
    from experience.index import postings
    from experience.index.models import IndexEntry, IndexPosting, IndexScope
    from semantic import branch, packing
    from semantic.tasks import scopes_changed

    call_command("migrate", verbosity=0, interactive=False)
    print(
        f"bench_indexing on {connection.vendor} · scopes of {args.small:,} and {args.large:,}"
        f" cases · {args.rounds} additions each · embedder {args.model}"
    )
    cases = Cases()
    stores = {args.small: "store-small", args.large: "store-large"}
    started = time.perf_counter()
    for size, store in stores.items():
        Case.objects.bulk_create(cases.rows(store, size), batch_size=2000)
    postings.rebuild()
    scope_ids = {
        size: IndexScope.objects.get(store=store, **SCOPE).pk for size, store in stores.items()
    }
    for scope_id in scope_ids.values():
        packing.scope_packed(postings.VECTOR_SPACE, scope_id)
    print(f"loaded and packed in {time.perf_counter() - started:.1f} s")

    def read(size: int) -> tuple[int, int, int, int, int]:
        """A reader's read of the scope: bytes and delta rows, lexical then vector."""
        scope = {**SCOPE, "store": stores[size]}
        assert postings.scope_read(scope, "优惠券 无法使用") is not postings.STALE
        lexical = (postings.FETCHED.bytes, postings.FETCHED.delta_rows, postings.FETCHED.lists)
        assert branch.packed(postings.VECTOR_SPACE, scope_ids[size]) is not None
        return (*lexical, branch.FETCHED.bytes, branch.FETCHED.delta_rows)

    lexical: dict[int, list[float]] = {size: [] for size in stores}
    vector: dict[int, list[float]] = {size: [] for size in stores}
    fetched: dict[int, list[tuple[int, int, int, int, int]]] = {size: [] for size in stores}
    for _round in range(args.rounds):
        for size, store in stores.items():
            read(size)  # the reader holds the scope as it is before the addition
            (case,) = cases.rows(store, 1)
            case.save()
            begun = time.perf_counter()
            with transaction.atomic():
                postings.item_indexed("case", case)
            lexical[size].append((time.perf_counter() - begun) * 1000)
            begun = time.perf_counter()
            packing.scope_packed(postings.VECTOR_SPACE, scope_ids[size])
            vector[size].append((time.perf_counter() - begun) * 1000)
            fetched[size].append(read(size))

    print(f"\none addition, median of {args.rounds} (ms)")
    print(f"{'cases in scope':>16} {'lexical':>10} {'vector':>10}")
    for size in stores:
        print(
            f"{size:>16,} {statistics.median(lexical[size]):>10.2f}"
            f" {statistics.median(vector[size]):>10.2f}"
        )
    for name, figures in (("lexical", lexical), ("vector", vector)):
        ratio = statistics.median(figures[args.large]) / statistics.median(figures[args.small])
        print(
            f"{name} addition ratio {args.large:,}/{args.small:,}: x{ratio:.2f}"
            f" (target <= {TARGET_RATIO})"
        )
    print("\na reader's refresh after one addition (last round)")
    for size in stores:
        lex_bytes, lex_rows, lists, vec_bytes, vec_rows = fetched[size][-1]
        print(
            f"reader after one addition at {size:,}: lexical {lex_bytes:,} bytes"
            f" ({lex_rows} delta rows), vector {vec_bytes:,} bytes ({vec_rows} delta rows);"
            f" the query's posting lists {lists:,} bytes"
        )
    print(
        "  (lexical: the scope's array and the delta's records; the posting lists travel with"
        " every search, addition or not)"
    )
    if connection.vendor == "sqlite":
        print("  (SQLite: the lexical array is read from the file at every search, not kept)")

    print("\nthe background merge of the delta gathered above (ms)")
    for size in stores:
        begun = time.perf_counter()
        with transaction.atomic():
            folded = postings.delta_merged(scope_ids[size])
        lexical_ms = (time.perf_counter() - begun) * 1000
        begun = time.perf_counter()
        merged = packing.vectors_merged(postings.VECTOR_SPACE, scope_ids[size])
        vector_ms = (time.perf_counter() - begun) * 1000
        print(
            f"merge at {size:,}: lexical {lexical_ms:.1f} ms ({folded} changes),"
            f" vector {vector_ms:.1f} ms ({merged} rows)"
        )

    # The same additions without a delta: the array and posting lists rewritten in the
    # writer's transaction, the matrix packed whole by the worker (what every addition cost
    # before the delta).
    rewrite = postings.Models(IndexScope, IndexEntry, IndexPosting)
    eager: dict[int, list[float]] = {size: [] for size in stores}
    whole: dict[int, list[float]] = {size: [] for size in stores}
    for _round in range(args.rounds):
        for size, store in stores.items():
            (case,) = cases.rows(store, 1)
            case.save()
            begun = time.perf_counter()
            with transaction.atomic():
                postings.item_indexed("case", case, rewrite)
                scopes_changed(postings.VECTOR_SPACE, [scope_ids[size]])
            eager[size].append((time.perf_counter() - begun) * 1000)
            begun = time.perf_counter()
            packing.scope_packed(postings.VECTOR_SPACE, scope_ids[size], whole=True)
            whole[size].append((time.perf_counter() - begun) * 1000)
    print(f"\nwithout the delta (rewriting the scope), median of {args.rounds} (ms)")
    for size in stores:
        print(
            f"rewrite at {size:,}: lexical {statistics.median(eager[size]):.2f} ms,"
            f" vector {statistics.median(whole[size]):.2f} ms"
        )
    for name, figures in (("lexical", eager), ("vector", whole)):
        ratio = statistics.median(figures[args.large]) / statistics.median(figures[args.small])
        print(f"{name} rewrite ratio {args.large:,}/{args.small:,}: x{ratio:.2f}")
    knowledge_row(args)
    return 0


class Documents:
    """Approved knowledge document versions written as rows, numbered across scopes."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)
        self.made = 0

    def make(self, store: str) -> tuple[Any, list[str]]:
        from knowledge.models import Document
        from textsearch.domain import tokenize

        n = self.made
        self.made += 1
        words = [WORDS[(n * 7 + k * 3) % len(WORDS)] for k in range(3)]
        title = " ".join(words) + f" #{n}"
        text = f"{title} {' '.join(words)}"
        tokens = " ".join(sorted(tokenize(f"{title}\n{text}")))
        document = Document(
            doc_key=f"bench-{n}",
            version=1,
            tenant=SCOPE["tenant"],
            brand=SCOPE["brand"],
            campaign=SCOPE["campaign"],
            kind="rule",
            rule_key=f"slot-{n % 50}" if n % 3 == 0 else "",
            title=title,
            text=text,
            source=f"bench://indexing/{n}",
            valid_from=self.now - timedelta(days=30),
            valid_to=None,
            published_at=self.now - timedelta(days=1),
            requirements={"channel": ["miniapp"]} if n % 2 else {},
            content_hash=format(n, "064x"),
            raw_tokens=tokens,
            expanded_tokens=tokens,
            approved=True,
            revoked=False,
            created_at=self.now,
        )
        return document, [store]

    def saved(self, store: str, count: int) -> list[tuple[Any, list[str]]]:
        from knowledge.models import Document, DocumentStore

        made = [self.make(store) for _ in range(count)]
        Document.objects.bulk_create([d for d, _ in made], batch_size=2000)
        DocumentStore.objects.bulk_create(
            [
                DocumentStore(
                    document_id=d.pk, tenant=d.tenant, brand=d.brand, campaign=d.campaign, store=s
                )
                for d, stores in made
                for s in stores
            ],
            batch_size=2000,
        )
        return made


def knowledge_row(args: argparse.Namespace) -> None:
    """Knowledge search's lexical index: one approved document version into a scope of each
    size (``knowledge.postings.document_indexed``, what an approval calls, in its own committed
    transaction), a search's refresh after it, the merge, and the rewrite it replaced."""
    from django.db import transaction

    from knowledge import postings as kp
    from knowledge import search
    from knowledge.models import Document, SearchScope

    documents = Documents()
    stores = {args.small: "docs-small", args.large: "docs-large"}
    Document.objects.filter(source__startswith="bench://indexing/").delete()
    with transaction.atomic():
        for size, store in stores.items():
            kp.bulk_indexed(documents.saved(store, size))
        kp.bulk_finished()
    scope_ids = {
        size: SearchScope.objects.get(store=store, tenant=SCOPE["tenant"]).pk
        for size, store in stores.items()
    }
    contexts = {
        size: search.KnowledgeContext(
            tenant=SCOPE["tenant"],
            brand=SCOPE["brand"],
            store=store,
            campaign=SCOPE["campaign"],
            occurred_at=documents.now,
            known_at=documents.now,
        )
        for size, store in stores.items()
    }

    def read(size: int) -> tuple[int, int]:
        search.ranked_top("优惠券 无法使用", contexts[size])
        return search.FETCHED.bytes, search.FETCHED.delta_rows

    def added(size: int, models: Any) -> float:
        ((document, _),) = documents.saved(stores[size], 1)
        begun = time.perf_counter()
        with transaction.atomic():
            kp.document_indexed(document, models)
        return (time.perf_counter() - begun) * 1000

    timed: dict[int, list[float]] = {size: [] for size in stores}
    fetched: dict[int, list[tuple[int, int]]] = {size: [] for size in stores}
    for _round in range(args.rounds):
        for size in stores:
            read(size)  # the reader holds the scope as it is before the addition
            timed[size].append(added(size, kp.LIVE))
            fetched[size].append(read(size))
    print(f"\nknowledge search, one approved version, median of {args.rounds} (ms)")
    for size in stores:
        bytes_read, rows = fetched[size][-1]
        print(
            f"knowledge addition at {size:,}: {statistics.median(timed[size]):.2f} ms;"
            f" reader after it {bytes_read:,} bytes ({rows} delta rows)"
        )
    ratio = statistics.median(timed[args.large]) / statistics.median(timed[args.small])
    print(
        f"knowledge lexical addition ratio {args.large:,}/{args.small:,}: x{ratio:.2f}"
        f" (target <= {TARGET_RATIO})"
    )
    for size in stores:
        begun = time.perf_counter()
        with transaction.atomic():
            folded = kp.delta_merged(scope_ids[size])
        print(
            f"knowledge merge at {size:,}: {(time.perf_counter() - begun) * 1000:.1f} ms"
            f" ({folded} changes)"
        )
    # The same additions without the delta: the scope's lists and array rewritten.
    rewrite = kp.IndexModels()
    eager: dict[int, list[float]] = {size: [] for size in stores}
    for _round in range(args.rounds):
        for size in stores:
            eager[size].append(added(size, rewrite))
    for size in stores:
        print(f"knowledge rewrite at {size:,}: {statistics.median(eager[size]):.2f} ms")
    ratio = statistics.median(eager[args.large]) / statistics.median(eager[args.small])
    print(f"knowledge rewrite ratio {args.large:,}/{args.small:,}: x{ratio:.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
