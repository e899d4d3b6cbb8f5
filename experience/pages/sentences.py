"""Machine codes as sentences for people: unmet condition names and skill-run reasons.

The codes stay what API users and commands see (docs/contracts.md); pages show the sentence,
translated, with the code as a tooltip (``{{ code|code_sentence }}``, ``{% run_reason_text %}``).
This is the one mapping; a test keeps it covering every unmet name the contracts document and
every run reason code the executor writes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
from dataclasses import dataclass

from django.utils.functional import Promise
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from experience.cases import executor
from experience.core import domain
from experience.lessons import domain as lesson_domain
from experience.lessons.domain import Confidence
from reviewconsole.templatetags.ids import shortened

# What stands in the way of a review, said as the fact that blocks it.
UNMET: dict[str, Promise] = {
    domain.NOT_REVIEWER: _("You do not hold the review permission this needs."),
    domain.REASON_REQUIRED: _("A reason is required."),
    domain.NOT_CANDIDATE: _("Only a candidate can be approved or rejected."),
    domain.NOT_APPROVED: _("Only an approved item can be revoked."),
    domain.EXPIRED: _("Its validity has ended."),
    domain.OWN_SUBMISSION: _("You submitted it; someone else must review it (four eyes)."),
    domain.NOT_INDEPENDENT: _(
        "Your account and the submitter's are one person's: one was created with a password by "
        "the other, or by the same admin; someone else must review it (four eyes)."
    ),
    domain.NO_DIAGNOSIS: _("The diagnosis states no cause."),
    domain.NO_CHECKED_DIAGNOSIS_EVIDENCE: _(
        "No one other than the submitter has checked a diagnosis evidence item yet."
    ),
    domain.NO_COUNTEREVIDENCE: _("No ruled-out hypothesis comes with evidence."),
    domain.TOO_FEW_INCIDENTS: _(
        "The skill cites fewer than two distinct incidents of approved, current cases."
    ),
    domain.CASE_UNAVAILABLE: _("A cited case is not approved or its validity has ended."),
    domain.SCOPE_MISMATCH: _("A cited case's scope differs from the scope of the item citing it."),
    domain.CITES_HELDOUT_TICKET: _("Its evidence cites a held-out evaluation ticket."),
    domain.PROMPT_TOOL_NOT_ALLOWED: _(
        "Its prompt declares a tool that is not a registered read-only investigation tool."
    ),
    domain.NO_RECIPE: _("It has neither a recipe nor a prompt: there is nothing to run."),
    lesson_domain.NO_SUPPORTING_CASE: _(
        "No supporting case is approved, current and of the lesson's scope."
    ),
    lesson_domain.CONFLICT_UNRESOLVED: _("The lesson it replaces is in an unresolved conflict."),
    lesson_domain.NOT_OUTDATED: _("Only an outdated lesson can be restored."),
    "not_in_tenant": _("You are not a member of the item's tenant."),
    "not_permitted": _("You do not hold the permission this needs."),
    "already_approved": _("This version is already approved."),
    "already_revoked": _("This version is already revoked."),
    "claimed_by_other": _(
        "Another reviewer holds a claim on it: take their claim over to decide on it."
    ),
    "not_submitted": _("It is a draft its author has not submitted for review yet."),
}

# Why a skill run ended as it did: the first word of ``Run.reason``.
RUN_REASONS: dict[str, Promise] = {
    executor.MISSING_CONTEXT: _("The ticket lacks context the skill needs"),
    executor.SKILL_NOT_FOUND: _("No skill has this id"),
    executor.SCOPE_MISMATCH: _("The ticket's scope differs from the skill's"),
    executor.SKILL_UNAVAILABLE: _("The skill was not available for reuse"),
    executor.INVALID_RECIPE: _("The skill's recipe is not valid"),
    executor.REVOKED_DURING_RUN: _("The skill or a cited case was revoked during the run"),
    executor.TOOL_ERROR: _("A tool failed"),
    executor.TIMEOUT: _("A step took too long"),
    executor.STEP_FAILED: _("A step found no current evidence that matches"),
    executor.ALL_STEPS_PASSED: _(
        "Every step found current matching evidence; the cited cases are leads only, "
        "so a person reviews the result"
    ),
    executor.INVALID_PROMPT: _(
        "The skill's prompt is not valid (a declared tool is no longer allowed)"
    ),
    executor.RUNNER_UNAVAILABLE: _("No investigation runner is installed to run the prompt"),
    executor.TOOL_REFUSED: _("The sub-agent called a tool the skill does not declare"),
    executor.BUDGET_EXHAUSTED: _("The sub-agent ran out of its call, time or output budget"),
    executor.ANSWER_REFUSED: _("The sub-agent's answer did not pass verification"),
    executor.PROVIDER_ERROR: _("The model provider failed"),
    executor.ANSWER_VERIFIED: _(
        "The sub-agent's answer passed verification and its output has the declared shape; "
        "the cited cases are leads only, so a person reviews the result"
    ),
}

# Why two lessons were found in conflict (``LessonConflict.found_by``).
CONFLICT_REASONS: dict[str, Promise] = {
    lesson_domain.TYPE_OPPOSITION: _(
        "One is a success pattern and the other a failure lesson for overlapping scenes of one "
        "scope: they advise opposite things."
    ),
    lesson_domain.EXPLICIT_LINK: _(
        "A case one lesson cites as support, the other cites as contradicting it."
    ),
}

# When a conflict was found (``LessonConflict.detected_on``).
CONFLICT_FOUND_ON: dict[str, Promise] = {
    "approval": _("Found when the second of them was approved"),
    "scan": _("Found by the periodic curation scan"),
}

# A lesson's type as people name it.
LESSON_TYPE_NAMES: dict[str, Promise] = {
    lesson_domain.SUCCESS_PATTERN: _("success pattern"),
    lesson_domain.FAILURE_LESSON: _("failure lesson"),
    lesson_domain.TOOL_USAGE: _("tool usage"),
    lesson_domain.DOMAIN_KNOWLEDGE: _("domain knowledge"),
}


def conflict_reason_sentence(code: str) -> CodeSentence:
    """Why a conflict was found, as a sentence; an unknown code shows as itself."""
    sentence = CONFLICT_REASONS.get(code)
    return CodeSentence(code, code, str(sentence) if sentence is not None else code)


# Why a lesson turned outdated (``Lesson.outdated_cause``).
OUTDATED_CAUSES: dict[str, Promise] = {
    lesson_domain.CONTRADICTED: _(
        "Its counterexamples (contradicting incidents and refuting outcomes) reached its support."
    ),
    lesson_domain.CONFIDENCE_FELL: _(
        "Its confidence fell below the threshold after having been above it."
    ),
}


def outdated_cause_sentence(code: str) -> CodeSentence:
    """Why a lesson is outdated, as a sentence; an unknown code shows as itself."""
    sentence = OUTDATED_CAUSES.get(code)
    return CodeSentence(code, code, str(sentence) if sentence is not None else code)


def lesson_type_name(code: str) -> str:
    name = LESSON_TYPE_NAMES.get(code)
    return str(name) if name is not None else code.replace("_", " ")


# Reasons whose detail adds nothing for a person once the sentence is shown.
SELF_EXPLAINED = frozenset({executor.ALL_STEPS_PASSED, executor.ANSWER_VERIFIED})


@dataclass(frozen=True)
class CodeSentence:
    """A machine text (``raw``) as shown to people: its code, the sentence, and any detail."""

    raw: str
    code: str
    sentence: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.sentence}: {self.detail}" if self.detail else self.sentence


def unmet_sentence(code: str) -> CodeSentence:
    """The sentence of an unmet condition name; an unknown name shows as itself."""
    sentence = UNMET.get(code)
    return CodeSentence(code, code, str(sentence) if sentence is not None else code)


def sentence_of(
    text: str, sentences: Mapping[str, Promise], self_explained: Set[str] = frozenset()
) -> CodeSentence:
    """``code`` or ``code: detail`` as the sentence ``sentences`` gives the code, keeping the
    detail unless the code is ``self_explained``; text that is no code shows as itself."""
    code, _separator, detail = (text or "").partition(":")
    code = code.strip()
    sentence = sentences.get(code)
    if sentence is None:
        return CodeSentence(text or "", "", text or "")
    detail = "" if code in self_explained else short_ids(detail.strip())
    return CodeSentence(text, code, str(sentence), detail)


# A content-named id in free text: shown short (the whole id stays in the tooltip, ``raw``), so a
# sentence never holds 64 hex digits that cannot wrap on a phone.
CONTENT_ID = re.compile(r"\b(?:case|skill|lesson):[0-9a-f]{64}\b")


def short_ids(text: str) -> str:
    return CONTENT_ID.sub(lambda found: shortened(found.group(0)), text)


def run_reason(reason: str) -> CodeSentence:
    """A run's reason (``code: detail``) as a sentence, keeping the detail where it says more."""
    return sentence_of(reason, RUN_REASONS, SELF_EXPLAINED)


