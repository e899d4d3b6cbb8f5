"""Runs and what hangs off a run id: the reads of memory, stored skill runs and their citations, who
owns a run id, its reported outcome, the runs to follow up and the stored revocation impacts.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from experience.core.models import (
    ID_LENGTH,
    GivenScopeFields,
    ItemType,
    RunStatus,
    _user_fk,
)


class Reference(models.Model):
    """One read of a memory item inside a run; the raw material of revocation impact."""

    run_id = models.CharField(max_length=100)
    item_id = models.CharField(max_length=ID_LENGTH)
    item_type = models.CharField(max_length=8, choices=ItemType.choices)
    read_at = models.DateTimeField()
    # Read into a context block (``experience.retrieval.block``): the item's text went into a
    # prompt, which a revocation's impact names apart (``context_blocks``). False for every other
    # read, and for reads recorded before blocks were told apart.
    in_block = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering = ["read_at", "id"]
        indexes = [
            # Covering index: impact queries read run ids without touching the table.
            models.Index(fields=["item_id", "run_id"], name="reference_item_run"),
            models.Index(fields=["run_id", "read_at"], name="reference_run"),
            # The context blocks among them: a partial index, as small as those reads are few.
            models.Index(
                fields=["item_id", "run_id"],
                condition=models.Q(in_block=True),
                name="reference_item_block",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} read {self.item_id}"


class Run(GivenScopeFields):
    """One execution of a skill inside an agent investigation (``run_id``)."""

    run_id = models.CharField(max_length=100, db_index=True)
    skill_id = models.CharField(max_length=ID_LENGTH, db_index=True)
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
    # A prompt-form skill's run through the investigation runner: provider, the runner's trace
    # (every tool call with its full result), the answer, its verification and the output.
    # Empty for a recipe run.
    prompt = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"{self.run_id} {self.skill_id} {self.status}"

    def get_absolute_url(self) -> str:
        return reverse("experience:run-detail", args=[self.run_id])


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
    # Open lesson conflicts one of whose sides the revocation revoked or left unavailable.
    conflicts = models.JSONField(default=list)
    # Runs whose context block carried the item, or a skill or lesson it reached.
    context_blocks = models.JSONField(default=list)
    revoked_by = _user_fk()
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"impact of revoking {self.item_id}"


class Outcome(models.TextChoices):
    RESOLVED_BY_LEAD = "resolved_by_lead", _("resolved by the lead")
    LEAD_WAS_WRONG = "lead_was_wrong", _("the lead was wrong")
    UNRESOLVED = "unresolved", _("unresolved")


class RunOwner(models.Model):
    """One run: the account (and the tenant of its scope) that opened it under the run id it
    chose (``name``), and the run's stored id (``run_id``), under which its reads, skill runs,
    investigation, outcome and follow-up are kept.

    A run is keyed by tenant, account and name: the same name chosen by two accounts, or by one
    account in two tenants, opens two runs, and nobody learns that the other exists
    (``experience.runs.claims``). The stored id is the name itself when no other run holds it,
    else the name with an unpredictable suffix (``~`` and 8 hex digits)."""

    run_id = models.CharField(max_length=100, unique=True)
    # The run id as its owner chose it (and reads under it, and asks for it).
    name = models.CharField(max_length=100)
    # Null only for runs recorded before runs had owners and whose reader nobody recorded: no
    # account may read under them again; a reviewer of their tenant may still report outcomes.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # Blank while the run's scope named no tenant; the owner's first read naming one fills it.
    tenant = models.CharField(max_length=64, blank=True)
    first_read_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "run_id"], name="run_owner_tenant"),
            models.Index(fields=["tenant", "name"], name="run_owner_tenant_name"),
        ]
        constraints = [
            # Also the index of an account's lookups by name, in one tenant or in all of them.
            models.UniqueConstraint(
                fields=["owner", "name", "tenant"], name="run_owner_one_run_per_name"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} of {self.owner_id} in {self.tenant or '-'} ({self.run_id})"


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
    # confidence (experience.lessons.domain.counted_outcomes).
    reviewed = models.BooleanField(default=False)

    class Meta:
        ordering = ["-reported_at", "-id"]

    def __str__(self) -> str:
        return f"{self.run_id}: {self.outcome}"


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
