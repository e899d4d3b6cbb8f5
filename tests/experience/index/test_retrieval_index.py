"""The retrieval index: the same ranked ids as ranking every gated item's text, on random corpora.

The reference is the definition retrieval had before the index: every case, skill and lesson of
the scope past the gate, ranked by ``experience.core.domain.rank_items`` over its text with the
current lexicon. The index must give exactly those ids in that order, after approvals,
revocations, supersessions and lexicon changes, and while a scope's expanded postings are behind
the lexicon.

The random corpora are written as rows (with times no review could give them), each change then
followed by the calls a review decision makes once it has saved a status
(``experience.review.lifecycle.status_followed``, the lesson inputs of a conflict), so the index
hears of it exactly as it does from the services; the review services themselves are followed by
``test_the_index_follows_approval_revocation_and_supersession``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experience.cases.models import Case, Skill, SkillCase
from experience.core import domain
from experience.core.models import Status
from experience.index import lesson_inputs, postings
from experience.index.lesson_inputs import evidence_refreshed
from experience.index.models import IndexEntry, IndexPosting, IndexScope
from experience.lessons.models import Lesson, LessonCase, LessonConflict
from experience.lessons.selectors import item_confidences
from experience.retrieval import ranking
from experience.retrieval.block import experience_context
from experience.retrieval.pipeline import gated_cases, gated_skills
from experience.retrieval.recall import recallable_lessons
from experience.retrieval.service import ranked_items
from experience.review.decisions import case_reject
from experience.review.events import LessonConflictClosed, LessonConflictOpened
from experience.review.lifecycle import status_followed
from experience.review.revocation import case_revoke
from knowledge.domain import sha256_hex
from knowledge.models import Synonym
from knowledge.postings import lexicon_stamp
from knowledge.services import synonym_delete, synonym_set
from reviewconsole.dispatch import dispatch
from tests.experience.conftest import NOW, SCOPE, approve_checked, case_data
from textsearch.postings import ids_of

pytestmark = pytest.mark.django_db

WORDS = (
    "优惠券",
    "代金券",
    "用不了",
    "无法使用",
    "水果茶",
    "小程序",
    "打印机",
    "断电",
    "coupon",
    "门店",
)
OTHER = {**SCOPE, "store": "store-009"}
SCOPES = (SCOPE, OTHER)
# Validity windows relative to NOW: in force, expired, not yet in force, approved after NOW.
WINDOWS = ("now", "expired", "future", "approved-later")


class Rollback(Exception):
    pass


@dataclass(frozen=True)
class Spec:
    text: str
    scope: int
    window: str
    approved: bool


def _times(window: str) -> dict[str, Any]:
    day = timedelta(days=1)
    valid_from, valid_to, approved_at = NOW - 30 * day, NOW + 30 * day, NOW - day
    if window == "expired":
        valid_to = NOW - day
    elif window == "future":
        valid_from = NOW + day
    elif window == "approved-later":
        approved_at = NOW + day
    return {"valid_from": valid_from, "valid_to": valid_to, "approved_at": approved_at}


def _common(
    prefix: str, n: int, spec: Spec, user: User, title: str | None = None
) -> dict[str, Any]:
    scope = SCOPES[spec.scope]
    times = _times(spec.window)
    return {
        "id": f"{prefix}:{sha256_hex([prefix, n, spec.text])}",
        **scope,
        "title": title if title is not None else spec.text[:40],
        "valid_from": times["valid_from"],
        "valid_to": times["valid_to"],
        "content_hash": sha256_hex([prefix, n]),
        "content": {"n": n},
        "submitted_by": user,
        "submitted_via": "import",
        "submitted_at": NOW - timedelta(days=40),
        "status": Status.APPROVED if spec.approved else Status.CANDIDATE,
        "approved_by": user if spec.approved else None,
        "approved_at": times["approved_at"] if spec.approved else None,
    }


def status_published(item: Case | Skill | Lesson) -> None:
    """What a review decision calls once it has saved an item's status."""
    status_followed(item, now=NOW)


