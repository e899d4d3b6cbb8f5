"""Reviewed cases with their evidence and its checks, and skills citing cases."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from experience.core.models import ID_LENGTH, ReviewedItem
from reviewconsole.errors import ImmutableContentError
from reviewconsole.scopes import SCOPE_FIELDS


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
                fields=[*SCOPE_FIELDS, "status"],
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
    # A recipe skill's steps; empty for a prompt-form skill, whose body is ``prompt``
    # (instructions, inputs, output, tools, max_calls; ``experience.core.prompts``).
    recipe = models.JSONField()
    prompt = models.JSONField(default=dict, blank=True)
    cases = models.ManyToManyField(Case, through="SkillCase", related_name="skills")

    class Meta:
        ordering = ["-submitted_at", "id"]
        indexes = [
            models.Index(
                fields=[*SCOPE_FIELDS, "status"],
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

    @property
    def form(self) -> str:
        """``prompt`` for a prompt-form skill, ``recipe`` otherwise."""
        return "prompt" if self.prompt else "recipe"


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
