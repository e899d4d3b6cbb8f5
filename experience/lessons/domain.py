"""Lessons' pure core: approval rules, confidence, scene overlap, conflicts and merges.

A lesson's availability is decided with every other kind's, in ``experience.core.availability``
(``lesson_availability``).

A lesson is distilled experience (a success pattern, a failure lesson, a tool's trick, a fact of
the domain) that cites reviewed cases as its evidence: cases that support it and cases that
contradict it. No Django imports; the clock and every setting are passed in
(docs/architecture.md, Layers inside an app; docs/contracts.md, Lessons).

Confidence is computed, never typed in. :func:`confidence` is the estimator:

    successes = distinct supporting incidents + accounts with review permission whose run
                outcomes confirmed the item (none while the item is in an open conflict)
    failures  = distinct contradicting incidents + accounts with review permission whose run
                outcomes refuted it
    wilson    = the lower bound of the Wilson score interval of successes / (successes + failures)
                at ``z`` standard deviations (0 when there is no evidence at all)
    decay     = 0.5 ** (days since the last confirmation / half-life in days)
    confidence = wilson * decay

How run outcomes count (:func:`counted_outcomes`, the one home of this rule; docs/contracts.md,
"How outcomes move confidence"): each reporting account is one vote per item and per direction,
however many runs it reports, so no account can multiply its reports; an outcome counts only
when a reviewer reported it, in either direction: an agent's ``resolved_by_lead`` or
``lead_was_wrong`` waits, shown as unconfirmed and (a refutation) queued for re-review, until a
reviewer reports that run's outcome; an item in an open conflict gains no confirmation until the
conflict is resolved. The bound: one agent token never moves an item's confidence, up or down, and
so never takes an item out of retrieval or the context block; one reviewer adds at most one
success and one failure to it, ever (``wilson_step_bound``).

The Wilson lower bound never rises when a failure is added and never falls when a success is
added (``tests/experience/lessons/test_lesson_domain.py`` checks both with hypothesis); adding a
contradicting incident leaves the last confirmation alone, so the decay keeps that order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any

from experience.core.availability import CitedCase, case_usable
from experience.core.domain import (
    SCOPE_MISMATCH,
    Reviewer,
    common_unmet,
    distinct_incidents,
    same_scope,
)
from knowledge.domain import jaccard, tokenize

# --- unmet condition names (docs/contracts.md, Unmet conditions) ----------------------------

NO_SUPPORTING_CASE = "no_supporting_case"
CONFLICT_UNRESOLVED = "conflict_unresolved"
# Restoring a lesson that is not outdated.
NOT_OUTDATED = "not_outdated"

# --- lifecycle -------------------------------------------------------------------------------

SUCCESS_PATTERN = "success_pattern"
FAILURE_LESSON = "failure_lesson"
TOOL_USAGE = "tool_usage"
DOMAIN_KNOWLEDGE = "domain_knowledge"
LESSON_TYPES = (SUCCESS_PATTERN, FAILURE_LESSON, TOOL_USAGE, DOMAIN_KNOWLEDGE)
# Types whose conclusions oppose each other when their scenes overlap.
OPPOSED_TYPES = frozenset({SUCCESS_PATTERN, FAILURE_LESSON})

SUPPORTS = "supports"
CONTRADICTS = "contradicts"

# Defaults of the settings CONSOLE_LESSON_* (console/settings.py).
DEFAULT_Z = 1.0
DEFAULT_HALF_LIFE_DAYS = 180.0
DEFAULT_THRESHOLD = 0.6
# Scene overlap: tag sets or descriptions at least this similar (Jaccard) name one scene.
SCENE_TAG_OVERLAP = Fraction(1, 2)
SCENE_TEXT_OVERLAP = Fraction(1, 2)
# A candidate this similar to an approved lesson of its type and scope is a proposed merge.
MERGE_SIMILARITY = Fraction(7, 10)

SECONDS_PER_DAY = 86_400


# --- review rules ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LessonFacts:
    """What approving a lesson looks at; the service reads it from the rows."""

    status: str
    submitted_by: int
    scope: Mapping[str, str]
    valid_to: datetime
    supports: tuple[CitedCase, ...]
    contradicts: tuple[CitedCase, ...]
    # The lesson this version replaces is in a conflict nobody resolved yet.
    replaces_conflicted: bool = False
    submitter_holder: int | None = None


def lesson_approval_unmet(
    lesson: LessonFacts, *, reviewer: Reviewer, reason: str, now: datetime
) -> list[str]:
    """Every unmet condition of approving a lesson, by name."""
    unmet = common_unmet(lesson, reviewer=reviewer, reason=reason, now=now)
    if not any(
        case_usable(case, now) and same_scope(case.scope, lesson.scope) for case in lesson.supports
    ):
        unmet.append(NO_SUPPORTING_CASE)
    if any(
        not same_scope(case.scope, lesson.scope) for case in (*lesson.supports, *lesson.contradicts)
    ):
        unmet.append(SCOPE_MISMATCH)
    if lesson.replaces_conflicted:
        unmet.append(CONFLICT_UNRESOLVED)
    return unmet


# --- confidence ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfidenceInputs:
    """What a confidence is computed from; the console shows these beside the number."""

    supporting_incidents: int
    contradicting_incidents: int
    # Accounts whose reported run outcomes count (counted_outcomes): reviewers that confirmed
    # the item, reviewers that refuted it.
    confirming_outcomes: int = 0
    refuting_outcomes: int = 0
    last_confirmed: datetime | None = None
    # Agents' confirmations and refutations that wait for a reviewer: shown, never counted.
    unconfirmed_outcomes: int = 0
    unconfirmed_refutations: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "supporting_incidents": self.supporting_incidents,
            "contradicting_incidents": self.contradicting_incidents,
            "confirming_outcomes": self.confirming_outcomes,
            "refuting_outcomes": self.refuting_outcomes,
            "unconfirmed_outcomes": self.unconfirmed_outcomes,
            "unconfirmed_refutations": self.unconfirmed_refutations,
            "last_confirmed": self.last_confirmed.isoformat() if self.last_confirmed else None,
        }


@dataclass(frozen=True)
class Confidence:
    value: float
    wilson: float
    decay: float
    days_since_confirmed: float
    inputs: ConfidenceInputs
    z: float
    half_life_days: float

    def as_json(self) -> dict[str, Any]:
        return {
            "confidence": self.value,
            "wilson_lower_bound": self.wilson,
            "decay": self.decay,
            "days_since_confirmed": self.days_since_confirmed,
            "z": self.z,
            "half_life_days": self.half_life_days,
            **self.inputs.as_json(),
        }

    @property
    def successes(self) -> int:
        return self.inputs.supporting_incidents + self.inputs.confirming_outcomes

    @property
    def failures(self) -> int:
        return self.inputs.contradicting_incidents + self.inputs.refuting_outcomes

    def why(self) -> str:
        i = self.inputs
        parts = [
            f"{i.supporting_incidents} supporting incident(s)",
            f"{i.contradicting_incidents} contradicting incident(s)",
        ]
        if i.confirming_outcomes or i.refuting_outcomes:
            parts.append(
                f"outcomes confirmed by {i.confirming_outcomes} reviewer(s), "
                f"refuted by {i.refuting_outcomes} reviewer(s)"
            )
        if i.unconfirmed_outcomes:
            parts.append(f"{i.unconfirmed_outcomes} agent confirmation(s) awaiting a reviewer")
        if i.unconfirmed_refutations:
            parts.append(f"{i.unconfirmed_refutations} agent refutation(s) awaiting a reviewer")
        parts.append(
            f"Wilson lower bound {self.wilson:.2f} × decay {self.decay:.2f} "
            f"({self.days_since_confirmed:.0f} days since last confirmed, "
            f"half-life {self.half_life_days:g} days)"
        )
        return "; ".join(parts)


def wilson_lower_bound(successes: int, failures: int, z: float = DEFAULT_Z) -> float:
    """The lower end of the Wilson score interval for successes / (successes + failures)."""
    n = successes + failures
    if n <= 0:
        return 0.0
    p = successes / n
    z2 = z * z
    centre = p + z2 / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, (centre - margin) / (1 + z2 / n))


def decay_factor(last_confirmed: datetime | None, now: datetime, half_life_days: float) -> float:
    """Halves every ``half_life_days`` since the last confirmation; 1 for a future or no date."""
    if last_confirmed is None or half_life_days <= 0:
        return 1.0
    days = max(0.0, (now - last_confirmed).total_seconds() / SECONDS_PER_DAY)
    return float(0.5 ** (days / half_life_days))


def confidence(
    inputs: ConfidenceInputs,
    *,
    now: datetime,
    z: float = DEFAULT_Z,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> Confidence:
    """The estimator of this module's docstring, rounded to three places for display."""
    successes = inputs.supporting_incidents + inputs.confirming_outcomes
    failures = inputs.contradicting_incidents + inputs.refuting_outcomes
    wilson = wilson_lower_bound(successes, failures, z)
    last = inputs.last_confirmed
    # decay_factor(last, now, half_life_days), from the days counted once.
    days = max(0.0, (now - last).total_seconds() / SECONDS_PER_DAY) if last is not None else 0.0
    decay = 1.0 if last is None or half_life_days <= 0 else float(0.5 ** (days / half_life_days))
    return Confidence(
        value=round(wilson * decay, 3),
        wilson=round(wilson, 3),
        decay=round(decay, 3),
        days_since_confirmed=round(days, 1),
        inputs=inputs,
        z=z,
        half_life_days=half_life_days,
    )


