"""The periodic scan (``curate``): stale and outdated items into re-review (lessons the outdated
rule finds outdated among them), shared patterns into skill proposals, and the links of cases
stored before curation was installed.

It runs as no one: its one event names what it queued, closed and linked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from curation.domain.proposals import (
    MAX_QUERY,
    PATTERN_DOCUMENT,
    PATTERN_LESSON,
    draft_query,
    draft_recipe,
    hypothesis_as_written,
    shared_patterns,
)
from curation.domain.staleness import document_findings, unused
from curation.domain.threads import collapse_space
from curation.incidents import case_link_similar
from curation.models import (
    NearDuplicate,
    ProposalStatus,
    ReReview,
    ReReviewReason,
    ReReviewResolution,
    ReReviewStatus,
    SkillProposal,
)
from curation.rereview import close_entries, resolution_of
from curation.selectors.proposals import (
    covered_by_skill,
    latest_titles,
    lesson_records,
    pattern_cases,
    proven_settings,
)
from curation.selectors.rereview import (
    cited_documents_of,
    document_states,
    last_confirmations,
    last_reads,
)
from experience.cases.models import Case, Skill
from experience.cases.schema import MAX_WHEN
from experience.core.gate import usable_case_q
from experience.core.models import Status
from experience.lessons.domain import SUCCESS_PATTERN
from experience.lessons.models import Lesson, LessonConflict
from experience.lessons.selectors import lesson_availability, open_conflict_ids
from experience.review.lesson_conflicts import conflicts_scan
from experience.review.outdating import lessons_outdated_scan
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.models import Action

DEFAULT_STALE_AFTER_DAYS = 90


def stale_after_days() -> int:
    return int(getattr(settings, "CURATION_STALE_AFTER_DAYS", DEFAULT_STALE_AFTER_DAYS))


@dataclass
class ScanReport:
    queued: list[ReReview] = field(default_factory=list)
    closed: list[ReReview] = field(default_factory=list)
    proposals: list[SkillProposal] = field(default_factory=list)
    linked: list[NearDuplicate] = field(default_factory=list)
    lesson_conflicts: list[LessonConflict] = field(default_factory=list)
    # Lessons the outdated rule took out of reuse (each queued for re-review on the way).
    outdated: list[Lesson] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "rereview": [_entry_json(e) for e in self.queued],
            "closed": [_entry_json(e) for e in self.closed],
            "proposals": [_proposal_json(p) for p in self.proposals],
            "near_duplicates": [
                {"id": link.pk, "cases": [link.case_a_id, link.case_b_id]} for link in self.linked
            ],
            "lesson_conflicts": [
                {
                    "id": c.pk,
                    "lessons": [c.lesson_a_id, c.lesson_b_id],
                    "found_by": c.found_by,
                    "favoured": c.favoured or None,
                }
                for c in self.lesson_conflicts
            ],
            "outdated_lessons": [
                {"id": lesson.id, "cause": lesson.outdated_cause} for lesson in self.outdated
            ],
        }


def _entry_json(entry: ReReview) -> dict[str, Any]:
    return {
        "id": entry.pk,
        "item_id": entry.item_id,
        "item_type": entry.item_type,
        "reason": entry.reason,
        "document_id": entry.document_id or None,
        "detail": entry.detail or None,
        "status": entry.status,
        "resolution": entry.resolution or None,
    }


def _proposal_json(proposal: SkillProposal) -> dict[str, Any]:
    return {
        "id": proposal.pk,
        "scope": proposal.scope,
        "pattern": {"kind": proposal.pattern_kind, "value": proposal.pattern},
        "cases": proposal.case_ids,
        "incidents": proposal.incidents,
        "status": proposal.status,
    }


def _has_entry(item_id: str, reason: str, document_id: str = "", detail: str = "") -> bool:
    entries = ReReview.objects.filter(item_id=item_id, reason=reason)
    if reason == ReReviewReason.UNUSED:
        # One open question at a time; a later scan may ask again once it is answered.
        return entries.filter(status__in=[ReReviewStatus.OPEN, ReReviewStatus.PENDING]).exists()
    # A document change is asked about once, whatever the answer was.
    return entries.filter(document_id=document_id, detail=detail).exists()


def _queue(
    item: Case | Skill,
    item_type: str,
    reason: str,
    *,
    now: datetime,
    document_id: str = "",
    detail: str = "",
) -> ReReview | None:
    if _has_entry(item.id, reason, document_id, detail):
        return None
    return ReReview.objects.create(
        item_id=item.id,
        item_type=item_type,
        tenant=item.tenant,
        title=item.title,
        reason=reason,
        document_id=document_id,
        detail=detail,
        detected_at=now,
    )


def _scan_staleness(now: datetime, days: int) -> list[ReReview]:
    queued: list[ReReview] = []
    cases = list(Case.objects.filter(status=Status.APPROVED).order_by("id"))
    skills = list(Skill.objects.filter(status=Status.APPROVED).order_by("id"))
    ids = [c.id for c in cases] + [s.id for s in skills]
    reads = last_reads(ids)
    confirmations = last_confirmations(ids)
    case_documents, skill_documents = cited_documents_of(cases, skills)
    everything = set().union(*case_documents.values(), *skill_documents.values())
    states = document_states(everything)

    items: list[tuple[Case | Skill, str, set[tuple[str, int]]]] = [
        *((c, "case", case_documents[c.id]) for c in cases),
        *((s, "skill", skill_documents[s.id]) for s in skills),
    ]
    for item, item_type, cited in items:
        assert item.approved_at is not None
        if unused(
            approved_at=item.approved_at,
            last_read_at=reads.get(item.id),
            last_confirmed_at=confirmations.get(item.id),
            now=now,
            days=days,
        ):
            entry = _queue(item, item_type, ReReviewReason.UNUSED, now=now, detail=f"{days} days")
            if entry:
                queued.append(entry)
        revoked, newest = states.get(item.tenant, (set(), {}))
        for finding in document_findings(cited, revoked=revoked, newest_approved=newest):
            entry = _queue(
                item,
                item_type,
                finding.reason,
                now=now,
                document_id=finding.document_id,
                detail=finding.detail,
            )
            if entry:
                queued.append(entry)
    return queued


def _close_gone(now: datetime) -> list[ReReview]:
    """Entries whose item is no longer approved (caught here when it changed by other means)."""
    closed: list[ReReview] = []
    open_entries = ReReview.objects.filter(status__in=[ReReviewStatus.OPEN, ReReviewStatus.PENDING])
    ids = set(open_entries.values_list("item_id", flat=True))
    statuses = dict(Case.objects.filter(pk__in=ids).values_list("pk", "status"))
    statuses.update(Skill.objects.filter(pk__in=ids).values_list("pk", "status"))
    lessons = dict(Lesson.objects.filter(pk__in=ids).values_list("pk", "status"))
    for item_id in sorted(ids):
        status = statuses.get(item_id, lessons.get(item_id))
        if item_id in lessons and status in (Status.APPROVED, Status.OUTDATED):
            # An outdated lesson's entry is open while it is outdated; a conflict's entry
            # closes with its conflict (curation.subscribers.conflict_rereview_settled).
            if status == Status.APPROVED:
                closed += close_entries(
                    item_id, ReReviewResolution.RESTORED, now=now, reason=ReReviewReason.OUTDATED
                )
            continue
        if status == Status.APPROVED:
            continue
        closed += close_entries(item_id, resolution_of(status), now=now)
    return closed


def _scan_proposals(now: datetime) -> list[SkillProposal]:
    cases = list(Case.objects.filter(usable_case_q(now)))
    patterns = pattern_cases(cases)
    drafts = shared_patterns(patterns)
    titles = latest_titles(
        {
            (dict(d.scope)["tenant"], d.pattern.value)
            for d in drafts
            if d.pattern.kind == PATTERN_DOCUMENT
        }
    )
    by_id = {c.case_id: c for c in patterns}
    proposals: list[SkillProposal] = []
    for draft in drafts:
        scope = dict(draft.scope)
        if covered_by_skill(scope, draft.case_ids):
            continue
        existing = SkillProposal.objects.filter(
            **scope, pattern_kind=draft.pattern.kind, pattern=draft.pattern.value[:300]
        ).first()
        if existing is not None:
            if existing.status == ProposalStatus.OPEN and existing.case_ids != list(draft.case_ids):
                existing.case_ids = list(draft.case_ids)
                existing.incidents = list(draft.incidents)
                existing.updated_at = now
                existing.save(update_fields=["case_ids", "incidents", "updated_at"])
                proposals.append(existing)
            continue
        members = [by_id[i] for i in draft.case_ids]
        if draft.pattern.kind == PATTERN_DOCUMENT:
            title = titles.get((scope["tenant"], draft.pattern.value), draft.pattern.value)
            query = draft_query(draft.pattern, document_title=title)
            skill_title = f"核对知识文档「{title}」"
            when = f"同一范围内已有 {len(draft.incidents)} 个不同事件核对过知识文档 {draft.pattern.value}："
        else:
            written = hypothesis_as_written(draft.pattern, members)
            query = draft_query(draft.pattern, written=written)
            skill_title = f"排查并排除假设「{written}」"
            when = f"同一范围内已有 {len(draft.incidents)} 个不同事件排除过假设「{written}」："
        when += "；".join(sorted({m.title for m in members}))
        proposals.append(
            SkillProposal.objects.create(
                **scope,
                pattern_kind=draft.pattern.kind,
                pattern=draft.pattern.value[:300],
                case_ids=list(draft.case_ids),
                incidents=list(draft.incidents),
                title=skill_title[:300],
                when=when[:MAX_WHEN],
                recipe=draft_recipe(query),
                created_at=now,
                updated_at=now,
            )
        )
    return proposals


def _scan_proven_lessons(now: datetime) -> list[SkillProposal]:
    """Success patterns proven often enough (``curation.domain.proposals.proven``) drafted as skill
    proposals; a lesson below the bar, in an open conflict or not available now stays a lesson.
    One proposal per lesson version, ever: a dismissed one is not drafted again."""
    config = proven_settings()
    lessons = [
        lesson
        for lesson in Lesson.objects.filter(
            status=Status.APPROVED, lesson_type=SUCCESS_PATTERN
        ).order_by("id")
        if lesson_availability(lesson, now).available
    ]
    volatile = open_conflict_ids([lesson.id for lesson in lessons])
    lessons = [lesson for lesson in lessons if lesson.id not in volatile]
    records = lesson_records(lessons, now)
    proposals: list[SkillProposal] = []
    for lesson in lessons:
        found = records[lesson.id]
        if not found.proven(config) or covered_by_skill(lesson.scope, found.case_ids):
            continue
        existing = SkillProposal.objects.filter(
            **lesson.scope, pattern_kind=PATTERN_LESSON, pattern=lesson.id
        ).first()
        if existing is not None:
            if existing.status == ProposalStatus.OPEN and existing.case_ids != list(found.case_ids):
                existing.case_ids = list(found.case_ids)
                existing.incidents = sorted(found.record.successes)
                existing.updated_at = now
                existing.save(update_fields=["case_ids", "incidents", "updated_at"])
                proposals.append(existing)
            continue
        record = found.record
        when = (
            f"同一范围内已有 {len(record.successes)} 个不同事件验证过这条经验"
            f"（成功率 {record.rate:.0%}）：{lesson.conclusion}"
        )
        proposals.append(
            SkillProposal.objects.create(
                **lesson.scope,
                pattern_kind=PATTERN_LESSON,
                pattern=lesson.id,
                case_ids=list(found.case_ids),
                incidents=sorted(record.successes),
                title=f"按已验证的经验排查：{lesson.scene_description}"[:300],
                when=when[:MAX_WHEN],
                recipe=draft_recipe(collapse_space(lesson.scene_description)[:MAX_QUERY]),
                created_at=now,
                updated_at=now,
            )
        )
    return proposals


def _backfill_signatures(now: datetime) -> list[NearDuplicate]:
    """Cases stored before curation was installed get their signature and links now."""
    linked: list[NearDuplicate] = []
    missing = Case.objects.filter(
        status__in=[Status.CANDIDATE, Status.APPROVED], signature__isnull=True
    ).order_by("submitted_at", "id")
    for case in missing:
        linked += case_link_similar(case=case, now=now)
    return linked


@transaction.atomic
def curation_scan(*, now: datetime | None = None, days: int | None = None) -> ScanReport:
    """Fill the queues: stale items into re-review, shared patterns into skill proposals."""
    now = now or clock.now()
    days = stale_after_days() if days is None else days
    report = ScanReport()
    report.linked = _backfill_signatures(now)
    report.closed = _close_gone(now)
    report.queued = _scan_staleness(now, days)
    report.proposals = _scan_proposals(now) + _scan_proven_lessons(now)
    report.lesson_conflicts = conflicts_scan(actor=None, now=now)
    # Each lesson turning outdated queues its own entry (curation.subscribers).
    report.outdated = lessons_outdated_scan(now=now)
    report.queued += list(
        ReReview.objects.filter(
            item_id__in=[lesson.id for lesson in report.outdated],
            reason=ReReviewReason.OUTDATED,
            status=ReReviewStatus.OPEN,
        )
    )
    if report.queued or report.closed or report.proposals or report.linked:
        event_record(
            actor=None,
            action=Action.CURATION_SCAN,
            target="curation:scan",
            details={
                "stale_after_days": days,
                "rereview": [e.pk for e in report.queued],
                "closed": [e.pk for e in report.closed],
                "proposals": [p.pk for p in report.proposals],
                "near_duplicates": [link.pk for link in report.linked],
            },
            at=now,
        )
    return report
