#!/usr/bin/env python
"""A hundred thousand in one scope: search and retrieval by doublings of one scope's size.

Builds one corpus holding a knowledge scope of each size in ``--sizes`` (default 8k, 16k, 32k,
64k and 128k documents that pass the gate, each at its own store, built as
``bench_knowledge.py`` builds its measured scopes) and, unless ``--skip-cases``, one experience
scope of each size in ``--case-sizes`` (approved cases in one exact scope, bulk inserted as
``bench_experience.py`` inserts them, then the retrieval index rebuilt). Then it prints:

* **indexing throughput**: documents per second through the loader and through the search
  index's own writes (``knowledge.postings.bulk_indexed`` and ``bulk_finished``), cases per
  second through the retrieval index's rebuild (``experience.index.postings.rebuild``);
* per size, the p50 and p95 of ``search_knowledge`` (and of ``retrieve_experience``) in wall
  time and in this process's CPU time (``time.process_time``), every size measured in one loop,
  query by query in rotating order, so the ratios are of one run on one machine's load; the
  same queries at every size;
* the **growth per doubling** of the p50 (each size's over the one before it), wall and CPU;
* where a search's CPU goes at each size: the index read (``knowledge.search._read``) and the
  ranking over it (``_ranked``), timed apart;
* the **peak RSS** (VmHWM) of a separate process that only searches one scope, per size: what a
  web process holds for that scope.

``--tenants 100 --total 1000000``: the same measured scopes inside a corpus of a million
documents over a hundred tenants (the other tenants' documents as ``bench_knowledge.py`` fills
them). That load takes long: run it on purpose.

Usage::

    python bench/bench_scale.py                                   # 8k … 128k; SQLite
    python bench/bench_scale.py --database postgres
    python bench/bench_scale.py --skip-cases --tenants 100 --total 1000000
    python bench/bench_scale.py --tiny                            # seconds: the suite's run

It reports; it never fails on a missed target (exit status 0 once the run completes).
"""

from __future__ import annotations

import argparse
import functools
import gc
import itertools
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import bench_knowledge as bk  # noqa: E402

TARGET_P50_MS = 30.0  # search p50 at 100k in one scope (the largest size measured)
TARGET_GROWTH = 1.5  # per doubling of the scope
CASE_WORDS = ["优惠券", "无法使用", "门店范围", "活动配置", "缓存", "商品列表", "金额门槛",
              "小程序", "核销失败", "新品", "渠道", "刷新"]  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="8000,16000,32000,64000,128000")
    parser.add_argument("--case-sizes", default="8000,16000,32000,64000,128000")
    parser.add_argument("--skip-cases", action="store_true", help="knowledge search only")
    parser.add_argument("--skip-knowledge", action="store_true", help="retrieval only")
    parser.add_argument(
        "--reuse",
        default="",
        metavar="URL",
        help="measure a database an earlier run kept (--keep) with the same --sizes, without"
        " loading: another version of the code on the same data",
    )
    parser.add_argument(
        "--total", type=int, default=0, help="documents in the whole corpus, at least"
    )
    parser.add_argument(
        "--tenants",
        type=int,
        default=0,
        help="tenants the other documents spread over (default: bench_knowledge.py's 40 + 1)",
    )
    parser.add_argument("--queries", type=int, default=40, help="queries per size and round")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database", choices=["sqlite", "postgres"], default=None)
    parser.add_argument("--postgres-url", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the bench database")
    parser.add_argument("--database-name", default="", help="PostgreSQL: the bench database's name")
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--seed", type=int, default=20260910)
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="sizes 20,40, 3 queries, 1 round, no RSS child: the test suite's check that the"
        " script runs (its figures mean nothing)",
    )
    args = parser.parse_args(argv)
    if args.tiny:
        args.sizes = args.case_sizes = "20,40"
        args.queries, args.warmup, args.rounds = 3, 1, 1
        # bench_knowledge.py's tiny run measures the same child process.
        args.skip_rss = True
    args.size_list = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s})
    args.case_list = sorted({int(s.replace("_", "")) for s in args.case_sizes.split(",") if s})
    if len(args.size_list) > len(bk.MEASURED_STORES):
        parser.error(f"at most {len(bk.MEASURED_STORES)} sizes")
    # What bench_knowledge.prepare_database and its RSS child read.
    env_url = os.environ.get("DATABASE_URL", "").strip()
    env_is_pg = env_url.startswith(("postgres://", "postgresql://", "pgsql://"))
    if args.database is None:
        args.database = "postgres" if env_is_pg else "sqlite"
    if args.postgres_url is None:
        args.postgres_url = env_url if env_is_pg else "postgres://postgres@127.0.0.1:5432/postgres"
    return args