def approved_published(item: Case | Skill | Lesson) -> None:
    if item.status == Status.APPROVED:
        status_published(item)


def make_case(n: int, spec: Spec, user: User) -> Case:
    case = Case.objects.create(
        **_common("case", n, spec, user), incident=f"INC-{n}", search_text=spec.text
    )
    approved_published(case)
    return case


def make_skill(n: int, spec: Spec, cited: list[Case], user: User) -> Skill:
    skill = Skill.objects.create(
        **_common("skill", n, spec, user, title=spec.text[:6]), when=spec.text, recipe=[]
    )
    for position, case in enumerate(cited):
        SkillCase.objects.create(skill=skill, case=case, position=position)
    approved_published(skill)
    return skill


def make_lesson(n: int, spec: Spec, supports: list[Case], user: User) -> Lesson:
    lesson = Lesson.objects.create(
        **_common("lesson", n, spec, user),
        lesson_type="failure_lesson",
        scene_tags=[],
        scene_description=spec.text,
        precondition="",
        conclusion=spec.text,
        search_text=spec.text,
    )
    for position, case in enumerate(supports):
        LessonCase.objects.create(lesson=lesson, case=case, relation="supports", position=position)
    approved_published(lesson)
    return lesson


def revoked(made: list[Case], picks: list[int]) -> None:
    """Revoke the picked cases that are still approved."""
    for i in picks:
        case = made[i % len(made)]
        case.refresh_from_db()
        if case.status == Status.APPROVED:
            case.status = Status.REVOKED
            case.save(update_fields=["status"])
            status_published(case)


def reference(query: str, scope: dict[str, str]) -> list[str]:
    """Ranked ids by the definition: every gated item's text through ``rank_items``."""
    lexicon = dict(Synonym.objects.values_list("term", "canonical"))
    texts = list(gated_cases(scope, NOW).values_list("id", "search_text"))
    texts += [(i, postings.skill_text(title, when)) for i, title, when in gated_skills(scope, NOW)]
    texts += [(i, lesson.search_text) for i, lesson in recallable_lessons(scope, NOW).items()]
    return domain.rank_items(query, texts, lexicon)


def indexed(query: str, scope: dict[str, str]) -> list[str]:
    return [
        i for i, _kind, _title in ranked_items(query, scope, NOW, recallable_lessons(scope, NOW))
    ]


def assert_same(queries: list[str]) -> int:
    answered = 0
    for query in queries:
        for scope in SCOPES:
            expected = reference(query, scope)
            assert indexed(query, scope) == expected, (query, scope)
            if IndexScope.objects.filter(store=scope["store"]).exists():
                # The answer came from the index, not from ranking the texts.
                assert postings.scope_read(scope, query) is not postings.STALE
            answered += bool(expected)
    return answered


