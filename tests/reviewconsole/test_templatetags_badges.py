"""``badge``: the one markup of a status, kind or outcome badge."""

from __future__ import annotations

from django.template import Context, Template
from django.utils import translation


def _render(value: object) -> str:
    return Template("{% load badges %}{{ value|badge }}").render(Context({"value": value}))


def test_the_class_names_the_value_and_the_text_translates_it() -> None:
    assert _render("approved") == '<span class="badge badge-approved">approved</span>'
    with translation.override("zh-hans"):
        assert _render("candidate") == '<span class="badge badge-candidate">候选</span>'


def test_the_value_is_escaped() -> None:
    html = _render('x"><script>')
    assert "<script>" not in html and "&quot;&gt;&lt;script&gt;" in html


def test_a_code_of_several_words_reads_as_words_with_the_code_on_hover() -> None:
    assert _render("needs_review") == (
        '<span class="badge badge-needs_review" title="needs_review">needs review</span>'
    )
    with translation.override("zh-hans"):
        html = _render("needs_review")
    assert 'title="needs_review"' in html and ">needs_review<" not in html
