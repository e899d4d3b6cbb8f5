"""A lesson's confidence inputs, kept on its retrieval index entry.

Recall scores every lesson the index finds for the query. Reading each one's cited cases, their
canonical incidents and its open conflicts from the tables costs a join per cited case on every
call, so the index entry of an approved lesson carries them as JSON (:func:`encode`): its type
and conclusion, whether it is in an open conflict, and per cited case the relation, id, status,
canonical incident and gate times. Only what depends on the moment is left to recall: which cited
cases are usable now, decay, and run outcomes (read per call).

Kept in step in the writer's transaction by every change that alters them:

* the lesson is indexed (``experience.index.postings`` calls :func:`evidence_refreshed`);
* a cited case changes status (approved, rejected, superseded, revoked: the decision calls
  :func:`case_status_followed`, through ``experience.review.lifecycle.status_followed``);
* a conflict naming the lesson opens or closes (``experience.review.lesson_conflicts`` calls
  :func:`conflict_followed`);
* an incident merge changes the canonical incident of cited cases (``curation.incidents``
  calls :func:`incidents_merged`).

A lesson's links to its cases are written with it, before it can be approved, and never change
after; a bulk load that writes rows without the services runs ``rebuild``.

An entry whose evidence is empty (written before this column existed, or by a migration) is read
from the tables, so recall never depends on it being filled; ``rebuild`` fills every entry.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from experience.cases import selectors
from experience.cases.models import Case
from experience.core.availability import CitedCase
from experience.index.models import IndexEntry
from experience.lessons.models import Lesson, LessonCase, LessonConflict
from experience.lessons.selectors import open_conflict_ids
from textsearch import postings as kp

LESSON = "lesson"
_CHUNK = 900


@dataclass(frozen=True)
class Evidence:
    """What an entry's JSON holds, decoded."""

    lesson_type: str
    conclusion: str
    conflict: bool
    # (relation, case) of each cited case; the case's scope is the lesson's (approval refuses any
    # other), so it is not kept.
    cases: tuple[tuple[str, CitedCase, datetime | None], ...]


def encode(
    lesson_type: str,
    conclusion: str,
    conflict: bool,
    cases: Iterable[tuple[str, str, str, str, datetime, datetime, datetime | None]],
) -> str:
    """``cases``: ``(relation, case_id, status, canonical incident, valid_from, valid_to,
    approved_at)`` of each cited case."""
    return json.dumps(
        {
            "lesson_type": lesson_type,
            "conclusion": conclusion,
            "conflict": conflict,
            "cases": [
                [relation, case_id, status, incident, kp.micros(start), kp.micros(end), _us(at)]
                for relation, case_id, status, incident, start, end, at in cases
            ],
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


def _us(moment: datetime | None) -> int | None:
    return None if moment is None else kp.micros(moment)


def decode(text: str, scope: dict[str, str]) -> Evidence:
    data = json.loads(text)
    return Evidence(
        lesson_type=data["lesson_type"],
        conclusion=data["conclusion"],
        conflict=bool(data["conflict"]),
        cases=tuple(
            (
                relation,
                CitedCase(case_id, status, scope, incident, kp.moment(start), kp.moment(end)),
                None if at is None else kp.moment(at),
            )
            for relation, case_id, status, incident, start, end, at in data["cases"]
        ),
    )


# --- reading the tables -------------------------------------------------------------------------


def evidence_of(lesson_ids: Sequence[str]) -> dict[str, str]:
    """The encoded evidence of each lesson among ``lesson_ids`` (read from the tables)."""

    found: dict[str, str] = {}
    for start in range(0, len(lesson_ids), _CHUNK):
        chunk = list(lesson_ids[start : start + _CHUNK])
        lessons = Lesson.objects.filter(pk__in=chunk).values_list("id", "lesson_type", "conclusion")
        # Distinct incidents follow incident merges.
        links, incident = selectors.with_canonical_incident(
            LessonCase.objects.filter(lesson_id__in=chunk)
        )
        cited: dict[str, list[Any]] = defaultdict(list)
        for lesson_id, *row in links.order_by("lesson_id", "relation", "position").values_list(
            "lesson_id", "relation", *selectors.cited_case_columns(incident)
        ):
            relation, case_id, status, inc, valid_from, valid_to, approved = row
            cited[lesson_id].append(
                (relation, case_id, status, inc or "", valid_from, valid_to, approved)
            )
        conflicted = open_conflict_ids(chunk)
        for lesson_id, lesson_type, conclusion in lessons:
            found[lesson_id] = encode(
                lesson_type, conclusion, lesson_id in conflicted, cited[lesson_id]
            )
    return found


# --- keeping entries in step --------------------------------------------------------------------


def evidence_refreshed(lesson_ids: Iterable[str]) -> int:
    """Rewrite the evidence of the indexed entries of ``lesson_ids``; returns how many."""

    wanted = sorted(set(lesson_ids))
    written = 0
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        entries = list(IndexEntry.objects.filter(kind=LESSON, item_id__in=chunk).only("evidence"))
        if not entries:
            continue
        evidence = evidence_of([entry.item_id for entry in entries])
        for entry in entries:
            entry.evidence = evidence.get(entry.item_id, "")
        IndexEntry.objects.bulk_update(entries, ["evidence"], batch_size=1000)
        written += len(entries)
    return written


def lessons_citing(case_ids: Iterable[str]) -> list[str]:

    ids = list(case_ids)
    return list(
        LessonCase.objects.filter(case_id__in=ids).values_list("lesson_id", flat=True).distinct()
    )


def incidents_merged(tenant: str, brand: str, incidents: Iterable[str]) -> int:
    """An incident merge changed the canonical incident of these incidents (of one tenant and
    brand): the lessons citing their cases count incidents anew."""

    lesson_ids = (
        LessonCase.objects.filter(
            case__tenant=tenant, case__brand=brand, case__incident__in=list(incidents)
        )
        .values_list("lesson_id", flat=True)
        .distinct()
    )
    return evidence_refreshed(lesson_ids)


def case_status_followed(*, item: Any) -> None:
    """A review decision saved ``item``'s status: a case's reaches the entries of the lessons
    citing it."""
    if isinstance(item, Case):
        evidence_refreshed(lessons_citing([item.pk]))


def conflict_followed(*, conflict: LessonConflict) -> None:
    """A conflict opened or closed: both lessons' entries say whether they are in an open
    conflict."""
    evidence_refreshed([conflict.lesson_a_id, conflict.lesson_b_id])
