"""Every write to the experience memory: atomic, permission-checked and audited.

The acting user always comes from the caller's authenticated identity (the ``actor`` argument),
never from a field of the submitted content.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Model

from experience import domain
from experience.lesson_schema import LessonContent, parse_lesson
from experience.models import (
    Case,
    Evidence,
    EvidenceCheck,
    ItemType,
    Lesson,
    Reference,
    RevocationImpact,
    Run,
    RunCitation,
    Skill,
    SkillCase,
    Status,
    SubmittedVia,
)
from experience.run_claims import run_claim
from experience.run_followups import follow_ups_flag
from experience.schema import (
    FILE_REFERENCE,
    CaseContent,
    SkillContent,
    item_kind,
    parse_case,
    parse_skill,
)
from experience.selectors import (
    NO_SUCH_CASE,
    NO_SUCH_LESSON,
    NO_SUCH_SKILL,
    Impact,
    case_approval_checklist,
    reviewer_of,
    revocation_impact,
    skill_facts,
)
from experience.tools import tool_specs
from knowledge.models import Document
from knowledge.services import DocumentRefusal, document_approve, document_revoke
from reviewconsole import clock, itemids
from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action
from reviewconsole.permissions import (
    ADD_CASE,
    ADD_SKILL,
    PROPOSE_CASE,
    VERIFY_EVIDENCE,
    holds,
    require,
)
from reviewconsole.reasons import MAX_REASON, reason_within_cap
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from reviewconsole.tenancy import NOT_IN_TENANT, may_access, require_input_tenant

M = TypeVar("M", bound=Model)

SUBMIT_REFUSED = "submitting cases needs the operator or reviewer role"
SUBMIT_SKILL_REFUSED = "submitting skills needs the operator or reviewer role"
PROPOSE_REFUSED = "proposing cases needs the agent, operator or reviewer role"
VERIFY_REFUSED = "marking evidence as checked needs the verify permission (reviewer role)"
VERIFIED_NEEDS_PERMISSION = "verified: true needs the importing user to hold the verify permission"
# An id of another tenant gets the same answer as an id that names nothing, so the answer never
# tells which ids exist in other tenants.
CASE_NOT_IN_TENANT = f"names no stored case of the same tenant ({NOT_IN_TENANT})"
SUPERSEDES_UNKNOWN = CASE_NOT_IN_TENANT
CASE_REFERENCE_UNKNOWN = CASE_NOT_IN_TENANT
CASE_REFERENCE_NOT_CASE = "points at an item of this file that is not a case"
CASE_REFERENCE_OUT_OF_RANGE = "points past the end of this file"
CASE_REFERENCE_DUPLICATE = "cites the same case twice"
NOT_A_LIST = "must be a JSON array of cases, skills and lessons"
RUN_ID_INVALID = "must be 1-100 characters without spaces"
SYSTEM_AGENT = "system-agent"


class ReviewRefused(Exception):
    """A review operation with unmet conditions; nothing was written."""

    def __init__(self, item_id: str, status: str, unmet: Sequence[str]) -> None:
        super().__init__(f"{item_id} cannot be changed: " + ", ".join(unmet))
        self.item_id = item_id
        self.status = status
        self.unmet = list(unmet)


@dataclass(frozen=True)
class ReviewOutcome:
    id: str
    status: str
    impact: Impact = field(default_factory=Impact)

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "id": self.id,
            "status": self.status,
            "unmet": [],
            "impact": self.impact.as_json(),
        }


def _require_tenant(actor: User, item: Case | Skill | Lesson) -> None:
    """Items of a tenant the actor is not a member of do not exist for them: refused exactly as
    an unknown id is (``selectors.case_get`` and its kin), so no answer tells what exists in
    another tenant."""
    if not may_access(actor, item.tenant):
        unknown = NO_SUCH_CASE if isinstance(item, Case) else NO_SUCH_SKILL
        if isinstance(item, Lesson):
            unknown = NO_SUCH_LESSON
        raise ValidationFailure("id", f"{unknown}: {item.id}")


def validate_run_id(run_id: object, *, field: str = "run_id") -> str:
    if (
        not isinstance(run_id, str)
        or not run_id.strip()
        or len(run_id) > 100
        or any(ch.isspace() for ch in run_id)
    ):
        raise ValidationFailure(field, RUN_ID_INVALID)
    return run_id


def system_agent() -> User:
    """The account a command, replay or benchmark that names no user reads memory as.

    Made with the agent role on first use. An existing account is taken as it is: when an
    administrator deactivates it or changes its role, the permission check refuses its reads.
    """
    existing = User.objects.filter(username=SYSTEM_AGENT).first()
    return existing or user_set_role(username=SYSTEM_AGENT, role=Role.AGENT)


# --- submission --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Submitted:
    id: str
    type: str
    created: bool


def _inserted(item: Case | Skill | Lesson) -> bool:
    """Insert a content-addressed row; False when a concurrent submission stored it first."""
    try:
        with transaction.atomic():
            item.save(force_insert=True)
    except IntegrityError:
        if not type(item).objects.filter(pk=item.pk).exists():
            raise
        return False
    return True


def _store_case(content: CaseContent, *, actor: User, via: str) -> tuple[Case, bool]:
    require_input_tenant(
        actor, content.scope["tenant"], field="scope.tenant", create=via == SubmittedVia.IMPORT
    )
    # A new version corrects a case of its own tenant, whoever submits it: superseding takes
    # the old version out of retrieval and shows its content in the new version's diff.
    if (
        content.supersedes
        and not Case.objects.filter(pk=content.supersedes, tenant=content.scope["tenant"]).exists()
    ):
        raise ValidationFailure("supersedes", f"{content.supersedes} {SUPERSEDES_UNKNOWN}")
    case_id = content.id
    existing = Case.objects.filter(pk=case_id).first()
    if existing is not None:
        return existing, False
    canonical = content.canonical()
    case = Case(
        id=case_id,
        content_hash=itemids.digest_of(case_id),
        content=canonical,
        incident=content.incident,
        title=content.title,
        summary=content.summary,
        observations=canonical["observations"],
        diagnosis=canonical["diagnosis"],
        counterevidence=canonical["counterevidence"],
        outcome=canonical["outcome"],
        supersedes=content.supersedes,
        search_text=content.search_text(),
        valid_from=content.valid_from,
        valid_to=content.valid_to,
        submitted_by=actor,
        submitted_via=via,
        submitted_at=clock.now(),
        **content.scope,
    )
    if not _inserted(case):
        return Case.objects.get(pk=case_id), False
    Evidence.objects.bulk_create(
        Evidence(
            case=case,
            key=item.key,
            section=item.section,
            position=position,
            source_id=item.source_id,
            excerpt=item.excerpt,
        )
        for position, item in enumerate(content.evidence())
    )
    event_record(
        actor=actor,
        action=Action.CASE_SUBMIT,
        target=case.id,
        details={"via": via, "incident": case.incident, "supersedes": case.supersedes or None},
    )
    return case, True


def _record_checks(case: Case, keys: Iterable[str], *, actor: User, note: str) -> list[str]:
    """Checks by ``actor`` on the named evidence items; an item already checked by them is kept."""
    recorded = []
    now = clock.now()
    for evidence in Evidence.objects.filter(case=case, key__in=list(keys)).order_by("position"):
        if evidence.checks.filter(checked_by=actor).exists():
            continue
        EvidenceCheck.objects.create(evidence=evidence, checked_by=actor, checked_at=now, note=note)
        recorded.append(evidence.key)
    if recorded:
        event_record(
            actor=actor,
            action=Action.CASE_VERIFY,
            target=case.id,
            reason=note,
            details={"evidence": recorded},
        )
    return recorded


def _verified_keys(content: CaseContent) -> list[str]:
    return [item.key for item in content.evidence() if item.verified]


def _verified_path(content: CaseContent) -> str:
    """The JSON path of the first ``verified: true`` flag, for the refusal message."""
    for item in content.evidence():
        if item.verified:
            parts = item.key.split("/")
            if parts[0] == "observations":
                return f"observations[{parts[1]}].verified"
            if parts[0] == "counterevidence":
                return f"counterevidence[{parts[1]}].evidence[{parts[2]}].verified"
            return f"{parts[0]}.evidence[{parts[1]}].verified"
    return "verified"


@transaction.atomic
def case_submit(
    *, content: CaseContent, actor: User, via: str = SubmittedVia.CONSOLE
) -> tuple[Case, bool]:
    """Submit a candidate case as ``actor``. Identical content returns the stored row."""
    if via == SubmittedVia.API:
        require(actor, (PROPOSE_CASE, ADD_CASE), message=PROPOSE_REFUSED)
        # A proposal's evidence is unchecked whatever its body says: only a person checks.
    else:
        require(actor, ADD_CASE, message=SUBMIT_REFUSED)
        if _verified_keys(content) and not holds(actor, VERIFY_EVIDENCE):
            raise ValidationFailure(_verified_path(content), VERIFIED_NEEDS_PERMISSION)
    case, created = _store_case(content, actor=actor, via=via)
    if via != SubmittedVia.API and _verified_keys(content):
        _record_checks(case, _verified_keys(content), actor=actor, note="verified in import")
    return case, created


def case_propose(*, data: object, actor: User) -> tuple[Case, bool]:
    """An agent's (or API client's) proposal: a candidate whose evidence is never checked."""
    return case_submit(content=parse_case(data), actor=actor, via=SubmittedVia.API)


def _store_skill(content: SkillContent, *, actor: User, via: str) -> tuple[Skill, bool]:
    require_input_tenant(
        actor, content.scope["tenant"], field="scope.tenant", create=via == SubmittedVia.IMPORT
    )
    skill_id = content.id
    existing = Skill.objects.filter(pk=skill_id).first()
    if existing is not None:
        return existing, False
    # A case of another tenant does not exist for this skill (nor is its existence revealed).
    stored = set(
        Case.objects.filter(pk__in=content.cases, tenant=content.scope["tenant"]).values_list(
            "pk", flat=True
        )
    )
    for i, case_id in enumerate(content.cases):
        if case_id not in stored:
            raise ValidationFailure(f"cases[{i}]", f"{case_id} {CASE_REFERENCE_UNKNOWN}")
    canonical = content.canonical()
    skill = Skill(
        id=skill_id,
        content_hash=itemids.digest_of(skill_id),
        content=canonical,
        title=content.title,
        when=content.when,
        recipe=canonical["recipe"],
        valid_from=content.valid_from,
        valid_to=content.valid_to,
        submitted_by=actor,
        submitted_via=via,
        submitted_at=clock.now(),
        **content.scope,
    )
    if not _inserted(skill):
        return Skill.objects.get(pk=skill_id), False
    SkillCase.objects.bulk_create(
        SkillCase(skill=skill, case_id=case_id, position=position)
        for position, case_id in enumerate(canonical["cases"])
    )
    event_record(
        actor=actor,
        action=Action.SKILL_SUBMIT,
        target=skill.id,
        details={"via": via, "cases": canonical["cases"]},
    )
    return skill, True


@transaction.atomic
def skill_submit(
    *, content: SkillContent, actor: User, via: str = SubmittedVia.CONSOLE
) -> tuple[Skill, bool]:
    require(actor, ADD_SKILL, message=SUBMIT_SKILL_REFUSED)
    if content.unresolved():
        raise ValidationFailure("cases", "file references (#N) are only meaningful in an import")
    return _store_skill(content, actor=actor, via=via)


@transaction.atomic
def items_import(*, items: object, actor: User) -> list[Submitted]:
    """Import a JSON array of cases and skills as candidates: all or nothing."""
    if not isinstance(items, list):
        raise ValidationFailure("$", NOT_A_LIST)
    specs = tool_specs()
    parsed: list[CaseContent | SkillContent | LessonContent] = []
    for index, raw in enumerate(items):
        try:
            kind = item_kind(raw)
            if kind == "lesson":
                parsed.append(parse_lesson(raw))
            else:
                parsed.append(parse_case(raw) if kind == "case" else parse_skill(raw, specs))
        except ValidationFailure as failure:
            raise failure.at(f"[{index}]") from None
    if any(isinstance(item, CaseContent) for item in parsed):
        require(actor, ADD_CASE, message=SUBMIT_REFUSED)
    if any(isinstance(item, SkillContent) for item in parsed):
        require(actor, ADD_SKILL, message=SUBMIT_SKILL_REFUSED)

    # Cases first, so a skill may cite a case that appears later in the same file.
    stored: dict[int, Submitted] = {}
    for index, item in enumerate(parsed):
        if isinstance(item, CaseContent):
            try:
                case, created = case_submit(content=item, actor=actor, via=SubmittedVia.IMPORT)
            except ValidationFailure as failure:
                raise failure.at(f"[{index}]") from None
            stored[index] = Submitted(case.id, "case", created)
    for index, item in enumerate(parsed):
        if isinstance(item, SkillContent):
            try:
                resolved = _resolve_file_references(item, parsed, stored)
                skill, created = _store_skill(resolved, actor=actor, via=SubmittedVia.IMPORT)
            except ValidationFailure as failure:
                raise failure.at(f"[{index}]") from None
            stored[index] = Submitted(skill.id, "skill", created)
    # Lessons last: they cite cases of this file; their module builds on this one.
    from experience.lessons import lessons_import

    lessons_import(parsed=parsed, stored=stored, actor=actor)
    return [stored[index] for index in range(len(parsed))]


def _resolve_file_references(
    skill: SkillContent,
    parsed: Sequence[CaseContent | SkillContent | LessonContent],
    stored: Mapping[int, Submitted],
) -> SkillContent:
    """Replace each ``#N`` by the id of item N of the same file (counted from 0)."""
    resolved: list[str] = []
    for i, ref in enumerate(skill.cases):
        match = FILE_REFERENCE.fullmatch(ref)
        if match is None:
            case_id = ref
        else:
            n = int(match.group(1))
            if n >= len(parsed):
                raise ValidationFailure(f"cases[{i}]", f"{ref} {CASE_REFERENCE_OUT_OF_RANGE}")
            target = parsed[n]
            if not isinstance(target, CaseContent):
                raise ValidationFailure(f"cases[{i}]", f"{ref} {CASE_REFERENCE_NOT_CASE}")
            case_id = stored[n].id
        if case_id in resolved:
            raise ValidationFailure(f"cases[{i}]", CASE_REFERENCE_DUPLICATE)
        resolved.append(case_id)
    return SkillContent(
        scope=skill.scope,
        title=skill.title,
        when=skill.when,
        recipe=skill.recipe,
        cases=tuple(resolved),
        valid_from=skill.valid_from,
        valid_to=skill.valid_to,
    )


