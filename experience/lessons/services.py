"""Every write to lessons: submission, review, conflicts and merges; atomic, checked, audited.

The rules are in ``experience.lesson_domain``; the reads in ``experience.lesson_selectors``.
Review follows cases and skills (``experience.services``): four eyes, a reason, the unmet
conditions named at once, revocation impact stored; like theirs, a decision publishes what it
sets in motion above this package (``reviewconsole.dispatch``; docs/architecture.md, "Events").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
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
    Submitted,
    supersede_version,
)
from experience.cases.services import item_inserted as item_inserted
from experience.cases.services import item_reject as item_reject
from experience.core.models import Status, SubmittedVia
from experience.core.review import ReviewOutcome, ReviewRefused
from experience.core.review import require_item_tenant as require_item_tenant
from experience.lessons import domain as ld
from experience.lessons import outdating
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import (
    ConflictStatus,
    Lesson,
    LessonCase,
    LessonConflict,
    LessonMergeProposal,
    LessonRelation,
)
from experience.lessons.schema import LessonContent
from reviewconsole import accounts, clock, itemids
from reviewconsole.audit import event_record
from reviewconsole.dispatch import Event, dispatch
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action
from reviewconsole.permissions import ADD_LESSON, PROPOSE_CASE, REVIEW_CASE, require
from reviewconsole.scopes import SCOPE_FIELDS
from reviewconsole.tenancy import require_input_tenant

SUBMIT_LESSON_REFUSED = "submitting lessons needs the operator or reviewer role"


PROPOSE_LESSON_REFUSED = "proposing a lesson needs the agent, operator or reviewer role"


RESOLVE_REFUSED = "resolving lesson conflicts needs the reviewer role"


MERGE_REFUSED = "accepting a merge needs the reviewer role"


SUPERSEDES_UNKNOWN = "names no stored lesson of the same tenant"


NOT_A_MERGE = "is not a proposed merge of this candidate"


def lesson_store(
    content: LessonContent, *, actor: User, via: str, now: datetime
) -> tuple[Lesson, bool]:
    require_input_tenant(
        actor,
        content.scope["tenant"],
        field="scope.tenant",
        create=via == SubmittedVia.IMPORT,
        now=now,
    )
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
    lesson = Lesson(
        id=lesson_id,
        content_hash=itemids.digest_of(lesson_id),
        content=canonical,
        title=content.title,
        lesson_type=content.lesson_type,
        scene_tags=canonical["scene"]["tags"],
        scene_description=content.description,
        precondition=content.precondition,
        conclusion=content.conclusion,
        supersedes=content.supersedes,
        search_text=content.search_text(),
        valid_from=content.valid_from,
        valid_to=content.valid_to,
        submitted_by=actor,
        submitted_via=via,
        submitted_at=now,
        **content.scope,
    )
    if not item_inserted(lesson):
        return Lesson.objects.get(pk=lesson_id), False
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
    dispatch(Event.LESSON_STORED, lesson=lesson)
    return lesson, True


@transaction.atomic
def lesson_submit(
    *,
    content: LessonContent,
    actor: User,
    via: str = SubmittedVia.CONSOLE,
    now: datetime | None = None,
) -> tuple[Lesson, bool]:
    """Submit a candidate lesson as ``actor``; identical content returns the stored row."""
    require(actor, ADD_LESSON, message=SUBMIT_LESSON_REFUSED)
    if content.unresolved():
        raise ValidationFailure("supports", "file references (#N) are only meaningful in an import")
    return lesson_store(content, actor=actor, via=via, now=now or clock.now())


@transaction.atomic
def lesson_propose(
    *, content: LessonContent, actor: User, now: datetime | None = None
) -> tuple[Lesson, bool]:
    """An agent's proposal of a lesson (the after-action review drafter's): a candidate submitted
    through the API path, which waits for a reviewer like any other; identical content returns
    the stored row."""
    require(actor, (PROPOSE_CASE, ADD_LESSON), message=PROPOSE_LESSON_REFUSED)
    if content.unresolved():
        raise ValidationFailure("supports", "file references (#N) are only meaningful in an import")
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


def lesson_locked(lesson: Lesson) -> Lesson:
    return Lesson.objects.select_for_update().get(pk=lesson.pk)


@dataclass(frozen=True)
class LessonReview(ReviewOutcome):
    conflicts: tuple[int, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {**super().as_json(), "conflicts": list(self.conflicts)}


@transaction.atomic
def lesson_approve(
    *, lesson: Lesson, actor: User, reason: str, now: datetime | None = None
) -> LessonReview:
    """Approve a candidate lesson; supersede the version it replaces; open any conflict it makes."""
    require_item_tenant(actor, lesson)
    lesson = lesson_locked(lesson)
    now = now or clock.now()
    unmet = lesson_selectors.lesson_approval_checklist(
        lesson=lesson, reviewer=actor, reason=reason, now=now
    )
    if unmet:
        raise ReviewRefused(lesson.id, lesson.status, unmet)
    lesson.status = Status.APPROVED
    lesson.approved_by = actor
    lesson.approved_at = now
    lesson.approved_reason = reason.strip()
    lesson.save(update_fields=["status", "approved_by", "approved_at", "approved_reason"])
    dispatch(Event.ITEM_STATUS_CHANGED, item=lesson)
    event_record(
        actor=actor,
        action=Action.LESSON_APPROVE,
        target=lesson.id,
        reason=reason.strip(),
        details=accounts.provenance(actor),
        at=now,
    )
    if lesson.supersedes:
        _supersede(lesson.supersedes, by=lesson, actor=actor, now=now)
    # What the outdated rule measures later evidence against: what this reviewer saw.
    outdating.lesson_marks_set(lesson, now=now)
    opened = _detect_conflicts(lesson, actor=actor, now=now, on="approval")
    return LessonReview(lesson.id, lesson.status, conflicts=tuple(c.pk for c in opened))


def _supersede(old_id: str, *, by: Lesson, actor: User, now: datetime) -> None:
    old = supersede_version(
        Lesson, old_id, by=by, action=Action.LESSON_SUPERSEDE, actor=actor, now=now
    )
    if old is None:
        return
    # The version that narrows a lesson settles the conflicts that asked for it; whether the
    # narrowed version still conflicts is detected afresh on its approval.
    for conflict in LessonConflict.objects.select_for_update().filter(
        narrowing=by.id, status=ConflictStatus.OPEN
    ):
        conflict_close(
            conflict,
            kept=conflict.other(old.id),
            resolution="narrowed",
            actor=actor,
            reason=f"narrowed by {by.id}",
            now=now,
        )


@transaction.atomic
def lesson_reject(
    *, lesson: Lesson, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    require_item_tenant(actor, lesson)
    return item_reject(
        lesson_locked(lesson),
        actor=actor,
        reason=reason,
        action=Action.LESSON_REJECT,
        now=now or clock.now(),
    )


def _open_conflict(
    a: str, b: str, *, tenant: str, found_by: str, actor: User | None, now: datetime, on: str
) -> LessonConflict | None:
    first, second = sorted((a, b))
    if LessonConflict.objects.filter(lesson_a_id=first, lesson_b_id=second).exists():
        return None
    lessons = {lesson.id: lesson for lesson in Lesson.objects.filter(pk__in=[first, second])}
    favoured = ld.favoured_side(
        lesson_selectors.conflict_side(lessons[first], now),
        lesson_selectors.conflict_side(lessons[second], now),
    )
    conflict = LessonConflict.objects.create(
        lesson_a_id=first,
        lesson_b_id=second,
        tenant=tenant,
        found_by=found_by,
        detected_at=now,
        detected_on=on,
        favoured=favoured,
    )
    dispatch(Event.LESSON_CONFLICT_OPENED, conflict=conflict)
    event_record(
        actor=actor,
        action=Action.LESSON_CONFLICT_OPEN,
        target=first,
        details={
            "conflict": conflict.pk,
            "lessons": [first, second],
            "found_by": found_by,
            "detected_on": on,
            "favoured": favoured or None,
        },
        at=now,
    )
    return conflict


def _detect_conflicts(
    lesson: Lesson, *, actor: User, now: datetime, on: str
) -> list[LessonConflict]:
    mine = lesson_selectors.lesson_shape(lesson)
    apart = lesson_selectors.NarrowedApart()
    opened = []
    for other in lesson_selectors.shapes_in_scope(lesson.scope):
        if other.id == lesson.id:
            continue
        reason = ld.conflict_reason(mine, other, narrowed_apart=apart(lesson.id, other.id))
        if reason is None:
            continue
        conflict = _open_conflict(
            lesson.id, other.id, tenant=lesson.tenant, found_by=reason, actor=actor, now=now, on=on
        )
        if conflict is not None:
            opened.append(conflict)
    return opened


def conflicts_scan(*, actor: User | None, now: datetime) -> list[LessonConflict]:
    """Every pair of approved lessons of one scope that conflicts and has no conflict record.

    The curation scan calls this (as no one, ``actor`` None); pairs are compared within a scope
    only.
    """
    by_scope: dict[tuple[str, ...], list[ld.LessonShape]] = {}
    for lesson in Lesson.objects.filter(status=Status.APPROVED).only(*SCOPE_FIELDS):
        by_scope.setdefault(tuple(lesson.scope.values()), [])
    opened = []
    apart = lesson_selectors.NarrowedApart()
    for key in sorted(by_scope):
        scope = dict(zip(SCOPE_FIELDS, key, strict=True))
        shapes = lesson_selectors.shapes_in_scope(scope)
        for i, a in enumerate(shapes):
            for b in shapes[i + 1 :]:
                reason = ld.conflict_reason(a, b, narrowed_apart=apart(a.id, b.id))
                if reason is None:
                    continue
                conflict = _open_conflict(
                    a.id,
                    b.id,
                    tenant=scope["tenant"],
                    found_by=reason,
                    actor=actor,
                    now=now,
                    on="scan",
                )
                if conflict is not None:
                    opened.append(conflict)
    return opened


def conflict_close(
    conflict: LessonConflict, *, kept: str, resolution: str, actor: User, reason: str, now: datetime
) -> None:
    conflict.status = ConflictStatus.RESOLVED
    conflict.kept = kept
    conflict.resolution = resolution
    conflict.resolved_by = actor
    conflict.resolved_at = now
    conflict.resolved_reason = reason
    conflict.save(
        update_fields=[
            "status",
            "kept",
            "resolution",
            "resolved_by",
            "resolved_at",
            "resolved_reason",
        ]
    )
    dispatch(Event.LESSON_CONFLICT_CLOSED, conflict=conflict)
    event_record(
        actor=actor,
        action=Action.LESSON_CONFLICT_RESOLVE,
        target=conflict.lesson_a_id,
        reason=reason,
        details={
            "conflict": conflict.pk,
            "lessons": [conflict.lesson_a_id, conflict.lesson_b_id],
            "kept": kept,
            "resolution": resolution,
        },
        at=now,
    )


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


@dataclass(frozen=True)
class MergeOutcome:
    merged: str
    candidate: str
    target: str

    def as_json(self) -> dict[str, Any]:
        return {"ok": True, "id": self.merged, "candidate": self.candidate, "target": self.target}


@transaction.atomic
def merge_accept(
    *, candidate: Lesson, target: Lesson, actor: User, reason: str, now: datetime | None = None
) -> MergeOutcome:
    """Accept a proposed merge: a new version of ``target`` that adds the candidate's evidence.

    The new version keeps the target's wording and adds the candidate's cases and tags; it is
    submitted in the candidate submitter's name and approved by ``actor`` under the approval
    rules (four eyes included), which supersedes the target. The candidate is superseded by the
    new version too. Nothing is edited in place: both old rows stay, so the diff stays visible.
    """
    require(actor, REVIEW_CASE, candidate.tenant, message=MERGE_REFUSED)
    now = now or clock.now()
    candidate = lesson_locked(candidate)
    target = lesson_locked(target)
    if target.id not in {p.target for p in lesson_selectors.merge_proposals(candidate)}:
        raise ValidationFailure("target", f"{target.id} {NOT_A_MERGE}")
    base = lesson_content(target)
    extra = lesson_content(candidate)
    supports = tuple(dict.fromkeys((*base.supports, *extra.supports)))
    contradicts = tuple(
        c for c in dict.fromkeys((*base.contradicts, *extra.contradicts)) if c not in supports
    )
    merged_content = replace(
        base,
        supports=supports,
        contradicts=contradicts,
        tags=tuple(dict.fromkeys((*base.tags, *extra.tags))),
        supersedes=target.id,
    )
    merged, _ = lesson_store(
        merged_content, actor=candidate.submitted_by, via=SubmittedVia.CONSOLE, now=now
    )
    lesson_approve(lesson=merged, actor=actor, reason=reason, now=now)
    candidate.status = Status.SUPERSEDED
    candidate.superseded_by = merged.id
    candidate.superseded_at = now
    candidate.save(update_fields=["status", "superseded_by", "superseded_at"])
    dispatch(Event.ITEM_STATUS_CHANGED, item=candidate)
    event_record(
        actor=actor,
        action=Action.LESSON_MERGE,
        target=merged.id,
        reason=reason.strip(),
        details={"candidate": candidate.id, "target": target.id},
        at=now,
    )
    return MergeOutcome(merged.id, candidate.id, target.id)
