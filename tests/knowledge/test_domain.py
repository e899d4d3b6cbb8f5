"""The pure core of search: tokens, lexicon rewriting, Jaccard, RRF, conditions, the gate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowledge.domain import (
    DocumentGateFields,
    Scope,
    admits,
    compare_conditions,
    conflicting,
    expand,
    jaccard,
    rank_branch,
    reciprocal_rank_fusion,
    tokenize,
    validate_requirements,
)
from reviewconsole.errors import ValidationFailure

# --- tokenize -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Coupon ABC123 miniapp", {"coupon", "abc123", "miniapp"}),
        ("优惠券", {"优惠", "惠券"}),
        ("茶", {"茶"}),
        (
            "两杯水果茶，优惠券用不了",
            {"两杯", "杯水", "水果", "果茶", "优惠", "惠券", "券用", "用不", "不了"},
        ),
        ("fruit-tea 奶茶/茶", {"fruit", "tea", "奶茶", "茶"}),
        ("满30元", {"满", "30", "元"}),
        ("", set()),
        ("!!! ... ---", set()),
    ],
)
def test_tokenize_examples(text: str, tokens: set[str]) -> None:
    assert tokenize(text) == tokens


CJK = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
TEXT = st.text(alphabet=st.one_of(CJK, st.sampled_from("abcXYZ019 ,.-，。")), max_size=60)


@given(TEXT)
def test_tokens_are_lowercase_ascii_runs_or_one_or_two_cjk_characters(text: str) -> None:
    for token in tokenize(text):
        if token.isascii():
            assert token.isalnum() and token == token.lower()
        else:
            assert 1 <= len(token) <= 2


@given(TEXT)
def test_tokenize_ignores_ascii_case(text: str) -> None:
    assert tokenize(text.upper()) == tokenize(text.lower())


@given(TEXT, TEXT)
def test_separated_texts_tokenize_independently(a: str, b: str) -> None:
    assert tokenize(f"{a} {b}") == tokenize(a) | tokenize(b)


# --- expand ---------------------------------------------------------------------------------


LEXICON = {"代金券": "优惠券", "抵扣券": "优惠券", "用不了": "无法使用", "券": "票"}


def test_expand_rewrites_every_term() -> None:
    assert expand("代金券用不了", LEXICON) == "优惠券无法使用"


def test_longer_terms_win_and_replacements_are_not_rewritten_again() -> None:
    # "抵扣券" wins over its suffix "券"; the "券" inside the produced "优惠券" stays.
    assert expand("抵扣券和券", LEXICON) == "优惠券和票"


def test_expand_matches_ascii_terms_case_insensitively() -> None:
    assert expand("COUPON fails", {"coupon": "优惠券"}) == "优惠券 fails"


def test_empty_lexicon_changes_nothing() -> None:
    assert expand("代金券", {}) == "代金券"


# --- Jaccard and ranking --------------------------------------------------------------------


def test_jaccard() -> None:
    assert jaccard(frozenset("ab"), frozenset("bc")) == Fraction(1, 3)
    assert jaccard(frozenset(), frozenset("a")) == 0
    assert jaccard(frozenset("ab"), frozenset("ab")) == 1


def test_rank_branch_drops_zero_scores_and_breaks_ties_by_id() -> None:
    query = frozenset({"a", "b"})
    docs = [("d2", frozenset({"a", "b"})), ("d1", frozenset({"a", "b"})), ("d0", frozenset({"z"}))]
    assert rank_branch(query, docs) == ["d1", "d2"]


def test_rrf_sums_reciprocal_ranks_with_k_60() -> None:
    # x: 1/61 + 1/63; y: 1/62 + 1/61; z: 1/62 only.
    fused = reciprocal_rank_fusion([["x", "y"], ["y", "z", "x"]])
    assert fused == ["y", "x", "z"]


def test_rrf_ties_by_id() -> None:
    assert reciprocal_rank_fusion([["b", "a"], ["a", "b"]]) == ["a", "b"]


RANKING = st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=8)


@given(RANKING, RANKING)
def test_rrf_returns_each_ranked_id_once(first: list[str], second: list[str]) -> None:
    fused = reciprocal_rank_fusion([first, second])
    assert sorted(fused) == sorted(set(first) | set(second))


@given(RANKING)
def test_rrf_of_one_ranking_keeps_its_order(ranking: list[str]) -> None:
    assert reciprocal_rank_fusion([ranking]) == ranking


@given(st.sampled_from("abcdefgh"), RANKING, RANKING)
def test_rrf_puts_an_id_first_in_both_rankings_first(
    top: str, first: list[str], second: list[str]
) -> None:
    fused = reciprocal_rank_fusion(
        [[top, *(x for x in first if x != top)], [top, *(x for x in second if x != top)]]
    )
    assert fused[0] == top


@given(RANKING, RANKING)
def test_rrf_does_not_depend_on_branch_order(first: list[str], second: list[str]) -> None:
    assert reciprocal_rank_fusion([first, second]) == reciprocal_rank_fusion([second, first])


# --- conditions -----------------------------------------------------------------------------

REQUIREMENTS = {
    "channel": ["miniapp"],
    "product": ["fruit-tea", "milk-tea"],
    "basket_cents": {"min": 3000},
}


@pytest.mark.parametrize(
    ("facts", "status", "mismatches", "unknown"),
    [
        ({"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200}, "match", (), ()),
        ({"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3000}, "match", (), ()),
        (
            {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 2999},
            "mismatch",
            ("basket_cents",),
            (),
        ),
        ({"channel": "pos", "basket_cents": 3200}, "mismatch", ("channel",), ("product",)),
        ({"channel": "miniapp"}, "unknown", (), ("basket_cents", "product")),
        ({}, "unknown", (), ("basket_cents", "channel", "product")),
        ({"channel": "miniapp", "product": "fruit-tea", "basket_cents": "3200"}, "match", (), ()),
        (
            {"channel": "miniapp", "product": "fruit-tea", "basket_cents": "lots"},
            "mismatch",
            ("basket_cents",),
            (),
        ),
    ],
)
def test_compare_conditions(
    facts: dict[str, object], status: str, mismatches: tuple[str, ...], unknown: tuple[str, ...]
) -> None:
    result = compare_conditions(REQUIREMENTS, facts)
    assert (result.status, result.mismatches, result.unknown) == (status, mismatches, unknown)


def test_no_requirements_is_a_match() -> None:
    assert compare_conditions({}, {"channel": "pos"}).status == "match"


def test_max_bound_is_inclusive() -> None:
    assert compare_conditions({"n": {"max": 5}}, {"n": 5}).status == "match"
    assert compare_conditions({"n": {"max": 5}}, {"n": 6}).status == "mismatch"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ([], "requirements"),
        ({"channel": []}, "requirements.channel"),
        ({"channel": "miniapp"}, "requirements.channel"),
        ({"basket_cents": {"min": "30"}}, "requirements.basket_cents.min"),
        ({"basket_cents": {"least": 3}}, "requirements.basket_cents"),
        ({"basket_cents": {"min": 5, "max": 4}}, "requirements.basket_cents"),
        ({"Channel": ["x"]}, "requirements.Channel"),
        ({"channel": [None]}, "requirements.channel[0]"),
    ],
)
def test_invalid_requirements_name_the_path(value: object, path: str) -> None:
    with pytest.raises(ValidationFailure) as failure:
        validate_requirements(value)
    assert failure.value.field == path


def test_conflicts_need_the_same_slot_and_different_requirements() -> None:
    docs: list[tuple[str, str, dict[str, Any]]] = [
        ("a", "slot", {"n": {"min": 1}}),
        ("b", "slot", {"n": {"min": 2}}),
        ("c", "other", {"n": {"min": 1}}),
        ("d", "", {"n": {"min": 9}}),
        ("e", "twin", {"n": [1]}),
        ("f", "twin", {"n": [1]}),
    ]
    assert conflicting(docs) == {"a", "b"}


# --- the gate -------------------------------------------------------------------------------

BASE = datetime(2026, 9, 18, 6, tzinfo=UTC)
SCOPE_VALUES = st.sampled_from(["t1", "t2"])
INSTANTS = st.integers(min_value=-5, max_value=5).map(lambda h: BASE + timedelta(hours=h))


@st.composite
def documents(draw: st.DrawFn) -> DocumentGateFields:
    valid_from = draw(INSTANTS)
    valid_to = draw(st.one_of(st.none(), INSTANTS))
    return DocumentGateFields(
        tenant=draw(SCOPE_VALUES),
        brand=draw(SCOPE_VALUES),
        stores=frozenset(draw(st.lists(SCOPE_VALUES, min_size=1))),
        campaign=draw(SCOPE_VALUES),
        approved=draw(st.booleans()),
        revoked=draw(st.booleans()),
        valid_from=valid_from,
        valid_to=valid_to,
        published_at=draw(INSTANTS),
    )


@st.composite
def scopes(draw: st.DrawFn) -> Scope:
    return Scope(
        tenant=draw(SCOPE_VALUES),
        brand=draw(SCOPE_VALUES),
        store=draw(SCOPE_VALUES),
        campaign=draw(SCOPE_VALUES),
        occurred_at=draw(INSTANTS),
        known_at=draw(INSTANTS),
    )


@given(documents(), scopes())
def test_the_gate_never_admits_an_out_of_scope_document(
    doc: DocumentGateFields, scope: Scope
) -> None:
    if admits(doc, scope):
        assert (doc.tenant, doc.brand, doc.campaign) == (scope.tenant, scope.brand, scope.campaign)
        assert scope.store in doc.stores
        assert doc.approved and not doc.revoked
        assert doc.valid_from <= scope.occurred_at
        assert doc.valid_to is None or scope.occurred_at < doc.valid_to
        assert doc.published_at <= scope.known_at


# --- the fast paths agree with exact arithmetic ----------------------------------------------

TOKENS = st.frozensets(st.sampled_from([f"t{i}" for i in range(12)]), max_size=12)


@given(TOKENS, st.lists(TOKENS, max_size=15))
def test_rank_branch_orders_exactly_as_fractions_do(
    query: frozenset[str], docs: list[frozenset[str]]
) -> None:
    named = [(f"d{i:02d}", tokens) for i, tokens in enumerate(docs)]
    exact = sorted(
        ((jaccard(query, tokens), doc_id) for doc_id, tokens in named if jaccard(query, tokens)),
        key=lambda pair: (-pair[0], pair[1]),
    )
    assert rank_branch(query, [(d, sorted(t)) for d, t in named]) == [d for _, d in exact]


@given(
    st.permutations([f"d{i:03d}" for i in range(120)]),
    st.permutations([f"d{i:03d}" for i in range(120)]),
    st.integers(min_value=0, max_value=120),
    st.integers(min_value=0, max_value=120),
)
def test_rrf_orders_exactly_as_fractions_do(
    first: list[str], second: list[str], cut_first: int, cut_second: int
) -> None:
    rankings = [first[:cut_first], second[:cut_second]]
    scores: dict[str, Fraction] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, Fraction(0)) + Fraction(1, 60 + rank)
    exact = sorted(scores, key=lambda doc_id: (-scores[doc_id], doc_id))
    assert reciprocal_rank_fusion(rankings) == exact