@dataclass(frozen=True)
class OutcomeVote:
    """One account's reported outcomes on an item: the latest outcome of each of its runs that
    read the item (or a version the item superseded), folded per account and direction."""

    account: int
    confirmed: bool
    refuted: bool
    # Whether the account held the review permission when it reported the confirmation.
    reviewer: bool
    # When its latest counted confirmation was reported.
    confirmed_at: datetime | None = None
    # Whether the account held the review permission when it reported the refutation.
    refuted_as_reviewer: bool = False


@dataclass(frozen=True)
class CountedOutcomes:
    confirming: int = 0
    refuting: int = 0
    unconfirmed: int = 0
    last_confirmed: datetime | None = None
    unconfirmed_refuting: int = 0


def counted_outcomes(votes: Iterable[OutcomeVote], *, in_open_conflict: bool) -> CountedOutcomes:
    """What reported outcomes add to an item's estimator (the rule of this module's docstring):
    the same for both directions, an outcome counts when a reviewer reported it; an agent's waits
    for one."""
    confirmers: set[int] = set()
    refuters: set[int] = set()
    unconfirmed: set[int] = set()
    unconfirmed_refuters: set[int] = set()
    last: datetime | None = None
    for vote in votes:
        if vote.refuted:
            (refuters if vote.refuted_as_reviewer else unconfirmed_refuters).add(vote.account)
        if not vote.confirmed:
            continue
        if not vote.reviewer:
            unconfirmed.add(vote.account)
            continue
        if in_open_conflict:
            continue
        confirmers.add(vote.account)
        if vote.confirmed_at is not None and (last is None or vote.confirmed_at > last):
            last = vote.confirmed_at
    return CountedOutcomes(
        confirming=len(confirmers),
        refuting=len(refuters),
        unconfirmed=len(unconfirmed - confirmers),
        last_confirmed=last,
        unconfirmed_refuting=len(unconfirmed_refuters - refuters),
    )