# --- loading, timed -----------------------------------------------------------------------------


class TimedCorpus(bk.Corpus):
    """``bench_knowledge.Corpus`` with the time spent in the search index's writes kept apart."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.index_seconds = 0.0

    def _insert(self, batch: Any) -> None:
        from knowledge import postings

        real = postings.bulk_indexed

        def timed(*args: Any, **kwargs: Any) -> int:
            began = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                self.index_seconds += time.perf_counter() - began

        postings.bulk_indexed = timed
        try:
            super()._insert(batch)
        finally:
            postings.bulk_indexed = real

    def finished(self, vendor: str) -> None:
        began = time.perf_counter()
        self.finish_loading(vendor)
        self.index_seconds += time.perf_counter() - began


def case_store(size: int) -> str:
    return f"scale-{size}"


def insert_cases(sizes: list[int], rng: random.Random) -> int:
    """``size`` approved cases in one exact scope per size, bulk inserted (no index written)."""
    from django.contrib.auth import get_user_model

    from bench.bench_experience import insert_many
    from experience.cases.models import Case
    from experience.core import domain
    from reviewconsole import itemids

    user, _ = get_user_model().objects.get_or_create(username="bench-scale")
    now = datetime.now(UTC)
    valid_from, valid_to = now - timedelta(days=30), now + timedelta(days=365)
    columns = [
        "id", "tenant", "brand", "store", "campaign", "deployment", "title", "valid_from",
        "valid_to", "content_hash", "content", "submitted_by_id", "submitted_via", "submitted_at",
        "status", "approved_by_id", "approved_at", "approved_reason", "rejected_reason",
        "revoked_reason", "superseded_by", "incident", "summary", "observations", "diagnosis",
        "counterevidence", "outcome", "supersedes", "search_text",
    ]  # fmt: skip
    count = 0
    for size in sizes:
        scope = case_scope(case_store(size))
        rows = []
        for i in range(size):
            title = "".join(rng.sample(CASE_WORDS, 3)) + f" #{i}"
            content = {"type": "case", "scope": scope, "incident": f"S{size}-{i}", "title": title}
            case_id = domain.content_id(domain.CASE_PREFIX, content)
            rows.append((
                case_id, *scope.values(), title, valid_from, valid_to, itemids.digest_of(case_id),
                content, user.pk, "import", now, "approved", user.pk, now - timedelta(days=1),
                "bench", "", "", "", f"S{size}-{i}", "", [], {}, [], {}, "", title,
            ))  # fmt: skip
        insert_many(Case._meta.db_table, columns, rows)
        count += size
    return count


def case_scope(store: str) -> dict[str, str]:
    return {"tenant": bk.TENANT, "brand": bk.BRAND, "store": store,
            "campaign": "campaign-b", "deployment": "release-1"}  # fmt: skip


def case_queries(seed: int, count: int) -> list[str]:
    rng = random.Random(seed + 2)
    return ["".join(rng.sample(CASE_WORDS, rng.randint(2, 4))) for _ in range(count)]


# --- measuring ----------------------------------------------------------------------------------


def p(samples: list[int], q: float) -> float:
    return bk.percentile(samples, q)


def interleaved(
    arms: list[tuple[int, list[Callable[[], Any]]]], warmup: int, rounds: int
) -> dict[int, dict[str, float]]:
    """Per size: the medians over rounds of the wall and CPU p50 and p95 (ms). Every size runs
    query by query in one loop, the sizes' order rotating, so each ratio is of one run."""
    for _size, calls in arms:
        for call in calls[:warmup]:
            call()
    wall_clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    figures: dict[int, dict[str, list[float]]] = {size: {} for size, _ in arms}
    for _ in range(rounds):
        gc.collect()
        wall: dict[int, list[int]] = {size: [] for size, _ in arms}
        cpu: dict[int, list[int]] = {size: [] for size, _ in arms}
        for i in range(max(len(calls) for _, calls in arms)):
            turn = i % len(arms)
            for size, calls in arms[turn:] + arms[:turn]:
                call = calls[i % len(calls)]
                c0, w0 = cpu_clock(), wall_clock()
                call()
                wall[size].append(wall_clock() - w0)
                cpu[size].append(cpu_clock() - c0)
        for size, _ in arms:
            for name, samples in (("wall", wall[size]), ("cpu", cpu[size])):
                for q in (50, 95):
                    figures[size].setdefault(f"{name} {q}", []).append(p(samples, q))
    return {
        size: {name: statistics.median(values) for name, values in by_name.items()}
        for size, by_name in figures.items()
    }


