"""The order of an answer: relevance fused with confidence and scene match (issue: a "best first"
block listed a 0.667 lesson above a 0.75 one of the same relevance).

The score (docs/contracts.md, "The order of retrieved experience"):
relevance × (3/4 + 1/4 · confidence) × (1 + 1/16 · scene share), ties by id, where relevance is
the RRF sum Σ 1/(60 + rank) and the scene share is how much of an item's declared scene tags the
request names.
"""

from __future__ import annotations

from datetime import timedelta
from fractions import Fraction
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.lessons.models import Lesson, LessonCase
from experience.lessons.selectors import item_confidences
from experience.retrieval import order, ranking
from experience.retrieval.block import experience_context
from experience.retrieval.service import retrieve_experience
from experience.runs.models import RunOutcome
from experience.runs.records import references_record
from knowledge.domain import sha256_hex, tokenize
from knowledge.services import synonym_set
from tests.experience.conftest import NOW, SCOPE
from tests.experience.index.test_retrieval_index import (
    Spec,
    _common,
    approved_published,
    make_case,
    status_published,
)

# --- the score, pure --------------------------------------------------------------------------


def test_equal_relevance_puts_the_higher_confidence_first() -> None:
    # Equal relevance: first and second in the two branches, the other way round.
    assert ranking.relevance((1, 2)) == ranking.relevance((2, 1))
    low = ranking.fused_score((1, 2), 0.667, Fraction(0))
    high = ranking.fused_score((2, 1), 0.75, Fraction(0))
    assert high > low
    assert ranking.best_first([(low, "lesson:a"), (high, "lesson:b")]) == [1, 0]


def test_the_issue_s_case_one_place_apart_goes_to_the_higher_confidence() -> None:
    # Same words, so the relevance order only breaks the tie by id: 0.667 first in both branches,
    # 0.75 second in both. The confidence weights (3.75/3.667) outweigh one place (62/61).
    assert ranking.fused_score((2, 2), 0.75, Fraction(0)) > ranking.fused_score(
        (1, 1), 0.667, Fraction(0)
    )


def test_scene_match_counts() -> None:
    scene = tokenize("新店 小程序")
    named = ranking.scene_share(scene, tokenize("新店参加不了这个活动吗"))
    assert named == Fraction(1, len(scene))
    assert ranking.scene_share(scene, tokenize("打印机断电")) == 0
    assert ranking.scene_share(frozenset(), tokenize("新店")) == 0  # no declared scene
    with_scene = ranking.fused_score((1, 2), 0.5, named)
    without = ranking.fused_score((2, 1), 0.5, Fraction(0))
    assert with_scene > without


def test_relevance_still_dominates_what_two_branches_agree_on() -> None:
    # Found by both branches against one branch at the same rank: twice the relevance, which no
    # confidence or scene can make up (the weights span less than a factor of two).
    both = ranking.fused_score((3, 3), 0.0, Fraction(0))
    one = ranking.fused_score((3, 0), 1.0, Fraction(1))
    assert both > one
    assert ranking.most_weight(True) / ranking.confidence_weight(0.0) < 2
    # And far down one branch is far below the top of both, whatever its confidence.
    assert ranking.fused_score((1, 1), 0.3, Fraction(0)) > ranking.fused_score(
        (1, 40), 1.0, Fraction(0)
    )


def test_the_weights_are_exact_at_the_confidence_shown() -> None:
    assert ranking.confidence_weight(None) == ranking.confidence_weight(0.0) == Fraction(3, 4)
    assert ranking.confidence_weight(1.0) == 1
    assert ranking.confidence_weight(0.6666) == ranking.confidence_weight(0.667)
    assert ranking.confidence_weight(0.5) == Fraction(3, 4) + Fraction(1, 8)


def test_ties_go_by_id() -> None:
    score = ranking.fused_score((1, 1), 0.5, Fraction(0))
    assert ranking.best_first([(score, "case:b"), (score, "case:a")]) == [1, 0]


# --- through the services ---------------------------------------------------------------------