# --- evidence checks -----------------------------------------------------------------------------


@transaction.atomic
def evidence_check(*, case: Case, key: str, actor: User, note: str = "") -> EvidenceCheck:
    """Record that ``actor`` checked one evidence item of ``case``."""
    require(actor, VERIFY_EVIDENCE, message=VERIFY_REFUSED, unmet=domain.NOT_REVIEWER)
    _require_tenant(actor, case)
    reason_within_cap(note, field="note")
    try:
        evidence = Evidence.objects.select_related("case").get(case=case, key=key)
    except Evidence.DoesNotExist:
        raise ValidationFailure("evidence", f"{case.id} has no evidence item {key!r}") from None
    check = EvidenceCheck.objects.create(
        evidence=evidence, checked_by=actor, checked_at=clock.now(), note=note.strip()
    )
    event_record(
        actor=actor,
        action=Action.CASE_VERIFY,
        target=case.id,
        reason=note.strip(),
        details={"evidence": [key]},
    )
    return check


# --- review: cases -----------------------------------------------------------------------------


def _locked_case(case: Case) -> Case:
    return Case.objects.select_for_update().get(pk=case.pk)


def _locked_skill(skill: Skill) -> Skill:
    return Skill.objects.select_for_update().get(pk=skill.pk)


@transaction.atomic
def case_approve(*, case: Case, actor: User, reason: str) -> ReviewOutcome:
    _require_tenant(actor, case)
    case = _locked_case(case)
    now = clock.now()
    unmet = case_approval_checklist(case=case, reviewer=actor, reason=reason, now=now)
    if unmet:
        raise ReviewRefused(case.id, case.status, unmet)
    case.status = Status.APPROVED
    case.approved_by = actor
    case.approved_at = now
    case.approved_reason = reason.strip()
    case.save(update_fields=["status", "approved_by", "approved_at", "approved_reason"])
    event_record(actor=actor, action=Action.CASE_APPROVE, target=case.id, reason=reason.strip())
    if case.supersedes:
        _supersede(case.supersedes, by=case, actor=actor, now=now)
    return ReviewOutcome(case.id, case.status)


