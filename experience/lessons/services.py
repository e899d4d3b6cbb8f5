"""Writes of lessons below review: submission, proposal, import and merge proposals; atomic,
checked, audited.

The rules are in ``experience.lessons.domain``; the reads in ``experience.lessons.selectors``.
Review decisions (approve, reject, revoke, restore, merge) and conflicts change what the
retrieval index above this package holds, so they live above it, in ``experience.review``. A
stored lesson concerns curation, above ``experience``: it is published (``LessonStored``,
``reviewconsole.dispatch``; docs/architecture.md, "Events").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from experience.cases.models import Case
from experience.cases.schema import FILE_REFERENCE, CaseContent
from experience.cases.services import (
    CASE_REFERENCE_NOT_CASE,
    CASE_REFERENCE_OUT_OF_RANGE,
    CASE_REFERENCE_UNKNOWN,
    FILE_REFERENCES_IN_IMPORTS,
    Submission,
    Submitted,
    row_stored,
    tenant_required,
)
from experience.core.models import Status, SubmittedVia
from experience.lessons.events import LessonStored
from experience.lessons.models import (
    Lesson,
    LessonCase,
    LessonMergeProposal,
    LessonRelation,
)
from experience.lessons.schema import LessonContent
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.dispatch import dispatch
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action
from reviewconsole.permissions import ADD_LESSON, PROPOSE_CASE, require
from reviewconsole.scopes import SCOPE_FIELDS

SUBMIT_LESSON_REFUSED = "submitting lessons needs the operator or reviewer role"


PROPOSE_LESSON_REFUSED = "proposing a lesson needs the agent, operator or reviewer role"


RESOLVE_REFUSED = "resolving lesson conflicts needs the reviewer role"


SUPERSEDES_UNKNOWN = "names no stored lesson of the same tenant"


def lesson_store(
    content: LessonContent, *, actor: User, via: str, now: datetime
) -> tuple[Lesson, bool]:
    tenant_required(content, actor=actor, via=via, now=now)
    tenant = content.scope["tenant"]
    if (
        content.supersedes
        and not Lesson.objects.filter(pk=content.supersedes, tenant=tenant).exists()
    ):
        raise ValidationFailure("supersedes", f"{content.supersedes} {SUPERSEDES_UNKNOWN}")
    lesson_id = content.id
    existing = Lesson.objects.filter(pk=lesson_id).first()
    if existing is not None:
        return existing, False
    cited = (*content.supports, *content.contradicts)
    stored = set(Case.objects.filter(pk__in=cited, tenant=tenant).values_list("pk", flat=True))
    for name, refs in (("supports", content.supports), ("contradicts", content.contradicts)):
        for i, case_id in enumerate(refs):
            if case_id not in stored:
                raise ValidationFailure(f"{name}[{i}]", f"{case_id} {CASE_REFERENCE_UNKNOWN}")
    canonical = content.canonical()
    lesson, created = row_stored(
        Lesson,
        content,
        canonical,
        actor,
        via,
        now,
        lesson_type=content.lesson_type,
        scene_tags=canonical["scene"]["tags"],
        scene_description=content.description,
        precondition=content.precondition,
        conclusion=content.conclusion,
        supersedes=content.supersedes,
        search_text=content.search_text(),
    )
    if not created:
        return lesson, False
    LessonCase.objects.bulk_create(
        [
            *(
                LessonCase(lesson=lesson, case_id=c, relation=LessonRelation.SUPPORTS, position=i)
                for i, c in enumerate(canonical["supports"])
            ),
            *(
                LessonCase(
                    lesson=lesson, case_id=c, relation=LessonRelation.CONTRADICTS, position=i
                )
                for i, c in enumerate(canonical["contradicts"])
            ),
        ]
    )
    event_record(
        actor=actor,
        action=Action.LESSON_SUBMIT,
        target=lesson.id,
        details={
            "via": via,
            "lesson_type": lesson.lesson_type,
            "supports": canonical["supports"],
            "contradicts": canonical["contradicts"],
            "supersedes": lesson.supersedes or None,
        },
        at=now,
    )
    # Curation, above: compared in meaning with the approved lessons of its scope, queued.
    dispatch(LessonStored(lesson=lesson, now=now))
    return lesson, True


LESSON_SUBMISSION: Submission[LessonContent, Lesson] = Submission(
    lesson_store, ADD_LESSON, SUBMIT_LESSON_REFUSED, "supports"
)
lesson_submit = LESSON_SUBMISSION.submit


@transaction.atomic
def lesson_propose(
    *, content: LessonContent, actor: User, now: datetime | None = None
) -> tuple[Lesson, bool]:
    """An agent's proposal of a lesson (the after-action review drafter's): a candidate submitted
    through the API path, which waits for a reviewer like any other; identical content returns
    the stored row."""
    require(actor, (PROPOSE_CASE, ADD_LESSON), message=PROPOSE_LESSON_REFUSED)
    if content.unresolved():
        raise ValidationFailure("supports", FILE_REFERENCES_IN_IMPORTS)
    return lesson_store(content, actor=actor, via=SubmittedVia.API, now=now or clock.now())


def lesson_merge_propose(
    *, candidate: Lesson, target_id: str, similarity: float, now: datetime | None = None
) -> bool:
    """Record that ``candidate`` is alike in meaning to the approved lesson ``target_id`` of its
    scope and type, so its page proposes the merge (``merge_accept`` accepts it like a merge
    found in words); True when the proposal stands. Nothing is merged: a reviewer decides."""
    target = Lesson.objects.filter(
        pk=target_id,
        status=Status.APPROVED,
        lesson_type=candidate.lesson_type,
        **{name: getattr(candidate, name) for name in SCOPE_FIELDS},
    ).first()
    if target is None or candidate.status != Status.CANDIDATE or target.pk == candidate.pk:
        return False
    LessonMergeProposal.objects.get_or_create(
        candidate=candidate,
        target=target,
        defaults={"similarity": similarity, "proposed_at": now or clock.now()},
    )
    return True


def lessons_import(
    *,
    parsed: Sequence[Any],
    stored: dict[int, Submitted],
    actor: User,
    now: datetime,
) -> None:
    """Store the lessons of an import (its cases are stored already), resolving ``#N``.

    Called inside ``items_import``'s transaction; a failure names the item's JSON path.
    """
    lessons = [(i, item) for i, item in enumerate(parsed) if isinstance(item, LessonContent)]
    if not lessons:
        return
    require(actor, ADD_LESSON, message=SUBMIT_LESSON_REFUSED)
    for index, item in lessons:
        try:
            resolved = item.resolved(
                _resolve(item.supports, "supports", parsed, stored),
                _resolve(item.contradicts, "contradicts", parsed, stored),
            )
            lesson, created = lesson_store(resolved, actor=actor, via=SubmittedVia.IMPORT, now=now)
        except ValidationFailure as failure:
            raise failure.at(f"[{index}]") from None
        stored[index] = Submitted(lesson.id, "lesson", created)


def _resolve(
    refs: Sequence[str], name: str, parsed: Sequence[Any], stored: Mapping[int, Submitted]
) -> tuple[str, ...]:
    resolved = []
    for i, ref in enumerate(refs):
        match = FILE_REFERENCE.fullmatch(ref)
        if match is None:
            resolved.append(ref)
            continue
        n = int(match.group(1))
        if n >= len(parsed):
            raise ValidationFailure(f"{name}[{i}]", f"{ref} {CASE_REFERENCE_OUT_OF_RANGE}")
        if not isinstance(parsed[n], CaseContent):
            raise ValidationFailure(f"{name}[{i}]", f"{ref} {CASE_REFERENCE_NOT_CASE}")
        resolved.append(stored[n].id)
    return tuple(resolved)


def lesson_content(lesson: Lesson) -> LessonContent:
    links = list(LessonCase.objects.filter(lesson=lesson).order_by("relation", "position"))
    return LessonContent(
        lesson_type=lesson.lesson_type,
        scope=lesson.scope,
        tags=tuple(lesson.scene_tags),
        description=lesson.scene_description,
        precondition=lesson.precondition,
        conclusion=lesson.conclusion,
        supports=tuple(x.case_id for x in links if x.relation == LessonRelation.SUPPORTS),
        contradicts=tuple(x.case_id for x in links if x.relation == LessonRelation.CONTRADICTS),
        valid_from=lesson.valid_from,
        valid_to=lesson.valid_to,
    )
