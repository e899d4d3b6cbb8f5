"""The lessons a retrieval may return, scored, and the confidence of every returned item."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db.models import Exists, OuterRef

from experience.cases import selectors
from experience.core import domain
from experience.core.availability import CitedCase, case_usable
from experience.core.gate import admitted_q
from experience.core.models import Status
from experience.index import lesson_inputs as lesson_index
from experience.lessons import domain as ld
from experience.lessons.models import (
    ConflictStatus,
    LessonCase,
    LessonConflict,
    LessonRelation,
)
from experience.lessons.outcome_tallies import NONE as NO_OUTCOMES
from experience.lessons.outcome_tallies import OutcomeBatch, aware_column
from experience.lessons.selectors import (
    CaseTimes,
    SkillEvidence,
    confidence_settings,
    item_confidences,
)
from experience.lessons.selectors import confidence_of as confidence_of
from experience.lessons.selectors import incident_key as incident_key
from reviewconsole.statements import DATETIME, Param, Statement
from textsearch import postings as kp

if TYPE_CHECKING:
    from experience.index.postings import EntryRow


@dataclass(frozen=True)
class Recallable:
    id: str
    title: str
    search_text: str
    lesson_type: str
    conclusion: str
    confidence: ld.Confidence
    conflict: bool


_RECALL_DATETIMES = (5, 11, 12, 13)  # the columns below that hold datetimes


_SCOPE_PARAMS = [Param(name) for name in domain.SCOPE_FIELDS]


def _recall_queryset(now: datetime, lesson_ids: Sequence[str] | None = None, **scope: str) -> Any:
    open_conflicts = LessonConflict.objects.filter(status=ConflictStatus.OPEN)
    links = LessonCase.objects.filter(admitted_q(scope, now, "lesson__"))
    if lesson_ids is not None:
        links = links.filter(lesson_id__in=lesson_ids)
    links = links.annotate(
        in_conflict=Exists(open_conflicts.filter(lesson_a=OuterRef("lesson_id")))
        | Exists(open_conflicts.filter(lesson_b=OuterRef("lesson_id")))
    )
    links, incident = selectors.with_canonical_incident(links, "case")
    return links.order_by().values_list(
        "lesson_id",
        "lesson__title",
        "lesson__search_text",
        "lesson__lesson_type",
        "lesson__conclusion",
        "lesson__approved_at",
        "in_conflict",
        "relation",
        *selectors.cited_case_columns(incident),
    )


_RECALL_IN_SCOPE = Statement(_recall_queryset, [*_SCOPE_PARAMS, Param("now", DATETIME)])


_RECALL_AMONG = Statement(
    _recall_queryset, [*_SCOPE_PARAMS, Param("now", DATETIME), Param("lesson_ids", many=True)]
)


def _recall_rows(
    scope: Mapping[str, str], now: datetime, among: Collection[str] | None
) -> list[tuple[Any, ...]]:
    if among is None:
        rows = _RECALL_IN_SCOPE.rows(incident_key(), now=now, **scope)
    elif among:
        rows = _RECALL_AMONG.rows(incident_key(), now=now, lesson_ids=sorted(among), **scope)
    else:
        return []
    converted = []
    for row in rows:
        values = list(row)
        for index in _RECALL_DATETIMES:
            values[index] = aware_column(values[index])
        values[6] = bool(values[6])
        converted.append(tuple(values))
    return converted


@dataclass
class _Inputs:
    """One lesson's recall inputs, from the tables or from its index entry."""

    title: str
    search_text: str
    lesson_type: str
    conclusion: str
    approved_at: datetime | None
    conflict: bool
    supports: list[CitedCase] = field(default_factory=list)
    contradicts: list[CitedCase] = field(default_factory=list)
    # The times its supporting approved cases were approved.
    approvals: list[datetime | None] = field(default_factory=list)

    def cite(self, relation: str, case: CitedCase, approved: datetime | None) -> None:
        if relation == LessonRelation.SUPPORTS:
            self.supports.append(case)
            if case.status == Status.APPROVED:
                self.approvals.append(approved)
        else:
            self.contradicts.append(case)


def _inputs_from_rows(rows: list[tuple[Any, ...]], scope: Mapping[str, str]) -> dict[str, _Inputs]:
    inputs: dict[str, _Inputs] = {}
    for lesson_id, *fields, relation, case_id, status, inc, valid_from, valid_to, approved in rows:
        lesson = inputs.get(lesson_id)
        if lesson is None:
            lesson = inputs[lesson_id] = _Inputs(*fields)
        # Cited cases share the lesson's scope: approval and submission refuse any other.
        case = CitedCase(case_id, status, scope, inc or "", valid_from, valid_to)
        lesson.cite(relation, case, approved)
    return inputs