def supersede_version(
    model: type[M], old_id: str, *, by: Any, action: Action, actor: User, now: datetime
) -> M | None:
    """Mark the approved version ``old_id`` superseded by ``by`` and audit it; None when there is
    no such version. Only a version of the new one's tenant is ever superseded, even by a row
    stored before submission refused other tenants' ids."""
    old = (
        model._default_manager.select_for_update()
        .filter(pk=old_id, tenant=by.tenant, status=Status.APPROVED)
        .first()
    )
    if old is None:
        return None
    old.status = Status.SUPERSEDED  # type: ignore[attr-defined]
    old.superseded_by = by.id  # type: ignore[attr-defined]
    old.superseded_at = now  # type: ignore[attr-defined]
    old.save(update_fields=["status", "superseded_by", "superseded_at"])
    event_record(
        actor=actor,
        action=action,
        target=old.pk,
        reason=f"superseded by {by.id}",
        details={"superseded_by": by.id},
    )
    return old


def _supersede(old_id: str, *, by: Case, actor: User, now: datetime) -> None:
    supersede_version(Case, old_id, by=by, action=Action.CASE_SUPERSEDE, actor=actor, now=now)


def _reject(
    item: Case | Skill | Lesson, *, actor: User, reason: str, action: Action
) -> ReviewOutcome:
    """Reject a locked candidate case or skill (the rules are the same for both)."""
    unmet = domain.rejection_unmet(status=item.status, reviewer=reviewer_of(actor), reason=reason)
    if unmet:
        raise ReviewRefused(item.id, item.status, unmet)
    item.status = Status.REJECTED
    item.rejected_by = actor
    item.rejected_at = clock.now()
    item.rejected_reason = reason.strip()
    item.save(update_fields=["status", "rejected_by", "rejected_at", "rejected_reason"])
    event_record(actor=actor, action=action, target=item.id, reason=reason.strip())
    return ReviewOutcome(item.id, item.status)