sentences = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
specs = st.builds(
    Spec,
    text=sentences,
    scope=st.integers(0, 1),
    window=st.sampled_from(WINDOWS),
    approved=st.booleans(),
)
queries = st.lists(
    st.builds(
        str.join,
        st.sampled_from(("", " ")),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=5,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    cases=st.lists(specs, min_size=1, max_size=14),
    skills=st.lists(
        st.tuples(specs, st.lists(st.integers(0, 13), min_size=1, max_size=2)), max_size=3
    ),
    lessons=st.lists(st.tuples(specs, st.integers(0, 13)), max_size=3),
    asked=queries,
    revoke=st.lists(st.integers(0, 13), max_size=3),
    synonym=st.tuples(st.sampled_from(WORDS), st.sampled_from(WORDS)),
)
def test_indexed_ranking_equals_the_definition_on_random_corpora(
    operator: User,
    cases: list[Spec],
    skills: list[tuple[Spec, list[int]]],
    lessons: list[tuple[Spec, int]],
    asked: list[str],
    revoke: list[int],
    synonym: tuple[str, str],
) -> None:
    try:
        with transaction.atomic():
            made = [make_case(n, spec, operator) for n, spec in enumerate(cases)]
            for n, (spec, cited) in enumerate(skills):
                # A skill cites cases of its own scope.
                chosen = [made[i % len(made)] for i in cited]
                spec = Spec(
                    spec.text, chosen[0].store == OTHER["store"], spec.window, spec.approved
                )
                make_skill(n, spec, list(dict.fromkeys(chosen)), operator)
            for n, (spec, support) in enumerate(lessons):
                case = made[support % len(made)]
                spec = Spec(spec.text, case.store == OTHER["store"], spec.window, spec.approved)
                make_lesson(n, spec, [case], operator)
            assert_same(asked)

            # Revocations take items out of the index (and a skill loses a cited case).
            revoked(made, revoke)
            assert_same(asked)

            # A lexicon change: the queued refresh brings every scope to the new stamp.
            term, canonical = synonym
            if term != canonical:
                synonym_set(term=term, canonical=canonical, actor=operator)
                assert set(IndexScope.objects.values_list("stamp", flat=True)) <= {lexicon_stamp()}
                assert_same(asked)
            raise Rollback
    except Rollback:
        pass


def test_a_scope_behind_the_lexicon_ranks_from_the_texts_until_refreshed(operator: User) -> None:
    first = make_case(1, Spec("代金券 用不了", 0, "now", True), operator)
    make_case(2, Spec("打印机 断电", 0, "now", True), operator)
    assert indexed("优惠券", SCOPE) == reference("优惠券", SCOPE) == [first.id]
    # The lexicon changes and no refresh has run yet (as when the task waits for a worker).
    IndexScope.objects.update(stamp="an-older-stamp")
    assert postings.scope_read(SCOPE, "优惠券") is postings.STALE
    assert indexed("优惠券", SCOPE) == reference("优惠券", SCOPE)
    assert postings.expanded_refreshed() == 1
    assert postings.scope_read(SCOPE, "优惠券") is not postings.STALE
    assert indexed("优惠券", SCOPE) == reference("优惠券", SCOPE)


def test_a_lexicon_change_reaches_indexed_items(operator: User) -> None:
    points = make_case(1, Spec("积分 兑换", 0, "now", True), operator)
    make_case(2, Spec("打印机 断电", 0, "now", True), operator)
    assert indexed("点数", SCOPE) == []
    synonym_set(term="点数", canonical="积分", actor=operator)
    assert indexed("点数", SCOPE) == reference("点数", SCOPE) == [points.id]
    synonym_delete(synonym=Synonym.objects.get(term="点数"), actor=operator)
    assert indexed("点数", SCOPE) == reference("点数", SCOPE) == []


def test_candidates_are_only_the_items_sharing_a_token(operator: User) -> None:
    coupon = make_case(1, Spec("优惠券 无法使用", 0, "now", True), operator)
    make_case(2, Spec("打印机 断电", 0, "now", True), operator)
    make_case(3, Spec("水果茶", 1, "now", True), operator)  # another scope
    read = postings.scope_read(SCOPE, "优惠券")
    assert read is not postings.STALE
    assert len(read.entries) == 2  # the scope's packed array: its two cases only
    listed = {int(i) for ids in [*read.raw, *read.expanded] for i in ids}
    assert [row.item_id for row in postings.entry_rows(listed).values()] == [coupon.id]


def test_a_scope_without_its_array_ranks_from_the_texts_until_packed(operator: User) -> None:
    """Entries written before the arrays existed: the refresh packs them."""
    coupon = make_case(1, Spec("优惠券 无法使用", 0, "now", True), operator)
    make_case(2, Spec("打印机 断电", 0, "now", True), operator)
    IndexScope.objects.update(arrays=None)
    assert postings.scope_read(SCOPE, "优惠券") is postings.STALE
    assert indexed("优惠券", SCOPE) == reference("优惠券", SCOPE) == [coupon.id]
    assert postings.expanded_refreshed() == 1
    assert postings.scope_read(SCOPE, "优惠券") is not postings.STALE
    assert indexed("优惠券", SCOPE) == [coupon.id]


def test_the_index_follows_approval_revocation_and_supersession(
    submit_case: Callable[..., Case], second_reviewer: User
) -> None:
    """The review services keep the index in step, in their own transaction."""

    def entries() -> list[str]:
        return list(IndexEntry.objects.values_list("item_id", flat=True))

    first = submit_case(case_data())
    assert entries() == []  # a candidate is not indexed
    approve_checked(first, actor=second_reviewer)
    assert entries() == [first.id]
    newer = submit_case(
        case_data(title="二号店优惠券无法使用：门店范围漏配（补充）", supersedes=first.id)
    )
    approve_checked(newer, actor=second_reviewer)
    assert entries() == [newer.id]
    rejected = submit_case(case_data(incident="INC-2", title="二号店打印机断电"))
    case_reject(case=rejected, actor=second_reviewer, reason="not an incident")
    assert entries() == [newer.id]
    case_revoke(case=newer, actor=second_reviewer, reason="the store list was right")
    assert entries() == []
    # Every posting list that held them is gone with them once the delta is merged.
    for scope_id in IndexScope.objects.values_list("pk", flat=True):
        postings.delta_merged(scope_id)
    assert not IndexPosting.objects.exists()


def test_a_rebuild_writes_what_approvals_wrote(operator: User) -> None:
    first = make_case(1, Spec("优惠券 无法使用", 0, "now", True), operator)
    make_case(2, Spec("代金券 打印机", 1, "expired", True), operator)
    make_lesson(1, Spec("优惠券 门店", 0, "now", True), [first], operator)
    for scope_id in IndexScope.objects.values_list("pk", flat=True):
        postings.delta_merged(scope_id)
    before = snapshot()
    assert postings.rebuild() == 3
    assert snapshot() == before


def snapshot() -> tuple[Any, Any, Any]:
    scopes = dict(IndexScope.objects.values_list("pk", "store"))
    entries = dict(IndexEntry.objects.values_list("pk", "item_id"))
    # Each scope's packed array by item id (entry ids differ between a rebuild and approvals).
    arrays = {
        scopes[pk]: sorted(
            (entries[int(record["id"])], *(record[name].item() for name in record.dtype.names[1:]))
            for record in postings.entries_of(blob)
        )
        for pk, blob in IndexScope.objects.values_list("pk", "arrays")
    }
    lists = {
        (scopes[scope], token): (
            sorted(entries[i] for i in ids_of(raw)),
            sorted(entries[i] for i in ids_of(expanded)),
        )
        for scope, token, raw, expanded in IndexPosting.objects.values_list(
            "scope_id", "token", "raw", "expanded"
        )
    }
    rows = sorted(
        IndexEntry.objects.values_list(
            "item_id",
            "kind",
            "title",
            "raw_size",
            "expanded_size",
            "expanded_tokens",
            "scope__store",
            "evidence",
        )
    )
    return lists, rows, arrays


LEXICON = {"代金券": "优惠券", "用不了": "无法使用", "coupon": "优惠券", "cache": "缓存"}


# What ranking is told about an entry: gated or not, and admitted without asking (a case), when
# asked (a usable skill, a recallable lesson) or refused when asked.
VERDICTS = ("known", "admitted", "refused")


@settings(max_examples=400, deadline=None)
@given(
    texts=st.lists(
        st.tuples(
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=10).map(" ".join),
            st.booleans(),
            st.sampled_from(VERDICTS),
        ),
        max_size=30,
    ),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map("".join),
)
def test_ranking_from_intersection_counts_equals_rank_items(
    texts: list[tuple[str, bool, str]], query: str
) -> None:
    """What the index stores (set sizes, tie order) and reads (hits per query token) ranks the
    admitted items as their texts rank, however deep it is asked, asking about each entry it
    does not know at most once."""
    from knowledge.domain import RRF_K, expand, rank_branch, reciprocal_rank_fusion, tokenize

    items = [(f"case:{sha256_hex([n, text])}", text) for n, (text, _, _) in enumerate(texts)]
    kept = [
        item for item, (_, gated, verdict) in zip(items, texts, strict=True)
        if gated and verdict != "refused"
    ]  # fmt: skip
    raw_query, expanded_query = tokenize(query), tokenize(expand(query, LEXICON))
    raw_sets = [tokenize(text) for _, text in items]
    expanded_sets = [tokenize(expand(text, LEXICON)) for _, text in items]
    raw_hits = np.array([len(t & raw_query) for t in raw_sets], dtype=np.int64)
    expanded_hits = np.array([len(t & expanded_query) for t in expanded_sets], dtype=np.int64)
    by_id = sorted(range(len(items)), key=lambda i: items[i][0])
    order = np.zeros(len(items), dtype=np.int64)
    order[by_id] = np.arange(len(items))
    gated = np.array([g for _, g, _ in texts], dtype=bool)

    def ranking_of(k: int) -> tuple[ranking.Ranking, list[int]]:
        asked: list[int] = []

        def decide(positions: np.ndarray) -> np.ndarray:
            asked.extend(positions.tolist())
            return np.array([texts[p][2] == "admitted" for p in positions], dtype=bool)

        ranked = ranking.Ranking(
            raw_hits=raw_hits,
            expanded_hits=expanded_hits,
            raw_size=len(raw_query),
            expanded_size=len(expanded_query),
            raw_sizes=np.array([len(t) for t in raw_sets], dtype=np.int64),
            expanded_sizes=np.array([len(t) for t in expanded_sets], dtype=np.int64),
            order=order,
            candidates=gated & ((raw_hits > 0) | (expanded_hits > 0)),
            known=np.array([verdict == "known" for _, _, verdict in texts], dtype=bool),
            decide=decide,
            k=k,
        )
        return ranked, asked

    def ids(positions: np.ndarray) -> list[str]:
        return [items[p][0] for p in positions]

    expected = domain.rank_items(query, kept, LEXICON)
    whole, asked = ranking_of(RRF_K)
    assert ids(whole.head(len(items) + 1)) == expected
    assert len(asked) == len(set(asked))
    # Only the first ``limit``: the same first ``limit``, also with a small fusion constant,
    # where the bound (k + 2 * limit) leaves most candidates out; asked deeper, it goes on.
    branches = [
        rank_branch(raw_query, [(i, tokenize(text)) for i, text in kept]),
        rank_branch(expanded_query, [(i, tokenize(expand(text, LEXICON))) for i, text in kept]),
    ]
    for k in (1, 3, RRF_K):
        fused = reciprocal_rank_fusion(branches, k)
        for limit in (1, 2, 5):
            ranked, asked = ranking_of(k)
            assert ids(ranked.head(limit)) == fused[:limit], (k, limit)
            assert ids(ranked.head(limit + 3)) == fused[: limit + 3], (k, limit)
            assert len(asked) == len(set(asked))