def breakdown(store: str, queries: int, seed: int) -> tuple[float, float]:
    """CPU p50 (ms) of the index read and of the ranking over it, for one scope's workload."""
    from knowledge import lexicon as index_lexicon
    from knowledge import search as ks
    from textsearch.domain import parse_query

    stamp, lexicon = index_lexicon.indexed_for(index_lexicon.last_indexed_stamp())
    reads, ranks = [], []
    for query, context in bk.make_workload(seed, queries, store):
        parsed = parse_query(query, lexicon, stamp)
        c0 = time.process_time_ns()
        read = ks._read(parsed, context)
        c1 = time.process_time_ns()
        ks._ranked(read, len(parsed.raw), len(parsed.expanded), context, parsed.text)
        reads.append(c1 - c0)
        ranks.append(time.process_time_ns() - c1)
    return p(reads, 50), p(ranks, 50)


def growth_line(label: str, sizes: list[int], values: dict[int, float]) -> str:
    steps = [values[b] / values[a] for a, b in itertools.pairwise(sizes)]
    worst = max(steps, default=0.0)
    shown = " ".join(f"×{s:.2f}" for s in steps)
    return (
        f"  growth per doubling, {label}: {shown} (worst ×{worst:.2f};"
        f" target ≤ {TARGET_GROWTH:g}×) {bk.verdict(worst <= TARGET_GROWTH)}"
    )


def table(title: str, results: dict[int, dict[str, float]], rss: dict[int, float]) -> None:
    print(f"\n{title}")
    header = (
        f"{'in scope':>9} │ {'p50 wall':>8} {'p95 wall':>8} │ {'p50 CPU':>8} {'p95 CPU':>8} │"
        f" {'× wall':>6} {'× CPU':>6} │ {'RSS MB':>6}"
    )
    print(header)
    print("─" * len(header))
    previous: dict[str, float] | None = None
    for size, row in results.items():
        if previous is None:
            grown = f"{'':>6} {'':>6}"
        else:
            grown = (
                f"{row['wall 50'] / previous['wall 50']:>5.2f}×"
                f" {row['cpu 50'] / previous['cpu 50']:>5.2f}×"
            )
        print(
            f"{size:>9,} │ {row['wall 50']:>8.2f} {row['wall 95']:>8.2f} │"
            f" {row['cpu 50']:>8.2f} {row['cpu 95']:>8.2f} │ {grown} │"
            + (f" {rss[size]:>6.0f}" if size in rss else f" {'n/a':>6}")
        )
        previous = row