def _revoke(
    item: Case | Skill | Lesson, item_type: ItemType, *, actor: User, reason: str, action: Action
) -> ReviewOutcome:
    """Revoke a locked approved case or skill; store and return what read or cited it."""
    unmet = domain.revocation_unmet(status=item.status, reviewer=reviewer_of(actor), reason=reason)
    if unmet:
        raise ReviewRefused(item.id, item.status, unmet)
    item.status = Status.REVOKED
    item.revoked_by = actor
    item.revoked_at = clock.now()
    item.revoked_reason = reason.strip()
    item.save(update_fields=["status", "revoked_by", "revoked_at", "revoked_reason"])
    impact = revocation_impact(item.id)
    _store_impact(item.id, item_type, impact, actor=actor, reason=reason.strip())
    event_record(
        actor=actor,
        action=action,
        target=item.id,
        reason=reason.strip(),
        details={"impact": impact.as_json()},
    )
    return ReviewOutcome(item.id, item.status, impact)


@transaction.atomic
def case_reject(*, case: Case, actor: User, reason: str) -> ReviewOutcome:
    _require_tenant(actor, case)
    return _reject(_locked_case(case), actor=actor, reason=reason, action=Action.CASE_REJECT)


def _store_impact(
    item_id: str, item_type: str, impact: Impact, *, actor: User, reason: str
) -> None:
    RevocationImpact.objects.create(
        item_id=item_id,
        item_type=item_type,
        skills=impact.skills,
        lessons=impact.lessons,
        runs=impact.runs,
        revoked_by=actor,
        reason=reason,
        created_at=clock.now(),
    )
    # The runs that read it stay flagged on the runs pages until someone follows them up.
    follow_ups_flag(run_ids=impact.runs, item_id=item_id, at=clock.now())


