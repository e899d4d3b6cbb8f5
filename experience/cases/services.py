"""Every write to the experience memory: atomic, permission-checked and audited.

The acting user always comes from the caller's authenticated identity (the ``actor`` argument),
never from a field of the submitted content. What a write sets in motion above this package (the
retrieval index, curation) it publishes where it writes, ``dispatch(Event.…)``
(``reviewconsole.dispatch``; docs/architecture.md, "Events", lists who reacts).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Model

from experience.cases.models import Case, Evidence, EvidenceCheck, Skill, SkillCase
from experience.cases.schema import (
    NO_BODY,
    CaseContent,
    SkillContent,
    parse_case,
)
from experience.cases.selectors import (
    case_approval_checklist,
    reviewer_of,
    skill_approval_checklist,
)
from experience.core import domain
from experience.core.models import ReviewedItem, Status, SubmittedVia
from experience.core.review import ReviewOutcome, ReviewRefused, require_item_tenant
from reviewconsole import accounts, clock, itemids
from reviewconsole.audit import event_record
from reviewconsole.dispatch import Event, dispatch
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
from reviewconsole.reasons import reason_within_cap
from reviewconsole.tenancy import NOT_IN_TENANT, require_input_tenant

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


@dataclass(frozen=True)
class Submitted:
    id: str
    type: str
    created: bool


def item_inserted(item: ReviewedItem) -> bool:
    """Insert a content-addressed row; False when a concurrent submission stored it first."""
    try:
        with transaction.atomic():
            item.save(force_insert=True)
    except IntegrityError:
        if not type(item).objects.filter(pk=item.pk).exists():
            raise
        return False
    return True


def _store_case(content: CaseContent, *, actor: User, via: str, now: datetime) -> tuple[Case, bool]:
    require_input_tenant(
        actor,
        content.scope["tenant"],
        field="scope.tenant",
        create=via == SubmittedVia.IMPORT,
        now=now,
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
        submitted_at=now,
        **content.scope,
    )
    if not item_inserted(case):
        return Case.objects.get(pk=case_id), False
    dispatch(Event.CASE_STORED, case=case)
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
        at=now,
    )
    return case, True


def _record_checks(
    case: Case, keys: Iterable[str], *, actor: User, note: str, now: datetime
) -> list[str]:
    """Checks by ``actor`` on the named evidence items; an item already checked by them is kept."""
    recorded = []
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
            at=now,
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
    *,
    content: CaseContent,
    actor: User,
    via: str = SubmittedVia.CONSOLE,
    now: datetime | None = None,
) -> tuple[Case, bool]:
    """Submit a candidate case as ``actor``. Identical content returns the stored row."""
    now = now or clock.now()
    if via == SubmittedVia.API:
        require(actor, (PROPOSE_CASE, ADD_CASE), message=PROPOSE_REFUSED)
        # A proposal's evidence is unchecked whatever its body says: only a person checks.
    else:
        require(actor, ADD_CASE, message=SUBMIT_REFUSED)
        if _verified_keys(content) and not holds(actor, VERIFY_EVIDENCE):
            raise ValidationFailure(_verified_path(content), VERIFIED_NEEDS_PERMISSION)
    case, created = _store_case(content, actor=actor, via=via, now=now)
    if via != SubmittedVia.API and _verified_keys(content):
        _record_checks(
            case, _verified_keys(content), actor=actor, note="verified in import", now=now
        )
    return case, created


def case_propose(*, data: object, actor: User, now: datetime | None = None) -> tuple[Case, bool]:
    """An agent's (or API client's) proposal: a candidate whose evidence is never checked."""
    return case_submit(content=parse_case(data), actor=actor, via=SubmittedVia.API, now=now)


def skill_store(
    content: SkillContent, *, actor: User, via: str, now: datetime
) -> tuple[Skill, bool]:
    require_input_tenant(
        actor,
        content.scope["tenant"],
        field="scope.tenant",
        create=via == SubmittedVia.IMPORT,
        now=now,
    )
    if content.prompt is None and not content.recipe:
        # A skill is a recipe or a prompt; content built without either is a defect upstream.
        raise ValidationFailure("recipe", NO_BODY)
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
        recipe=canonical.get("recipe", []),
        prompt=canonical.get("prompt") or {},
        valid_from=content.valid_from,
        valid_to=content.valid_to,
        submitted_by=actor,
        submitted_via=via,
        submitted_at=now,
        **content.scope,
    )
    if not item_inserted(skill):
        return Skill.objects.get(pk=skill_id), False
    SkillCase.objects.bulk_create(
        SkillCase(skill=skill, case_id=case_id, position=position)
        for position, case_id in enumerate(canonical["cases"])
    )
    event_record(
        actor=actor,
        action=Action.SKILL_SUBMIT,
        target=skill.id,
        details={
            "via": via,
            "cases": canonical["cases"],
            **({"form": content.form} if content.prompt is not None else {}),
        },
        at=now,
    )
    return skill, True


@transaction.atomic
def skill_submit(
    *,
    content: SkillContent,
    actor: User,
    via: str = SubmittedVia.CONSOLE,
    now: datetime | None = None,
) -> tuple[Skill, bool]:
    require(actor, ADD_SKILL, message=SUBMIT_SKILL_REFUSED)
    if content.unresolved():
        raise ValidationFailure("cases", "file references (#N) are only meaningful in an import")
    return skill_store(content, actor=actor, via=via, now=now or clock.now())


@transaction.atomic
def evidence_check(
    *, case: Case, key: str, actor: User, note: str = "", now: datetime | None = None
) -> EvidenceCheck:
    """Record that ``actor`` checked one evidence item of ``case``."""
    require(actor, VERIFY_EVIDENCE, message=VERIFY_REFUSED, unmet=domain.NOT_REVIEWER)
    require_item_tenant(actor, case)
    reason_within_cap(note, field="note")
    try:
        evidence = Evidence.objects.select_related("case").get(case=case, key=key)
    except Evidence.DoesNotExist:
        raise ValidationFailure("evidence", f"{case.id} has no evidence item {key!r}") from None
    now = now or clock.now()
    check = EvidenceCheck.objects.create(
        evidence=evidence, checked_by=actor, checked_at=now, note=note.strip()
    )
    event_record(
        actor=actor,
        action=Action.CASE_VERIFY,
        target=case.id,
        reason=note.strip(),
        details={"evidence": [key]},
        at=now,
    )
    return check


def case_locked(case: Case) -> Case:
    return Case.objects.select_for_update().get(pk=case.pk)


def skill_locked(skill: Skill) -> Skill:
    return Skill.objects.select_for_update().get(pk=skill.pk)


@transaction.atomic
def case_approve(
    *, case: Case, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    require_item_tenant(actor, case)
    case = case_locked(case)
    now = now or clock.now()
    unmet = case_approval_checklist(case=case, reviewer=actor, reason=reason, now=now)
    if unmet:
        raise ReviewRefused(case.id, case.status, unmet)
    case.status = Status.APPROVED
    case.approved_by = actor
    case.approved_at = now
    case.approved_reason = reason.strip()
    case.save(update_fields=["status", "approved_by", "approved_at", "approved_reason"])
    dispatch(Event.ITEM_STATUS_CHANGED, item=case)
    event_record(
        actor=actor,
        action=Action.CASE_APPROVE,
        target=case.id,
        reason=reason.strip(),
        details=accounts.provenance(actor),
        at=now,
    )
    if case.supersedes:
        _supersede(case.supersedes, by=case, actor=actor, now=now)
    return ReviewOutcome(case.id, case.status)


def supersede_version(
    model: type[M], old_id: str, *, by: Any, action: Action, actor: User, now: datetime
) -> M | None:
    """Mark the approved (or, for a lesson, outdated) version ``old_id`` superseded by ``by`` and
    audit it; None when there is no such version. Only a version of the new one's tenant is ever
    superseded, even by a row stored before submission refused other tenants' ids."""
    old = (
        model._default_manager.select_for_update()
        .filter(pk=old_id, tenant=by.tenant, status__in=[Status.APPROVED, Status.OUTDATED])
        .first()
    )
    if old is None:
        return None
    old.status = Status.SUPERSEDED  # type: ignore[attr-defined]
    old.superseded_by = by.id  # type: ignore[attr-defined]
    old.superseded_at = now  # type: ignore[attr-defined]
    old.save(update_fields=["status", "superseded_by", "superseded_at"])
    dispatch(Event.ITEM_STATUS_CHANGED, item=old)
    event_record(
        actor=actor,
        action=action,
        target=old.pk,
        reason=f"superseded by {by.id}",
        details={"superseded_by": by.id},
        at=now,
    )
    return old


