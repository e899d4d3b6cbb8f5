#!/usr/bin/env python
"""Benchmark of the vector branch: what it finds that the words miss, and what it costs.

On a temporary database holding the demo world and the paraphrase set (``fixtures/paraphrase/``:
its documents and cases imported and approved as an operator and a second reviewer would), in
one run:

1. **Quality.** Each paraphrase query (customers' and staff's own wording, labelled by meaning)
   and each shipped held-out ticket (``fixtures/heldout/tickets.json``, its exact wording,
   labelled in ``fixtures/paraphrase/heldout-labels.json``) is asked of ``search_knowledge`` or
   ``retrieve_experience`` with ``SEMANTIC_EMBEDDER=off`` (lexical only) and with the local
   model (lexical + vector, fused by RRF): recall@4 (the share of a query's labelled answers in
   the first four), hit@4 and MRR@10, per set and target, and by style.
2. **Latency.** p50/p95 of ``search_knowledge`` and ``retrieve_experience`` in one scope of
   ~100 and of ~10k items, with and without the vector branch, interleaved call by call; the
   query vector is cached per query text, so the time to embed one query is measured apart
   (each text embedded once, uncached). The 100-item scopes are embedded by the model; the 10k
   scopes get synthetic vectors (said in the output): real vectors of a pool of the scope's
   texts, each jittered and renormalised, written through the embedder interface, so their
   similarities to a query spread as real ones do.
3. **Indexing throughput** of the local model: items embedded per second by ``reembed`` over
   the demo and paraphrase data, and the embedder's own passages per second.

Usage::

    python bench/bench_semantic.py                  # SQLite in a temporary directory
    python bench/bench_semantic.py --quick          # latency at 100 and 1k, fewer queries
    python bench/bench_semantic.py --database postgres --postgres-url postgres://USER@HOST:5432/postgres

PostgreSQL runs create a database of their own (``bench_semantic_<pid>``) and drop it. The
script reports; it never fails on a missed target (exit status 0 once the run completes).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import HashedEmbedder, postgres_create, sqlite_prepared  # noqa: E402

PARAPHRASE = ROOT / "fixtures" / "paraphrase"
HELDOUT = ROOT / "fixtures" / "heldout" / "tickets.json"

# --- targets (issue "Semantic memory") ----------------------------------------------------------

TARGET_PARAPHRASE_GAIN = 0.20  # recall@4 on paraphrases, vector arm minus lexical arm
TARGET_LATENCY_RATIO = 1.3  # with the branch (query vector cached) / lexical only (issue 40)
K = 4  # recall@K: what a search returns by default
DEPTH = 10  # MRR@DEPTH: results asked for

LEXICAL = "off"
# The local model (``SEMANTIC_EMBEDDER=local``), built once: the embedder interface builds a new
# one, loading the model again, whenever the setting changes, and the arms alternate call by call.
VECTOR = "bench.bench_semantic.kept_local_embedder"
ARMS = (LEXICAL, VECTOR)
ARM_NAMES = {LEXICAL: "lexical", VECTOR: "lexical+vector"}

SYNTHETIC_POOL = 64  # real vectors the 10k scopes' synthetic ones are jittered from
SYNTHETIC_NOISE = 0.35  # per-dimension Gaussian noise before renormalising
THROUGHPUT_SAMPLE = 48  # passages timed through the embedder itself
FORKS = 5  # forked workers timed per way of loading the model


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="100,10000", help="items in the measured scopes (comma-separated)"
    )
    parser.add_argument("--queries", type=int, default=40, help="latency queries per scope")
    parser.add_argument("--rounds", type=int, default=3, help="latency rounds; median reported")
    parser.add_argument("--quick", action="store_true", help="sizes 100,1000; 15 queries; 1 round")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="sizes 20,50; 3 queries; 1 round; vectors hashed from the tokens instead of the"
        " model's: the test suite's check that the script still runs (its figures mean nothing)",
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
        help="server to create the bench database on (default: DATABASE_URL's server, else "
        "postgres://postgres@127.0.0.1:5432/postgres)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the bench database afterwards")
    parser.add_argument("--seed", type=int, default=20261018)
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="also score the fusion settings around the configured ones (significance floor x votes)",
    )
    parser.add_argument("--no-latency", action="store_true", help="quality figures only")
    parser.add_argument(
        "--no-quality",
        action="store_true",
        help="latency figures only (the data is still loaded and embedded as for a full run)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.queries, args.rounds = "100,1000", 15, 1
    if args.tiny:
        args.sizes, args.queries, args.rounds = "20,50", 3, 1
    try:
        args.size_list = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s})
    except ValueError:
        parser.error("--sizes must be comma-separated integers")
    if not args.size_list or min(*args.size_list, args.queries, args.rounds) < 1:
        parser.error("--sizes, --queries and --rounds must be positive")
    env_url = os.environ.get("DATABASE_URL", "").strip()
    env_is_pg = env_url.startswith(("postgres://", "postgresql://"))
    if args.database is None:
        args.database = "postgres" if env_is_pg else "sqlite"
    if args.postgres_url is None:
        args.postgres_url = env_url if env_is_pg else "postgres://postgres@127.0.0.1:5432/postgres"
    return args


# --- the bench's own database -------------------------------------------------------------------


def _with_dbname(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def prepare_database(args: argparse.Namespace) -> Callable[[], None]:
    """Point DATABASE_URL at a database of the bench's own (never the project's); return its
    cleanup."""
    if args.database == "sqlite":
        directory = tempfile.mkdtemp(prefix="bench-semantic-")
        os.environ["DATABASE_URL"] = (
            f"sqlite:///{sqlite_prepared(Path(directory) / 'bench.sqlite3')}"
        )

        def remove() -> None:
            if args.keep:
                print(f"kept {os.environ['DATABASE_URL']}")
            else:
                shutil.rmtree(directory, ignore_errors=True)

        return remove

    import psycopg
    from psycopg import sql

    name = f"bench_semantic_{os.getpid()}"
    admin_url = _with_dbname(args.postgres_url, "postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        postgres_create(conn, name)
    os.environ["DATABASE_URL"] = _with_dbname(args.postgres_url, name)

    def drop() -> None:
        if args.keep:
            print(f"kept {os.environ['DATABASE_URL']}")
            return
        from django.db import connections

        connections.close_all()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    return drop


def django_ready() -> str:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")  # DEBUG records every query, as no server does
    # Tasks queued by the loaders wait in the table; the vectors are made by ``reembed`` below.
    os.environ.setdefault("CONSOLE_TASKS_BACKEND", "django_tasks_db.DatabaseBackend")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0, interactive=False)
    return connection.vendor


def semantic_installed() -> bool:
    from django.apps import apps

    return apps.is_installed("semantic")


@contextmanager
def arm(name: str) -> Iterator[None]:
    """``SEMANTIC_EMBEDDER`` set to ``name`` for the calls inside, then restored. Set on the
    settings themselves rather than with ``override_settings``: that wraps the settings, which
    slows every read of a setting, and the ORM reads several on every query; the arms alternate
    call by call, and the timings would carry the wrapper."""
    from django.conf import settings

    before = settings.SEMANTIC_EMBEDDER
    settings.SEMANTIC_EMBEDDER = name
    try:
        yield
    finally:
        settings.SEMANTIC_EMBEDDER = before


# --- the paraphrase world -----------------------------------------------------------------------


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@dataclass
class World:
    now: datetime
    agent: Any
    loaded_seconds: float
    documents: int
    cases: int


def load_world() -> World:
    """The demo world, then the paraphrase documents (imported by the operator) and cases
    (imported by the operator, their diagnosis evidence checked and approved by a reviewer)."""
    from console.demo import load_demo_world
    from experience.cases import selectors
    from experience.demo import case_check_and_approve
    from experience.review.imports import items_import
    from knowledge.services import documents_import
    from reviewconsole import clock

    began = time.perf_counter()
    now = clock.now().replace(second=0, microsecond=0)
    load_demo_world(now=now)
    from django.contrib.auth.models import User

    operator = User.objects.get(username="olivia")
    reviewer = User.objects.get(username="ravi")
    at = now - timedelta(days=14)
    documents = documents_import(
        items=_read(PARAPHRASE / "knowledge.json"), actor=operator, now=now - timedelta(days=20)
    )
    submitted = items_import(items=_read(PARAPHRASE / "experience.json"), actor=operator, now=at)
    for result in submitted:
        case_check_and_approve(
            selectors.case_get(result.id),
            reviewer=reviewer,
            reason="bench: diagnosis evidence compared with the thread",
            note="bench: excerpt matches",
            now=at,
        )
    return World(
        now=now,
        agent=User.objects.get(username="agent-7"),
        loaded_seconds=time.perf_counter() - began,
        documents=len(documents.created),
        cases=len(submitted),
    )


def embed_everything() -> tuple[int, float]:
    """``reembed --wait`` with the local model: the vectors of every scope, packed. Returns the
    items it embedded and the seconds it took."""
    import io

    from django.core.management import call_command

    out = io.StringIO()
    began = time.perf_counter()
    with arm(VECTOR):
        call_command("reembed", "--wait", "--json", stdout=out)
    seconds = time.perf_counter() - began
    return int(json.loads(out.getvalue())["embedded"]), seconds


# --- quality ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    id: str
    target: str  # "knowledge" | "experience"
    text: str
    scope: dict[str, str]
    occurred_at: datetime
    known_at: datetime
    answers: frozenset[str]  # doc_keys, or case titles
    style: str
    overlap: int = 0  # tokens shared with the answer that shares most (see ``with_overlap``)


def paraphrases() -> list[Question]:
    from reviewconsole.timeparse import parse_aware_datetime

    return [
        Question(
            q["id"],
            q["target"],
            q["text"],
            q["scope"],
            parse_aware_datetime(q["occurred_at"], field="occurred_at"),
            parse_aware_datetime(q["known_at"], field="known_at"),
            frozenset(q["answers"]),
            q["style"],
        )
        for q in _read(PARAPHRASE / "queries.json")["queries"]
    ]


def heldout_questions() -> list[Question]:
    """Each held-out ticket as a knowledge question, and as an experience question where it is
    labelled with cases; tickets without labels (the printer) are left out."""
    from reviewconsole.timeparse import parse_aware_datetime

    labels = {e["id"]: e for e in _read(PARAPHRASE / "heldout-labels.json")["labels"]}
    questions = []
    for ticket in _read(HELDOUT)["tickets"]:
        label = labels[ticket["id"]]
        times = (
            parse_aware_datetime(ticket["context"]["occurred_at"], field="occurred_at"),
            parse_aware_datetime(ticket["context"]["known_at"], field="known_at"),
        )
        short = ticket["id"].rsplit("/", 1)[-1]
        for target, answers in (
            ("knowledge", label["knowledge"]),
            ("experience", label["experience"]),
        ):
            if answers:
                questions.append(
                    Question(
                        short,
                        target,
                        ticket["text"],
                        ticket["scope"],
                        *times,
                        frozenset(answers),
                        ticket["situation"],
                    )
                )
    return questions


def with_overlap(questions: list[Question]) -> list[Question]:
    """Each question with the number of search tokens (CJK bigrams, ASCII runs; raw or after the
    synonym lexicon, whichever is more) it shares with the labelled answer that shares most: a
    property of the texts, computed as the lexical branches tokenize, not of any search."""
    from dataclasses import replace

    from experience.cases.models import Case
    from knowledge.domain import expand, tokenize
    from knowledge.lexicon import searchable
    from knowledge.models import Document
    from knowledge.selectors import current_lexicon

    lexicon = current_lexicon()
    texts: dict[str, list[str]] = defaultdict(list)
    for key, title, text in Document.objects.values_list("doc_key", "title", "text"):
        texts[key].append(searchable(title, text))
    for title, search_text in Case.objects.filter(status="approved").values_list(
        "title", "search_text"
    ):
        texts[title].append(search_text)

    def shared(query: str, text: str) -> int:
        raw = len(tokenize(query) & tokenize(text))
        return max(raw, len(tokenize(expand(query, lexicon)) & tokenize(expand(text, lexicon))))

    return [
        replace(q, overlap=max(shared(q.text, t) for a in q.answers for t in texts[a]))
        for q in questions
    ]


OVERLAP_BANDS = ((0, 1, "shares 0-1 tokens"), (2, 3, "shares 2-3 tokens"), (4, 10**6, "shares 4+"))


def overlap_band(overlap: int) -> str:
    return next(name for low, high, name in OVERLAP_BANDS if low <= overlap <= high)


def _doc_key(item_id: str) -> str:
    from reviewconsole.itemids import parse

    return parse(item_id).key_version[0]


def asked(question: Question, world: World, statuses: dict[str, int]) -> list[str]:
    """The labels of what the search returns for ``question``, best first (DEPTH at most)."""
    from experience.retrieval.service import retrieve_experience
    from knowledge.search import KnowledgeContext, search_knowledge

    if question.target == "knowledge":
        scope = question.scope
        context = KnowledgeContext(
            tenant=scope["tenant"],
            brand=scope["brand"],
            store=scope["store"],
            campaign=scope["campaign"],
            occurred_at=question.occurred_at,
            known_at=question.known_at,
            limit=DEPTH,
        )
        answer = search_knowledge(question.text, context, actor=world.agent)
        _count_status(answer, statuses)
        return [_doc_key(item["id"]) for item in answer["evidence"]]
    answer = retrieve_experience(
        question.text,
        question.scope,
        world.now,
        f"bench-semantic-{uuid.uuid4()}",
        DEPTH,
        actor=world.agent,
    )
    _count_status(answer, statuses)
    return [item["title"] for item in answer["items"] if item["type"] == "case"]


def _count_status(answer: dict[str, Any], statuses: dict[str, int]) -> None:
    status = answer.get("semantic")
    if isinstance(status, dict):
        status = status.get("status")
    statuses[str(status) if status is not None else "not reported"] += 1


@dataclass
class Scores:
    recall: list[float] = field(default_factory=list)
    hit: list[float] = field(default_factory=list)
    rr: list[float] = field(default_factory=list)

    def add(self, ranked: Sequence[str], answers: frozenset[str]) -> None:
        top = set(ranked[:K])
        self.recall.append(len(top & answers) / len(answers))
        self.hit.append(1.0 if top & answers else 0.0)
        first = next((i for i, label in enumerate(ranked, 1) if label in answers), 0)
        self.rr.append(1 / first if first else 0.0)

    def row(self) -> tuple[float, float, float]:
        def mean(values: list[float]) -> float:
            return statistics.fmean(values) if values else 0.0

        return mean(self.recall), mean(self.hit), mean(self.rr)


def evaluate(
    questions: list[Question], world: World, arms: Sequence[str]
) -> tuple[dict[tuple[str, str, str], Scores], dict[str, dict[str, int]], list[str]]:
    """Scores keyed by (arm, target or "all", group), group being "" or a style or an overlap
    band; per arm the semantic statuses the answers carried; the questions whose count of
    answers in the first K differs between the arms."""
    scores: dict[tuple[str, str, str], Scores] = defaultdict(Scores)
    statuses: dict[str, dict[str, int]] = {a: defaultdict(int) for a in arms}
    changed = []
    for question in questions:
        heads = []
        for name in arms:  # the same question under each arm, one after the other
            with arm(name):
                ranked = asked(question, world, statuses[name])
            heads.append(len(set(ranked[:K]) & question.answers))
            for target in (question.target, "all"):
                scores[(name, target, "")].add(ranked, question.answers)
            scores[(name, "all", question.style)].add(ranked, question.answers)
            scores[(name, "all", overlap_band(question.overlap))].add(ranked, question.answers)
        if len(set(heads)) > 1:
            changed.append(
                f"{question.id} ({'→'.join(map(str, heads))} of {len(question.answers)}) {question.text}"
            )
    return scores, statuses, changed


def report_quality(
    title: str,
    questions: list[Question],
    scores: dict[tuple[str, str, str], Scores],
    arms: Sequence[str],
    changed: list[str],
    *,
    styles: bool,
) -> dict[str, tuple[float, float, float]]:
    print(f"\n{title}")
    print(f"  {'':24} {'n':>3}  " + "  ".join(f"{ARM_NAMES[a]:>26}" for a in arms))
    print(f"  {'':24} {'':>3}  " + "  ".join(f"{'recall@4  hit@4  MRR@10':>26}" for _ in arms))
    groups = [("knowledge", ""), ("experience", ""), ("all", "")]
    if styles:
        groups += [("all", s) for s in sorted({q.style for q in questions})]
    groups += [("all", name) for _, _, name in OVERLAP_BANDS]
    overall: dict[str, tuple[float, float, float]] = {}
    for target, group in groups:
        n = len(scores[(arms[0], target, group)].recall)
        if not n:
            continue
        label = f"style {group}" if group in {q.style for q in questions} else group or target
        cells = []
        for a in arms:
            recall, hit, rr = scores[(a, target, group)].row()
            cells.append(f"{recall:9.3f} {hit:6.3f} {rr:7.3f}  ")
            if (target, group) == ("all", ""):
                overall[a] = (recall, hit, rr)
        print(f"  {label:24} {n:>3}  " + "  ".join(f"{c:>26}" for c in cells))
    if changed:
        print(f"  answers in the first {K}, lexical → with vector ({len(changed)} questions):")
        for line in changed:
            print(f"    {line}")
    return overall


# --- latency ------------------------------------------------------------------------------------


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


LATENCY_TENANT, LATENCY_BRAND, LATENCY_CAMPAIGN = "teahouse", "leaf-and-cup", "campaign-a"


def _scope_store(size: int) -> str:
    return f"store-sem-{size}"


def build_latency_scopes(sizes: Sequence[int], seed: int) -> None:
    """Per size, one knowledge scope (``bench_knowledge``'s synthetic documents, ~20% more
    gated out) and one experience scope of that many approved cases, bulk inserted and indexed
    as the other benchmarks do."""
    from django.db import connection
    from django.db.models import Max

    from bench.bench_knowledge import Corpus
    from knowledge.models import Document

    corpus = Corpus(seed)
    # The demo's and the paraphrase set's documents came first: number the bulk rows after them.
    corpus.next_id = (Document.objects.aggregate(last=Max("id"))["last"] or 0) + 1
    for size in sizes:
        corpus.build_scope(_scope_store(size), size)
    corpus.finish_loading(connection.vendor)
    rng = random.Random(seed)
    for size in sizes:
        _experience_scope(_scope_store(size), size, rng)
    from experience.index import postings

    postings.rebuild()


def _experience_scope(store: str, size: int, rng: random.Random) -> None:
    from django.contrib.auth.models import User

    from bench.bench_experience import insert_many
    from bench.bench_knowledge import _sentence
    from experience.cases.models import Case
    from experience.core import domain
    from reviewconsole import clock, itemids

    submitter, _ = User.objects.get_or_create(username="bench-submitter")
    approver, _ = User.objects.get_or_create(username="bench-approver")
    now = clock.now()
    valid_from, valid_to = now - timedelta(days=30), now + timedelta(days=365)
    approved_at = now - timedelta(days=1)
    scope = {"tenant": LATENCY_TENANT, "brand": LATENCY_BRAND, "store": store,
             "campaign": LATENCY_CAMPAIGN, "deployment": "release-1"}  # fmt: skip
    rows = []
    for i in range(size):
        title, text = _sentence(rng)
        content = {"type": "case", "scope": scope, "incident": f"INC-{store}-{i}", "title": title}
        case_id = domain.content_id(domain.CASE_PREFIX, content)
        rows.append((
            case_id, *scope.values(), title, valid_from, valid_to, itemids.digest_of(case_id),
            content, submitter.pk, "import", now, "approved", approver.pk, approved_at, "bench",
            "", "", "", f"INC-{store}-{i}", text, [], {}, [], {}, "", f"{title}\n{text}",
        ))  # fmt: skip
    columns = [
        "id", "tenant", "brand", "store", "campaign", "deployment", "title", "valid_from",
        "valid_to", "content_hash", "content", "submitted_by_id", "submitted_via", "submitted_at",
        "status", "approved_by_id", "approved_at", "approved_reason", "rejected_reason",
        "revoked_reason", "superseded_by", "incident", "summary", "observations", "diagnosis",
        "counterevidence", "outcome", "supersedes", "search_text",
    ]  # fmt: skip
    insert_many(Case._meta.db_table, columns, rows)


class SyntheticPassages:
    """The local model for queries; for passages, a real vector of one of a small pool of
    texts (chosen by the passage's hash), jittered and renormalised. Same ``name`` as the local
    model, so the vectors it writes are the ones the branch reads for that model. For the large
    scopes only, where embedding every text would take an hour on a shared 2-core machine."""

    def __init__(self, real: Any, pool: Sequence[str]) -> None:
        import numpy as np

        self.real = real
        self.name = real.name
        self.dim = real.dim
        self.pool = np.asarray(real.passages(list(pool)), dtype=np.float32)

    def queries(self, texts: Sequence[str]) -> Any:
        return self.real.queries(texts)

    def passages(self, texts: Sequence[str]) -> Any:
        import numpy as np

        rows = []
        for text in texts:
            digest = hashlib.sha256(text.encode("utf-8")).digest()
            rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
            base = self.pool[int.from_bytes(digest[8:12], "little") % len(self.pool)]
            row = base + rng.normal(0.0, SYNTHETIC_NOISE / np.sqrt(self.dim), self.dim)
            rows.append(row / np.linalg.norm(row))
        return np.asarray(rows, dtype=np.float32)


_synthetic: SyntheticPassages | None = None
_local: Any = None


def kept_local_embedder() -> Any:
    """``SEMANTIC_EMBEDDER=local``'s embedder, one per process (the factory the vector arm names)."""
    global _local
    if _local is None:
        from semantic.embedders import LocalEmbedder

        _local = LocalEmbedder()
    return _local


def synthetic_embedder() -> SyntheticPassages:
    """The factory ``SEMANTIC_EMBEDDER`` names while the large scopes are embedded."""
    assert _synthetic is not None
    return _synthetic


def embed_latency_scopes(sizes: Sequence[int], real_up_to: int) -> dict[int, str]:
    """Vectors for the measured scopes, packed: scopes of at most ``real_up_to`` items by the
    local model, larger ones synthetic (:class:`SyntheticPassages`). Returns how each size was
    embedded, with the seconds it took."""
    global _synthetic
    from bench.bench_knowledge import _sentence
    from semantic import embedders

    how = {}
    for size in sizes:
        real = size <= real_up_to
        if not real and _synthetic is None:
            with arm(VECTOR):
                local = embedders.configured()
            pool_rng = random.Random(size)
            pool = ["\n".join(_sentence(pool_rng)) for _ in range(SYNTHETIC_POOL)]
            _synthetic = SyntheticPassages(local, pool)
        began = time.perf_counter()
        with arm(VECTOR if real else SYNTHETIC_FACTORY):
            made = sum(scope_vectors_packed(space, scope) for space, scope in _scopes_of(size))
        seconds = time.perf_counter() - began
        how[size] = (
            f"{made} embedded by the local model in {seconds:.0f} s"
            if real
            else f"{made} synthetic (jittered from {SYNTHETIC_POOL} real ones) in {seconds:.0f} s"
        )
    return how


SYNTHETIC_FACTORY = "bench.bench_semantic.synthetic_embedder"


def _scopes_of(size: int) -> list[tuple[str, int]]:
    """The (space, index scope id) pairs of the measured scope of ``size``."""
    from experience.index.models import IndexScope
    from knowledge.models import SearchScope

    store = _scope_store(size)
    knowledge = SearchScope.objects.get(
        tenant=LATENCY_TENANT, brand=LATENCY_BRAND, campaign=LATENCY_CAMPAIGN, store=store
    )
    experience = IndexScope.objects.get(
        tenant=LATENCY_TENANT,
        brand=LATENCY_BRAND,
        campaign=LATENCY_CAMPAIGN,
        store=store,
        deployment="release-1",
    )
    from semantic.spaces import every_space

    registered = {space.name for space in every_space()}
    pairs = [(KNOWLEDGE_SPACE, knowledge.pk), (EXPERIENCE_SPACE, experience.pk)]
    return [(space, scope) for space, scope in pairs if space in registered]


KNOWLEDGE_SPACE = "knowledge"
EXPERIENCE_SPACE = "experience"


def scope_vectors_packed(space: str, scope: int) -> int:
    """Embed one index scope's entries with the configured embedder and pack its matrix;
    returns how many items were embedded."""
    from semantic.packing import scope_packed, scopes_marked

    scopes_marked(space, [scope])
    return scope_packed(space, scope)


def make_questions(seed: int, count: int) -> list[str]:
    from bench.bench_knowledge import _query

    rng = random.Random(seed + 7)
    return [_query(rng) for _ in range(count)]


def measure_latency(
    size: int, texts: list[str], world: World, rounds: int
) -> tuple[dict[str, tuple[float, float]], dict[str, dict[str, int]]]:
    """p50/p95 (ms; medians over rounds) of search and retrieval in the scope of ``size``, per
    arm, interleaved; and of embedding one query text (uncached). With the semantic statuses
    the vector arm's answers carried, per call."""
    from bench.bench_knowledge import KNOWN_AT, OCCURRED_AT
    from experience.retrieval.service import retrieve_experience
    from knowledge.search import KnowledgeContext, search_knowledge
    from reviewconsole import clock

    store = _scope_store(size)
    context = KnowledgeContext(
        tenant=LATENCY_TENANT,
        brand=LATENCY_BRAND,
        store=store,
        campaign=LATENCY_CAMPAIGN,
        occurred_at=OCCURRED_AT,
        known_at=KNOWN_AT,
        limit=K,
    )
    scope = {"tenant": LATENCY_TENANT, "brand": LATENCY_BRAND, "store": store,
             "campaign": LATENCY_CAMPAIGN, "deployment": "release-1"}  # fmt: skip
    now = clock.now()

    statuses: dict[str, dict[str, int]] = {"search": defaultdict(int), "retrieve": defaultdict(int)}

    def search(text: str) -> dict[str, Any]:
        return search_knowledge(text, context, actor=world.agent)

    def retrieve(text: str) -> dict[str, Any]:
        return retrieve_experience(
            text, scope, now, f"bench-semantic-{uuid.uuid4()}", K, actor=world.agent
        )

    calls = {"search": search, "retrieve": retrieve}
    # Warm both arms (the scope's packed arrays and matrix, every query's vector).
    for text in texts:
        for name in ARMS:
            with arm(name):
                for call in calls.values():
                    call(text)
    figures: dict[str, list[tuple[float, float]]] = defaultdict(list)
    timer = time.perf_counter
    for _ in range(rounds):
        gc.collect()
        samples: dict[str, list[float]] = defaultdict(list)
        for i, text in enumerate(texts):
            order = ARMS if i % 2 == 0 else ARMS[::-1]
            for name in order:
                with arm(name):
                    for what, call in calls.items():
                        began = timer()
                        answer = call(text)
                        samples[f"{what} {name}"].append((timer() - began) * 1000)
                        if name == VECTOR:
                            _count_status(answer, statuses[what])
        for key, values in samples.items():
            figures[key].append((percentile(values, 0.5), percentile(values, 0.95)))
    result = {
        key: (statistics.median(v[0] for v in values), statistics.median(v[1] for v in values))
        for key, values in figures.items()
    }
    result["embed query"] = query_embedding_ms(texts)
    result.update(uncached_ms(search, texts))
    return result, statuses


def _forget_question_vectors(*, shared: bool) -> None:
    from semantic import queries
    from semantic.models import QueryVector

    queries.memory_cleared()
    if shared:
        QueryVector.objects.all().delete()


def uncached_ms(
    search: Callable[[str], Any], texts: Sequence[str]
) -> dict[str, tuple[float, float]]:
    """p50/p95 of a search with the vector branch whose question vector is: in this process's
    memory (``cached``); only in the shared table, as in a process that never saw it
    (``shared``); nowhere, embedded on the way (``uncached``). Call by call, each text in all
    three states in turn, so the three see the same load; ``extra``: per text, uncached minus
    cached."""
    samples: dict[str, list[float]] = defaultdict(list)
    timer = time.perf_counter
    with arm(VECTOR):
        for text in texts:
            timed = {}
            for state in ("uncached", "shared", "cached"):
                if state != "cached":
                    _forget_question_vectors(shared=state == "uncached")
                began = timer()
                search(text)
                timed[state] = (timer() - began) * 1000
                samples[state].append(timed[state])
            samples["extra"].append(timed["uncached"] - timed["cached"])
    return {
        f"search {state}": (percentile(values, 0.5), percentile(values, 0.95))
        for state, values in samples.items()
    }


def coalesced_ms(texts: Sequence[str], clients: int = 4) -> tuple[float, float, int]:
    """``clients`` threads each embed a question of their own at once through the process's
    coalescer: the wall time of all, the time of the same questions one after the other, and
    how many embedder calls the coalescer made."""
    from semantic import embedders, queries

    with arm(VECTOR):
        embedder = embedders.configured()
    assert embedder is not None
    chosen = [f"{t} {uuid.uuid4().hex[:6]}" for t in list(texts)[:clients]]
    began = time.perf_counter()
    embedder.queries([chosen[0] + " warm"])
    for text in chosen:
        embedder.queries([text + " alone"])
    one_by_one = (time.perf_counter() - began) * 1000 * len(chosen) / (len(chosen) + 1)
    coalescer = queries.Coalescer(embedder.queries)
    start = threading.Barrier(len(chosen) + 1)

    def ask(text: str) -> None:
        start.wait()
        coalescer.submit(text).result()

    threads = [threading.Thread(target=ask, args=(t,)) for t in chosen]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return (time.perf_counter() - began) * 1000, one_by_one, coalescer.calls


def query_embedding_ms(texts: Sequence[str]) -> tuple[float, float]:
    """p50/p95 of embedding one query text with the configured local model, each text once and
    never from a cache (a fresh suffix makes every text new to any cache below the embedder)."""
    from semantic import embedders

    with arm(VECTOR):
        embedder = embedders.configured()
    assert embedder is not None
    samples = []
    for text in texts:
        began = time.perf_counter()
        embedder.queries([f"{text} {uuid.uuid4().hex[:6]}"])
        samples.append((time.perf_counter() - began) * 1000)
    return percentile(samples, 0.5), percentile(samples, 0.95)


def _private_kib() -> int:
    """This process's private memory (resident pages no other process shares), KiB."""
    fields = Path("/proc/self/smaps_rollup").read_text().splitlines()
    return sum(int(line.split()[1]) for line in fields if line.startswith("Private_"))


def forked_first_question(*, preloaded: bool) -> tuple[float, int]:
    """In a child forked from this process (which holds the local model, as a gunicorn master
    started with ``--preload`` does): the time of its first question (ms) and the private memory
    it gained (KiB), with the model inherited (``preloaded``) or loaded by the child itself, as
    a worker did before the preload."""
    from semantic.embedders import LocalEmbedder

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            before = _private_kib()
            began = time.perf_counter()
            model = kept_local_embedder() if preloaded else LocalEmbedder()
            model.queries(["why is my gift card empty"])
            ms = (time.perf_counter() - began) * 1000
            os.write(write, json.dumps([ms, _private_kib() - before]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        ms, kib = json.loads(answer.read())
    os.waitpid(pid, 0)
    return float(ms), int(kib)


def passages_per_second(texts: Sequence[str]) -> float:
    from semantic import embedders

    with arm(VECTOR):
        embedder = embedders.configured()
    assert embedder is not None
    embedder.passages(list(texts[:2]))  # the model is loaded once per process
    began = time.perf_counter()
    embedder.passages(list(texts))
    return len(texts) / (time.perf_counter() - began)


# --- main ---------------------------------------------------------------------------------------


def _note_load() -> None:
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    print(f"machine: {cores} cores, load average {load:.1f}; OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    # Run as a script this module is __main__; the embedder factory is named by its import path.
    sys.modules.setdefault("bench.bench_semantic", sys.modules[__name__])
    args = parse_args(argv)
    if args.tiny:
        global _local
        _local = HashedEmbedder()
        print("--tiny: vectors hashed from the tokens, not the model's; the figures mean nothing")
    cleanup = prepare_database(args)
    try:
        vendor = django_ready()
        print(f"bench_semantic on {vendor}")
        _note_load()
        world = load_world()
        print(
            f"loaded the demo world and the paraphrase set ({world.documents} documents, "
            f"{world.cases} cases approved) in {world.loaded_seconds:.0f} s"
        )
        if not semantic_installed():
            print("the semantic app is not installed: lexical figures only")
            arms: tuple[str, ...] = (LEXICAL,)
        else:
            arms = ARMS
            made, seconds = embed_everything()
            print(
                f"indexing throughput, reembed --wait (local model): {made} items in "
                f"{seconds:.1f} s, {made / seconds if seconds else 0:.1f} items/s"
            )
            sample = [d["title"] + "\n" + d["text"] for d in _read(PARAPHRASE / "knowledge.json")]
            rate = passages_per_second(sample[:THROUGHPUT_SAMPLE])
            print(
                f"  the embedder alone, {THROUGHPUT_SAMPLE} passages in one call: {rate:.1f} items/s"
            )
        if args.no_quality and len(arms) == 2:
            latency(args, world)
            return 0
        para = with_overlap(paraphrases())
        scores, statuses, para_changed = evaluate(para, world, arms)
        para_all = report_quality(
            f"Paraphrases ({len(para)} queries, fixtures/paraphrase/queries.json)",
            para,
            scores,
            arms,
            para_changed,
            styles=True,
        )
        held = with_overlap(heldout_questions())
        held_scores, held_statuses, held_changed = evaluate(held, world, arms)
        held_all = report_quality(
            f"Exact wording: the held-out tickets ({len(held)} questions)",
            held,
            held_scores,
            arms,
            held_changed,
            styles=False,
        )
        for name in arms:
            both = {
                k: statuses[name][k] + held_statuses[name][k]
                for k in {*statuses[name], *held_statuses[name]}
            }
            print(
                f"  semantic status of the answers, {ARM_NAMES[name]}: {dict(sorted(both.items()))}"
            )
        if len(arms) == 2:
            gain = para_all[VECTOR][0] - para_all[LEXICAL][0]
            loss = held_all[LEXICAL][0] - held_all[VECTOR][0]
            print(
                f"\n  paraphrase recall@4 gain: {gain * 100:+.1f} points "
                f"(target >= {TARGET_PARAPHRASE_GAIN * 100:.0f}): "
                f"{'PASS' if gain >= TARGET_PARAPHRASE_GAIN else 'MISS'}"
            )
            print(
                f"  exact-wording recall@4 change: {-loss * 100:+.1f} points (target: no loss): "
                f"{'PASS' if loss <= 0 else 'MISS'}"
            )
        if len(arms) == 2 and args.sweep:
            sweep(para, held, world, para_all[LEXICAL][0], held_all[LEXICAL][0])
        if len(arms) == 2 and not args.no_latency:
            latency(args, world)
        return 0
    finally:
        cleanup()


# The fusion settings the sweep tries: the vector branch's significance floor (the fitted one, and
# half a deviation either side) and its votes in the RRF sum. Query vectors are cached, so each
# setting costs only the searches.
SWEEP_FLOOR_SHIFTS = (-0.5, 0.0, 0.5)
SWEEP_VOTES = (1, 2, 3)


def sweep(
    para: list[Question],
    held: list[Question],
    world: World,
    para_lexical: float,
    held_lexical: float,
) -> None:
    """Paraphrase gain and exact-wording change of recall@4 under each fusion setting."""
    import json
    import tempfile

    from django.conf import settings

    from semantic import calibration, embedders

    embedder = embedders.configured()
    assert embedder is not None
    fitted = calibration.for_model(embedder.name)
    print("\nFusion settings (recall@4 with the vector branch; gain / change against lexical)")
    print(f"  {'floor':>5} {'votes':>5}  {'paraphrases':>18}  {'exact wording':>18}")
    saved = (settings.SEMANTIC_CALIBRATION_FILE, settings.SEMANTIC_VOTES)
    try:
        with tempfile.TemporaryDirectory() as folder:
            for shift in SWEEP_FLOOR_SHIFTS:
                floor = fitted.floor + shift
                path = f"{folder}/floor{shift:+.1f}.json"
                with open(path, "w", encoding="utf-8") as out:
                    json.dump(
                        {
                            "models": {
                                embedder.name: {"curve": fitted.vector.as_json(), "floor": floor}
                            },
                            "lexical": fitted.lexical.as_json(),
                        },
                        out,
                    )
                settings.SEMANTIC_CALIBRATION_FILE = path
                for count in SWEEP_VOTES:
                    settings.SEMANTIC_VOTES = count
                    cells = []
                    for questions, lexical in ((para, para_lexical), (held, held_lexical)):
                        scores, _, _ = evaluate(questions, world, (VECTOR,))
                        recall = scores[(VECTOR, "all", "")].row()[0]
                        cells.append(f"{recall:.3f} ({(recall - lexical) * 100:+5.1f})")
                    mark = "  <- configured" if (shift, count) == (0.0, saved[1]) else ""
                    print(f"  {floor:5.2f} {count:5d}  {cells[0]:>18}  {cells[1]:>18}" + mark)
    finally:
        settings.SEMANTIC_CALIBRATION_FILE, settings.SEMANTIC_VOTES = saved


def latency(args: argparse.Namespace, world: World) -> None:
    print("\nLatency (ms, p50 / p95, interleaved; medians over rounds)")
    build_latency_scopes(args.size_list, args.seed)
    how = embed_latency_scopes(args.size_list, real_up_to=1000)
    texts = make_questions(args.seed, args.queries)
    for size in args.size_list:
        result, statuses = measure_latency(size, texts, world, args.rounds)
        embed = result["embed query"]
        print(f"  {size} items in one scope (vectors per space: {how[size]})")
        for what in ("search", "retrieve"):
            lexical = result[f"{what} {LEXICAL}"]
            vector = result[f"{what} {VECTOR}"]
            ratio = vector[0] / lexical[0]
            ran = bool(statuses[what].get("used") or statuses[what].get("partial"))
            # Issue 40's target: with the query vector cached, within 1.3x lexical.
            verdict = "PASS" if ratio <= TARGET_LATENCY_RATIO else "MISS"
            print(
                f"    {what:8} lexical {lexical[0]:7.2f} / {lexical[1]:7.2f}   "
                f"with vector {vector[0]:7.2f} / {vector[1]:7.2f}   ratio {ratio:.2f}; "
                f"target <= {TARGET_LATENCY_RATIO} (query vector cached): "
                + (verdict if ran else "n/a, no vector branch ran")
            )
            print(
                f"             semantic status with vector: {dict(sorted(statuses[what].items()))}"
            )
        print(
            f"    one query embedding (uncached) {embed[0]:7.2f} / {embed[1]:7.2f}; the ratio "
            "compares the cached-vector arm, so a first query adds one embedding to both sides"
        )
        cached, shared = result["search cached"], result["search shared"]
        uncached, extra = result["search uncached"], result["search extra"]
        print(
            f"    search with vector, question vector in memory {cached[0]:7.2f} / {cached[1]:7.2f}"
            f"   from the shared table {shared[0]:7.2f} / {shared[1]:7.2f}"
            f"   embedded {uncached[0]:7.2f} / {uncached[1]:7.2f}"
        )
        verdict = "PASS" if extra[0] <= embed[0] else "MISS"
        print(
            f"    an uncached question's extra cost {extra[0]:7.2f} / {extra[1]:7.2f}; target <= one"
            f" embedding ({embed[0]:.2f} ms p50, this run's load): {verdict}"
        )
    if not args.tiny and sys.platform.startswith("linux"):
        forks: dict[bool, list[tuple[float, int]]] = {True: [], False: []}
        for _ in range(FORKS):  # alternating, so both see the same load
            for preloaded in (True, False):
                forks[preloaded].append(forked_first_question(preloaded=preloaded))
        for preloaded, runs in forks.items():
            mode = "preloaded in the parent" if preloaded else "loaded after the fork"
            print(
                f"  a forked worker's first question, model {mode} (median of {FORKS}): "
                f"{statistics.median(r[0] for r in runs):.0f} ms, "
                f"{statistics.median(r[1] for r in runs) / 1024:.1f} MiB of private memory gained"
            )
    together, apart, calls = coalesced_ms(texts)
    print(
        f"  4 questions at once through the coalescer: {together:.1f} ms in {calls} embedder "
        f"call(s); one after the other {apart:.1f} ms"
    )


if __name__ == "__main__":
    sys.exit(main())
