"""Lessons, the cases they cite for and against them, and conflicts between lessons."""

from __future__ import annotations

from django.db import models
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from experience.cases.models import Case
from experience.core.models import ID_LENGTH, SCOPE_LENGTH, ReviewedItem, _user_fk
from reviewconsole.scopes import SCOPE_FIELDS


class LessonType(models.TextChoices):
    SUCCESS_PATTERN = "success_pattern", _("success pattern")
    FAILURE_LESSON = "failure_lesson", _("failure lesson")
    TOOL_USAGE = "tool_usage", _("tool usage")
    DOMAIN_KNOWLEDGE = "domain_knowledge", _("domain knowledge")


class Lesson(ReviewedItem):
    """Distilled experience citing reviewed cases as evidence for and against it.

    Its confidence is computed from that evidence when it is read
    (``experience.lessons.selectors``), never stored or typed in.
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
    # The outdated rule (experience.lessons.domain.outdated_cause; lifecycle columns, not
    # content): when and why the lesson turned outdated; when its evidence was last seen at or
    # above the confidence threshold since it was approved or restored; and the evidence
    # (successes, failures) the reviewer who approved or restored it had before them.
    outdated_at = models.DateTimeField(null=True, blank=True)
    outdated_cause = models.CharField(max_length=20, blank=True)
    confident_at = models.DateTimeField(null=True, blank=True)
    seen_successes = models.PositiveIntegerField(default=0)
    seen_failures = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-submitted_at", "id"]
        indexes = [
            models.Index(
                fields=[*SCOPE_FIELDS, "status"],
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
    SUPPORTS = "supports", _("supports")
    CONTRADICTS = "contradicts", _("contradicts")


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


class LessonMergeProposal(models.Model):
    """A candidate's merge into an approved lesson proposed by meaning (the vector branch found
    them alike though their words differ). Merges in words are computed when read
    (``experience.lessons.selectors.merge_proposals``), which reads these beside them."""

    candidate = models.ForeignKey(Lesson, on_delete=models.CASCADE, related_name="+")
    target = models.ForeignKey(Lesson, on_delete=models.PROTECT, related_name="+")
    similarity = models.FloatField()
    proposed_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["candidate", "target"], name="lesson_merge_once"),
        ]

    def __str__(self) -> str:
        return f"merge {self.candidate_id} into {self.target_id}"


class ConflictStatus(models.TextChoices):
    OPEN = "open", _("open")
    RESOLVED = "resolved", _("resolved")


class LessonConflict(models.Model):
    """Two approved lessons of one scope whose conclusions oppose; open until a reviewer decides."""

    lesson_a = models.ForeignKey(Lesson, on_delete=models.PROTECT, related_name="+")
    lesson_b = models.ForeignKey(Lesson, on_delete=models.PROTECT, related_name="+")
    tenant = models.CharField(max_length=SCOPE_LENGTH, db_index=True)
    # ``type_opposition`` or ``explicit_link`` (experience.lessons.domain.conflict_reason).
    found_by = models.CharField(max_length=20)
    detected_at = models.DateTimeField()
    detected_on = models.CharField(max_length=12)  # "approval" or "scan"
    status = models.CharField(
        max_length=10, choices=ConflictStatus.choices, default=ConflictStatus.OPEN, db_index=True
    )
    # The side the design keeps: usable support and the higher confidence when the conflict was
    # found (experience.lessons.domain.favoured_side); blank when neither was ahead. The other
    # side waits in the re-review queue until the conflict is resolved.
    favoured = models.CharField(max_length=ID_LENGTH, blank=True)
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