def _inputs_from_entry(entry: EntryRow, scope: dict[str, str]) -> _Inputs:
    evidence = lesson_index.decode(entry.evidence or "", scope)
    lesson = _Inputs(
        title=entry.title,
        search_text="",  # ranked from the index: the text is not read
        lesson_type=evidence.lesson_type,
        conclusion=evidence.conclusion,
        approved_at=kp.moment(entry.approved_at),
        conflict=evidence.conflict,
    )
    for relation, case, approved in evidence.cases:
        lesson.cite(relation, case, approved)
    return lesson


def recallable_lessons(
    scope: Mapping[str, str],
    now: datetime,
    outcomes: OutcomeBatch | None = None,
    among: Mapping[str, EntryRow] | None = None,
) -> dict[str, Recallable]:
    """Lessons retrieval may return: past the gate, available, and at or above the confidence
    threshold, or below it but in an unresolved conflict (returned flagged, never settled).

    ``among``: only the lessons the index found for the query are asked about, each scored from
    the confidence inputs its entry keeps (``experience.index.lesson_inputs``); those whose entry has
    none yet, and every lesson of the scope when ``among`` is None, are read in one query: the
    cited cases of the gated lessons, each row with its lesson's fields and whether it is in an
    open conflict. Outcomes come through ``outcomes`` when the caller batches them with the
    items it will ask about next.
    """
    if among is None:
        inputs = _inputs_from_rows(_recall_rows(scope, now, None), scope)
    else:
        exact = dict(scope)
        inputs = {i: _inputs_from_entry(c, exact) for i, c in among.items() if c.evidence}
        unread = [i for i, c in among.items() if not c.evidence]
        if unread:
            inputs.update(_inputs_from_rows(_recall_rows(scope, now, unread), scope))
    config = confidence_settings()
    batch = outcomes or OutcomeBatch(now)
    tallies = batch.tallies(inputs)
    found = {}
    for lesson_id, lesson in sorted(inputs.items()):
        if not any(case_usable(case, now) for case in lesson.supports):
            continue
        score = confidence_of(
            lesson.supports,
            lesson.contradicts,
            [lesson.approved_at, *lesson.approvals],
            now,
            config,
            tallies.get(lesson_id, NO_OUTCOMES),
            in_open_conflict=lesson.conflict,
        )
        if score.value < config.threshold and not lesson.conflict:
            continue
        found[lesson_id] = Recallable(
            lesson_id,
            lesson.title,
            lesson.search_text,
            lesson.lesson_type,
            lesson.conclusion,
            score,
            lesson.conflict,
        )
    return found


def with_confidence(
    items: list[dict[str, Any]],
    lessons: Mapping[str, Recallable],
    now: datetime,
    outcomes: OutcomeBatch | None = None,
    approved_cases: Mapping[str, CaseTimes] | None = None,
    *,
    explain: bool = True,
    skill_evidence: SkillEvidence | None = None,
) -> list[dict[str, Any]]:
    """Retrieval items with ``confidence``, ``why`` and ``conflict``; lessons also with
    ``lesson_type`` and ``conclusion``. Cases count their own incident; skills their cited
    cases' distinct incidents (docs/contracts.md, Lessons). ``approved_cases``: cases whose gate
    times the caller read already (from the retrieval index), which are not read again;
    ``skill_evidence``: skills whose cited cases the caller read already (the ranking, deciding
    which skills may be returned), which are not read again either.
    ``explain=False`` leaves ``why`` empty (the context block shows no explanation)."""
    case_ids = [item["id"] for item in items if item["type"] == "case"]
    skill_ids = [item["id"] for item in items if item["type"] == "skill"]
    scores = item_confidences(case_ids, skill_ids, now, outcomes, approved_cases, skill_evidence)
    out = []
    for item in items:
        lesson = lessons.get(item["id"])
        score = lesson.confidence if lesson else scores.get(item["id"])
        extra: dict[str, Any] = {
            "confidence": score.value if score else None,
            "why": score.why() if score and explain else "",
            "conflict": bool(lesson and lesson.conflict),
        }
        if lesson:
            extra["lesson_type"] = lesson.lesson_type
            extra["conclusion"] = lesson.conclusion
        out.append({**item, **extra})
    return out