def _supersede(old_id: str, *, by: Case, actor: User, now: datetime) -> None:
    supersede_version(Case, old_id, by=by, action=Action.CASE_SUPERSEDE, actor=actor, now=now)


def item_reject(
    item: ReviewedItem, *, actor: User, reason: str, action: Action, now: datetime
) -> ReviewOutcome:
    """Reject a locked candidate case or skill (the rules are the same for both)."""
    unmet = domain.rejection_unmet(status=item.status, reviewer=reviewer_of(actor), reason=reason)
    if unmet:
        raise ReviewRefused(item.id, item.status, unmet)
    item.status = Status.REJECTED
    item.rejected_by = actor
    item.rejected_at = now
    item.rejected_reason = reason.strip()
    item.save(update_fields=["status", "rejected_by", "rejected_at", "rejected_reason"])
    dispatch(Event.ITEM_STATUS_CHANGED, item=item)
    event_record(actor=actor, action=action, target=item.id, reason=reason.strip(), at=now)
    return ReviewOutcome(item.id, item.status)


@transaction.atomic
def case_reject(
    *, case: Case, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    require_item_tenant(actor, case)
    return item_reject(
        case_locked(case),
        actor=actor,
        reason=reason,
        action=Action.CASE_REJECT,
        now=now or clock.now(),
    )


@transaction.atomic
def skill_approve(
    *, skill: Skill, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    require_item_tenant(actor, skill)
    skill = skill_locked(skill)
    now = now or clock.now()
    unmet = skill_approval_checklist(skill=skill, reviewer=actor, reason=reason, now=now)
    if unmet:
        raise ReviewRefused(skill.id, skill.status, unmet)
    skill.status = Status.APPROVED
    skill.approved_by = actor
    skill.approved_at = now
    skill.approved_reason = reason.strip()
    skill.save(update_fields=["status", "approved_by", "approved_at", "approved_reason"])
    dispatch(Event.ITEM_STATUS_CHANGED, item=skill)
    event_record(
        actor=actor,
        action=Action.SKILL_APPROVE,
        target=skill.id,
        reason=reason.strip(),
        details=accounts.provenance(actor),
        at=now,
    )
    return ReviewOutcome(skill.id, skill.status)


@transaction.atomic
def skill_reject(
    *, skill: Skill, actor: User, reason: str, now: datetime | None = None
) -> ReviewOutcome:
    require_item_tenant(actor, skill)
    return item_reject(
        skill_locked(skill),
        actor=actor,
        reason=reason,
        action=Action.SKILL_REJECT,
        now=now or clock.now(),
    )
