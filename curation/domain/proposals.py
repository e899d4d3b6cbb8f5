"""Skill proposals, over plain values: check patterns shared by cases, and success patterns
proven often enough.

- **Check patterns**: two approved cases share a pattern when they cite the same knowledge
  document key (any version) or refuted the same hypothesis (compared after Unicode NFKC,
  case folding and removal of whitespace and punctuation).
- **Proven patterns**: see the comment above ``PATTERN_LESSON``.
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from curation.domain.threads import collapse_space

# --- check patterns and skill proposals --------------------------------------------------------

PATTERN_DOCUMENT = "document"
PATTERN_HYPOTHESIS = "hypothesis"
MIN_PROPOSAL_INCIDENTS = 2
MAX_QUERY = 200


def enough_support(incidents: int) -> bool:
    """Whether a shared pattern (or a proposal drafted from one) has the distinct incidents a
    skill proposal needs; the scan drafts by it and adoption refuses a proposal below it."""
    return incidents >= MIN_PROPOSAL_INCIDENTS


def normalize_hypothesis(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if not (ch.isspace() or unicodedata.category(ch)[0] == "P"))


@dataclass(frozen=True)
class Pattern:
    kind: str
    value: str


@dataclass(frozen=True)
class PatternCase:
    case_id: str
    scope: tuple[tuple[str, str], ...]
    incident: str  # canonical
    title: str
    documents: frozenset[str]  # document keys cited by evidence
    hypotheses: tuple[str, ...]  # refuted hypotheses as written


def case_patterns(case: PatternCase) -> set[Pattern]:
    patterns = {Pattern(PATTERN_DOCUMENT, key) for key in case.documents}
    for hypothesis in case.hypotheses:
        normalized = normalize_hypothesis(hypothesis)
        if normalized:
            patterns.add(Pattern(PATTERN_HYPOTHESIS, normalized))
    return patterns


@dataclass(frozen=True)
class ProposalDraft:
    scope: tuple[tuple[str, str], ...]
    pattern: Pattern
    case_ids: tuple[str, ...]
    incidents: tuple[str, ...]


def shared_patterns(cases: Iterable[PatternCase]) -> list[ProposalDraft]:
    """Scope and pattern shared by approved cases of at least two distinct incidents."""
    groups: dict[tuple[tuple[tuple[str, str], ...], Pattern], list[PatternCase]] = defaultdict(list)
    for case in cases:
        for pattern in case_patterns(case):
            groups[(case.scope, pattern)].append(case)
    drafts = []
    for (scope, pattern), members in groups.items():
        incidents = sorted({case.incident for case in members})
        if enough_support(len(incidents)):
            drafts.append(
                ProposalDraft(
                    scope=scope,
                    pattern=pattern,
                    case_ids=tuple(sorted(case.case_id for case in members)),
                    incidents=tuple(incidents),
                )
            )
    return sorted(drafts, key=lambda d: (d.scope, d.pattern.kind, d.pattern.value))


def hypothesis_as_written(pattern: Pattern, cases: Iterable[PatternCase]) -> str:
    for case in cases:
        for hypothesis in case.hypotheses:
            if normalize_hypothesis(hypothesis) == pattern.value:
                return hypothesis
    return pattern.value


def draft_query(pattern: Pattern, *, document_title: str = "", written: str = "") -> str:
    """The ``search_knowledge`` query a drafted recipe starts from; a person edits it."""
    if pattern.kind == PATTERN_DOCUMENT:
        query = document_title or pattern.value
    else:
        query = written or pattern.value
    return collapse_space(query)[:MAX_QUERY]


# --- proven patterns: a success pattern confirmed often enough becomes a skill proposal -----------
#
# The design's rule: what keeps being confirmed, by enough distinct incidents and with a high
# enough success rate, is worth a skill; what is rare or volatile stays a lesson for an agent to
# weigh at the time ("do not over-solidify"). Its record counts incidents, never reports:
#   successes = canonical incidents of the lesson's usable supporting cases, plus each run that
#               read it (or a version it replaced) whose latest outcome a reviewer reported as
#               resolved_by_lead, as the incident its after-action case names (``run:R``)
#   failures  = incidents of its usable contradicting cases, plus each run whose latest outcome
#               a reviewer reported as lead_was_wrong (an agent's counts in neither direction)
#   rate      = successes / (successes + failures)
# A run and its own after-action case are one incident (both ``run:R``).

PATTERN_LESSON = "lesson"
# Defaults of SKILL_PROPOSAL_MIN_INCIDENTS and SKILL_PROPOSAL_MIN_SUCCESS_RATE.
DEFAULT_MIN_PROVEN_INCIDENTS = 3
DEFAULT_MIN_SUCCESS_RATE = 0.8
RUN_INCIDENT = "run:{run_id}"


@dataclass(frozen=True)
class PatternRecord:
    successes: frozenset[str]
    failures: frozenset[str]

    @property
    def rate(self) -> float:
        total = len(self.successes) + len(self.failures)
        return len(self.successes) / total if total else 0.0


def pattern_record(
    *,
    supporting: Iterable[str],
    contradicting: Iterable[str],
    confirmed_runs: Iterable[str],
    refuted_runs: Iterable[str],
) -> PatternRecord:
    """The record of this section's comment from incidents of cases and ids of runs."""
    return PatternRecord(
        successes=frozenset(supporting)
        | {RUN_INCIDENT.format(run_id=run) for run in confirmed_runs},
        failures=frozenset(contradicting)
        | {RUN_INCIDENT.format(run_id=run) for run in refuted_runs},
    )


def proven(record: PatternRecord, *, min_incidents: int, min_rate: float) -> bool:
    """Confirmed by at least ``min_incidents`` distinct incidents (never fewer than a skill's
    approval needs) with a success rate of at least ``min_rate``."""
    needed = max(min_incidents, MIN_PROPOSAL_INCIDENTS)
    return len(record.successes) >= needed and record.rate >= min_rate


def draft_recipe(query: str) -> list[dict[str, Any]]:
    """A one-step read-only recipe: search the knowledge base with ``query``."""
    return [{"tool": "search_knowledge", "arguments": {"query": query}}]
