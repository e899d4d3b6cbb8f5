"""The context block's pure builder: eligibility, order, markers and the token budget."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experience.core.availability import GateFields
from experience.retrieval.context import (
    CONFLICT_MARK,
    HEADER,
    TOKENIZER,
    Candidate,
    build_block,
    count_tokens,
    item_head,
    longest_prefix,
)
from knowledge.domain import HISTORICAL_CASE_PREFIX

NOW = datetime.fromisoformat("2026-10-01T12:00:00+08:00")
SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "deployment": "release-1",
}
THRESHOLD = 0.3


def gate(**changes: object) -> GateFields:
    fields: dict[str, object] = {
        "status": "approved",
        "scope": dict(SCOPE),
        "valid_from": NOW - timedelta(days=30),
        "valid_to": NOW + timedelta(days=30),
        "approved_at": NOW - timedelta(days=1),
    }
    fields.update(changes)
    return GateFields(**fields)  # type: ignore[arg-type]


def candidate(n: int, **changes: object) -> Candidate:
    fields: dict[str, object] = {
        "id": f"case:{n:064x}",
        "type": "case",
        "title": f"优惠券无法使用 {n}",
        "text": "活动适用门店不含二号店。",
        "gate": gate(),
        "available": True,
        "confidence": 0.5,
    }
    fields.update(changes)
    return Candidate(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("  \n\t ", 0),
        ("历史案例", 4),  # one per ideograph
        ("，", 1),  # full-width punctuation
        ("word", 1),
        ("words", 2),  # one per started four letters
        ("case:0123abcd", 4),  # "case" ":" "0123abcd"
        ("a_b", 3),  # the underscore is punctuation
    ],
)
def test_count_tokens(text: str, tokens: int) -> None:
    assert count_tokens(text) == tokens


def _reference_count(text: str) -> int:
    """The tokenizer as its definition reads: per match of a word or another visible
    character, one per started four characters of a word, else one."""
    import math
    import re

    from experience.retrieval.context import _CJK

    total = 0
    for match in re.finditer(rf"(?P<word>[^\W_{_CJK}]+)|[^\s]", text):
        word = match.group("word")
        total += math.ceil(len(word) / 4) if word else 1
    return total


@settings(max_examples=500)
@given(st.text(alphabet="ab1_ :，。历史案例-é가xZ\t\n5", max_size=60))
def test_count_tokens_is_its_definition(text: str) -> None:
    assert count_tokens(text) == _reference_count(text)


@settings(max_examples=500)
@given(st.text(alphabet="ab1_ :，。历史案例-é가xZ\t5", max_size=40), st.integers(-1, 30))
def test_longest_prefix_is_the_longest_within_room(text: str, room: int) -> None:
    expected = max([m for m in range(len(text) + 1) if count_tokens(text[:m]) <= room], default=0)
    assert longest_prefix(text, room) == expected


def test_lines_are_additive() -> None:
    lines = ["[1] case x 历史案例", "confidence=0.500 words words"]
    assert count_tokens("\n".join(lines)) == sum(count_tokens(line) for line in lines)


def test_block_names_each_item_with_markers_best_first() -> None:
    case = candidate(1)
    lesson = candidate(2, id=f"lesson:{2:064x}", type="lesson", conflict=True, confidence=0.71)
    block = build_block([lesson, case], scope=SCOPE, now=NOW, budget=1_000, threshold=THRESHOLD)
    lines = block.text.split("\n")
    assert lines[0] == HEADER
    assert lines[1].startswith(f"[1] lesson {lesson.id} confidence=0.710 {CONFLICT_MARK} ")
    assert HISTORICAL_CASE_PREFIX not in lines[1]  # a lesson is not a historical case
    assert lines[2].startswith(f"[2] case {case.id} confidence=0.500 {HISTORICAL_CASE_PREFIX} ")
    assert block.as_json()["items"] == [
        {"id": lesson.id, "type": "lesson", "confidence": 0.71},
        {"id": case.id, "type": "case", "confidence": 0.5},
    ]
    assert block.as_json()["tokenizer"] == TOKENIZER
    assert block.tokens == count_tokens(block.text)


@pytest.mark.parametrize(
    "excluded",
    [
        candidate(9, gate=gate(status="candidate", approved_at=None)),
        candidate(9, gate=gate(status="revoked")),
        candidate(9, gate=gate(valid_to=NOW)),  # expired at now
        candidate(9, gate=gate(approved_at=NOW + timedelta(seconds=1))),
        candidate(9, gate=gate(scope={**SCOPE, "store": "store-001"})),
        candidate(9, available=False),
        candidate(9, confidence=THRESHOLD - 0.001),
        candidate(9, confidence=None),
    ],
)
def test_ineligible_items_are_left_out(excluded: Candidate) -> None:
    kept = candidate(1)
    block = build_block([excluded, kept], scope=SCOPE, now=NOW, budget=1_000, threshold=THRESHOLD)
    assert [item.id for item in block.items] == [kept.id]
    assert excluded.id not in block.text


def test_a_long_top_item_is_cut_not_skipped() -> None:
    long = candidate(1, text="二号店" * 400)
    short = candidate(2)
    budget = count_tokens(HEADER) + count_tokens(item_head(1, long)) + 20
    block = build_block([long, short], scope=SCOPE, now=NOW, budget=budget, threshold=THRESHOLD)
    assert [item.id for item in block.items] == [long.id]
    assert block.text.endswith("…")
    assert block.tokens <= budget


def test_no_room_for_the_header_is_an_empty_block() -> None:
    block = build_block([candidate(1)], scope=SCOPE, now=NOW, budget=3, threshold=THRESHOLD)
    assert (block.text, block.items, block.tokens) == ("", (), 0)


_texts = st.text(alphabet=st.sampled_from(list("ab1 _:，。历史案例二号店\n\t-")), max_size=200)
_candidates = st.builds(
    candidate,
    st.integers(0, 10_000),
    type=st.sampled_from(["case", "skill", "lesson"]),
    title=_texts,
    text=_texts,
    gate=st.builds(
        gate,
        status=st.sampled_from(["candidate", "approved", "rejected", "revoked", "superseded"]),
        scope=st.sampled_from([SCOPE, {**SCOPE, "tenant": "other"}, {**SCOPE, "deployment": "r2"}]),
        valid_to=st.sampled_from([NOW - timedelta(days=1), NOW, NOW + timedelta(days=1)]),
        approved_at=st.sampled_from([None, NOW - timedelta(days=1), NOW + timedelta(days=1)]),
    ),
    available=st.booleans(),
    confidence=st.one_of(st.none(), st.floats(0, 1)),
    conflict=st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_candidates, max_size=12), st.integers(1, 400))
def test_block_never_exceeds_its_budget_nor_includes_an_ineligible_item(
    candidates: list[Candidate], budget: int
) -> None:
    block = build_block(candidates, scope=SCOPE, now=NOW, budget=budget, threshold=THRESHOLD)
    assert block.tokens == count_tokens(block.text) <= budget
    for item in block.items:
        assert item.gate.status == "approved"
        assert item.gate.scope == SCOPE
        assert item.gate.valid_from <= NOW < item.gate.valid_to
        assert item.gate.approved_at is not None and item.gate.approved_at <= NOW
        assert item.available
        assert item.confidence is not None and item.confidence >= THRESHOLD
        assert item.id in block.text
    # Best first: the included items are the leading eligible ones, in the given order.
    eligible = [
        c
        for c in candidates
        if c.gate.status == "approved"
        and c.gate.scope == SCOPE
        and c.gate.valid_from <= NOW < c.gate.valid_to
        and c.gate.approved_at is not None
        and c.gate.approved_at <= NOW
        and c.available
        and c.confidence is not None
        and c.confidence >= THRESHOLD
    ]
    assert list(block.items) == eligible[: len(block.items)]