def load_knowledge(args: argparse.Namespace, vendor: str) -> list[Any]:
    """The measured scopes, then the rest of the corpus; the indexing throughput."""
    began, cpu = time.perf_counter(), time.process_time()
    corpus = TimedCorpus(args.seed)
    for store, size in zip(bk.MEASURED_STORES, args.size_list, strict=False):
        corpus.build_scope(store, size)
    corpus.grow_to(args.total, print)
    corpus.finished(vendor)
    loaded, cpu = time.perf_counter() - began, time.process_time() - cpu
    print(
        f"indexing: {corpus.documents:,} documents ({corpus.postings:,} postings) loaded in"
        f" {loaded:.1f} s ({cpu:.1f} s CPU): {corpus.documents / loaded:,.0f} documents/s"
        f" ({corpus.documents / max(cpu, 1e-9):,.0f} per CPU second) through the loader;"
        f" the search index's writes {corpus.index_seconds:.1f} s:"
        f" {corpus.documents / max(corpus.index_seconds, 1e-9):,.0f} documents/s"
    )
    return corpus.scopes


def load_cases(args: argparse.Namespace, vendor: str) -> None:
    from django.db import connection

    from experience.index import postings as experience_postings
    from reviewconsole.models import Tenant

    Tenant.objects.get_or_create(name=bk.TENANT, defaults={"created_at": datetime.now(UTC)})
    began = time.perf_counter()
    cases = insert_cases(args.case_list, random.Random(args.seed))
    inserted = time.perf_counter() - began
    began, cpu = time.perf_counter(), time.process_time()
    entries = experience_postings.rebuild()
    rebuilt, cpu = time.perf_counter() - began, time.process_time() - cpu
    if vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    print(
        f"indexing: {cases:,} cases inserted in {inserted:.1f} s; the retrieval index rebuilt"
        f" ({entries:,} entries) in {rebuilt:.1f} s ({cpu:.1f} s CPU): {cases / rebuilt:,.0f}"
        f" cases/s ({cases / max(cpu, 1e-9):,.0f} per CPU second)"
    )


def measure_knowledge(args: argparse.Namespace, scopes: list[Any]) -> None:
    from django.db import connection

    from knowledge.search import search_knowledge

    actor = bk.searcher()
    arms: list[tuple[int, list[Callable[[], Any]]]] = []
    for scope in scopes:
        calls: list[Callable[[], Any]] = [
            functools.partial(search_knowledge, query, context, actor=actor)
            for query, context in bk.make_workload(
                args.seed, args.queries + args.warmup, scope.store
            )
        ]
        arms.append((scope.size, calls))
    from knowledge.search import gated_rows

    for scope in scopes:
        # The corpus is as the benchmark says: the gate admits each scope's size exactly.
        context = bk.make_workload(args.seed, 1, scope.store)[0][1]
        gated = len(list(gated_rows(context).values_list("document_id")))
        if gated != scope.size:
            print(f"  WARNING: the gate admitted {gated} documents, expected {scope.size}")
    results = interleaved(arms, args.warmup, args.rounds)
    rss: dict[int, float] = {}
    if not args.skip_rss:
        child = argparse.Namespace(queries=args.queries)
        connection.close()
        rss = {scope.size: bk.searching_rss(scope.store, child) for scope in scopes}
    table(
        f"knowledge search, one scope ({args.queries} queries × {args.rounds} rounds per"
        " size, medians over rounds; ms; RSS: peak of a process that only searches that"
        " scope)",
        results,
        rss,
    )
    sizes = list(results)
    print(growth_line("wall", sizes, {s: r["wall 50"] for s, r in results.items()}))
    print(growth_line("CPU", sizes, {s: r["cpu 50"] for s, r in results.items()}))
    largest = sizes[-1]
    print(
        f"  search p50 at {largest:,} in scope ≤ {TARGET_P50_MS:g} ms:"
        f" {results[largest]['wall 50']:.2f} ms wall, {results[largest]['cpu 50']:.2f} ms CPU"
        f"  {bk.verdict(results[largest]['wall 50'] <= TARGET_P50_MS)}"
    )
    print("  where a search's CPU goes (p50 ms): index read / ranking")
    for scope in scopes:
        read, ranked = breakdown(scope.store, args.queries, args.seed)
        print(f"    {scope.size:>9,}: {read:.2f} / {ranked:.2f}")