def code_sentence(code: str) -> CodeSentence:
    """Any code of this module: an unmet name or a run reason."""
    if code in UNMET:
        return unmet_sentence(code)
    return run_reason(code)


# --- confidence, in words a reviewer can check by counting --------------------------------------


def confidence_sentence(score: Confidence) -> str:
    """What a confidence comes from, in one sentence: the incidents that support and contradict
    the item, the accounts whose run outcomes count, and how long since it was last confirmed.
    The formula itself is shown apart (``_review_item.html#confidence-panel``)."""
    inputs = score.inputs
    support = ngettext(
        "%(count)d incident supports it",
        "%(count)d incidents support it",
        inputs.supporting_incidents,
    ) % {"count": inputs.supporting_incidents}
    contradict = ngettext(
        "%(count)d contradicts it", "%(count)d contradict it", inputs.contradicting_incidents
    ) % {"count": inputs.contradicting_incidents}
    if inputs.confirming_outcomes or inputs.refuting_outcomes:
        confirmed = ngettext(
            "confirmed by %(count)d reviewer",
            "confirmed by %(count)d reviewers",
            inputs.confirming_outcomes,
        ) % {"count": inputs.confirming_outcomes}
        refuted = ngettext(
            "refuted by %(count)d reviewer",
            "refuted by %(count)d reviewers",
            inputs.refuting_outcomes,
        ) % {"count": inputs.refuting_outcomes}
        outcomes = gettext(
            "the outcomes of runs that used it were %(confirmed)s and %(refuted)s"
        ) % {
            "confirmed": confirmed,
            "refuted": refuted,
        }
    else:
        outcomes = gettext("no run that used it has a counted outcome yet")
    if inputs.last_confirmed is None:
        age = gettext("never confirmed")
    else:
        days = int(score.days_since_confirmed)
        age = (
            gettext("last confirmed today")
            if days == 0
            else ngettext(
                "last confirmed %(days)d day ago", "last confirmed %(days)d days ago", days
            )
            % {"days": days}
        )
    sentence = gettext("%(support)s, %(contradict)s; %(outcomes)s; %(age)s.") % {
        "support": support,
        "contradict": contradict,
        "outcomes": outcomes,
        "age": age,
    }
    if inputs.unconfirmed_outcomes:
        sentence += " " + ngettext(
            "%(count)d agent's confirmation waits for a reviewer and does not count yet.",
            "%(count)d agents' confirmations wait for a reviewer and do not count yet.",
            inputs.unconfirmed_outcomes,
        ) % {"count": inputs.unconfirmed_outcomes}
    if inputs.unconfirmed_refutations:
        sentence += " " + ngettext(
            "%(count)d agent's refutation waits for a reviewer and does not count yet.",
            "%(count)d agents' refutations wait for a reviewer and do not count yet.",
            inputs.unconfirmed_refutations,
        ) % {"count": inputs.unconfirmed_refutations}
    return sentence
