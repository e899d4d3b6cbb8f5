"""Merges by meaning propose what tells the same experience, not what shares a language and topic.

The shaped fake embedder behaves as the small multilingual model does: two Chinese texts of one
topic are close (cosine above 0.92) whatever incident they tell, and a text and its translation
are far apart in raw cosine. The merge rule (``semantic.duplicates``) must not link the first and
must propose the second once the operator's lexicon names the same concepts in both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.cases.models import Case
from tests.experience.conftest import case_data
from tests.semantic import fakes

SHAPED = "tests.semantic.fakes.shaped"

STORE_LIMITED_ZH = {
    "scene": {"tags": ["优惠"], "description": "门店限定优惠券在非活动门店不能用"},
    "precondition": "优惠券只限活动门店",
    "conclusion": "先核对门店限定的活动门店名单",
}
MEMBER_PRICE_ZH = {
    "scene": {"tags": ["优惠"], "description": "会员价没有生效"},
    "precondition": "顾客没有登录",
    "conclusion": "先请顾客登录再付款才有会员价",
}
STORE_LIMITED_EN = {
    "scene": {"tags": ["discount"], "description": "store-limited coupon refused at another shop"},
    "precondition": "the coupon only works at the campaign's shops",
    "conclusion": "check the store-limited campaign's shop list first",
}


@pytest.fixture
def shaped(settings: Any) -> Any:
    settings.SEMANTIC_EMBEDDER = SHAPED
    return settings


def lesson(supports: list[str], content: dict[str, Any]) -> dict[str, Any]:
    from tests.experience.lessons.test_lessons import lesson_data

    return lesson_data(supports, **content)


@pytest.fixture
def approved_lesson(
    shaped: Any, approved_case: Callable[..., Case], reviewer: User, second_reviewer: User
) -> Callable[[dict[str, Any]], Any]:
    from experience.lessons.models import Lesson
    from experience.lessons.schema import parse_lesson
    from experience.lessons.services import lesson_submit
    from experience.review.decisions import lesson_approve

    supports = [
        approved_case(incident="INC-A", title="A").id,
        approved_case(incident="INC-B", title="B").id,
    ]

    def make(content: dict[str, Any], *, approve: bool = True) -> Lesson:
        item, _ = lesson_submit(content=parse_lesson(lesson(supports, content)), actor=reviewer)
        if approve:
            lesson_approve(lesson=item, actor=second_reviewer, reason="two incidents")
        return Lesson.objects.get(pk=item.pk)

    return make


def bilingual_lexicon(operator: User) -> None:
    from knowledge.services import synonym_set

    for term, canonical in (
        ("优惠券", "coupon"),
        ("门店限定", "store-limited"),
        ("会员价", "member price"),
    ):
        synonym_set(term=term, canonical=canonical, actor=operator)


def proposals(candidate: Any) -> list[str]:
    from experience.lessons.models import LessonMergeProposal

    return [p.target_id for p in LessonMergeProposal.objects.filter(candidate=candidate)]


def test_the_shaped_fake_reproduces_the_models_shape() -> None:
    """The premise of the tests below, on the fake's own vectors."""
    embedder = fakes.Shaped()
    texts = [
        "\n".join([*lesson_text(STORE_LIMITED_ZH)]),
        "\n".join([*lesson_text(MEMBER_PRICE_ZH)]),
        "\n".join([*lesson_text(STORE_LIMITED_EN)]),
    ]
    zh, other_zh, en = embedder.passages(texts)
    assert float(zh @ other_zh) >= 0.92  # two Chinese incidents of one topic: "the same"
    assert float(zh @ en) < 0.5  # a translation: far apart in raw cosine


def lesson_text(content: dict[str, Any]) -> list[str]:
    scene = content["scene"]
    return [
        " ".join(scene["tags"]),
        scene["description"],
        content["precondition"],
        content["conclusion"],
    ]