def test_fused_order_is_exact_where_distinct_scores_share_a_float() -> None:
    """1/a + 1/b and 1/c + 1/d that differ but round to one double are ordered as the exact
    values, not by the tie order the floats would leave them to."""
    from fractions import Fraction

    k = 60
    (a, b), (c, d) = (65_044_081, 50_959_385), (53_209_249, 61_713_406)
    assert (a + b) / (a * b) == (c + d) / (c * d)
    assert Fraction(1, a) + Fraction(1, b) > Fraction(1, c) + Fraction(1, d)
    first = np.array([a - k, 1, c - k], dtype=np.int64)
    second = np.array([b - k, 1, d - k], dtype=np.int64)
    order = np.array([2, 0, 1], dtype=np.int64)  # ties would put the third before the first
    positions = np.array([0, 1, 2], dtype=np.int64)
    assert ranking.fused_order(positions, first, second, order, k).tolist() == [1, 0, 2]
    # Equal floats that are equal scores keep the tie order.
    first, second = np.array([5, 0, 3]), np.array([0, 5, 0])
    assert ranking.fused_order(positions, first, second, order, k).tolist() == [2, 1, 0]


def test_the_context_block_reads_ranked_items_a_chunk_at_a_time(
    operator: User, agent: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experience.retrieval import block as context_service

    for n in range(5):
        make_case(n, Spec(f"优惠券 无法使用 门店 {'coupon ' * n}", 0, "now", True), operator)
    blocks = []
    for chunk in (1, 2, 100):
        monkeypatch.setattr(context_service, "chunk_size", lambda budget, chunk=chunk: chunk)
        result = context_service.experience_context(
            "优惠券无法使用", SCOPE, NOW, f"run-chunk-{chunk}", 2_000, actor=agent
        )
        blocks.append((result["block"], result["items"]))
    assert len(blocks[0][1]) == 5
    assert blocks[0] == blocks[1] == blocks[2]


def test_a_retrieval_reads_outcomes_in_one_statement(operator: User, agent: User) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from experience.retrieval.service import retrieve_experience

    first = make_case(1, Spec("优惠券 无法使用", 0, "now", True), operator)
    second = make_case(2, Spec("优惠券 门店", 0, "now", True), operator)
    # Two supporting incidents: confidence above the lessons' threshold.
    make_lesson(1, Spec("优惠券 无法使用 门店", 0, "now", True), [first, second], operator)
    with CaptureQueriesContext(connection) as queries:
        result = retrieve_experience("优惠券无法使用", SCOPE, NOW, "run-once", actor=agent)
    assert {item["type"] for item in result["items"]} == {"case", "lesson"}
    outcome_reads = [q for q in queries.captured_queries if "runoutcome" in q["sql"]]
    assert len(outcome_reads) == 1


def _from_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postings, "scope_read", lambda scope, query: postings.STALE)


