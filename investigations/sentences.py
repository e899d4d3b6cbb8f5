"""An investigation's machine codes as sentences for people: conclusions, refusals, end reasons.

The codes stay what the API, MCP and ``investigate --json`` return (docs/contracts.md); pages show
the translated sentence with the code as a tooltip (``{{ code|investigation_code }}``), rendered
like the experience memory's codes (``experience.pages.sentences``). A test keeps this covering
every conclusion code, verification reason and end reason the runner writes.
"""

from __future__ import annotations

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from experience.pages.sentences import CodeSentence, sentence_of
from investigations import domain, verification
from knowledge import conclusions

CONCLUSIONS: dict[str, Promise] = {
    conclusions.RULES_EXCLUDE_PURCHASE: _("A rule's conditions exclude this purchase"),
    conclusions.RULES_DO_NOT_EXPLAIN: _(
        "The rules match this purchase; check the real configuration and requests"
    ),
    conclusions.ASK_FOR_FACTS: _("The rules cannot be decided yet; ask for the missing facts"),
    conclusions.CHECK_CAMPAIGN_CONFIGURATION: _(
        "The sources conflict; check the live campaign configuration"
    ),
    conclusions.KNOWLEDGE_HAS_NO_ANSWER: _("The knowledge base does not answer this"),
    conclusions.LEAD_NEEDS_REVIEW: _(
        "A skill or historical case is a lead only, never a confirmed cause"
    ),
}

REFUSALS: dict[str, Promise] = {
    verification.QUOTE_NOT_VERBATIM: _(
        "A quote does not appear word for word in what the tools returned in this run"
    ),
    verification.CITATION_NOT_IN_RUN: _("A citation names evidence no tool returned in this run"),
    verification.CONCLUSION_NOT_ALLOWED: _("The cited evidence does not allow this conclusion"),
    verification.MISSING_CASE_PREFIX: _(
        "A quote of a historical case leaves out its prefix, passing an old cause off as current"
    ),
    verification.CITED_ITEM_REVOKED: _("Something cited was revoked while the run went on"),
    verification.ANSWER_MALFORMED: _("The answer is not the structured answer asked for"),
    verification.OUTPUT_SHAPE_MISMATCH: _("The skill's output does not match its declared shape"),
}

END_REASONS: dict[str, Promise] = {
    domain.MISSING_CONTEXT: _("The ticket lacks context the investigation needs"),
    domain.CALLS_EXHAUSTED: _("The model asked for more tool calls than the budget allows"),
    domain.TIME_EXHAUSTED: _("The run took longer than its time budget"),
    domain.OUTPUT_EXHAUSTED: _("The model wrote more than the output budget allows"),
    domain.PROVIDER_ERROR: _("The model provider failed"),
    domain.NO_ANSWER: _("The model gave no answer"),
}

SENTENCES: dict[str, Promise] = {**CONCLUSIONS, **REFUSALS, **END_REASONS}


def investigation_sentence(text: str) -> CodeSentence:
    """``code`` or ``code: detail`` as a sentence; text that is no code shows as itself."""
    return sentence_of(text, SENTENCES)
