#!/usr/bin/env python
"""Benchmark the investigation runner's overhead per tool call against calling the tool directly.

Loads the shipped knowledge fixtures into a temporary SQLite file (never the project's database)
and measures, interleaved in the same run:

- **direct**: ``search_knowledge`` through the registry's handler, as a skill step calls it;
- **runner**: ``run_ticket`` with a provider that makes ``--calls`` search calls and then
  answers; the per-call time is the whole run (argument parsing, schema check, step records,
  transcripts, the final citation check) divided by the number of calls;
- **service**: the same through ``investigation_run`` (tools bound to the ticket, document reads
  recorded, the run and its audit event stored), per call, for reference.

It prints p50 of each and the ratios runner/direct and service/direct. Target: runner/direct
≤ 1.2. It reports; it never fails on a missed target.

Usage::

    python bench/bench_investigations.py               # 10 calls per run, 60 runs
    python bench/bench_investigations.py --quick       # 5 calls per run, 15 runs
    python bench/bench_investigations.py --tiny        # seconds: the test suite's run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import sqlite_prepared  # noqa: E402

TARGET_RATIO = 1.2
QUERY = "两杯水果茶，优惠券用不了"
SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-001",
    "campaign": "campaign-a",
    "deployment": "release-1",
}
FACTS = {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200}


def setup(path: str) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{path}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10, help="tool calls per run")
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="2 calls per run, 3 runs: the test suite's check that the script still runs (its figures mean nothing)",
    )
    args = parser.parse_args()
    if args.quick:
        args.calls, args.runs = 5, 15
    if args.tiny:
        args.calls, args.runs = 2, 3

    with tempfile.TemporaryDirectory() as directory:
        setup(str(sqlite_prepared(Path(directory) / "bench.sqlite3")))
        report(args.calls, args.runs)


def report(calls: int, runs: int) -> None:
    from datetime import datetime

    from experience.cases.schema import TicketContext
    from experience.cases.tools import SEARCH_KNOWLEDGE, CallContext, default_registry
    from investigations.declarations import SEARCH_DECLARATION
    from investigations.domain import Budget, Ticket, ToolCall, Transcript, Turn, run_ticket
    from investigations.services import investigation_run
    from knowledge.services import documents_import
    from reviewconsole.roles import Role
    from reviewconsole.services import system_agent, user_set_role

    operator = user_set_role(username="bench-operator", role=Role.OPERATOR)
    documents = json.loads((ROOT / "fixtures" / "knowledge.json").read_text(encoding="utf-8"))
    documents_import(items=documents, actor=operator)
    agent = system_agent()

    occurred = datetime.fromisoformat("2026-09-18T14:00:00+08:00")
    known = datetime.fromisoformat("2026-09-18T14:10:00+08:00")
    search = default_registry()[SEARCH_KNOWLEDGE].handler
    context = CallContext(
        scope=SCOPE, occurred_at=occurred, known_at=known, facts=FACTS, actor=agent
    )
    ticket = Ticket(QUERY, SCOPE, TicketContext(occurred, known, FACTS))
    answer = json.dumps(
        {
            "conclusion": "The rules do not cover this purchase.",
            "conclusion_code": "rules_exclude_purchase",
            "followups": [],
            "citations": [],
        }
    )

    class Repeat:
        """``calls`` searches, then an answer: the model's own time is left out."""

        name = "bench"

        def next_turn(self, transcript: Transcript) -> Turn:
            made = sum(len(r.exchanges) for r in transcript.rounds)
            if made >= calls:
                return Turn(answer=answer)
            arguments = json.dumps({"query": QUERY}, ensure_ascii=False)
            return Turn(calls=(ToolCall(f"c{made}", SEARCH_KNOWLEDGE, arguments),))

    def direct() -> None:
        for _ in range(calls):
            search({"query": QUERY}, context)

    def runner() -> None:
        run_ticket(
            ticket,
            Repeat(),
            tools=[SEARCH_DECLARATION],
            handlers={SEARCH_KNOWLEDGE: lambda arguments: search(arguments, context)},
            budget=Budget(max_calls=calls),
        )

    counter = iter(range(10**9))

    def service() -> None:
        investigation_run(
            actor=agent,
            text=QUERY,
            scope=SCOPE,
            occurred_at=occurred,
            known_at=known,
            facts=FACTS,
            run_id=f"bench-{next(counter)}",
            max_calls=calls,
            provider_instance=Repeat(),
        )

    measured: dict[str, list[float]] = {"direct": [], "runner": [], "service": []}
    plans: dict[str, Callable[[], None]] = {"direct": direct, "runner": runner, "service": service}
    for plan in plans.values():  # warm-up
        plan()
    for index in range(runs):
        # Alternate the order so neither side always runs on a warmer cache.
        order = list(plans.items()) if index % 2 == 0 else list(reversed(plans.items()))
        for name, plan in order:
            began = time.perf_counter()
            plan()
            measured[name].append((time.perf_counter() - began) / calls)

    p50 = {name: statistics.median(samples) * 1000 for name, samples in measured.items()}
    print(f"investigation runner overhead: {calls} search_knowledge calls per run, {runs} runs")
    print(f"{'path':10} {'p50 ms/call':>12} {'ratio to direct':>16}")
    for name in ("direct", "runner", "service"):
        print(f"{name:10} {p50[name]:12.3f} {p50[name] / p50['direct']:16.2f}")
    ratio = p50["runner"] / p50["direct"]
    verdict = "PASS" if ratio <= TARGET_RATIO else "MISS"
    print(f"runner/direct {ratio:.2f} (target <= {TARGET_RATIO}): {verdict}")
    print("service adds the References, the stored run and its audit event per investigation.")


if __name__ == "__main__":
    main()
