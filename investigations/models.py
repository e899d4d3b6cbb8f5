"""Stored investigations: one row per run of a ticket through the runner."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from experience.core.models import SCOPE_LENGTH, GivenScopeFields


class InvestigationStatus(models.TextChoices):
    ANSWERED = "answered", _("answered")
    REFUSED_ANSWER = "refused_answer", _("answer refused")
    BUDGET_EXHAUSTED = "budget_exhausted", _("budget exhausted")
    NEEDS_CONTEXT = "needs_context", _("needs context")
    ERROR = "error", _("error")


class Investigation(GivenScopeFields):
    """A ticket's run: every tool call with its full result, the answer and its verification.

    The memory it read is recorded as ``experience.Reference`` rows under ``run_id`` (documents
    by this app, cases and skills by retrieval and skill runs), so revocation impact reaches it.
    """

    run_id = models.CharField(max_length=100, unique=True)
    text = models.TextField()
    context = models.JSONField(default=dict)
    provider = models.CharField(max_length=32)
    status = models.CharField(max_length=20, choices=InvestigationStatus.choices)
    reason = models.TextField(blank=True)
    steps = models.JSONField(default=list)
    answer = models.JSONField(null=True, blank=True)
    raw_answer = models.TextField(blank=True)
    verification = models.JSONField(default=dict)
    missing = models.JSONField(default=list)
    tool_calls = models.PositiveIntegerField(default=0)
    budget = models.JSONField(default=dict)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["tenant", "started_at"], name="investigation_tenant")]

    def __str__(self) -> str:
        return f"{self.run_id} {self.status}"

    def get_absolute_url(self) -> str:
        return reverse("investigations:investigation-detail", args=[self.pk])

    def as_json(self) -> dict[str, object]:
        """The contract's shape (docs/contracts.md, Investigations)."""
        return {
            "run_id": self.run_id,
            "status": self.status,
            "reason": self.reason,
            "answer": self.answer,
            "verification": self.verification,
            "tool_calls": self.tool_calls,
            "steps": self.steps,
            "missing": self.missing,
            "provider": self.provider,
            "scope": self.scope,
            "context": self.context,
        }


class RequestState(models.TextChoices):
    QUEUED = "queued", _("queued")
    RUNNING = "running", _("running")
    FINISHED = "finished", _("finished")
    FAILED = "failed", _("failed")


class InvestigationRequest(models.Model):
    """A ticket entered on the console, run in the background: its steps as they arrive.

    The runner stores each step here as it happens (the page polls them); the finished run is
    the ``Investigation`` under the same ``run_id``, linked once it is stored. ``arguments`` are
    what the form gave (text, scope, times as ISO 8601 with their offset, facts); the actor's
    permission and tenant are checked again when the run starts.
    """

    run_id = models.CharField(max_length=100, unique=True)
    tenant = models.CharField(max_length=SCOPE_LENGTH, blank=True)
    text = models.TextField()
    arguments = models.JSONField(default=dict)
    state = models.CharField(
        max_length=16, choices=RequestState.choices, default=RequestState.QUEUED
    )
    steps = models.JSONField(default=list)
    error = models.TextField(blank=True)
    investigation = models.OneToOneField(
        Investigation, null=True, blank=True, on_delete=models.PROTECT, related_name="request"
    )
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.run_id} {self.state}"

    def get_absolute_url(self) -> str:
        return reverse("investigations:request-detail", args=[self.pk])

    @property
    def done(self) -> bool:
        return self.state in (RequestState.FINISHED, RequestState.FAILED)
