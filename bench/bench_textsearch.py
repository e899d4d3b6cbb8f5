#!/usr/bin/env python
"""Benchmark the text-search engine's ranking against the ranking it replaced, in one process.

The two searches' ranking code as it was before ``textsearch`` is kept frozen as the property
tests' oracle (``tests/textsearch/oracle.py``). This script ranks the same generated scopes with
both, interleaved, and prints the p50 of each and their ratio (CPU time of this process, so
steadier on a shared machine than the wall clock):

- knowledge search's ranking over a scope's packed entries (``knowledge.search._ranked``: gate,
  newest-version rule, intersections, both Jaccard branches, RRF, conflicts), at 100, 1k and
  10k entries in scope (the partial head from 2,048 candidates);
- retrieval's branch order (``textsearch.ranking.branch_order``) at the same sizes;
- the query's tokens: parsed once (``textsearch.domain.parse_query``) against the three
  tokenizations one retrieval made before.

Usage::

    python bench/bench_textsearch.py            # 200 samples per figure
    python bench/bench_textsearch.py --repeat 50
    python bench/bench_textsearch.py --tiny      # seconds: the test suite's run

It reports; it never fails on a missed target.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ["SEMANTIC_EMBEDDER"] = "off"


def _p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _interleaved(
    new: Callable[[], object], old: Callable[[], object], repeat: int
) -> tuple[float, float]:
    news: list[float] = []
    olds: list[float] = []
    for i in range(repeat):
        # Each goes first every other time (the first of a pair pays for the caches).
        pair = ((new, news), (old, olds)) if i % 2 else ((old, olds), (new, news))
        for call, into in pair:
            start = time.process_time()
            call()
            into.append(time.process_time() - start)
    return _p50(news), _p50(olds)


def _at_size(count: int, repeat: int) -> None:
    """Both figures of ``count`` entries in scope."""
    import numpy as np

    from knowledge import search as ks
    from tests.textsearch import oracle
    from tests.textsearch.test_oracle import _context, _scope
    from textsearch import ranking

    rng = np.random.default_rng(count)
    read, raw_size, expanded_size = _scope(rng, count, 40, gated_share=0.9)
    context = _context(rng)
    new, old = _interleaved(
        lambda: ks._ranked(read, raw_size, expanded_size, context, "q"),
        lambda: oracle._ranked(read, raw_size, expanded_size, context, "q"),
        repeat,
    )
    print(
        f"{f'knowledge ranking, {count:,} in scope':<44} {new:>10.3f} {old:>10.3f} {new / old:>6.2f}x"
    )
    hits = rng.integers(0, 4, count).astype(np.int64)
    sizes = rng.integers(1, 12, count).astype(np.int32)
    order = rng.permutation(count).astype(np.int32)
    among = rng.random(count) < 0.9
    new, old = _interleaved(
        lambda: ranking.branch_order(hits, 4, sizes, order, among),
        lambda: oracle.branch_order(hits, 4, sizes, order, among),
        repeat,
    )
    print(
        f"{f'retrieval branch order, {count:,} in scope':<44} {new:>10.3f} {old:>10.3f} {new / old:>6.2f}x"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="100 and 1,000 in scope, 3 samples: the test suite's check that the script still runs (its figures mean nothing)",
    )
    args = parser.parse_args()
    sizes = (100, 1_000) if args.tiny else (100, 1_000, 10_000)
    if args.tiny:
        args.repeat = 3

    import django
    from django.conf import settings

    django.setup()
    settings.SEMANTIC_EMBEDDER = "off"

    from tests.textsearch import oracle
    from textsearch.domain import parse_query

    print(f"{'figure':<44} {'engine ms':>10} {'before ms':>10} {'ratio':>7}")
    for count in sizes:
        _at_size(count, args.repeat)
    query = "the coupon was not applied to the member's order 优惠券没有用上 points"
    lexicon = {"coupon": "优惠券", "points": "积分", "voucher": "优惠券"}

    def three_times() -> None:
        for _ in range(3):
            oracle.tokenize(query)
        oracle.tokenize(oracle.expand(query, lexicon))

    new, old = _interleaved(lambda: parse_query(query, lexicon, "s"), three_times, args.repeat * 5)
    print(
        f"{'a query parsed once / tokenized 3 times':<44} {new:>10.3f} {old:>10.3f} {new / old:>6.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
