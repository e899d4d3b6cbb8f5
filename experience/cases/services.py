"""Submissions of cases and skills and the checks of their evidence: atomic,
permission-checked and audited.

The acting user always comes from the caller's authenticated identity (the ``actor`` argument),
never from a field of the submitted content. Review decisions (approve, reject, revoke,
supersede) change what the retrieval index above this package holds, so they live above it, in
``experience.review``. A stored case concerns curation, above ``experience``: it is published
(``CaseStored``, ``reviewconsole.dispatch``; docs/architecture.md, "Events").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, cast

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Model

from experience.cases.events import CaseStored
from experience.cases.models import Case, Evidence, EvidenceCheck, Skill, SkillCase
from experience.cases.schema import (
    NO_BODY,
    CaseContent,
    SkillContent,
    parse_case,
)
from experience.core import domain
from experience.core.models import ReviewedItem, SubmittedVia
from experience.core.review import require_item_tenant
from reviewconsole import clock, itemids
from reviewconsole.audit import event_record
from reviewconsole.dispatch import dispatch
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


class Storable(Protocol):
    """What every kind's parsed content gives its row (``CaseContent``, ``SkillContent``,
    ``experience.lessons.schema.LessonContent``)."""

    @property
    def id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def valid_from(self) -> datetime: ...

    @property
    def valid_to(self) -> datetime: ...

    @property
    def scope(self) -> Mapping[str, str]: ...


Row = TypeVar("Row", bound=ReviewedItem)


def tenant_required(content: Storable, *, actor: User, via: str, now: datetime) -> None:
    """The content's tenant is one of the actor's (an import may create it, the rest of the
    import permitting)."""
    require_input_tenant(
        actor,
        content.scope["tenant"],
        field="scope.tenant",
        create=via == SubmittedVia.IMPORT,
        now=now,
    )


def row_stored(
    model: type[Row],
    content: Storable,
    canonical: dict[str, Any],
    actor: User,
    via: str,
    now: datetime,
    **fields: Any,
) -> tuple[Row, bool]:
    """A new candidate's row with what every kind stores (its content-addressed id and hash,
    the canonical content, title, validity, submission and scope) and the kind's own
    ``fields``; the stored row instead, not created, when a concurrent submission stored it
    first."""
    row = model(
        id=content.id,
        content_hash=itemids.digest_of(content.id),
        content=canonical,
        title=content.title,
        valid_from=content.valid_from,
        valid_to=content.valid_to,
        submitted_by=actor,
        submitted_via=via,
        submitted_at=now,
        **content.scope,
        **fields,
    )
    if not item_inserted(row):
        return cast(Row, model._default_manager.get(pk=row.pk)), False
    return row, True


def _store_case(content: CaseContent, *, actor: User, via: str, now: datetime) -> tuple[Case, bool]:
    tenant_required(content, actor=actor, via=via, now=now)
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
    case, created = row_stored(
        Case,
        content,
        canonical,
        actor,
        via,
        now,
        incident=content.incident,
        summary=content.summary,
        observations=canonical["observations"],
        diagnosis=canonical["diagnosis"],
        counterevidence=canonical["counterevidence"],
        outcome=canonical["outcome"],
        supersedes=content.supersedes,
        search_text=content.search_text(),
    )
    if not created:
        return case, False
    # Curation, above: the case's similarity signature and near-duplicate links, queued.
    dispatch(CaseStored(case=case, now=now))
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
    tenant_required(content, actor=actor, via=via, now=now)
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
    skill, created = row_stored(
        Skill,
        content,
        canonical,
        actor,
        via,
        now,
        when=content.when,
        recipe=canonical.get("recipe", []),
        prompt=canonical.get("prompt") or {},
    )
    if not created:
        return skill, False
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


class Referencing(Protocol):
    def unresolved(self) -> tuple[str, ...]: ...


Content = TypeVar("Content", bound=Referencing)
Stored = TypeVar("Stored", bound=ReviewedItem)

FILE_REFERENCES_IN_IMPORTS = "file references (#N) are only meaningful in an import"


@dataclass(frozen=True)
class Submission(Generic[Content, Stored]):
    """How a skill or a lesson is submitted on the console (or by a service in its name): the
    permission it needs and its refusal, the field that names the cases it cites (``#N`` file
    references are only meaningful in an import), and the kind's store."""

    store: Callable[..., tuple[Stored, bool]]
    permission: str
    refused: str
    references: str

    def submit(
        self,
        *,
        content: Content,
        actor: User,
        via: str = SubmittedVia.CONSOLE,
        now: datetime | None = None,
    ) -> tuple[Stored, bool]:
        """Submit a candidate as ``actor``; identical content returns the stored row."""
        with transaction.atomic():
            require(actor, self.permission, message=self.refused)
            if content.unresolved():
                raise ValidationFailure(self.references, FILE_REFERENCES_IN_IMPORTS)
            return self.store(content, actor=actor, via=via, now=now or clock.now())


SKILL_SUBMISSION: Submission[SkillContent, Skill] = Submission(
    skill_store, ADD_SKILL, SUBMIT_SKILL_REFUSED, "cases"
)
skill_submit = SKILL_SUBMISSION.submit


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