def open_conflict(first: Lesson, second: Lesson) -> LessonConflict:
    a, b = sorted((first.id, second.id))
    conflict = LessonConflict.objects.create(
        lesson_a_id=a,
        lesson_b_id=b,
        tenant=SCOPE["tenant"],
        found_by="type_opposition",
        detected_at=NOW - timedelta(days=1),
        detected_on="scan",
    )
    lesson_inputs.conflict_followed(conflict=conflict)
    dispatch(LessonConflictOpened(conflict=conflict, now=NOW))
    return conflict


def conflict_resolved(conflict: LessonConflict) -> None:
    conflict.status = "resolved"
    conflict.save(update_fields=["status"])
    lesson_inputs.conflict_followed(conflict=conflict)
    dispatch(LessonConflictClosed(conflict=conflict, now=NOW))


def cited_late(lesson: Lesson, case: Case, relation: str, position: int) -> None:
    """A link written after the lesson's approval, as a bulk load writes one (no service
    does): its writer rewrites the lesson's kept inputs."""
    LessonCase.objects.create(lesson=lesson, case=case, relation=relation, position=position)
    evidence_refreshed([lesson.id])


def assert_entries_current() -> None:
    """Every lesson entry keeps what its lesson's evidence is now, read from the tables."""
    from experience.index.lesson_inputs import evidence_of

    kept = dict(IndexEntry.objects.filter(kind="lesson").values_list("item_id", "evidence"))
    assert kept == evidence_of(sorted(kept))


