"""Runs to follow up: a run that read memory which was later revoked, until someone follows it up.

Imported by ``experience.models`` so Django registers the model with the app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class RunFollowUp(models.Model):
    """One run id that read revoked memory. Pending while ``followed_up_at`` is empty; a later
    revocation reaching the same run flags it again."""

    run_id = models.CharField(max_length=100, unique=True)
    # The revoked items the run read, in the order their revocations reached it.
    revoked_items = models.JSONField(default=list)
    flagged_at = models.DateTimeField()
    followed_up_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    followed_up_at = models.DateTimeField(null=True, blank=True, db_index=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-flagged_at", "-id"]

    def __str__(self) -> str:
        state = "followed up" if self.followed_up_at else "to follow up"
        return f"{self.run_id}: {state}"

    @property
    def pending(self) -> bool:
        return self.followed_up_at is None