@transaction.atomic
def case_revoke(*, case: Case, actor: User, reason: str) -> ReviewOutcome:
    """Revoke an approved case; return and store the skills citing it and the runs that read them."""
    _require_tenant(actor, case)
    return _revoke(
        _locked_case(case), ItemType.CASE, actor=actor, reason=reason, action=Action.CASE_REVOKE
    )


# --- review: skills ----------------------------------------------------------------------------


@transaction.atomic
def skill_approve(*, skill: Skill, actor: User, reason: str) -> ReviewOutcome:
    _require_tenant(actor, skill)
    skill = _locked_skill(skill)
    now = clock.now()
    unmet = domain.skill_approval_unmet(
        skill_facts(skill), reviewer=reviewer_of(actor), reason=reason, now=now
    )
    if unmet:
        raise ReviewRefused(skill.id, skill.status, unmet)
    skill.status = Status.APPROVED
    skill.approved_by = actor
    skill.approved_at = now
    skill.approved_reason = reason.strip()
    skill.save(update_fields=["status", "approved_by", "approved_at", "approved_reason"])
    event_record(actor=actor, action=Action.SKILL_APPROVE, target=skill.id, reason=reason.strip())
    return ReviewOutcome(skill.id, skill.status)


@transaction.atomic
def skill_reject(*, skill: Skill, actor: User, reason: str) -> ReviewOutcome:
    _require_tenant(actor, skill)
    return _reject(_locked_skill(skill), actor=actor, reason=reason, action=Action.SKILL_REJECT)