def assert_recall_same(asked: list[str], agent: User, tag: str) -> None:
    from experience.retrieval.service import retrieve_experience

    assert_entries_current()
    for n, query in enumerate(asked):
        for scope in SCOPES:
            got = retrieve_experience(query, scope, NOW, f"run-i{tag}-{n}", 20, actor=agent)
            with pytest.MonkeyPatch.context() as patch:
                _from_texts(patch)
                expected = retrieve_experience(
                    query, scope, NOW, f"run-t{tag}-{n}", 20, actor=agent
                )
            assert got == expected, (tag, query, scope)
            # A returned case's or skill's confidence is what the console reads for it from the
            # tables: retrieval hands over the times and cited cases it read to rank them.
            cases = [item["id"] for item in got["items"] if item["type"] == "case"]
            skills = [item["id"] for item in got["items"] if item["type"] == "skill"]
            read = item_confidences(cases, skills, NOW)
            for item in got["items"]:
                if item["type"] != "lesson":
                    score = read[item["id"]]
                    assert (item["confidence"], item["why"]) == (score.value, score.why())
            block = experience_context(query, scope, NOW, f"run-c{tag}-{n}", 400, actor=agent)
            with pytest.MonkeyPatch.context() as patch:
                _from_texts(patch)
                assert block == experience_context(
                    query, scope, NOW, f"run-d{tag}-{n}", 400, actor=agent
                ), (tag, query, scope)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    # Mostly usable cases, so that lessons citing them clear the threshold.
    cases=st.lists(
        st.builds(
            Spec,
            text=sentences,
            scope=st.integers(0, 1),
            window=st.sampled_from(("now", "now", "now", "expired")),
            approved=st.just(True),
        ),
        min_size=2,
        max_size=10,
    ),
    skills=st.lists(
        st.tuples(specs, st.lists(st.integers(0, 9), min_size=1, max_size=2)), max_size=3
    ),
    lessons=st.lists(
        st.tuples(sentences, st.lists(st.integers(0, 9), min_size=2, max_size=4)),
        min_size=1,
        max_size=4,
    ),
    conflicted=st.booleans(),
    confirmed=st.lists(st.tuples(st.integers(0, 9), st.booleans()), max_size=4),
    asked=queries,
    revoke=st.lists(st.integers(0, 9), max_size=2),
    merge=st.tuples(st.integers(0, 9), st.integers(0, 9)),
    cite=st.tuples(st.integers(0, 3), st.integers(0, 9), st.booleans()),
)
def test_recall_from_the_index_answers_what_recall_from_the_texts_answers(
    operator: User,
    reviewer: User,
    agent: User,
    cases: list[Spec],
    skills: list[tuple[Spec, list[int]]],
    lessons: list[tuple[str, list[int]]],
    conflicted: bool,
    confirmed: list[tuple[int, bool]],
    asked: list[str],
    revoke: list[int],
    merge: tuple[int, int],
    cite: tuple[int, int, bool],
) -> None:
    """Confidence, its reasons, lesson fields and conflicts too: the index's gate times stand in
    for the case rows, and the lessons' entries for their cited cases and conflicts, through
    every change that alters them."""
    from curation.incidents import incident_merge
    from experience.runs.models import RunOutcome
    from experience.runs.records import references_record

    try:
        with transaction.atomic():
            made = [make_case(n, spec, operator) for n, spec in enumerate(cases)]
            for n, (spec, cited) in enumerate(skills):
                chosen = list(dict.fromkeys(made[i % len(made)] for i in cited))
                spec = Spec(spec.text, chosen[0].store == OTHER["store"], spec.window, True)
                make_skill(n, spec, chosen, operator)
            recalled = []
            for n, (text, support) in enumerate(lessons):
                # Supported by cases of its scope; in force, so its support decides.
                chosen = list(dict.fromkeys(made[i % len(made)] for i in support))
                chosen = [c for c in chosen if c.store == chosen[0].store]
                spec = Spec(text, chosen[0].store == OTHER["store"], "now", True)
                recalled.append(make_lesson(n, spec, chosen, operator))
            conflict = None
            if conflicted and len(recalled) >= 2:
                # An open conflict: recalled flagged even below the threshold.
                conflict = open_conflict(recalled[0], recalled[1])
            # Reported outcomes move confidence up or down (and the last confirmation).
            for n, (i, good) in enumerate(confirmed):
                run = f"run-outcome-{n}"
                references_record(
                    run_id=run, items=[(made[i % len(made)].id, "case")], at=NOW - timedelta(1)
                )
                RunOutcome.objects.create(
                    run_id=run,
                    outcome="resolved_by_lead" if good else "lead_was_wrong",
                    reported_by=operator,
                    reported_at=NOW - timedelta(hours=n + 1),
                )
            assert_recall_same(asked, agent, "a")

            # Cited cases revoked; the conflict resolved; two incidents merged into one; a
            # counterexample cited after approval.
            revoked(made, revoke)
            if conflict is not None:
                conflict_resolved(conflict)
            alias, into = (made[i % len(made)].incident for i in merge)
            if alias != into:
                incident_merge(
                    tenant=SCOPE["tenant"],
                    brand=SCOPE["brand"],
                    alias=alias,
                    into=into,
                    actor=reviewer,
                    reason="one outage",
                )
            which, case_at, supports = cite
            if recalled:
                lesson = recalled[which % len(recalled)]
                case = made[case_at % len(made)]
                if (
                    case.store == lesson.store
                    and not LessonCase.objects.filter(lesson=lesson, case=case).exists()
                ):
                    cited_late(lesson, case, "supports" if supports else "contradicts", 9)
            assert_recall_same(asked, agent, "b")
            raise Rollback
    except Rollback:
        pass