def make_lesson(n: int, text: str, supports: list[Any], user: User, tags: list[str]) -> Lesson:
    """A lesson of ``SCOPE`` with ``tags`` as its scene, ranked by ``text``; its id hashes its
    content, scene included, as a lesson's id does."""
    common = _common("lesson", n, Spec(text, 0, "now", True), user)
    common["id"] = f"lesson:{sha256_hex(['lesson', n, text, tags, len(supports)])}"
    lesson = Lesson.objects.create(
        **common,
        lesson_type="success_pattern",
        scene_tags=tags,
        scene_description=text,
        precondition="",
        conclusion=text,
        search_text=text,
    )
    for position, case in enumerate(supports):
        LessonCase.objects.create(lesson=lesson, case=case, relation="supports", position=position)
    approved_published(lesson)
    return lesson


def _pair_with_ids_against_the_order(
    operator: User, first_supports: int, second_supports: int, tags: tuple[list[str], list[str]]
) -> tuple[Lesson, Lesson]:
    """Two lessons with the same words (so the same relevance, bar the tie by id), the one the
    new order must put first holding the larger id: the relevance order alone puts it second."""
    cases = [make_case(n, Spec(f"门店 {n}", 0, "now", True), operator) for n in range(4)]
    for n in range(0, 40, 2):
        weaker = make_lesson(n, "优惠券 门店 小程序", cases[:first_supports], operator, tags[0])
        stronger = make_lesson(
            n + 1, "优惠券 门店 小程序", cases[:second_supports], operator, tags[1]
        )
        if stronger.id > weaker.id:
            return weaker, stronger
        for lesson in (weaker, stronger):
            lesson.status = "revoked"
            lesson.save(update_fields=["status"])
            status_published(lesson)
    raise AssertionError("no pair of ids in the needed order")


@pytest.mark.django_db
def test_retrieval_and_the_block_put_the_better_confirmed_lesson_first(
    operator: User, agent: User
) -> None:
    # Two supporting incidents against three: about 0.67 against 0.75.
    weaker, stronger = _pair_with_ids_against_the_order(operator, 2, 3, ([], []))
    result = retrieve_experience("优惠券 门店", SCOPE, NOW, "run-order-1", limit=2, actor=agent)
    items = result["items"]
    assert [item["id"] for item in items] == [stronger.id, weaker.id]
    assert items[0]["confidence"] > items[1]["confidence"]
    # The shapes stay as they were: only the order changed.
    assert set(items[0]) >= {"id", "type", "title", "confidence", "why", "conflict"}
    block = experience_context("优惠券 门店", SCOPE, NOW, "run-order-2", 2_000, actor=agent)
    lessons = [item["id"] for item in block["items"] if item["type"] == "lesson"]
    assert lessons == [stronger.id, weaker.id]
    assert block["block"].index(stronger.id) < block["block"].index(weaker.id)


@pytest.mark.django_db
def test_a_lesson_whose_scene_the_request_names_goes_first(operator: User, agent: User) -> None:
    # Same words and support; one declares the scene "新店" the ticket names, the other "外卖".
    other, named = _pair_with_ids_against_the_order(operator, 2, 2, (["外卖"], ["新店"]))
    result = retrieve_experience("新店 优惠券 门店", SCOPE, NOW, "run-scene", limit=2, actor=agent)
    assert [item["id"] for item in result["items"]] == [named.id, other.id]
    assert result["items"][0]["confidence"] == result["items"][1]["confidence"]


@pytest.mark.django_db
def test_relevance_dominates_a_better_confirmed_item_found_by_one_branch_only(
    operator: User, agent: User
) -> None:
    # "点数" means "积分" only through the lexicon: the lesson is found by the expanded branch
    # alone; the case, fresh (0.5), by both. Twice the relevance wins over 0.75.
    synonym_set(term="点数", canonical="积分", actor=operator)
    cases = [make_case(n, Spec(f"积分 {n}", 0, "now", True), operator) for n in range(3)]
    lesson = make_lesson(9, "点数", cases, operator, [])
    exact = make_case(10, Spec("积分 换购", 0, "now", True), operator)
    result = retrieve_experience("积分换购", SCOPE, NOW, "run-dominates", limit=5, actor=agent)
    ids = [item["id"] for item in result["items"]]
    assert ids.index(exact.id) < ids.index(lesson.id)
    confidence = {item["id"]: item["confidence"] for item in result["items"]}
    assert confidence[lesson.id] > confidence[exact.id]


