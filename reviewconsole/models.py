from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_noop


class Action(models.TextChoices):
    """Every audited operation, namespaced ``<app>.<entity>.<verb>``."""

    USER_ROLE_SET = "auth.user.role_set", gettext_noop("user role set")
    USER_CREATE = "auth.user.create", gettext_noop("user created")
    USER_CHANGE = "auth.user.change", gettext_noop("user details changed")
    USER_ACTIVE_SET = "auth.user.active_set", gettext_noop("user activated or deactivated")
    USER_TENANTS_SET = "auth.user.tenants_set", gettext_noop("user tenant memberships changed")
    USER_PASSWORD_CHANGE = "auth.user.password_change", gettext_noop("user password changed")
    DOCUMENT_CREATE = "knowledge.document.create", gettext_noop("knowledge document created")
    DOCUMENT_SUBMIT = "knowledge.document.submit", gettext_noop("knowledge document submitted")
    DOCUMENT_APPROVE = "knowledge.document.approve", gettext_noop("knowledge document approved")
    DOCUMENT_REVOKE = "knowledge.document.revoke", gettext_noop("knowledge document revoked")
    LEXICON_CHANGE = "knowledge.lexicon.change", gettext_noop("synonym lexicon changed")
    CASE_SUBMIT = "experience.case.submit", gettext_noop("case submitted")
    CASE_VERIFY = "experience.case.verify", gettext_noop("case evidence checked")
    CASE_APPROVE = "experience.case.approve", gettext_noop("case approved")
    CASE_REJECT = "experience.case.reject", gettext_noop("case rejected")
    CASE_REVOKE = "experience.case.revoke", gettext_noop("case revoked")
    CASE_SUPERSEDE = "experience.case.supersede", gettext_noop("case superseded")
    SKILL_SUBMIT = "experience.skill.submit", gettext_noop("skill submitted")
    SKILL_APPROVE = "experience.skill.approve", gettext_noop("skill approved")
    SKILL_REJECT = "experience.skill.reject", gettext_noop("skill rejected")
    SKILL_REVOKE = "experience.skill.revoke", gettext_noop("skill revoked")
    SKILL_RUN = "experience.skill.run", gettext_noop("skill run")
    RUN_OUTCOME = "experience.run.outcome", gettext_noop("run outcome reported")
    RUN_FOLLOW_UP = "experience.run.follow_up", gettext_noop("run followed up after a revocation")
    LESSON_SUBMIT = "experience.lesson.submit", gettext_noop("lesson submitted")
    LESSON_APPROVE = "experience.lesson.approve", gettext_noop("lesson approved")
    LESSON_REJECT = "experience.lesson.reject", gettext_noop("lesson rejected")
    LESSON_REVOKE = "experience.lesson.revoke", gettext_noop("lesson revoked")
    LESSON_SUPERSEDE = "experience.lesson.supersede", gettext_noop("lesson superseded")
    LESSON_MERGE = "experience.lesson.merge", gettext_noop("lesson merge accepted")
    LESSON_OUTDATE = "experience.lesson.outdate", gettext_noop("lesson outdated by its evidence")
    LESSON_RESTORE = "experience.lesson.restore", gettext_noop("outdated lesson restored")
    LESSON_CONFLICT_OPEN = (
        "experience.lesson_conflict.open",
        gettext_noop("lesson conflict detected"),
    )
    LESSON_CONFLICT_RESOLVE = (
        "experience.lesson_conflict.resolve",
        gettext_noop("lesson conflict resolved"),
    )
    AGENT_TOKEN_CREATE = "agentapi.token.create", gettext_noop("agent API token created")
    AGENT_TOKEN_REVOKE = "agentapi.token.revoke", gettext_noop("agent API token revoked")
    AGENT_OAUTH_GRANT = "agentapi.oauth.grant", gettext_noop("agent OAuth client authorised")
    AGENT_OAUTH_REVOKE = "agentapi.oauth.revoke", gettext_noop("agent OAuth token revoked")
    THREAD_IMPORT = "curation.thread.import", gettext_noop("investigation thread imported")
    THREAD_BUILD = "curation.thread.build", gettext_noop("candidate built from a thread")
    NEAR_DUPLICATE_RESOLVE = (
        "curation.near_duplicate.resolve",
        gettext_noop("near-duplicate resolved"),
    )
    INCIDENT_MERGE = "curation.incident.merge", gettext_noop("incidents merged")
    CURATION_SCAN = "curation.scan.run", gettext_noop("curation scan queued items")
    AAR_DRAFT = "curation.aar.draft", gettext_noop("after-action review drafted from a run")
    REREVIEW_RECERTIFY = "curation.rereview.recertify", gettext_noop("re-certification submitted")
    REREVIEW_CONFIRM = "curation.rereview.confirm", gettext_noop("re-review confirmed")
    PROPOSAL_ADOPT = (
        "curation.proposal.adopt",
        gettext_noop("skill proposal submitted as candidate"),
    )
    PROPOSAL_DISMISS = "curation.proposal.dismiss", gettext_noop("skill proposal dismissed")
    HELDOUT_REGISTER = "evaluation.heldout.register", gettext_noop("held-out tickets registered")
    EVALUATION_REPLAY = "evaluation.replay.run", gettext_noop("replay evaluation run")
    INVESTIGATION_RUN = "investigations.investigation.run", gettext_noop("ticket investigated")
    BACKUP_RESTORE = "reviewconsole.backup.restore", gettext_noop("database restored from a backup")
    TENANT_CREATE = "reviewconsole.tenant.create", gettext_noop("tenant created")
    # Review conversations and change requests (reviewconsole/conversations.py).
    THREAD_OPEN = "reviewconsole.thread.open", gettext_noop("review thread opened")
    THREAD_REPLY = "reviewconsole.thread.reply", gettext_noop("review thread answered")
    THREAD_RESOLVE = "reviewconsole.thread.resolve", gettext_noop("review thread resolved")
    THREAD_REOPEN = "reviewconsole.thread.reopen", gettext_noop("review thread reopened")
    CHANGES_REQUEST = "reviewconsole.changes.request", gettext_noop("changes requested")
    CHANGES_RESUBMIT = "reviewconsole.changes.resubmit", gettext_noop("revised and resubmitted")
    CLAIM_TAKE = "reviewconsole.claim.take", gettext_noop("review claim taken")
    CLAIM_RELEASE = "reviewconsole.claim.release", gettext_noop("review claim released")
    CLAIM_BREAK = "reviewconsole.claim.break", gettext_noop("review claim broken by an admin")
    CLAIM_TAKE_OVER = "reviewconsole.claim.take_over", gettext_noop("review claim taken over")


