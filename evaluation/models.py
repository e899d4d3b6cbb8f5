"""Held-out tickets (which tickets may never feed memory) and the stored replay reports."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse


class HeldoutTicket(models.Model):
    """A ticket set aside for evaluation: no approved memory may cite it."""

    ticket_id = models.CharField(max_length=200, unique=True)
    ticket_set = models.CharField(max_length=64)
    # The ticket's scope tenant, so tenant-limited users see their own held-out tickets only.
    tenant = models.CharField(max_length=64, default="", blank=True, db_index=True)
    registered_at = models.DateTimeField()
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["ticket_set", "ticket_id"]

    def __str__(self) -> str:
        return self.ticket_id


class HeldoutRun(models.Model):
    """A run id of a held-out ticket's own investigation."""

    run_id = models.CharField(max_length=100, unique=True)
    ticket = models.ForeignKey(HeldoutTicket, on_delete=models.CASCADE, related_name="runs")

    class Meta:
        ordering = ["run_id"]

    def __str__(self) -> str:
        return f"{self.run_id} of {self.ticket_id}"


class Memory(models.TextChoices):
    DEMO = "demo", "demo memory (temporary database)"
    CURRENT = "current", "this database's memory"


class ReplayReport(models.Model):
    """One replay of a ticket set, with and without memory, as the command computed it."""

    created_at = models.DateTimeField(db_index=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    ticket_set = models.CharField(max_length=64)
    # The set's one tenant (``TicketSet.tenant``); empty when its tickets span tenants, and then
    # only deployment-wide users see the report. Its tickets' text, scope and truth are that
    # tenant's, like its case and skill ids.
    tenant = models.CharField(max_length=64, default="", blank=True, db_index=True)
    set_hash = models.CharField(max_length=64)
    memory = models.CharField(max_length=8, choices=Memory.choices)
    tickets = models.PositiveIntegerField()
    with_memory = models.JSONField(default=dict)
    without_memory = models.JSONField(default=dict)
    # The whole JSON report: per-ticket counts, traces and the ground truth they were scored on.
    result = models.JSONField(default=dict)
    chart = models.BinaryField(editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"replay {self.pk} of {self.ticket_set} ({self.memory})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise RuntimeError("a replay report records what was measured; it is never edited")
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("evaluation:report-detail", args=[self.pk])
