"""Every code an investigation shows to people has a sentence; unknown text shows as itself."""

from __future__ import annotations

from investigations import domain, verification
from investigations.sentences import END_REASONS, investigation_sentence
from knowledge.conclusions import CONCLUSION_CODES


def test_every_conclusion_refusal_and_end_reason_reads_as_a_sentence() -> None:
    codes = [
        *CONCLUSION_CODES,
        *verification.REASON_CODES,
        domain.MISSING_CONTEXT,
        domain.CALLS_EXHAUSTED,
        domain.TIME_EXHAUSTED,
        domain.OUTPUT_EXHAUSTED,
        domain.PROVIDER_ERROR,
        domain.NO_ANSWER,
    ]
    for code in codes:
        shown = investigation_sentence(code)
        assert shown.code == code and shown.sentence and shown.sentence != code, code
    assert set(END_REASONS) <= set(codes)


def test_an_end_reason_keeps_its_detail_after_the_sentence() -> None:
    shown = investigation_sentence(f"{domain.CALLS_EXHAUSTED}: more than 6 tool calls")
    assert shown.code == domain.CALLS_EXHAUSTED
    assert shown.detail == "more than 6 tool calls"
    assert str(shown).endswith(": more than 6 tool calls")


def test_text_that_is_no_code_shows_as_itself() -> None:
    shown = investigation_sentence("something else")
    assert shown.code == "" and str(shown) == "something else"


def test_the_composed_conclusion_and_the_page_say_the_same_per_code() -> None:
    from django.utils import translation

    from investigations.sentences import CONCLUSIONS

    with translation.override("en"):
        for code, statement in verification.CONCLUSION_STATEMENTS.items():
            assert statement == f"{CONCLUSIONS[code]}.", code