def measure_cases(args: argparse.Namespace) -> None:
    from experience.retrieval.service import retrieve_experience
    from reviewconsole.services import system_agent

    agent = system_agent()
    now = datetime.now(UTC)
    counter = iter(range(10**9))
    queries = case_queries(args.seed, args.queries + args.warmup)

    def retrieval(query: str, scope: dict[str, str]) -> Callable[[], Any]:
        return lambda: retrieve_experience(query, scope, now, f"scale-{next(counter)}", actor=agent)

    arms: list[tuple[int, list[Callable[[], Any]]]] = [
        (size, [retrieval(query, case_scope(case_store(size))) for query in queries])
        for size in args.case_list
    ]
    results = interleaved(arms, args.warmup, args.rounds)
    table("retrieve_experience, one scope (ms)", results, {})
    sizes = list(results)
    print(growth_line("wall", sizes, {s: r["wall 50"] for s, r in results.items()}))
    print(growth_line("CPU", sizes, {s: r["cpu 50"] for s, r in results.items()}))
    biggest = sizes[-1]
    print(
        f"  retrieval p50 at {biggest:,} in scope ≤ {TARGET_P50_MS:g} ms:"
        f" {results[biggest]['wall 50']:.2f} ms wall, {results[biggest]['cpu 50']:.2f} ms CPU"
        f"  {bk.verdict(results[biggest]['wall 50'] <= TARGET_P50_MS)}"
    )


# --- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")
    if args.tenants:
        bk.OTHER_TENANTS[:] = [f"tenant-{i:02d}" for i in range(args.tenants - 1)]
    started = time.perf_counter()
    knowledge_args = argparse.Namespace(
        database=args.database, postgres_url=args.postgres_url, keep=args.keep
    )
    if args.reuse:
        os.environ["DATABASE_URL"] = args.reuse
        database = bk.BenchDatabase(args.database, args.reuse, lambda: None)
    else:
        database = bk.prepare_database(
            knowledge_args, args.database_name or f"bench_scale_{os.getpid()}"
        )
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0, interactive=False)
        connection.ensure_connection()
        vendor = "postgres" if connection.vendor == "postgresql" else "sqlite"
        print(
            f"scale benchmark · {connection.vendor} · documents in one scope:"
            f" {', '.join(f'{s:,}' for s in args.size_list)}"
            + (
                ""
                if args.skip_cases
                else f" · cases: {', '.join(f'{s:,}' for s in args.case_list)}"
            )
            + (
                f" · total ≥ {args.total:,} over {len(bk.OTHER_TENANTS) + 1} tenants"
                if args.total
                else ""
            )
        )
        bk.busy_warning()
        with connection.cursor() as cursor:
            if args.reuse:
                pass  # nothing is loaded: the project's settings as they are
            elif vendor == "sqlite":
                cursor.execute("PRAGMA journal_mode=OFF")
                cursor.execute("PRAGMA synchronous=OFF")
                cursor.execute("PRAGMA cache_size=-262144")
            else:
                cursor.execute("SET synchronous_commit = off")

        scopes = [
            bk.MeasuredScope(store, size, [])
            for store, size in zip(bk.MEASURED_STORES, args.size_list, strict=False)
        ]
        if not args.reuse:
            if not args.skip_knowledge:
                scopes = load_knowledge(args, vendor)
            if not args.skip_cases:
                load_cases(args, vendor)
        connection.close()
        if not args.skip_knowledge:
            measure_knowledge(args, scopes)
        if not args.skip_cases:
            measure_cases(args)
        if vendor == "postgres":
            print("  (CPU: this process only; the database's own CPU is not in it)")
        print(f"\ntotal run time {time.perf_counter() - started:.0f} s")
    finally:
        database.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
