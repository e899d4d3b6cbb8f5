"""Benchmark of the experience memory: revocation impact and retrieval at scale.

Builds (at --scale 1) 100k approved cases in 1,000 exact scopes (~100 per scope), 10k skills
citing two cases each, 10k lessons citing cases of their scope, and 1M references, with bulk inserts. Then prints:

* p50/p95 of the revocation impact for a typical item (~50 references) and for a hot one
  (10k references), next to the bare indexed reference lookup of the same items measured in the
  same run, as ratios;
* p50 of ``retrieve_experience`` with ~100 cases in scope, with 10k lessons (~10 per scope, some
  in open conflicts) against the same call without recalling lessons, interleaved, as a ratio;
* at ~100 and at 10k cases in one scope (another 10k cases in one store, 110k in all), in one
  interleaved loop: p50/p95 of ``retrieve_experience`` with a query that matches most items and
  with a rare token, of the context block (``experience_context``), of retrieval ranking every
  gated item's text (the index switched off), on PostgreSQL of retrieval with every posting list
  sent every time (the lists kept per process switched off), and of the bare gated query of the
  scope through the ORM and as SQL (``cursor.execute``, the same rows); then the ratios between
  them;
* each compiled statement (``reviewconsole.statements``) next to building the same queryset
  through the ORM on every call, and the recording of 11 reads as one INSERT
  (``references_record``) next to ``bulk_create``, with the same values, interleaved, and the
  gain.

Usage::

    python bench/bench_experience.py              # temporary SQLite file
    python bench/bench_experience.py --scale 0.01 # smoke run
    python bench/bench_experience.py --tiny       # seconds: the test suite's run (no figures)
    python bench/bench_experience.py --only-retrieval   # the scope-size arms only
    python bench/bench_experience.py --only-retrieval --cpu-time  # CPU time: a shared machine
    python bench/bench_experience.py --scale 0.05 --only-statements  # statements vs the ORM
    DATABASE_URL=postgres://... python bench/bench_experience.py

With DATABASE_URL the benchmark writes to that database: point it at a scratch database.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIG_STORE = "store-big"
QUERY = "优惠券无法使用 门店范围"
sys.path.insert(0, str(ROOT))

from bench.common import sqlite_prepared  # noqa: E402
from bench.seams import Seam, all_applied  # noqa: E402

# The fewest samples an arm takes whatever --repeat says (--tiny: one, for the test suite).
FLOOR = [20]


def setup(database_url: str | None) -> str:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")  # DEBUG would record every query, as no server does
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from django.db import connection

    return connection.vendor


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


# What a sample is timed with: the wall clock, or (--cpu-time) this process's CPU time.
CLOCK: list[Callable[[], float]] = [time.perf_counter]


def timed(call: Callable[[], Any], repeat: int) -> list[float]:
    clock = CLOCK[0]
    samples = []
    for _ in range(repeat):
        began = clock()
        call()
        samples.append((clock() - began) * 1000)
    return samples


def adapt(value: Any) -> Any:
    """What the ORM would send for this value: raw executemany skips field conversion."""
    from django.db import connection

    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    if isinstance(value, (dict, list)):
        return connection.ops.adapt_json_value(value, None)
    return value


def insert_many(
    table: str, columns: list[str], rows: list[tuple[Any, ...]], batch: int = 20_000
) -> None:
    from django.db import connection, transaction

    rows = [tuple(adapt(v) for v in row) for row in rows]

    quoted = ", ".join(connection.ops.quote_name(c) for c in columns)
    placeholders = ", ".join(["%s"] * len(columns))
    sql = f"INSERT INTO {connection.ops.quote_name(table)} ({quoted}) VALUES ({placeholders})"
    with transaction.atomic(), connection.cursor() as cursor:
        for start in range(0, len(rows), batch):
            cursor.executemany(sql, rows[start : start + batch])


def build(scale: float, rng: random.Random) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from reviewconsole.models import Tenant

    # The rows below are inserted straight into the tables, so the tenant they name is
    # registered here as an import would register it (requests refuse an unknown tenant).
    Tenant.objects.get_or_create(name="teahouse", defaults={"created_at": datetime.now(UTC)})

    from experience.cases.models import Case, Skill, SkillCase
    from experience.core import domain
    from experience.lessons.models import Lesson, LessonCase, LessonConflict
    from experience.runs.models import Reference
    from reviewconsole import itemids

    User = get_user_model()
    submitter, _ = User.objects.get_or_create(username="bench-submitter")
    approver, _ = User.objects.get_or_create(username="bench-approver")

    n_cases = max(200, int(100_000 * scale))
    n_skills = max(20, int(10_000 * scale))
    n_refs = max(20_000, int(1_000_000 * scale))
    per_scope = 100
    n_scopes = max(1, n_cases // per_scope)
    hot_refs = min(10_000, n_refs // 4)
    typical_refs = 50

    now = datetime.now(UTC)
    valid_from, valid_to = now - timedelta(days=30), now + timedelta(days=365)
    approved_at = now - timedelta(days=1)
    words = ["优惠券", "无法使用", "门店范围", "活动配置", "缓存", "商品列表", "金额门槛", "小程序",
             "核销失败", "新品", "渠道", "刷新"]  # fmt: skip

    started = time.perf_counter()
    case_rows, case_ids, scopes = [], [], []
    for i in range(n_cases):
        store = f"store-{i % n_scopes:04d}"
        scope = {"tenant": "teahouse", "brand": "leaf-and-cup", "store": store,
                 "campaign": "campaign-b", "deployment": "release-1"}  # fmt: skip
        title = "".join(rng.sample(words, 3)) + f" #{i}"
        content = {"type": "case", "scope": scope, "incident": f"INC-{i}", "title": title}
        case_id = domain.content_id(domain.CASE_PREFIX, content)
        case_ids.append(case_id)
        scopes.append(store)
        case_rows.append((
            case_id, *scope.values(), title, valid_from, valid_to, itemids.digest_of(case_id), content,
            submitter.pk, "import", now, "approved", approver.pk, approved_at, "bench", "", "", "",
            f"INC-{i}", "", [], {}, [], {}, "", title,
        ))  # fmt: skip
    case_columns = [
        "id", "tenant", "brand", "store", "campaign", "deployment", "title", "valid_from",
        "valid_to", "content_hash", "content", "submitted_by_id", "submitted_via", "submitted_at",
        "status", "approved_by_id", "approved_at", "approved_reason", "rejected_reason",
        "revoked_reason", "superseded_by", "incident", "summary", "observations", "diagnosis",
        "counterevidence", "outcome", "supersedes", "search_text",
    ]  # fmt: skip
    # One large scope beside the small ones: 10k cases in one store (at --scale 1).
    n_big = max(1_000, int(10_000 * scale))
    for i in range(n_big):
        scope = {"tenant": "teahouse", "brand": "leaf-and-cup", "store": BIG_STORE,
                 "campaign": "campaign-b", "deployment": "release-1"}  # fmt: skip
        title = "".join(rng.sample(words, 3)) + f" big #{i}"
        content = {"type": "case", "scope": scope, "incident": f"INC-B{i}", "title": title}
        case_id = domain.content_id(domain.CASE_PREFIX, content)
        case_rows.append((
            case_id, *scope.values(), title, valid_from, valid_to, itemids.digest_of(case_id), content,
            submitter.pk, "import", now, "approved", approver.pk, approved_at, "bench", "", "", "",
            f"INC-B{i}", "", [], {}, [], {}, "", title,
        ))  # fmt: skip
    insert_many(Case._meta.db_table, case_columns, case_rows)

    skill_rows, link_rows, skill_ids = [], [], []
    for j in range(n_skills):
        first = rng.randrange(n_cases)
        second = (first + n_scopes) % n_cases  # same scope, another incident
        scope = {"tenant": "teahouse", "brand": "leaf-and-cup", "store": scopes[first],
                 "campaign": "campaign-b", "deployment": "release-1"}  # fmt: skip
        skill_content: dict[str, object] = {"type": "skill", "scope": scope, "n": j}
        skill_id = domain.content_id(domain.SKILL_PREFIX, skill_content)
        skill_ids.append(skill_id)
        title = "".join(rng.sample(words, 2)) + f" skill {j}"
        skill_rows.append((
            skill_id, *scope.values(), title, valid_from, valid_to, itemids.digest_of(skill_id), content,
            submitter.pk, "import", now, "approved", approver.pk, approved_at, "bench", "", "", "",
            title, [{"tool": "search_knowledge", "arguments": {"query": "优惠券"}}], {},
        ))  # fmt: skip
        link_rows.append((skill_id, case_ids[first], 0))
        link_rows.append((skill_id, case_ids[second], 1))
    skill_columns = [
        "id", "tenant", "brand", "store", "campaign", "deployment", "title", "valid_from",
        "valid_to", "content_hash", "content", "submitted_by_id", "submitted_via", "submitted_at",
        "status", "approved_by_id", "approved_at", "approved_reason", "rejected_reason",
        "revoked_reason", "superseded_by", "when", "recipe", "prompt",
    ]  # fmt: skip
    insert_many(Skill._meta.db_table, skill_columns, skill_rows)
    # A case cited by two skills must not create a duplicate link row.
    link_rows = list({(s, c): (s, c, p) for s, c, p in link_rows}.values())
    insert_many(SkillCase._meta.db_table, ["skill_id", "case_id", "position"], link_rows)

    # References: one hot case, a group of typical cases with exactly ~50 reads, the rest random.
    cited = {c for _, c, _ in link_rows}
    uncited = [c for c in case_ids if c not in cited]
    hot = uncited[0]
    typical = uncited[1:201]
    reserved = {hot, *typical}
    others = [c for c in case_ids if c not in reserved] + skill_ids
    read_at = now - timedelta(hours=1)
    refs: list[tuple[Any, ...]] = []
    run_counter = 0

    def add(item: str, kind: str, count: int) -> None:
        nonlocal run_counter
        for _ in range(count):
            refs.append((f"run-{run_counter // 3}", item, kind, read_at))
            run_counter += 1

    add(hot, "case", hot_refs)
    for item in typical:
        add(item, "case", typical_refs)
    remaining = n_refs - len(refs)
    for _ in range(remaining):
        item = others[rng.randrange(len(others))]
        refs.append((f"run-{run_counter // 3}", item, item.split(":", 1)[0], read_at))
        run_counter += 1
    insert_many(Reference._meta.db_table, ["run_id", "item_id", "item_type", "read_at"], refs)

    # Lessons: ~10 per scope, each citing two supporting cases of its scope and, for one in
    # three, a counterexample; every tenth pair of a scope in an open conflict.
    n_lessons = max(20, int(10_000 * scale))
    lesson_rows, lesson_links, conflict_rows = [], [], []
    types = ["success_pattern", "failure_lesson", "tool_usage", "domain_knowledge"]
    for k in range(n_lessons):
        first = rng.randrange(n_cases)
        second = (first + n_scopes) % n_cases
        third = (first + 2 * n_scopes) % n_cases
        scope = {"tenant": "teahouse", "brand": "leaf-and-cup", "store": scopes[first],
                 "campaign": "campaign-b", "deployment": "release-1"}  # fmt: skip
        lesson_content: dict[str, object] = {"type": "lesson", "scope": scope, "n": k}
        lesson_id = domain.content_id(itemids.LESSON.prefix, lesson_content)
        tags = rng.sample(words, 2)
        description = "".join(rng.sample(words, 3))
        conclusion = "".join(rng.sample(words, 3)) + f" lesson {k}"
        lesson_rows.append((
            lesson_id, *scope.values(), description, valid_from, valid_to,
            itemids.digest_of(lesson_id), lesson_content, submitter.pk, "import", now, "approved",
            approver.pk, approved_at, "bench", "", "", "", types[k % 4], tags, description,
            "条件", conclusion, "", " ".join([*tags, description, conclusion]), "", 0, 0,
        ))  # fmt: skip
        lesson_links.append((lesson_id, case_ids[first], "supports", 0))
        if second != first:
            lesson_links.append((lesson_id, case_ids[second], "supports", 1))
        if k % 3 == 0 and third not in (first, second):
            lesson_links.append((lesson_id, case_ids[third], "contradicts", 0))
        if k % 10 == 1:
            a, b = sorted((lesson_id, str(lesson_rows[-2][0])))
            conflict_rows.append((a, b, "teahouse", "type_opposition", now, "scan", "open"))
    lesson_columns = [
        "id", "tenant", "brand", "store", "campaign", "deployment", "title", "valid_from",
        "valid_to", "content_hash", "content", "submitted_by_id", "submitted_via", "submitted_at",
        "status", "approved_by_id", "approved_at", "approved_reason", "rejected_reason",
        "revoked_reason", "superseded_by", "lesson_type", "scene_tags", "scene_description",
        "precondition", "conclusion", "supersedes", "search_text", "outdated_cause",
        "seen_successes", "seen_failures",
    ]  # fmt: skip
    insert_many(Lesson._meta.db_table, lesson_columns, lesson_rows)
    insert_many(
        LessonCase._meta.db_table, ["lesson_id", "case_id", "relation", "position"], lesson_links
    )
    insert_many(
        LessonConflict._meta.db_table,
        ["lesson_a_id", "lesson_b_id", "tenant", "found_by", "detected_at", "detected_on",
         "status", "narrowing", "kept", "resolution", "resolved_reason", "favoured"],
        [(*row, "", "", "", "", "") for row in conflict_rows],
    )  # fmt: skip
    # Bulk inserts skip the write-time indexing that approvals do: index everything at once.
    from experience.index import postings

    index_started = time.perf_counter()
    postings.rebuild()
    index_seconds = time.perf_counter() - index_started
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {
        "index_seconds": index_seconds,
        "big": n_big,
        "cases": n_cases,
        "skills": n_skills,
        "lessons": n_lessons,
        "references": len(refs),
        "scopes": n_scopes,
        "hot": hot,
        "typical": typical,
        "build_seconds": time.perf_counter() - started,
        "now": now,
    }


def measure(
    data: dict[str, Any], rng: random.Random, repeat: int
) -> list[tuple[str, float, float]]:
    from experience.retrieval.service import retrieve_experience
    from experience.review.impact import revocation_impact
    from experience.runs.models import Reference
    from reviewconsole.services import system_agent

    agent = system_agent()

    def bare(item: str) -> Callable[[], Any]:
        # The same distinct run-id read the impact makes for the item itself, and nothing else.
        return lambda: list(
            Reference.objects.filter(item_id=item)
            .order_by()
            .values_list("run_id", flat=True)
            .distinct()
        )

    def impact(item: str) -> Callable[[], Any]:
        return lambda: revocation_impact(item)

    typical = data["typical"]
    for item in typical[:5]:  # warm statement caches and pages before timing
        bare(item)()
        impact(item)()
    results = []
    pickers: tuple[tuple[str, Callable[[], Any]], ...] = (
        ("typical", lambda: rng.choice(typical)),
        ("hot", lambda: data["hot"]),
    )
    for label, item_of in pickers:
        bare_samples, impact_samples = [], []
        for _ in range(repeat):
            item = item_of()
            bare_samples += timed(bare(item), 1)
            impact_samples += timed(impact(item), 1)
        results.append(
            (
                f"bare reference lookup ({label})",
                percentile(bare_samples, 0.5),
                percentile(bare_samples, 0.95),
            )
        )
        results.append(
            (
                f"revocation impact ({label})",
                percentile(impact_samples, 0.5),
                percentile(impact_samples, 0.95),
            )
        )

    counter = iter(range(10**9))

    def recall() -> Any:
        store = f"store-{rng.randrange(data['scopes']):04d}"
        return retrieve_experience(
            QUERY, _scope(store), data["now"], f"bench-{next(counter)}", actor=agent
        )

    # With lessons (what retrieval does now) against retrieval as it was before lessons (no
    # lesson recalled, no confidence), interleaved call by call over the same scopes.
    from experience.lessons import outcome_tallies as outcome_selectors
    from experience.retrieval import order, pipeline

    def unscored(items: list[dict[str, Any]], *_: Any, **__: Any) -> list[dict[str, Any]]:
        return [{**item, "confidence": None, "why": "", "conflict": False} for item in items]

    # The baseline switches off everything retrieval does for lessons and confidence: no lesson
    # is recallable (so none is scored, and no outcome is read for one) and no item is scored.
    no_lessons = [
        Seam(pipeline, "recallable_lessons", lambda *_, **__: {}),
        Seam(order, "with_confidence", unscored),
    ]
    # The same call with the outcome counts taken as none: what reading lessons and computing
    # confidence cost apart from the outcome lookup.
    no_tallies = Seam(outcome_selectors, "outcome_tallies", lambda *_, **__: {})

    def without_lessons() -> Any:
        with all_applied(no_lessons):
            return recall()

    def without_outcome_tallies() -> Any:
        with no_tallies.applied():
            return recall()

    for _ in range(5):
        recall()
        without_lessons()
        without_outcome_tallies()
    for seam in [*no_lessons, no_tallies]:
        seam.require_called()
    with_samples, without_samples, untallied_samples = [], [], []
    for _ in range(max(FLOOR[0], repeat // 4)):
        with_samples += timed(recall, 1)
        without_samples += timed(without_lessons, 1)
        untallied_samples += timed(without_outcome_tallies, 1)
    results.append(
        (
            "retrieve_experience, no lessons (~100 in scope)",
            percentile(without_samples, 0.5),
            percentile(without_samples, 0.95),
        )
    )
    results.append(
        (
            "retrieve_experience with lessons",
            percentile(with_samples, 0.5),
            percentile(with_samples, 0.95),
        )
    )
    results.append(
        (
            "  the same without outcome lookups",
            percentile(untallied_samples, 0.5),
            percentile(untallied_samples, 0.95),
        )
    )
    return results


def _scope(store: str) -> dict[str, str]:
    return {"tenant": "teahouse", "brand": "leaf-and-cup", "store": store,
            "campaign": "campaign-b", "deployment": "release-1"}  # fmt: skip


# The bare gated query as SQL: what ``gated_cases(scope, now).values_list("id")`` sends.
GATED_SQL = (
    'SELECT "id" FROM "experience_case" WHERE "status" = %s AND "approved_at" <= %s'
    ' AND "valid_from" <= %s AND "valid_to" > %s AND "tenant" = %s AND "brand" = %s'
    ' AND "store" = %s AND "campaign" = %s AND "deployment" = %s'
)


def by_scope_size(
    data: dict[str, Any], rng: random.Random, repeat: int, agent: Any
) -> list[tuple[str, list[float]]]:
    """Per scope size (~100 and the large scope): retrieval from the index with a query that
    matches most items and with a rare token, the context block, retrieval ranking every gated
    text (the index switched off: what retrieval did before it), and the bare gated query
    through the ORM and as SQL; interleaved arm by arm, round by round, in alternating order."""
    from django.db import connection

    from experience.index import postings
    from experience.retrieval.block import experience_context
    from experience.retrieval.pipeline import gated_cases
    from experience.retrieval.service import retrieve_experience

    counter = iter(range(10**9))
    n_scopes, n_big, now = data["scopes"], data["big"], data["now"]

    def small() -> str:
        return f"store-{rng.randrange(n_scopes):04d}"

    def big() -> str:
        return BIG_STORE

    def rare_small(store: str) -> str:
        # Case i of the small scopes is in store i % n_scopes and its title ends in "#i".
        return f"#{int(store.rsplit('-', 1)[1]) + n_scopes * rng.randrange(100)}"

    def rare_big(_store: str) -> str:
        return f"#{rng.randrange(n_big)}"

    def common(_store: str) -> str:
        return QUERY

    def recall(store: Callable[[], str], query: Callable[[str], str]) -> Callable[[], Any]:
        def call() -> Any:
            chosen = store()
            return retrieve_experience(
                query(chosen), _scope(chosen), now, f"bench-s-{next(counter)}", actor=agent
            )

        return call

    def context(store: Callable[[], str]) -> Callable[[], Any]:
        return lambda: experience_context(
            QUERY, _scope(store()), now, f"bench-c-{next(counter)}", 800, actor=agent
        )

    # Retrieval as it was before the index: the index never answers, so every gated text is
    # ranked (pipeline.TextRanking).
    index_off = Seam(postings, "scope_read", lambda *_, **__: postings.STALE)

    def from_texts(call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            with index_off.applied():
                return call()

        return run

    # Retrieval as it was before its posting lists were kept per process (PostgreSQL): every
    # list of the query sent on every retrieval.
    kept = connection.vendor == "postgresql"
    lists_sent = Seam(postings, "_postings_kept", lambda: False)

    def sent_every_time(call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            with lists_sent.applied():
                return call()

        return run

    def bare(store: Callable[[], str]) -> Callable[[], Any]:
        return lambda: list(gated_cases(_scope(store()), now).values_list("id", flat=True))

    def bare_sql(store: Callable[[], str]) -> Callable[[], Any]:
        adapt_now = connection.ops.adapt_datetimefield_value(now)

        def run() -> Any:
            params = ["approved", adapt_now, adapt_now, adapt_now, *_scope(store()).values()]
            with connection.cursor() as cursor:
                cursor.execute(GATED_SQL, params)
                return [row[0] for row in cursor.fetchall()]

        return run

    for name in ("store-0000", BIG_STORE):  # the two baselines read the same rows
        fixed: Callable[[], str] = lambda name=name: name  # type: ignore[misc]  # noqa: E731
        assert sorted(bare(fixed)()) == sorted(bare_sql(fixed)()) != []

    arms: list[tuple[str, Callable[[], Any]]] = []
    for size, where, rare in (("~100", small, rare_small), (f"{n_big:,}", big, rare_big)):
        arms += [
            (f"{size} retrieve, common query", recall(where, common)),
            (f"{size} retrieve, rare token", recall(where, rare)),
            (f"{size} context block", context(where)),
            (f"{size} retrieve, ranking every text", from_texts(recall(where, common))),
            *(
                [
                    (
                        f"{size} retrieve, lists sent every time",
                        sent_every_time(recall(where, common)),
                    )
                ]
                if kept
                else []
            ),
            (f"{size} bare gated query (ORM)", bare(where)),
            (f"{size} bare gated query (SQL)", bare_sql(where)),
        ]
    for _label, call in arms:
        for _ in range(3):
            call()
    index_off.require_called()
    if kept:
        lists_sent.require_called()
    samples: list[list[float]] = [[] for _ in arms]
    for round_ in range(max(FLOOR[0], repeat // 2)):
        turn = list(enumerate(arms))
        if round_ % 2:
            turn.reverse()
        for index, (_label, call) in turn:
            samples[index] += timed(call, 1)
    return [(label, taken) for (label, _call), taken in zip(arms, samples, strict=True)]


def statements_gain(data: dict[str, Any], repeat: int) -> list[tuple[str, float, float]]:
    """Each compiled statement (``reviewconsole.statements``) next to building its queryset
    through the ORM on every call, the same values, interleaved: ``(label, statement p50 ms,
    ORM p50 ms)``. The rows must agree (datetimes compared as the statement's caller reads
    them)."""
    from experience.cases.models import Skill
    from experience.lessons.models import Lesson
    from experience.lessons.selectors import (
        _SKILL_EVIDENCE,
        _skill_evidence_queryset,
        incident_key,
        skill_evidence_rows,
    )
    from experience.retrieval import recall

    now, scope = data["now"], _scope("store-0001")
    skill_ids = list(
        Skill.objects.filter(store=scope["store"]).values_list("id", flat=True)[:8]
    ) or list(Skill.objects.values_list("id", flat=True)[:8])
    lesson_ids = sorted(Lesson.objects.filter(store=scope["store"]).values_list("id", flat=True))
    key = incident_key()
    arms: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
        (
            f"skill evidence of {len(skill_ids)} skills",
            lambda: _SKILL_EVIDENCE.rows(key, skill_ids=skill_ids),
            lambda: list(_skill_evidence_queryset(skill_ids)),
        ),
        (
            "lessons recalled in a scope",
            lambda: recall._RECALL_IN_SCOPE.rows(key, now=now, **scope),
            lambda: list(recall._recall_queryset(now, **scope)),
        ),
        (
            f"lessons recalled among {len(lesson_ids)}",
            lambda: recall._RECALL_AMONG.rows(key, now=now, lesson_ids=lesson_ids, **scope),
            lambda: list(recall._recall_queryset(now, lesson_ids, **scope)),
        ),
    ]
    assert sorted(skill_evidence_rows(skill_ids)) == sorted(_skill_evidence_queryset(skill_ids))
    from django.db import transaction

    from experience.runs.models import Reference
    from experience.runs.records import references_record

    reads = [(f"case:{'0' * 63}{i:x}", "case") for i in range(11)]
    counter = iter(range(10**9))

    def rolled_back(write: Callable[[str], Any]) -> Callable[[], list[tuple[str, str]]]:
        def run() -> list[tuple[str, str]]:
            with transaction.atomic():
                run_id = f"bench-w-{next(counter)}"
                write(run_id)
                transaction.set_rollback(True)
            return reads

        return run

    from reviewconsole import access, tenancy
    from reviewconsole.models import Tenant
    from reviewconsole.services import system_agent

    agent = system_agent()
    arms += [
        (
            "a user's access and a named tenant",
            lambda: access._ACCESS[(True, False)].rows(user_id=agent.pk, tenant="teahouse"),
            lambda: list(
                access._access_queryset(agent.pk, "teahouse", active=True, superuser=False)
            ),
        ),
        (
            "whether a tenant exists",
            lambda: tenancy._TENANT_NAMED.rows(name="teahouse"),
            lambda: list(Tenant.objects.filter(name="teahouse").order_by().values_list("pk")[:1]),
        ),
    ]
    arms.append(
        (
            f"{len(reads)} reads recorded (one INSERT)",
            rolled_back(lambda run_id: references_record(run_id=run_id, items=reads, at=now)),
            rolled_back(
                lambda run_id: Reference.objects.bulk_create(
                    Reference(run_id=run_id, item_id=i, item_type=k, read_at=now) for i, k in reads
                )
            ),
        )
    )
    out = []
    for label, compiled, built in arms:
        assert len(compiled()) == len(built())
        for _ in range(3):
            compiled(), built()
        a: list[float] = []
        b: list[float] = []
        for round_ in range(max(2 * FLOOR[0], repeat)):
            first, second = (compiled, built) if round_ % 2 else (built, compiled)
            taken = timed(first, 1) + timed(second, 1)
            (a, b)[first is built].append(taken[0])
            (a, b)[second is built].append(taken[1])
        out.append((label, percentile(a, 0.5), percentile(b, 0.5)))
    return out


def report_statements(rows: list[tuple[str, float, float]]) -> None:
    print()
    print(f"{'hand-written statement vs the ORM (same values)':48} {'stmt ms':>9} {'ORM ms':>9}")
    for label, compiled, built in rows:
        print(f"{label:48} {compiled:9.3f} {built:9.3f}  gain x{built / compiled:.2f}")


def report_sizes(rows: list[tuple[str, list[float]]], big: str) -> None:
    p50 = {label: percentile(taken, 0.5) for label, taken in rows}
    print(f"{'measurement (same run, interleaved)':48} {'p50 ms':>9} {'p95 ms':>9}")
    for label, taken in rows:
        print(f"{label:48} {percentile(taken, 0.5):9.3f} {percentile(taken, 0.95):9.3f}")
    for size in ("~100", big):
        orm, sql = p50[f"{size} bare gated query (ORM)"], p50[f"{size} bare gated query (SQL)"]
        common, rare = p50[f"{size} retrieve, common query"], p50[f"{size} retrieve, rare token"]
        texts = p50[f"{size} retrieve, ranking every text"]
        block = p50[f"{size} context block"]
        print(f"{size} in scope, p50 ratios:")
        print(
            f"  retrieve (common query) / bare gated ORM x{common / orm:.2f}, / SQL x{common / sql:.2f}"
        )
        print(
            f"  retrieve (rare token) / bare gated ORM x{rare / orm:.2f}, / SQL x{rare / sql:.2f}"
        )
        print(f"  retrieve (common query) / ranking every text x{common / texts:.2f}")
        sent = p50.get(f"{size} retrieve, lists sent every time")
        if sent is not None:
            print(f"  retrieve (common query), lists kept / sent every time x{common / sent:.2f}")
        print(f"  context block / retrieve (common query) x{block / common:.2f} (target <= 1.3)")
        print(f"  ORM overhead of the bare gated query: {orm - sql:.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="1.0 = 100k cases, 10k skills, 1M references"
    )
    parser.add_argument("--repeat", type=int, default=200, help="samples per measurement")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--only-retrieval", action="store_true", help="skip the revocation impact and lessons arms"
    )
    parser.add_argument(
        "--only-statements",
        action="store_true",
        help="only the hand-written statements against the ORM",
    )
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time this process's CPU time instead of the wall clock: steadier on a machine"
        " shared with other work; SQLite only (PostgreSQL works in its own processes)",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="the smallest run (the fewest rows, one sample per arm): the test suite's check that"
        " the script still runs; its figures mean nothing",
    )
    args = parser.parse_args()
    if args.cpu_time:
        CLOCK[0] = time.process_time
    if args.tiny:
        args.scale, args.repeat, FLOOR[0] = 0.0, 1, 1

    database_url = os.environ.get("DATABASE_URL")
    with tempfile.TemporaryDirectory(prefix="bench-experience-") as directory:
        if not database_url:
            database_url = f"sqlite:///{sqlite_prepared(Path(directory) / 'bench.sqlite3')}"
        vendor = setup(database_url)
        rng = random.Random(args.seed)
        data = build(args.scale, rng)
        from django.conf import settings

        from reviewconsole.services import system_agent

        print(
            f"{vendor} (DEBUG={settings.DEBUG}): {data['cases']:,} cases in {data['scopes']:,} scopes, {data['skills']:,} skills, "
            f"{data['lessons']:,} lessons, {data['references']:,} references (built in {data['build_seconds']:.1f}s), "
            f"{data['big']:,} more cases in one scope; retrieval index built in {data['index_seconds']:.1f}s"
        )
        print("timed with", "this process's CPU time" if args.cpu_time else "the wall clock")
        if args.only_statements:
            report_statements(statements_gain(data, args.repeat))
            return
        if not args.only_retrieval:
            rows = measure(data, rng, args.repeat)
            print(f"{'measurement':48} {'p50 ms':>9} {'p95 ms':>9}")
            for label, p50, p95 in rows:
                print(f"{label:48} {p50:9.3f} {p95:9.3f}")
            by_label = {label: (p50, p95) for label, p50, p95 in rows}
            base50 = by_label["retrieve_experience, no lessons (~100 in scope)"][0]
            lessons50 = by_label["retrieve_experience with lessons"][0]
            print(
                f"retrieval with lessons / without: p50 x{lessons50 / base50:.2f} (target <= 1.3)"
            )
            untallied50 = by_label["  the same without outcome lookups"][0]
            print(f"  without outcome lookups / without lessons: p50 x{untallied50 / base50:.2f}")
            for kind in ("typical", "hot"):
                bare50, bare95 = by_label[f"bare reference lookup ({kind})"]
                imp50, imp95 = by_label[f"revocation impact ({kind})"]
                print(
                    f"impact / bare lookup ({kind}): p50 x{imp50 / bare50:.2f}, p95 x{imp95 / bare95:.2f}"
                )
        report_sizes(by_scope_size(data, rng, args.repeat, system_agent()), f"{data['big']:,}")
        report_statements(statements_gain(data, args.repeat))
        from django.db import connections

        connections.close_all()


if __name__ == "__main__":
    main()
