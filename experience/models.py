"""Experience memory rows: reviewed cases, skills, runs and the references that tie them together.

Hashed content is written once; only lifecycle columns (status, approvals, rejection,
revocation, supersession) may change afterwards.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse

from reviewconsole import itemids
from reviewconsole.links import item_page


class ImmutableContentError(RuntimeError):
    pass


class Status(models.TextChoices):
    CANDIDATE = "candidate", "candidate"
    APPROVED = "approved", "approved"
    REJECTED = "rejected", "rejected"
    REVOKED = "revoked", "revoked"
    SUPERSEDED = "superseded", "superseded"


class SubmittedVia(models.TextChoices):
    CONSOLE = "console", "console"
    IMPORT = "import", "import"
    API = "api", "api"


class ItemType(models.TextChoices):
    CASE = "case", "case"
    SKILL = "skill", "skill"
    LESSON = "lesson", "lesson"
    DOCUMENT = "document", "knowledge document"


class RunStatus(models.TextChoices):
    NEEDS_REVIEW = "needs_review", "needs review"
    FALLBACK = "fallback", "fallback"


# Columns that may change once a case or skill is saved.
LIFECYCLE_FIELDS = frozenset(
    {
        "status",
        "approved_by",
        "approved_at",
        "approved_reason",
        "rejected_by",
        "rejected_at",
        "rejected_reason",
        "revoked_by",
        "revoked_at",
        "revoked_reason",
        "superseded_by",
        "superseded_at",
    }
)

ID_LENGTH = 80
SCOPE_LENGTH = 64


class ReviewedItemQuerySet(models.QuerySet[Any]):
    def update(self, **kwargs: Any) -> int:
        changed = set(kwargs) - LIFECYCLE_FIELDS
        if changed:
            raise ImmutableContentError(
                f"{', '.join(sorted(changed))} is hashed content; submit a new version instead"
            )
        return super().update(**kwargs)


def _user_fk() -> Any:
    return models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )


class ReviewedItem(models.Model):
    """Scope, validity, submission and lifecycle shared by cases and skills."""

    id = models.CharField(primary_key=True, max_length=ID_LENGTH)
    tenant = models.CharField(max_length=SCOPE_LENGTH)
    brand = models.CharField(max_length=SCOPE_LENGTH)
    store = models.CharField(max_length=SCOPE_LENGTH)
    campaign = models.CharField(max_length=SCOPE_LENGTH)
    deployment = models.CharField(max_length=SCOPE_LENGTH)
    title = models.CharField(max_length=300)
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField()
    content_hash = models.CharField(max_length=64)
    # The canonical JSON the id was computed from, kept so the hash can be re-verified.
    content = models.JSONField()

    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    submitted_via = models.CharField(max_length=8, choices=SubmittedVia.choices)
    submitted_at = models.DateTimeField()

    status = models.CharField(
        max_length=12, choices=Status.choices, default=Status.CANDIDATE, db_index=True
    )
    approved_by = _user_fk()
    approved_at = models.DateTimeField(null=True, blank=True)
    approved_reason = models.TextField(blank=True)
    rejected_by = _user_fk()
    rejected_at = models.DateTimeField(null=True, blank=True)
    rejected_reason = models.TextField(blank=True)
    revoked_by = _user_fk()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_reason = models.TextField(blank=True)
    superseded_by = models.CharField(max_length=ID_LENGTH, blank=True)
    superseded_at = models.DateTimeField(null=True, blank=True)

    objects = ReviewedItemQuerySet.as_manager()

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return self.id

    def save(self, *args: Any, **kwargs: Any) -> None:
        update_fields = kwargs.get("update_fields")
        if not self._state.adding and not (
            update_fields and set(update_fields) <= LIFECYCLE_FIELDS
        ):
            raise ImmutableContentError(
                f"{self.id} is saved; a change must be submitted as a new version"
            )
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return item_page(self.item_id)

    @property
    def scope(self) -> dict[str, str]:
        return {
            "tenant": self.tenant,
            "brand": self.brand,
            "store": self.store,
            "campaign": self.campaign,
            "deployment": self.deployment,
        }

    @property
    def item_id(self) -> itemids.ItemId:
        return itemids.parse(self.id)

    @property
    def digest(self) -> str:
        """The hex part of the id: what the item's console URLs carry."""
        return self.item_id.digest