def wilson_step_bound(successes: int, failures: int, z: float = DEFAULT_Z) -> float:
    """How far one more success moves the Wilson lower bound from ``successes``/``failures``:
    the most one reviewer's outcomes can lift an item with that evidence."""
    return wilson_lower_bound(successes + 1, failures, z) - wilson_lower_bound(
        successes, failures, z
    )


def evidence_inputs(
    supports: Sequence[CitedCase],
    contradicts: Sequence[CitedCase],
    *,
    approvals: Iterable[datetime | None],
    now: datetime,
    outcomes: CountedOutcomes | None = None,
) -> ConfidenceInputs:
    """Confidence inputs from cited cases and counted outcomes; ``approvals`` are the times
    anyone confirmed the item (a counted confirmation's time is added from ``outcomes``)."""
    outcomes = outcomes or CountedOutcomes()
    confirmed = [at for at in [*approvals, outcomes.last_confirmed] if at is not None and at <= now]
    return ConfidenceInputs(
        supporting_incidents=distinct_incidents(supports, now),
        contradicting_incidents=distinct_incidents(contradicts, now),
        confirming_outcomes=outcomes.confirming,
        refuting_outcomes=outcomes.refuting,
        last_confirmed=max(confirmed) if confirmed else None,
        unconfirmed_outcomes=outcomes.unconfirmed,
        unconfirmed_refutations=outcomes.unconfirmed_refuting,
    )


