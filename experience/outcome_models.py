"""Who owns a run id, and what happened after the run (its reported outcome).

Imported by ``experience.models`` so Django registers these models with the app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Outcome(models.TextChoices):
    RESOLVED_BY_LEAD = "resolved_by_lead", "resolved by the lead"
    LEAD_WAS_WRONG = "lead_was_wrong", "the lead was wrong"
    UNRESOLVED = "unresolved", "unresolved"


class RunOwner(models.Model):
    """Who opened a run: the account (and the tenant of its scope) that first read memory or
    stored a run under ``run_id``. One per run id; another account's read under it, or the same
    account's under another tenant, is refused (``experience.run_claims``)."""

    run_id = models.CharField(max_length=100, unique=True)
    # Null only for runs recorded before runs had owners and whose reader nobody recorded: no
    # account may read under them again; a reviewer of their tenant may still report outcomes.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # Blank while the run's scope named no tenant; the owner's first read naming one fills it.
    tenant = models.CharField(max_length=64, blank=True)
    first_read_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["tenant", "run_id"], name="run_owner_tenant")]

    def __str__(self) -> str:
        return f"{self.run_id} of {self.owner_id} in {self.tenant or '-'}"


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