@pytest.mark.django_db
def test_the_head_asked_for_is_the_head_of_the_whole_order_read_no_deeper_than_needed(
    operator: User, agent: User
) -> None:
    # Forty cases of equal words: one confirmed by run outcomes would be the only reason to read
    # deep; with all of them fresh (0.5), the first three are known after a few reads, and they
    # are the first three of the whole order.
    for n in range(40):
        make_case(n, Spec("优惠券 门店", 0, "now", True), operator)
    read: list[int] = []
    original = order.BestFirst._score

    def counting(self: order.BestFirst, hits: list[Any]) -> None:
        read.append(len(hits))
        original(self, hits)

    order.BestFirst._score = counting  # type: ignore[method-assign]
    try:
        head = retrieve_experience("优惠券 门店", SCOPE, NOW, "run-deep-1", limit=3, actor=agent)
    finally:
        order.BestFirst._score = original  # type: ignore[method-assign]
    whole = retrieve_experience("优惠券 门店", SCOPE, NOW, "run-deep-2", limit=20, actor=agent)
    assert [i["id"] for i in head["items"]] == [i["id"] for i in whole["items"][:3]]
    assert max(read) < 40


@pytest.mark.django_db
def test_a_case_confirmed_deep_in_the_relevance_order_still_reaches_the_head(
    operator: User, agent: User
) -> None:
    # Thirty cases of equal words: relevance by id alone (rank i + 1 in both branches). Fresh
    # cases weigh at most what one incident allows (confidence 0.5), so those deep in that order
    # need no confidence to be left out; but the eighth, confirmed by three reviewers' run
    # outcomes (Wilson lower bound of 4 of 4: 0.8), scores 2/68 · 0.95 against 2/63 · 0.875 for
    # the third: it must be scored, and comes third.
    made = [make_case(n, Spec("优惠券 门店", 0, "now", True), operator) for n in range(30)]
    cases = sorted(made, key=lambda case: case.id)
    confirmed = cases[7]
    for n in range(3):
        reporter = User.objects.create_user(f"confirming-reviewer-{n}")
        run = f"run-confirmed-{n}"
        references_record(run_id=run, items=[(confirmed.id, "case")], at=NOW - timedelta(days=1))
        RunOutcome.objects.create(
            run_id=run,
            outcome="resolved_by_lead",
            reported_by=reporter,
            reported_at=NOW - timedelta(hours=1),
            reviewed=True,
        )
    scores = item_confidences([case.id for case in cases], [], NOW)
    assert scores[confirmed.id].value == 0.8
    assert all(scores[case.id].value <= 0.5 for case in cases if case is not confirmed)
    expected = sorted(
        range(len(cases)),
        key=lambda i: (
            -ranking.fused_score((i + 1, i + 1), scores[cases[i].id].value, Fraction(0)),
            cases[i].id,
        ),
    )
    head = [cases[i].id for i in expected[:3]]
    assert head[2] == confirmed.id

    answer = retrieve_experience(
        "优惠券 门店", SCOPE, NOW, "run-confirmed-head", limit=3, actor=agent
    )
    assert [item["id"] for item in answer["items"]] == head
    block = experience_context("优惠券 门店", SCOPE, NOW, "run-confirmed-block", 800, actor=agent)
    assert [item["id"] for item in block["items"]][:3] == head


@pytest.mark.parametrize("confidence", [None, 0.0, 0.3, 0.5, 0.6666, 0.75, 1.0])
@pytest.mark.parametrize("share", [Fraction(0), Fraction(1, 3), Fraction(1)])
def test_the_score_is_the_product_of_its_three_factors(
    confidence: float | None, share: Fraction
) -> None:
    ranks = (3, 7)
    expected = (
        ranking.relevance(ranks)
        * ranking.confidence_weight(confidence)
        * ranking.scene_weight(share)
    )
    assert ranking.fused_score(ranks, confidence, share) == expected