class Case(ReviewedItem):
    incident = models.CharField(max_length=200)
    summary = models.TextField(blank=True)
    observations = models.JSONField(default=list)
    diagnosis = models.JSONField(default=dict)
    counterevidence = models.JSONField(default=list)
    outcome = models.JSONField(default=dict)
    supersedes = models.CharField(max_length=ID_LENGTH, blank=True, db_index=True)
    # Title, summary, observation excerpts and diagnosis statement: what retrieval ranks.
    search_text = models.TextField(editable=False)

    class Meta:
        ordering = ["-submitted_at", "id"]
        indexes = [
            models.Index(
                fields=["tenant", "brand", "store", "campaign", "deployment", "status"],
                name="case_scope_status",
            ),
            models.Index(fields=["status", "submitted_at"], name="case_queue"),
            # Outcome tallies follow supersessions back to earlier versions.
            models.Index(
                fields=["superseded_by"],
                condition=~models.Q(superseded_by=""),
                name="case_superseded_by",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(valid_to__gt=models.F("valid_from")),
                name="case_validity_ordered",
            ),
        ]
        permissions = [
            ("verify_evidence", "Can record that case evidence was checked"),
            ("review_case", "Can approve, reject and revoke cases and skills"),
            ("use_experience", "Can retrieve experience and run skills"),
            ("propose_case", "Can propose candidate cases"),
        ]


class Evidence(models.Model):
    """One cited excerpt of a case, addressed by its key (``diagnosis/0``, ``counterevidence/0/1``)."""

    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="evidence_items")
    key = models.CharField(max_length=40)
    section = models.CharField(max_length=20)
    position = models.PositiveIntegerField()
    source_id = models.CharField(max_length=300)
    excerpt = models.TextField()

    class Meta:
        ordering = ["case", "position"]
        constraints = [
            models.UniqueConstraint(fields=["case", "key"], name="evidence_case_key"),
        ]

    def __str__(self) -> str:
        return f"{self.case_id}#{self.key}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ImmutableContentError("evidence is part of the hashed case content")
        super().save(*args, **kwargs)


class EvidenceCheck(models.Model):
    """A reviewer's record that they checked one evidence item."""

    evidence = models.ForeignKey(Evidence, on_delete=models.CASCADE, related_name="checks")
    checked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    checked_at = models.DateTimeField()
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["checked_at", "id"]

    def __str__(self) -> str:
        return f"{self.evidence} checked by {self.checked_by_id}"


class Skill(ReviewedItem):
    when = models.TextField()
    recipe = models.JSONField()
    cases = models.ManyToManyField(Case, through="SkillCase", related_name="skills")

    class Meta:
        ordering = ["-submitted_at", "id"]
        indexes = [
            models.Index(
                fields=["tenant", "brand", "store", "campaign", "deployment", "status"],
                name="skill_scope_status",
            ),
            # Outcome tallies follow supersessions back to earlier versions.
            models.Index(
                fields=["superseded_by"],
                condition=~models.Q(superseded_by=""),
                name="skill_superseded_by",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(valid_to__gt=models.F("valid_from")),
                name="skill_validity_ordered",
            ),
        ]


class SkillCase(models.Model):
    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="case_links")
    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="skill_links")
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["skill", "position"]
        constraints = [
            models.UniqueConstraint(fields=["skill", "case"], name="skill_case_unique"),
        ]
        # "Which skills cite this case" is the first half of a revocation impact.
        indexes = [models.Index(fields=["case", "skill"], name="skill_case_by_case")]

    def __str__(self) -> str:
        return f"{self.skill_id} cites {self.case_id}"