class AppendOnlyError(RuntimeError):
    pass


class EventQuerySet(models.QuerySet["Event"]):
    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError("audit events are append-only")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("audit events are append-only")


class Event(models.Model):
    """An append-only audit record. The actor is who acted; the target is what was acted on."""

    created_at = models.DateTimeField(db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    actor_name = models.CharField(max_length=150)
    # Values come from ``Action``; no DB choices so a new action needs no migration.
    action = models.CharField(max_length=64, db_index=True)
    target = models.CharField(max_length=200, db_index=True)
    reason = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    # The chain: each event's hash covers its own columns and its predecessor's hash, in the
    # format ``hash_version`` names (see reviewconsole/chain.py); 1 marks events written before
    # the current format, which covers every column.
    hash_version = models.PositiveSmallIntegerField(default=1, editable=False)
    prev_hash = models.CharField(max_length=64, default="", editable=False)
    hash = models.CharField(max_length=64, default="", editable=False, db_index=True)

    objects = EventQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["actor_name", "created_at"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_name} {self.action} {self.target}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Not ``pk is None``: the chain chooses an event's id before inserting it.
        if not self._state.adding:
            raise AppendOnlyError("audit events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("audit events are append-only")

    @property
    def action_label(self) -> str:
        try:
            return str(Action(self.action).label)
        except ValueError:
            return self.action


class ChainHeadQuerySet(models.QuerySet["ChainHead"]):
    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError("audit chain heads are append-only")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("audit chain heads are append-only")


class ChainHead(models.Model):
    """The audit chain's length and last event after an append, signed with a key kept outside
    the database, so that events cut from the chain's end are noticed. Append-only."""

    count = models.PositiveBigIntegerField()
    event_id = models.BigIntegerField()
    hash = models.CharField(max_length=64)
    signature = models.CharField(max_length=64)

    objects = ChainHeadQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.count} events, last {self.event_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError("audit chain heads are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("audit chain heads are append-only")


class TenantMembership(models.Model):
    """Which tenants' data a user may see and act on.

    A user with no membership works across every tenant of the deployment (a single-tenant
    installation needs none); one or more memberships restrict the user to those tenants.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tenant_memberships"
    )
    tenant = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], name="tenant_membership_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user_id}@{self.tenant}"


class AccountOrigin(models.Model):
    """Who created an account, and whose eyes it may be (``reviewconsole.accounts``).

    Written when an account is made by someone the console knows (an admin in the admin, or a
    service given an actor). An account without a row was made on the shell (``add_user``,
    ``createsuperuser``) or before accounts were recorded: its own holder, created by nobody
    the console knows. ``holder`` is the account whose person may act through this one: the
    account itself, or, when its creator set its password, the creator's holder (chains of admins
    collapse to the first). It is fixed when the account is made; setting the password on the
    shell (``add_user --password``) makes the account its own holder again.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="origin"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    password_by_creator = models.BooleanField(default=False)
    # An account id, kept even if that account is deleted: a puppet stays tied to its holder.
    holder = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )

    def __str__(self) -> str:
        return f"{self.user_id} created by {self.created_by_id} (holder {self.holder_id})"


class SignOnIdentity(models.Model):
    """The person at an OpenID Connect provider an account belongs to: the provider (``issuer``)
    and its stable, never reassigned id for the person (``subject``, the ID token's ``sub``).

    Sign-on finds accounts by this pair only, never by e-mail or username, so a provider account
    whose e-mail or name matches a local account does not reach it (``user_sign_on``).
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sign_on"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField()
    last_sign_on_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sign_on_identity_unique")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class Tenant(models.Model):
    """A tenant of the deployment: the registry every tenant value names.

    Tenant values stay plain columns on the rows that carry them; ``reviewconsole.tenancy`` checks
    each value that comes in (a membership, an import, a request's scope) against this table.
    A tenant is created explicitly (``add_tenant``, the admin) or by a deployment-wide user's
    import naming it, audited as ``reviewconsole.tenant.create``; it is never deleted, since
    memories, runs and the audit log keep naming it.
    """

    name = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


def tenant_named(name: str) -> models.QuerySet[Tenant]:
    """The tenant called ``name`` (none or one row): what every "does this tenant exist" asks."""
    return Tenant.objects.filter(name=name).order_by()


class WorkerHeartbeat(models.Model):
    """The last moment each ``manage.py worker`` process showed it was alive (its loop wrote this).

    Written by ``reviewconsole.health.heartbeat_beat``, read by ``/readyz``. Rows are keyed by the
    worker's id (``--worker-id``, random by default); a worker that stops cleanly removes its row
    and rows of workers gone for a day are pruned when a worker starts.
    """

    worker_id = models.CharField(max_length=64, unique=True)
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return self.worker_id


# --- Review conversations and change requests ---------------------------------------------------
# Written by reviewconsole/conversations.py only. Items are named by their string id
# (reviewconsole/itemids.py) with their tenant, so every kind (cases, skills, lessons, knowledge
# document versions) shares these tables from the core, below every app.

ITEM_REF_LENGTH = 200


class ChangeRequest(models.Model):
    """A reviewer sent a candidate back to its submitter; open until a revision is resubmitted
    (``resubmitted_as``, the new version's id)."""

    tenant = models.CharField(max_length=64)
    item_id = models.CharField(max_length=ITEM_REF_LENGTH)
    note = models.TextField()
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    requested_at = models.DateTimeField()
    # Whom the item is returned to: its submitter.
    returned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    resubmitted_as = models.CharField(max_length=ITEM_REF_LENGTH, blank=True)
    resubmitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    resubmitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["requested_at", "pk"]
        indexes = [models.Index(fields=["tenant", "item_id"], name="changereq_item")]

    def __str__(self) -> str:
        return f"changes requested on {self.item_id}"

    @property
    def open(self) -> bool:
        return not self.resubmitted_as


class ThreadStatus(models.TextChoices):
    OPEN = "open", gettext_noop("open")
    RESOLVED = "resolved", gettext_noop("resolved")


class ReviewThread(models.Model):
    """A conversation anchored to one part of an item: an evidence item, a section or a field
    (``anchor``, e.g. ``evidence:diagnosis/0``, ``section:diagnosis``), or the whole item (blank)."""

    tenant = models.CharField(max_length=64)
    item_id = models.CharField(max_length=ITEM_REF_LENGTH)
    anchor = models.CharField(max_length=ITEM_REF_LENGTH, blank=True)
    status = models.CharField(max_length=8, choices=ThreadStatus.choices, default=ThreadStatus.OPEN)
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    opened_at = models.DateTimeField()
    # The change request this thread was opened with, if any.
    change_request = models.ForeignKey(
        ChangeRequest, null=True, blank=True, on_delete=models.PROTECT, related_name="threads"
    )
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["opened_at", "pk"]
        indexes = [models.Index(fields=["tenant", "item_id"], name="reviewthread_item")]

    def __str__(self) -> str:
        return f"thread on {self.item_id}{'#' + self.anchor if self.anchor else ''}"


class ReviewComment(models.Model):
    thread = models.ForeignKey(ReviewThread, on_delete=models.PROTECT, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    body = models.TextField()
    written_at = models.DateTimeField()

    class Meta:
        ordering = ["written_at", "pk"]

    def __str__(self) -> str:
        return f"comment {self.pk} on thread {self.thread_id}"


# --- Review claims (reviewconsole.claims) ---------------------------------------------------------


class ReviewClaim(models.Model):
    """A reviewer's claim on an item under review: "I am looking at this one".

    One row per item (``tenant``, ``item_id``; ids are strings of ``reviewconsole.itemids``). A
    claim counts until ``expires_at`` (the claim's moment plus ``REVIEW_CLAIM_TTL_MINUTES``),
    read against the clock: a lapsed claim simply stops counting, no timer removes it. Released,
    broken, taken over or ended by a decision on the item, the row is deleted; the audit log keeps
    its history. ``title`` is the item's, copied when claimed, so a list of claims is one query.
    Written only by ``reviewconsole.claims``.
    """

    tenant = models.CharField(max_length=64)
    item_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=16)
    title = models.CharField(max_length=300, blank=True)
    holder = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="review_claims"
    )
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-claimed_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "item_id"], name="review_claim_one_per_item")
        ]
        indexes = [models.Index(fields=["holder", "expires_at"])]
        permissions = [("break_reviewclaim", "Can break another reviewer's claim")]

    def __str__(self) -> str:
        return f"{self.item_id}@{self.tenant} claimed by {self.holder_id}"