@transaction.atomic
def skill_revoke(*, skill: Skill, actor: User, reason: str) -> ReviewOutcome:
    _require_tenant(actor, skill)
    return _revoke(
        _locked_skill(skill), ItemType.SKILL, actor=actor, reason=reason, action=Action.SKILL_REVOKE
    )


# --- review: knowledge documents -----------------------------------------------------------------


def document_revocation_store(
    document_id: str, tenant: str, actor: User, reason: str
) -> dict[str, list[str]]:
    """Knowledge's revocation recorder: the runs of ``tenant`` whose tool results cited the
    document, stored."""
    impact = revocation_impact(document_id, tenant=tenant)
    _store_impact(document_id, ItemType.DOCUMENT, impact, actor=actor, reason=reason)
    return impact.as_json()


def document_revoke_with_impact(*, document: Document, actor: User, reason: str) -> ReviewOutcome:
    """Revoke a knowledge document (its service stores the impact), as a review outcome."""
    try:
        review = document_revoke(document=document, actor=actor, reason=reason)
    except DocumentRefusal as refusal:
        raise ReviewRefused(refusal.item_id, refusal.status, refusal.conditions) from None
    return ReviewOutcome(review.document.public_id, review.document.status, Impact(**review.impact))


def document_approve_reviewed(*, document: Document, actor: User, reason: str) -> ReviewOutcome:
    try:
        review = document_approve(document=document, actor=actor, reason=reason)
    except DocumentRefusal as refusal:
        raise ReviewRefused(refusal.item_id, refusal.status, refusal.conditions) from None
    return ReviewOutcome(review.document.public_id, review.document.status)


# --- references and runs -----------------------------------------------------------------------


def references_record(*, run_id: str, items: Iterable[tuple[str, str]], at: datetime) -> None:
    """One Reference per ``(item_id, item_type)`` read inside ``run_id``."""
    Reference.objects.bulk_create(
        Reference(run_id=run_id, item_id=item_id, item_type=kind, read_at=at)
        for item_id, kind in items
    )


@transaction.atomic
def run_store(
    *,
    run_id: str,
    skill_id: str,
    scope: Mapping[str, str | None],
    context: Mapping[str, Any],
    steps: list[dict[str, Any]],
    observations: list[dict[str, Any]],
    cases: list[str],
    status: str,
    reason: str,
    tool_calls: int,
    started_at: datetime,
    finished_at: datetime,
    cited_documents: Iterable[str],
    actor: User,
) -> Run:
    run_claim(run_id=run_id, actor=actor, tenant=scope.get("tenant"), at=started_at)
    run = Run.objects.create(
        run_id=run_id,
        skill_id=skill_id[:80],
        context=dict(context),
        steps=steps,
        observations=observations,
        cases=cases,
        status=status,
        reason=reason,
        tool_calls=tool_calls,
        started_at=started_at,
        finished_at=finished_at,
        actor=actor,
        **{name: (scope.get(name) or "")[:64] for name in domain.SCOPE_FIELDS},
    )
    RunCitation.objects.bulk_create(
        RunCitation(run=run, run_id_text=run_id, document_id=document_id)
        for document_id in sorted(set(cited_documents))
    )
    event_record(
        actor=actor,
        action=Action.SKILL_RUN,
        target=skill_id[:200],
        # The run's own account of itself (tool errors, evidence ids) may run long; the run row
        # keeps it whole, the event its start.
        reason=reason[:MAX_REASON],
        details={"run_id": run_id, "status": status, "tool_calls": tool_calls},
    )
    return run