def test_different_incidents_of_one_topic_in_one_language_are_not_proposed(
    approved_lesson: Callable[..., Any], operator: User
) -> None:
    bilingual_lexicon(operator)
    member_price = approved_lesson(MEMBER_PRICE_ZH)

    candidate = approved_lesson(STORE_LIMITED_ZH, approve=False)

    assert member_price.id not in proposals(candidate)


def test_a_translation_is_proposed_when_the_lexicon_names_the_same_concepts(
    approved_lesson: Callable[..., Any], operator: User, shaped: Any
) -> None:
    # Meaning alone may not suffice for this fake's scale: only agreeing concepts propose.
    shaped.SEMANTIC_DUPLICATE_SIGNIFICANCE = 1000.0
    bilingual_lexicon(operator)
    store_limited = approved_lesson(STORE_LIMITED_ZH)
    member_price = approved_lesson(MEMBER_PRICE_ZH)

    candidate = approved_lesson(STORE_LIMITED_EN, approve=False)

    assert proposals(candidate) == [store_limited.id]
    assert member_price.id not in proposals(candidate)


def test_without_the_lexicon_a_translation_needs_meaning_alone(
    approved_lesson: Callable[..., Any], shaped: Any, operator: User
) -> None:
    from knowledge.models import Synonym
    from knowledge.services import synonym_delete

    for synonym in Synonym.objects.all():
        synonym_delete(synonym=synonym, actor=operator)
    shaped.SEMANTIC_DUPLICATE_SIGNIFICANCE = 1000.0
    approved_lesson(STORE_LIMITED_ZH)

    candidate = approved_lesson(STORE_LIMITED_EN, approve=False)

    assert proposals(candidate) == []


def zh_case(incident: str, title: str, diagnosis: str) -> dict[str, Any]:
    return case_data(
        incident=incident,
        title=title,
        summary="优惠",
        observations=[{"source_id": f"thread:{incident}#m1", "excerpt": "顾客：优惠没有用上。"}],
        diagnosis={
            "statement": diagnosis,
            "evidence": [
                {"source_id": f"thread:{incident}#m2", "excerpt": diagnosis, "verified": True}
            ],
        },
    )


def test_cases_of_different_incidents_on_one_topic_are_not_linked_by_meaning(
    shaped: Any,
    approved_case: Callable[..., Case],
    submit_case: Callable[..., Case],
    operator: User,
) -> None:
    from curation.models import NearDuplicate

    bilingual_lexicon(operator)
    approved_case(**zh_case("INC-MEMBER", "会员价没有生效", "顾客没有登录，会员价不生效。"))

    submit_case(zh_case("INC-STORE", "门店限定优惠券不能用", "本店不在门店限定名单里。"))

    assert not NearDuplicate.objects.filter(found_by="meaning").exists()


def test_a_case_told_in_the_other_language_is_linked_by_meaning(
    shaped: Any,
    approved_case: Callable[..., Case],
    submit_case: Callable[..., Case],
    operator: User,
) -> None:
    from curation.models import NearDuplicate

    shaped.SEMANTIC_DUPLICATE_SIGNIFICANCE = 1000.0
    bilingual_lexicon(operator)
    store = approved_case(
        **zh_case("INC-STORE", "门店限定优惠券不能用", "本店不在门店限定名单里。")
    )
    approved_case(**zh_case("INC-MEMBER", "会员价没有生效", "顾客没有登录，会员价不生效。"))

    candidate = submit_case(
        case_data(
            incident="INC-STORE-EN",
            title="discount: store-limited coupon refused",
            summary="the shop is not on the store-limited list",
            observations=[{"source_id": "thread:9#m1", "excerpt": "customer: coupon refused"}],
            diagnosis={
                "statement": "this shop is missing from the store-limited coupon's list",
                "evidence": [
                    {"source_id": "thread:9#m2", "excerpt": "ops: list lacks it", "verified": True}
                ],
            },
        )
    )

    (link,) = NearDuplicate.objects.filter(found_by="meaning")
    assert {link.case_a_id, link.case_b_id} == {candidate.id, store.id}
