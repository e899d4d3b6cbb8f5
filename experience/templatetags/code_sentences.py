"""``{{ code|code_sentence }}``: a machine code (unmet name, run reason) as a translated sentence,
the code itself in the tooltip (``experience.pages.sentences`` holds the mapping)."""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from experience.lessons.domain import Confidence
from experience.pages.sentences import (
    CodeSentence,
    conflict_reason_sentence,
    lesson_type_name,
)
from experience.pages.sentences import code_sentence as sentence_of
from experience.pages.sentences import confidence_sentence as sentence_of_confidence

register = template.Library()


def sentence_html(shown: CodeSentence) -> SafeString | str:
    if not shown.raw:
        return ""
    if not shown.code:
        return shown.raw
    return format_html(
        '<span class="code-sentence" title="{}" data-code="{}">{}</span>',
        shown.raw,
        shown.code,
        str(shown),
    )


@register.filter
def code_sentence(value: object) -> SafeString | str:
    if isinstance(value, CodeSentence):
        return sentence_html(value)
    if value is None or value == "":
        return ""
    return sentence_html(sentence_of(str(value)))


@register.filter
def conflict_reason(value: object) -> SafeString | str:
    """Why two lessons conflict (``LessonConflict.found_by``), as a sentence."""
    return sentence_html(conflict_reason_sentence(str(value or "")))


@register.filter
def lesson_type(value: object) -> SafeString:
    """A lesson's type as a badge in words, the code in the tooltip."""
    code = str(value or "")
    return format_html(
        '<span class="badge badge-lesson" title="{}">{}</span>', code, lesson_type_name(code)
    )


@register.filter
def confidence_sentence(value: Confidence | None) -> str:
    """A confidence's inputs as one plain sentence (``experience.pages.sentences``)."""
    return sentence_of_confidence(value) if value is not None else ""
