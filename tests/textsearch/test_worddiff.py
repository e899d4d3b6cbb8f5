"""Word-level differences (``textsearch.worddiff``): English by words, Chinese by characters,
mixed text by both; the kept and inserted segments rebuild the new text, the kept and deleted
ones the old, whatever the texts."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from textsearch.worddiff import (
    DELETED,
    INSERTED,
    SAME,
    Segment,
    changed,
    closest,
    field_diffs,
    new_side,
    old_side,
    rebuilt,
    tokens,
    word_diff,
)


def marked(old: str, new: str) -> list[tuple[str, str]]:
    return [(s.kind, s.text) for s in word_diff(old, new) if s.kind != SAME]


def test_english_is_compared_by_whole_words() -> None:
    assert marked("The store list lost store 002.", "The store list lost store 003.") == [
        (DELETED, "002"),
        (INSERTED, "003"),
    ]
    # A changed word is replaced whole, never letter by letter.
    assert marked("coupon refused", "voucher refused") == [
        (DELETED, "coupon"),
        (INSERTED, "voucher"),
    ]


def test_chinese_is_compared_by_character() -> None:
    old = "活动B后台的适用门店列表缺少二号店。"
    new = "活动B后台的适用门店列表漏掉了二号店。"
    assert marked(old, new) == [(DELETED, "缺少"), (INSERTED, "漏掉了")]


def test_mixed_text_marks_the_word_and_the_characters_that_changed() -> None:
    old = "二号店 store-002 的优惠券 coupon 被拒绝"
    new = "三号店 store-003 的优惠券 voucher 被拒绝"
    assert marked(old, new) == [
        (DELETED, "二"),
        (INSERTED, "三"),
        (DELETED, "002"),
        (INSERTED, "003"),
        (DELETED, "coupon"),
        (INSERTED, "voucher"),
    ]


def test_the_same_text_has_no_change_and_an_empty_side_is_all_inserted_or_deleted() -> None:
    assert word_diff("同一段文字 same", "同一段文字 same") == (Segment(SAME, "同一段文字 same"),)
    assert not changed(word_diff("x", "x"))
    assert word_diff("", "新增 new") == (Segment(INSERTED, "新增 new"),)
    assert word_diff("删去 gone", "") == (Segment(DELETED, "删去 gone"),)
    assert word_diff("", "") == ()


def test_a_deletion_comes_before_the_insertion_that_replaces_it() -> None:
    kinds = [s.kind for s in word_diff("a b c", "a x c")]
    assert kinds == [SAME, DELETED, INSERTED, SAME]


def test_fields_compare_by_name_and_a_missing_field_is_empty() -> None:
    rows = field_diffs(
        [("title", "Title", "旧标题"), ("gone", "Gone", "only old")],
        [("title", "Title", "新标题"), ("added", "Added", "only new")],
    )
    assert [(r.name, r.changed) for r in rows] == [
        ("title", True),
        ("added", True),
        ("gone", True),
    ]
    assert rebuilt(rows[0].old) == "旧标题" and rebuilt(rows[0].new) == "新标题"
    assert rows[1].segments == (Segment(INSERTED, "only new"),)
    assert rows[2].segments == (Segment(DELETED, "only old"),)


@pytest.mark.parametrize(
    "text", ["", "a", "  two  spaces ", "门店\n列表", "store-002：券不可用！", "\t\n\r", "é😀x"]
)
def test_tokens_rebuild_the_text(text: str) -> None:
    assert "".join(tokens(text)) == text


# Texts drawn from the alphabets the console holds: English words, Han characters, digits,
# punctuation of both languages and white space, so the diff meets them mixed.
TEXT = st.text(
    alphabet=st.sampled_from(
        list("abc xyz ABC 019") + list("门店优惠券活动二号") + list("，。：！-_.\n\t") + ["😀"]
    ),
    max_size=60,
)


@given(TEXT, TEXT)
def test_kept_and_inserted_rebuild_the_new_text_kept_and_deleted_the_old(
    old: str, new: str
) -> None:
    segments = word_diff(old, new)
    assert rebuilt(new_side(segments)) == new
    assert rebuilt(old_side(segments)) == old
    # Segments are joined: no empty segment, no two neighbours of one kind.
    assert all(s.text for s in segments)
    assert all(a.kind != b.kind for a, b in pairwise(segments))
    assert changed(segments) == (old != new)


@given(st.text(max_size=80), st.text(max_size=80))
def test_any_unicode_text_is_rebuilt(old: str, new: str) -> None:
    segments = word_diff(old, new)
    assert rebuilt(new_side(segments)) == new and rebuilt(old_side(segments)) == old


def test_long_texts_are_aligned_by_lines_and_still_rebuild() -> None:
    old = "\n".join(f"line {i} 门店" for i in range(3000))
    new = old.replace("line 1500 门店", "line 1500 分店")
    segments = word_diff(old, new)
    assert rebuilt(new_side(segments)) == new and rebuilt(old_side(segments)) == old
    assert [s.text for s in segments if s.kind == INSERTED] == ["line 1500 分店\n"]


def test_the_closest_statement_is_found_and_an_unlike_one_is_not() -> None:
    others = ["顾客刷新后仍失败。", "活动B后台的适用门店列表漏掉了二号店。", "printer jam"]
    assert closest("活动B后台的适用门店列表缺少二号店。", others) == 1
    assert closest("The printer had a jam", others) == 2
    assert closest("完全无关 nothing alike", others) is None
    assert closest("anything", []) is None
