"""Benchmark of the learning loop's write and read paths.

* Bulk import of near-identical cases into one scope: seconds (wall and CPU) and near-duplicate
  rows at each size (default 250, 500, 1,000 and 2,000 cases, each size into a scope of its own),
  with the near-duplicate indexing included (the immediate task backend runs it inline, as a
  worker would right after), and the ratio of time to the previous size. Near-linear means
  seconds per case stays flat: each doubling of the size about doubles the time.
* The context block: p50/p95 of ``experience_context`` with ~100 approved cases in scope, in a
  database of 100k cases at ``--scale 1`` (built as ``bench_experience.py`` builds it).

Usage::

    python bench/bench_learning.py                       # temporary SQLite file
    python bench/bench_learning.py --sizes 100 200 --scale 0.05   # smoke run
    python bench/bench_learning.py --tiny                # seconds: the test suite's run
    DATABASE_URL=postgres://... python bench/bench_learning.py
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_experience import build, percentile, setup, timed  # noqa: E402
from bench.common import sqlite_prepared  # noqa: E402


def near_identical(n: int, store: str) -> list[dict[str, Any]]:
    scope = {"tenant": "teahouse", "brand": "leaf-and-cup", "store": store,
             "campaign": "campaign-b", "deployment": "release-1"}  # fmt: skip
    return [
        {
            "type": "case",
            "scope": scope,
            "incident": f"BULK-{store}-{i}",
            "title": f"二号店优惠券无法使用：门店范围漏配 {i}",
            "summary": "顾客在二号店小程序使用优惠券失败。",
            "observations": [{"source_id": f"thread:{i}#m1", "excerpt": "顾客：优惠券用不了。"}],
            "diagnosis": {
                "statement": "活动适用门店不含二号店。",
                "evidence": [
                    {"source_id": f"thread:{i}#m7", "excerpt": "运营：门店列表缺少二号店。"}
                ],
            },
            "valid_from": "2026-09-01T00:00:00+08:00",
            "valid_to": "2027-12-31T00:00:00+08:00",
        }
        for i in range(n)
    ]


def import_curve(sizes: list[int]) -> Iterator[tuple[int, float, float, int]]:
    from django.contrib.auth.models import User

    from curation.models import NearDuplicate
    from experience.review.imports import items_import
    from reviewconsole.roles import Role
    from reviewconsole.services import user_set_role

    actor = User.objects.filter(username="bench-operator").first() or user_set_role(
        username="bench-operator", role=Role.OPERATOR
    )
    for n in sizes:
        store = f"bulk-{n}"
        items = near_identical(n, store)
        before = NearDuplicate.objects.count()
        began, cpu = time.perf_counter(), time.process_time()
        items_import(items=items, actor=actor)
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
        yield n, seconds, cpu, NearDuplicate.objects.count() - before


def context_p50(data: dict[str, Any], repeat: int) -> tuple[float, float]:
    from experience.retrieval.block import experience_context
    from reviewconsole.services import system_agent

    agent = system_agent()
    scope = {"tenant": "teahouse", "brand": "leaf-and-cup", "store": "store-0001",
             "campaign": "campaign-b", "deployment": "release-1"}  # fmt: skip
    counter = iter(range(10**9))

    def call() -> None:
        experience_context(
            "优惠券无法使用 门店范围", scope, data["now"], f"bench-ctx-{next(counter)}", 800,
            actor=agent,
        )  # fmt: skip

    call()
    samples = timed(call, repeat)
    return percentile(samples, 0.5), percentile(samples, 0.95)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1_000, 2_000])
    parser.add_argument("--scale", type=float, default=1.0, help="1.0 = 100k cases")
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="sizes 10 20, the fewest rows, 3 samples: the test suite's check that the script still runs (its figures mean nothing)",
    )
    args = parser.parse_args()
    if args.tiny:
        args.sizes, args.scale, args.repeat = [10, 20], 0.0, 3
    database_url = os.environ.get("DATABASE_URL")
    # Tasks run where they are enqueued, so the import's time includes the indexing a worker does.
    os.environ["CONSOLE_TASKS_BACKEND"] = "django_tasks.backends.immediate.ImmediateBackend"
    if args.tiny:
        # Seconds, not the local model's minute: the imports' inline tasks embed nothing.
        os.environ["CONSOLE_EMBEDDER"] = "off"
    with tempfile.TemporaryDirectory(prefix="bench-learning-") as directory:
        if not database_url:
            database_url = f"sqlite:///{sqlite_prepared(Path(directory) / 'bench.sqlite3')}"
        vendor = setup(database_url)
        print(f"{vendor}: bulk import of near-identical cases into one scope")
        print(
            f"{'cases':>6} {'seconds':>9} {'ms/case':>8} {'cpu s':>8} {'x size':>7} "
            f"{'x time':>7} {'x cpu':>7} {'near-duplicate rows':>20}"
        )
        previous: tuple[int, float, float] | None = None
        for n, seconds, cpu, links in import_curve(args.sizes):
            # Per growth step: how much larger the import, how much longer it took (near-linear:
            # the ratios about equal, ~2.0 for each doubling). CPU time is steadier than wall
            # time on a shared machine.
            grew = (
                f"{n / previous[0]:7.2f} {seconds / previous[1]:7.2f} {cpu / previous[2]:7.2f}"
                if previous
                else " " * 23
            )
            print(
                f"{n:6,} {seconds:9.2f} {seconds / n * 1000:8.2f} {cpu:8.2f} {grew} {links:20,}",
                flush=True,
            )
            previous = (n, seconds, cpu)
        # The context block's database is bulk-inserted, then indexed at once; with tasks run
        # inline that indexing would embed every case with the local model (hours at --scale 1),
        # which is not what this figure is about: the vector branch is off while it is built.
        from django.conf import settings

        embedder, settings.SEMANTIC_EMBEDDER = settings.SEMANTIC_EMBEDDER, "off"
        try:
            data = build(args.scale, random.Random(7))
        finally:
            settings.SEMANTIC_EMBEDDER = embedder
        p50, p95 = context_p50(data, args.repeat)
        print(
            f"context block, {data['cases']:,} cases (~100 in scope): "
            f"p50 {p50:.2f} ms, p95 {p95:.2f} ms"
        )
        from django.db import connections

        connections.close_all()


if __name__ == "__main__":
    main()
