"""Who read memory under a run id, and what happened after the run (its reported outcome).

Imported by ``experience.models`` so Django registers these models with the app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Outcome(models.TextChoices):
    RESOLVED_BY_LEAD = "resolved_by_lead", "resolved by the lead"
    LEAD_WAS_WRONG = "lead_was_wrong", "the lead was wrong"
    UNRESOLVED = "unresolved", "unresolved"


class RunReader(models.Model):
    """An account that read memory under ``run_id``: the run's owner, who may report its outcome."""

    run_id = models.CharField(max_length=100)
    reader = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    first_read_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run_id", "reader"], name="run_reader_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.reader_id} read under {self.run_id}"


class RunOutcome(models.Model):
    """The latest reported outcome of one run id; every report is also an audit event."""

    run_id = models.CharField(max_length=100, unique=True)
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    note = models.TextField(blank=True)
    reported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    reported_at = models.DateTimeField()
    # The reporter held the review permission: only then does a confirmation count toward
    # confidence (experience.lesson_domain.counted_outcomes).
    reviewed = models.BooleanField(default=False)

    class Meta:
        ordering = ["-reported_at", "-id"]

    def __str__(self) -> str:
        return f"{self.run_id}: {self.outcome}"