def test_recall_reads_no_cited_case_of_a_lesson_whose_entry_keeps_them(
    operator: User, agent: User
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from experience.retrieval.service import retrieve_experience

    first = make_case(1, Spec("优惠券 无法使用", 0, "now", True), operator)
    second = make_case(2, Spec("优惠券 门店", 0, "now", True), operator)
    lesson = make_lesson(1, Spec("优惠券 无法使用 门店", 0, "now", True), [first, second], operator)
    assert IndexEntry.objects.get(item_id=lesson.id).evidence

    def recall(run: str) -> tuple[dict[str, Any], list[str]]:
        with CaptureQueriesContext(connection) as queries:
            result = retrieve_experience("优惠券无法使用", SCOPE, NOW, run, actor=agent)
        return result, [q["sql"] for q in queries.captured_queries if "lessoncase" in q["sql"]]

    kept, reads = recall("run-kept")
    assert lesson.id in [item["id"] for item in kept["items"]]
    assert reads == []
    # An entry written before it kept them (or by a migration) is read from the tables.
    IndexEntry.objects.filter(item_id=lesson.id).update(evidence="")
    unkept, reads = recall("run-unkept")
    assert len(reads) == 1
    assert unkept == kept


def test_a_lesson_entry_follows_every_change_to_its_evidence(
    operator: User, reviewer: User, agent: User
) -> None:
    from curation.incidents import incident_merge
    from experience.index.lesson_inputs import decode

    cases = [make_case(n, Spec(f"优惠券 门店 {n}", 0, "now", True), operator) for n in range(4)]
    lesson = make_lesson(1, Spec("优惠券 无法使用", 0, "now", True), cases[:3], operator)
    other = make_lesson(2, Spec("优惠券 门店", 0, "now", True), cases[:2], operator)
    asked = ["优惠券", "优惠券 无法使用"]

    def kept() -> Any:
        return decode(IndexEntry.objects.get(item_id=lesson.id).evidence, SCOPE)

    assert_recall_same(asked, agent, "approved")
    assert sorted(case.incident for _, case, _ in kept().cases) == ["INC-0", "INC-1", "INC-2"]

    revoked = cases[0]
    revoked.status = Status.REVOKED
    revoked.save(update_fields=["status"])
    status_published(revoked)
    statuses = {case.incident: case.status for _, case, _ in kept().cases}
    assert statuses == {"INC-0": "revoked", "INC-1": "approved", "INC-2": "approved"}
    assert_recall_same(asked, agent, "revoked")

    incident_merge(
        tenant=SCOPE["tenant"],
        brand=SCOPE["brand"],
        alias="INC-2",
        into="INC-1",
        actor=reviewer,
        reason="one outage",
    )
    assert sorted(case.incident for _, case, _ in kept().cases) == ["INC-0", "INC-1", "INC-1"]
    assert_recall_same(asked, agent, "merged")

    cited_late(lesson, cases[3], "contradicts", 0)
    assert {case.case_id: relation for relation, case, _ in kept().cases}[cases[3].id] == (
        "contradicts"
    )
    assert_recall_same(asked, agent, "cited")

    conflict = open_conflict(lesson, other)
    assert kept().conflict
    assert_recall_same(asked, agent, "conflict")
    conflict_resolved(conflict)
    assert not kept().conflict
    assert_recall_same(asked, agent, "resolved")
