"""Intake and curation rows: imported threads, similarity links, incident merges, the re-review
queue and skill proposals.

Imported threads are written once. Queue entries change only through their resolution columns.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from experience.cases.models import Case
from experience.core.models import ID_LENGTH, SCOPE_LENGTH, ScopeFields
from reviewconsole.scopes import SCOPE_FIELDS


def _user_fk(*, null: bool = True) -> models.ForeignKey[Any, Any]:
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=null,
        blank=null,
        on_delete=models.PROTECT,
        related_name="+",
    )


class Thread(models.Model):
    """An investigation thread as imported: the raw material an operator picks evidence from.

    It belongs to one tenant: only that tenant's members (and deployment-wide users) see it, and
    candidates built from it carry that tenant.
    """

    # Chosen by the importing tenant: unique within it (``thread_tenant_id``), not globally.
    thread_id = models.CharField(max_length=100, db_index=True)
    tenant = models.CharField(max_length=SCOPE_LENGTH, db_index=True)
    title = models.CharField(max_length=300)
    source = models.CharField(max_length=500, blank=True)
    # Brand, store, campaign and deployment as the thread gave them (any of them, or none): the
    # thread builder starts from these.
    scope = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64)
    imported_by = _user_fk(null=False)
    imported_at = models.DateTimeField()

    class Meta:
        ordering = ["-imported_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "thread_id"], name="thread_tenant_id"),
        ]

    def __str__(self) -> str:
        return self.thread_id

    def get_absolute_url(self) -> str:
        """The tenant-qualified page (``/curation/threads/<id>/`` is ambiguous for a user who
        sees two tenants with that id)."""
        return reverse("curation:tenant-thread-detail", args=[self.tenant, self.thread_id])


class MessageRole(models.TextChoices):
    CUSTOMER = "customer", _("customer")
    SUPPORT = "support", _("support")
    ENGINEER = "engineer", _("engineer")
    OPERATIONS = "operations", _("operations")
    AGENT = "agent", _("agent")
    SYSTEM = "system", _("system")


class ThreadMessage(models.Model):
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="messages")
    message_id = models.CharField(max_length=40)
    position = models.PositiveIntegerField()
    author = models.CharField(max_length=100)
    role = models.CharField(max_length=12, choices=MessageRole.choices)
    sent_at = models.DateTimeField()
    text = models.TextField(blank=True)
    # [{"name": ..., "text": <extracted text>}, ...]
    attachments = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["thread", "position"]
        constraints = [
            models.UniqueConstraint(fields=["thread", "message_id"], name="thread_message_id"),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}#{self.message_id}"


class CaseSignature(models.Model):
    """A case's MinHash signature, kept so later submissions compare against it."""

    case = models.OneToOneField(
        Case, on_delete=models.CASCADE, primary_key=True, related_name="signature"
    )
    scope_key = models.CharField(max_length=64)
    values = models.JSONField()
    threshold = models.FloatField()

    def __str__(self) -> str:
        return f"signature of {self.case_id}"


class CaseBand(models.Model):
    """One LSH band key of a case; cases of one scope sharing a key are candidate pairs."""

    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="+")
    scope_key = models.CharField(max_length=64)
    key = models.CharField(max_length=20)

    class Meta:
        indexes = [models.Index(fields=["scope_key", "key"], name="case_band_lookup")]

    def __str__(self) -> str:
        return f"{self.case_id} band {self.key}"


class LinkStatus(models.TextChoices):
    OPEN = "open", _("open")
    SAME_INCIDENT = "same_incident", _("same incident")
    DIFFERENT = "different", _("different incidents")


class NearDuplicate(models.Model):
    """Two cases of one scope whose text is similar: possibly the same incident."""

    # case_a.id < case_b.id, so a pair is stored once.
    case_a = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="+")
    case_b = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="+")
    # ``words``: Jaccard of their shingles; ``meaning``: cosine of their embeddings, for a pair
    # whose words differ that the merge rule (semantic.duplicates) found to tell one experience.
    similarity = models.FloatField()
    found_by = models.CharField(
        max_length=8, choices=[("words", "words"), ("meaning", "meaning")], default="words"
    )
    detected_at = models.DateTimeField()
    status = models.CharField(
        max_length=16, choices=LinkStatus.choices, default=LinkStatus.OPEN, db_index=True
    )
    resolved_by = _user_fk()
    resolved_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-detected_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["case_a", "case_b"], name="near_duplicate_pair"),
        ]

    def __str__(self) -> str:
        return f"{self.case_a_id} ~ {self.case_b_id}"

    def other(self, case_id: str) -> Case:
        return self.case_b if self.case_a_id == case_id else self.case_a