NO_COUNTED_OUTCOMES = CountedOutcomes()


def case_confidence(
    *,
    usable: bool,
    approved_at: datetime | None,
    now: datetime,
    outcomes: CountedOutcomes = NO_COUNTED_OUTCOMES,
    z: float = DEFAULT_Z,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> Confidence:
    """A case's confidence: :func:`confidence` of :func:`evidence_inputs` with the case as its
    only supporting case and its approval as the only approval, worked out without the lists
    and sets those build (a context block scores a dozen cases a call). A case is its own
    incident, so it counts one supporting incident while ``usable`` (``availability.
    case_usable``) and none otherwise; the latest confirmation is the first latest of its
    approval and the outcomes' last confirmation at or before ``now``, as ``max`` picks it.
    ``tests/experience/lessons/test_lesson_domain.py`` holds it equal to the definition."""
    last = approved_at if approved_at is not None and approved_at <= now else None
    confirmed = outcomes.last_confirmed
    if confirmed is not None and confirmed <= now and (last is None or confirmed > last):
        last = confirmed
    inputs = ConfidenceInputs(
        supporting_incidents=1 if usable else 0,
        contradicting_incidents=0,
        confirming_outcomes=outcomes.confirming,
        refuting_outcomes=outcomes.refuting,
        last_confirmed=last,
        unconfirmed_outcomes=outcomes.unconfirmed,
        unconfirmed_refutations=outcomes.unconfirmed_refuting,
    )
    return confidence(inputs, now=now, z=z, half_life_days=half_life_days)


# --- outdated lessons --------------------------------------------------------------------------

# Why an approved lesson turned outdated (Lesson.outdated_cause; docs/contracts.md, Lessons).
CONTRADICTED = "contradicted"
CONFIDENCE_FELL = "confidence_fell"
OUTDATED_CAUSES = (CONTRADICTED, CONFIDENCE_FELL)


@dataclass(frozen=True)
class OutdatedMarks:
    """What the rule remembers of a lesson between checks (its lifecycle columns): whether its
    evidence was seen at or above the threshold since it was approved or restored, and the
    successes and failures the reviewer who approved or restored it had before them."""

    was_confident: bool
    seen_successes: int
    seen_failures: int


def outdated_cause(score: Confidence, marks: OutdatedMarks, *, threshold: float) -> str | None:
    """Why an approved lesson is outdated now, or None. The rule of the design's "counterexamples
    lower the confidence, and can mark the experience outdated":

    - ``contradicted``: its counterexamples (contradicting incidents + accounts whose outcomes
      refuted it) reach its support (supporting incidents + reviewers whose outcomes confirmed
      it), and the balance is worse than the one its approver (or restorer) accepted: a reviewer
      who approves a lesson with as many counterexamples as support has seen them;
    - ``confidence_fell``: its evidence was seen at or above ``threshold`` since it was approved
      or restored, and is below it now.

    Both read the evidence part of the confidence (the Wilson bound, ``score.wilson``), not the
    decay: time alone lowers a lesson's rank and drops it out of recall, it does not declare it
    wrong. The rule is a pure function of the evidence and the marks, so checking again with
    nothing new changes nothing.
    """
    successes, failures = score.successes, score.failures
    worse_than_seen = failures > marks.seen_failures or successes < marks.seen_successes
    if failures > 0 and failures >= successes and worse_than_seen:
        return CONTRADICTED
    if marks.was_confident and score.wilson < threshold:
        return CONFIDENCE_FELL
    return None


def is_confident(score: Confidence, *, threshold: float) -> bool:
    """Whether the evidence is at or above the threshold (what arms ``confidence_fell``)."""
    return score.wilson >= threshold


# --- scenes, conflicts and merges ------------------------------------------------------------


@dataclass(frozen=True)
class LessonShape:
    """What conflict and merge detection compare: no model, only tags, text, types and links."""

    id: str
    lesson_type: str
    scope: Mapping[str, str]
    tags: frozenset[str]
    description: str
    conclusion: str
    supports: frozenset[str]
    contradicts: frozenset[str]


def normalise_tag(tag: str) -> str:
    return " ".join(tag.strip().lower().split())


def scenes_overlap(a: LessonShape, b: LessonShape) -> bool:
    tags = jaccard(a.tags, b.tags) if a.tags and b.tags else Fraction(0)
    text = jaccard(tokenize(a.description), tokenize(b.description))
    return tags >= SCENE_TAG_OVERLAP or text >= SCENE_TEXT_OVERLAP


TYPE_OPPOSITION = "type_opposition"
EXPLICIT_LINK = "explicit_link"


def conflict_reason(a: LessonShape, b: LessonShape, *, narrowed_apart: bool = False) -> str | None:
    """Why two approved lessons of one scope conflict, or None.

    An explicit link (a case one cites as support, the other as a contradiction) is a conflict
    on its own, always read from the links; a success pattern and a failure lesson conflict when
    their scenes overlap, unless a reviewer's narrowing set them apart (``narrowed_apart``: one
    descends from the narrowed version a conflict's resolution approved, the other from the
    lesson kept against it). Scene overlap is textual and a narrowing keeps the scene's
    description, so only the recorded narrowing can tell that the narrowed version no longer
    applies where the kept lesson does.
    """
    if a.id == b.id or not same_scope(a.scope, b.scope):
        return None
    if contested_cases(a, b):
        return EXPLICIT_LINK
    if (
        not narrowed_apart
        and {a.lesson_type, b.lesson_type} == OPPOSED_TYPES
        and scenes_overlap(a, b)
    ):
        return TYPE_OPPOSITION
    return None


def contested_cases(a: LessonShape, b: LessonShape) -> frozenset[str]:
    """The cases one lesson cites as support and the other as a contradiction."""
    return (a.supports & b.contradicts) | (a.contradicts & b.supports)


def narrowed_links(
    narrowed: LessonShape, kept: LessonShape
) -> tuple[frozenset[str], frozenset[str]]:
    """The links of a narrowed version, re-evaluated against the lesson kept over it: a case the
    kept lesson cites the other way is the kept lesson's evidence, in the scene the narrowing
    gives up, so the narrowed version no longer cites it; every other link stays."""
    contested = contested_cases(narrowed, kept)
    return narrowed.supports - contested, narrowed.contradicts - contested


@dataclass(frozen=True)
class ConflictSide:
    """One lesson of a conflict as the design's rule weighs it."""

    id: str
    usable_support: bool
    confidence: float


def favoured_side(a: ConflictSide, b: ConflictSide) -> str:
    """The side the design keeps: the one with evidence (a usable supporting case) and the
    higher confidence; blank when neither is ahead (the reviewer decides alone)."""
    contenders = [side for side in (a, b) if side.usable_support]
    if len(contenders) == 1:
        return contenders[0].id
    if len(contenders) == 2 and a.confidence != b.confidence:
        return a.id if a.confidence > b.confidence else b.id
    return ""


def merge_similarity(candidate: LessonShape, approved: LessonShape) -> Fraction:
    """How near a candidate is to an approved lesson: scene and conclusion text together."""
    a = tokenize(" ".join((candidate.description, candidate.conclusion, *sorted(candidate.tags))))
    b = tokenize(" ".join((approved.description, approved.conclusion, *sorted(approved.tags))))
    return jaccard(a, b)


def is_merge_candidate(candidate: LessonShape, approved: LessonShape) -> bool:
    return (
        candidate.id != approved.id
        and candidate.lesson_type == approved.lesson_type
        and same_scope(candidate.scope, approved.scope)
        and merge_similarity(candidate, approved) >= MERGE_SIMILARITY
    )
