"""What every reviewed item's row shares: statuses, the lifecycle columns, the scope and the base model.

Hashed content is written once; only lifecycle columns (status, approvals, rejection,
revocation, supersession) may change afterwards.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from reviewconsole import itemids
from reviewconsole.errors import ImmutableContentError
from reviewconsole.links import item_page
from reviewconsole.scopes import SCOPE_FIELDS


class Status(models.TextChoices):
    CANDIDATE = "candidate", _("candidate")
    APPROVED = "approved", _("approved")
    REJECTED = "rejected", _("rejected")
    REVOKED = "revoked", _("revoked")
    SUPERSEDED = "superseded", _("superseded")
    # Lessons only: the evidence turned against an approved lesson (experience.lessons.domain,
    # outdated_cause); out of reuse until a reviewer restores or revokes it.
    OUTDATED = "outdated", _("outdated")


class SubmittedVia(models.TextChoices):
    CONSOLE = "console", "console"
    IMPORT = "import", "import"
    API = "api", "api"


class ItemType(models.TextChoices):
    CASE = "case", _("case")
    SKILL = "skill", _("skill")
    LESSON = "lesson", _("lesson")
    DOCUMENT = "document", _("knowledge document")


class RunStatus(models.TextChoices):
    NEEDS_REVIEW = "needs_review", _("needs review")
    FALLBACK = "fallback", _("fallback")


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
        # Lessons only: when and why the evidence made one outdated, and what the outdated rule
        # remembers between checks (experience.lessons.outdating).
        "outdated_at",
        "outdated_cause",
        "confident_at",
        "seen_successes",
        "seen_failures",
    }
)


ID_LENGTH = 80


SCOPE_LENGTH = 64


class ScopeFields(models.Model):
    """The five-field scope a row applies to, every field declared (reviewed items, skill
    proposals, index scopes)."""

    tenant = models.CharField(max_length=SCOPE_LENGTH)
    brand = models.CharField(max_length=SCOPE_LENGTH)
    store = models.CharField(max_length=SCOPE_LENGTH)
    campaign = models.CharField(max_length=SCOPE_LENGTH)
    deployment = models.CharField(max_length=SCOPE_LENGTH)

    class Meta:
        abstract = True

    @property
    def scope(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in SCOPE_FIELDS}


class GivenScopeFields(ScopeFields):
    """The scope a run or investigation was asked in, as given: a field the caller left out is
    blank (the run then ends early, and is still stored)."""

    tenant = models.CharField(max_length=SCOPE_LENGTH, blank=True)
    brand = models.CharField(max_length=SCOPE_LENGTH, blank=True)
    store = models.CharField(max_length=SCOPE_LENGTH, blank=True)
    campaign = models.CharField(max_length=SCOPE_LENGTH, blank=True)
    deployment = models.CharField(max_length=SCOPE_LENGTH, blank=True)

    class Meta:
        abstract = True


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


class ReviewedItem(ScopeFields):
    """Scope, validity, submission and lifecycle shared by cases and skills."""

    id = models.CharField(primary_key=True, max_length=ID_LENGTH)
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
    def item_id(self) -> itemids.ItemId:
        return itemids.parse(self.id)

    @property
    def digest(self) -> str:
        """The hex part of the id: what the item's console URLs carry."""
        return self.item_id.digest