class IncidentMerge(models.Model):
    """A reviewer's record that incident ``alias`` is the incident ``into`` (tenant and brand).

    ``canonical`` is where ``alias`` ends up now: when ``into`` is later merged further, the
    service moves ``canonical`` along, so one lookup answers every count.
    """

    tenant = models.CharField(max_length=SCOPE_LENGTH)
    brand = models.CharField(max_length=SCOPE_LENGTH)
    alias = models.CharField(max_length=200)
    into = models.CharField(max_length=200)
    canonical = models.CharField(max_length=200)
    merged_by = _user_fk(null=False)
    merged_at = models.DateTimeField()
    reason = models.TextField()
    link = models.ForeignKey(
        NearDuplicate, null=True, blank=True, on_delete=models.SET_NULL, related_name="merges"
    )

    class Meta:
        ordering = ["-merged_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "brand", "alias"], name="incident_merge_alias"
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "brand", "canonical"], name="incident_merge_canonical")
        ]

    def __str__(self) -> str:
        return f"{self.tenant}/{self.brand}: {self.alias} → {self.canonical}"


class ReReviewReason(models.TextChoices):
    UNUSED = "unused", _("unused for too long")
    DOCUMENT_NEW_VERSION = "document_new_version", _("cited document has a new version")
    DOCUMENT_REVOKED = "document_revoked", _("cited document was revoked")
    # A lesson the outdated rule took out of reuse (experience.lessons.outdating).
    OUTDATED = "outdated", _("lesson outdated by its evidence")
    # The less supported lesson of an open conflict (LessonConflict.favoured names the other);
    # ``detail`` holds the conflict's number.
    CONFLICT = "conflict", _("in conflict with a better-supported lesson")
    # An approved item an agent's run outcome refuted (``lead_was_wrong``): it counts nothing
    # until a reviewer reports that run's outcome; ``runs`` names the runs.
    REFUTED = "refuted", _("an agent reported the lead was wrong")


class ReReviewStatus(models.TextChoices):
    OPEN = "open", _("open")
    PENDING = "pending", _("new version waiting for review")
    CLOSED = "closed", _("closed")


class ReReviewResolution(models.TextChoices):
    NONE = "", _("—")
    SUPERSEDED = "superseded", _("superseded by a reviewed new version")
    REVOKED = "revoked", _("revoked")
    CONFIRMED = "confirmed", _("confirmed by a reviewer")
    RESTORED = "restored", _("restored by a reviewer")
    SETTLED = "settled", _("its conflict was resolved")
    GONE = "gone", _("no longer approved")
    # Every run the entry names has an outcome reported by a reviewer.
    REPORTED = "reported", _("a reviewer reported the runs' outcomes")


class ReReview(models.Model):
    """An approved case or skill, or an outdated lesson, that must be looked at again, and why."""

    item_id = models.CharField(max_length=ID_LENGTH, db_index=True)
    item_type = models.CharField(max_length=8)
    # The item's tenant, copied so tenant-limited users see only their own entries.
    tenant = models.CharField(max_length=SCOPE_LENGTH, default="", db_index=True)
    title = models.CharField(max_length=300)
    reason = models.CharField(max_length=24, choices=ReReviewReason.choices)
    document_id = models.CharField(max_length=200, blank=True)
    detail = models.CharField(max_length=200, blank=True)
    # The runs whose agent-reported outcomes refuted the item (reason ``refuted``), oldest first.
    runs = models.JSONField(default=list, blank=True)
    detected_at = models.DateTimeField()
    status = models.CharField(
        max_length=8, choices=ReReviewStatus.choices, default=ReReviewStatus.OPEN, db_index=True
    )
    new_item_id = models.CharField(max_length=ID_LENGTH, blank=True)
    resolution = models.CharField(
        max_length=12, choices=ReReviewResolution.choices, default="", blank=True
    )
    resolved_by = _user_fk()
    resolved_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["-detected_at", "-id"]

    def __str__(self) -> str:
        return f"re-review {self.item_id}: {self.reason}"