class Reference(models.Model):
    """One read of a memory item inside a run; the raw material of revocation impact."""

    run_id = models.CharField(max_length=100)
    item_id = models.CharField(max_length=ID_LENGTH)
    item_type = models.CharField(max_length=8, choices=ItemType.choices)
    read_at = models.DateTimeField()

    class Meta:
        ordering = ["read_at", "id"]
        indexes = [
            # Covering index: impact queries read run ids without touching the table.
            models.Index(fields=["item_id", "run_id"], name="reference_item_run"),
            models.Index(fields=["run_id", "read_at"], name="reference_run"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} read {self.item_id}"


class Run(models.Model):
    """One execution of a skill inside an agent investigation (``run_id``)."""

    run_id = models.CharField(max_length=100, db_index=True)
    skill_id = models.CharField(max_length=ID_LENGTH, db_index=True)
    tenant = models.CharField(max_length=SCOPE_LENGTH, blank=True)
    brand = models.CharField(max_length=SCOPE_LENGTH, blank=True)
    store = models.CharField(max_length=SCOPE_LENGTH, blank=True)
    campaign = models.CharField(max_length=SCOPE_LENGTH, blank=True)
    deployment = models.CharField(max_length=SCOPE_LENGTH, blank=True)
    context = models.JSONField(default=dict)
    steps = models.JSONField(default=list)
    observations = models.JSONField(default=list)
    cases = models.JSONField(default=list)
    status = models.CharField(max_length=16, choices=RunStatus.choices)
    reason = models.TextField(blank=True)
    tool_calls = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    actor = _user_fk()

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"{self.run_id} {self.skill_id} {self.status}"

    def get_absolute_url(self) -> str:
        return reverse("experience:run-detail", args=[self.run_id])

    @property
    def scope(self) -> dict[str, str]:
        return {
            "tenant": self.tenant,
            "brand": self.brand,
            "store": self.store,
            "campaign": self.campaign,
            "deployment": self.deployment,
        }


class RunCitation(models.Model):
    """A knowledge document that a tool result inside a run cited."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="citations")
    run_id_text = models.CharField(max_length=100)
    document_id = models.CharField(max_length=200)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "document_id"], name="run_citation_unique"),
        ]
        indexes = [
            models.Index(fields=["document_id", "run_id_text"], name="run_citation_document"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id_text} cited {self.document_id}"


class RevocationImpact(models.Model):
    """What a revocation reached, stored as it was computed when the revocation happened."""

    item_id = models.CharField(max_length=200, db_index=True)
    item_type = models.CharField(max_length=8, choices=ItemType.choices)
    skills = models.JSONField(default=list)
    lessons = models.JSONField(default=list)
    runs = models.JSONField(default=list)
    revoked_by = _user_fk()
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"impact of revoking {self.item_id}"


class LessonType(models.TextChoices):
    SUCCESS_PATTERN = "success_pattern", "success pattern"
    FAILURE_LESSON = "failure_lesson", "failure lesson"
    TOOL_USAGE = "tool_usage", "tool usage"
    DOMAIN_KNOWLEDGE = "domain_knowledge", "domain knowledge"


class Lesson(ReviewedItem):
    """Distilled experience citing reviewed cases as evidence for and against it.

    Its confidence is computed from that evidence when it is read
    (``experience.lesson_selectors``), never stored or typed in.
    """

    lesson_type = models.CharField(max_length=20, choices=LessonType.choices)
    scene_tags = models.JSONField(default=list)
    scene_description = models.TextField()
    precondition = models.TextField()
    conclusion = models.TextField()
    supersedes = models.CharField(max_length=ID_LENGTH, blank=True, db_index=True)
    cases = models.ManyToManyField(Case, through="LessonCase", related_name="lessons")
    # Scene tags and description, precondition and conclusion: what retrieval ranks.
    search_text = models.TextField(editable=False)

    class Meta:
        ordering = ["-submitted_at", "id"]
        indexes = [
            models.Index(
                fields=["tenant", "brand", "store", "campaign", "deployment", "status"],
                name="lesson_scope_status",
            ),
            models.Index(fields=["status", "submitted_at"], name="lesson_queue"),
            # Outcome tallies follow supersessions back to earlier versions.
            models.Index(
                fields=["superseded_by"],
                condition=~models.Q(superseded_by=""),
                name="lesson_superseded_by",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(valid_to__gt=models.F("valid_from")),
                name="lesson_validity_ordered",
            ),
        ]


class LessonRelation(models.TextChoices):
    SUPPORTS = "supports", "supports"
    CONTRADICTS = "contradicts", "contradicts"


class LessonCase(models.Model):
    """A case a lesson cites, as support or as a counterexample (part of the hashed content)."""

    lesson = models.ForeignKey(Lesson, on_delete=models.CASCADE, related_name="case_links")
    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="lesson_links")
    relation = models.CharField(max_length=12, choices=LessonRelation.choices)
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["lesson", "relation", "position"]
        constraints = [
            models.UniqueConstraint(fields=["lesson", "case"], name="lesson_case_unique"),
        ]
        indexes = [models.Index(fields=["case", "lesson"], name="lesson_case_by_case")]

    def __str__(self) -> str:
        return f"{self.lesson_id} {self.relation} {self.case_id}"


class ConflictStatus(models.TextChoices):
    OPEN = "open", "open"
    RESOLVED = "resolved", "resolved"


class LessonConflict(models.Model):
    """Two approved lessons of one scope whose conclusions oppose; open until a reviewer decides."""

    lesson_a = models.ForeignKey(Lesson, on_delete=models.PROTECT, related_name="+")
    lesson_b = models.ForeignKey(Lesson, on_delete=models.PROTECT, related_name="+")
    tenant = models.CharField(max_length=SCOPE_LENGTH, db_index=True)
    # ``type_opposition`` or ``explicit_link`` (experience.lesson_domain.conflict_reason).
    found_by = models.CharField(max_length=20)
    detected_at = models.DateTimeField()
    detected_on = models.CharField(max_length=12)  # "approval" or "scan"
    status = models.CharField(
        max_length=10, choices=ConflictStatus.choices, default=ConflictStatus.OPEN, db_index=True
    )
    # The narrowed version a resolution submitted; the conflict closes when it is approved.
    narrowing = models.CharField(max_length=ID_LENGTH, blank=True)
    kept = models.CharField(max_length=ID_LENGTH, blank=True)
    resolution = models.CharField(max_length=12, blank=True)  # "revoked" or "narrowed"
    resolved_by = _user_fk()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-detected_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["lesson_a", "lesson_b"], name="lesson_conflict_pair"),
            models.CheckConstraint(
                condition=models.Q(lesson_a__lt=models.F("lesson_b")),
                name="lesson_conflict_ordered",
            ),
        ]
        permissions = [("resolve_lessonconflict", "Can resolve conflicts between lessons")]

    def __str__(self) -> str:
        return f"{self.lesson_a_id} conflicts with {self.lesson_b_id}"

    def get_absolute_url(self) -> str:
        return reverse("experience:lesson-conflict", args=[self.pk])

    def other(self, lesson_id: str) -> str:
        return str(self.lesson_b_id if lesson_id == self.lesson_a_id else self.lesson_a_id)


# Registered with this app from their own module (run readers, outcomes, the retrieval index).
from experience.followup_models import RunFollowUp  # noqa: E402, F401
from experience.index_models import IndexEntry, IndexPosting, IndexScope  # noqa: E402, F401
from experience.outcome_models import RunOutcome, RunOwner  # noqa: E402, F401