class ProposalStatus(models.TextChoices):
    OPEN = "open", _("open")
    ADOPTED = "adopted", _("submitted as a candidate")
    DISMISSED = "dismissed", _("dismissed")


class SkillProposal(ScopeFields):
    """A drafted skill for a check pattern shared by approved cases of distinct incidents.

    Not a skill: a person turns it into a candidate (and becomes its submitter), and another
    reviewer approves that candidate.
    """

    pattern_kind = models.CharField(max_length=12)
    pattern = models.CharField(max_length=300)
    case_ids = models.JSONField(default=list)
    incidents = models.JSONField(default=list)
    title = models.CharField(max_length=300)
    when = models.TextField()
    recipe = models.JSONField()
    status = models.CharField(
        max_length=10, choices=ProposalStatus.choices, default=ProposalStatus.OPEN, db_index=True
    )
    skill_id = models.CharField(max_length=ID_LENGTH, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    resolved_by = _user_fk()
    resolved_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=[*SCOPE_FIELDS, "pattern_kind", "pattern"],
                name="skill_proposal_pattern",
            ),
        ]

    def __str__(self) -> str:
        return f"proposal {self.pattern_kind}:{self.pattern}"

    def get_absolute_url(self) -> str:
        return reverse("curation:proposal-detail", args=[self.pk])


class RunDraft(models.Model):
    """An after-action review drafted from one finished run: the candidate it made, or the open
    candidate it was attached to as further evidence (a near-duplicate)."""

    KIND_CHOICES = [("skill run", "skill run"), ("investigation", "investigation")]

    run_id = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=KIND_CHOICES)
    case_id = models.CharField(max_length=80, db_index=True)
    attached = models.BooleanField(default=False)
    drafted_at = models.DateTimeField()
    # The candidate lesson the review drafted beside the case, or the open candidate lesson it
    # was attached to; blank for drafts made before lessons were drafted.
    lesson_id = models.CharField(max_length=80, blank=True, db_index=True)
    lesson_attached = models.BooleanField(default=False)
    # Who wrote the lesson's words: "trace" (deterministic) or "model" (the review agent).
    lesson_drafted_by = models.CharField(max_length=8, blank=True)
    # Why the review agent's draft was not used, when it was asked and refused or failed.
    lesson_note = models.TextField(blank=True)
    # The review agent's citations of the trace (``[{"id", "quote"}]``), checked verbatim.
    lesson_citations = models.JSONField(default=list, blank=True)
    # The approved lesson this draft matches: its merge is proposed instead of a new lesson.
    lesson_merge_into = models.CharField(max_length=80, blank=True)

    class Meta:
        ordering = ["drafted_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "run_id"], name="run_draft_once"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.run_id} → {self.case_id}"


class NotificationOptOut(models.Model):
    """A user who turned reviewer notifications off (curation.notifications)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    since = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.user_id} opted out"


class OutboxMail(models.Model):
    """One reviewer notification mail in the outbox (curation.notifications): written in the
    transaction that decides it is due, sent by ``curation.notifications.mail_send_task``, and marked
    sent in the transaction of the send, so a failed send leaves it pending to be tried again."""

    class State(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        DROPPED = (
            "dropped"  # the user could no longer receive it (deactivated, opted out, no email)
        )

    # Sent as the mail's Message-ID: a mail sent again after a crash between the send and its
    # record is recognisably the same mail.
    idempotency_key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    subject = models.CharField(max_length=200)
    body = models.TextField()
    state = models.CharField(
        max_length=8, choices=State.choices, default=State.PENDING, db_index=True
    )
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.subject} to {self.user_id} ({self.state})"


class NotificationSent(models.Model):
    """One event announced to one user, through the outbox mail that carries it: the same
    event never goes to the same user in two mails (rows from before the outbox have none)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20)
    key = models.CharField(max_length=200)
    sent_at = models.DateTimeField()
    mail = models.ForeignKey(
        OutboxMail,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="announcements",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "kind", "key"], name="notification_once"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.key} to {self.user_id}"
