"""Reviewer notifications by email (Django's email backend; the console backend by default).

A reviewer is told when candidates have waited longer than ``NOTIFY_CANDIDATE_WAIT_HOURS``, an
operator when a knowledge version they may approve is submitted for review, when
an item they approved is revoked, when a lesson conflict involves a lesson they approved, and
when a lesson they approved (or an earlier version of it) turns outdated.
Each user may turn notifications off (``NotificationOptOut``); users without an email address get
none. ``NotificationSent`` makes each event go to each user in one mail however often the task
runs.

Delivery goes through an outbox (``OutboxMail``): deciding a mail is due writes the mail, its
``NotificationSent`` rows and the task that sends it in one transaction; the send and the mark
"sent" are one transaction too (``outbox_send``), so a failed send leaves the mail pending and
its task is retried (``reviewconsole.background.retrying``); when the retries run out, each
curation scan starts them again (``outbox_retry_stalled``). Delivery is at least once: a crash
after the mail server took the mail and before the mark commits sends it again, under the same
Message-ID (the mail's idempotency key). User text enters a mail only as one quoted, capped line
(``curation.mail_text``), and links point only at ``CONSOLE_BASE_URL``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import EmailMessage
from django.db import IntegrityError, transaction
from django.db.models import F
from django_tasks import task

from curation.mail_text import console_link, quoted
from curation.models import NotificationOptOut, NotificationSent, OutboxMail
from experience.cases.models import Case, Skill
from experience.core.models import Status
from experience.lessons.domain import CONFIDENCE_FELL, CONTRADICTED
from experience.lessons.models import Lesson, LessonConflict
from experience.review.impact import impact_lines, latest_impact
from knowledge.models import Document
from knowledge.selectors import document_approvers
from reviewconsole import clock
from reviewconsole.background import retrying
from reviewconsole.permissions import REVIEW_CASE, holds
from reviewconsole.reasons import reason_clipped
from reviewconsole.tenancy import may_access

WAITING = "waiting"
REVOKED = "revoked"
CONFLICT = "conflict"
OUTDATED = "outdated"
SUBMITTED = "submitted"

MESSAGE_ID_DOMAIN = "review-console"


def wait_hours() -> float:
    return float(getattr(settings, "NOTIFY_CANDIDATE_WAIT_HOURS", 24))


def opted_out(user: User) -> bool:
    return NotificationOptOut.objects.filter(user=user).exists()


def notifications_set(*, user: User, enabled: bool) -> None:
    if enabled:
        NotificationOptOut.objects.filter(user=user).delete()
    else:
        NotificationOptOut.objects.get_or_create(user=user, defaults={"since": clock.now()})


def _claim(user: User, kind: str, keys: Iterable[str], *, now: datetime) -> list[str]:
    """The keys not yet announced to ``user``, now marked as announced."""
    fresh = []
    for key in keys:
        try:
            with transaction.atomic():
                NotificationSent.objects.create(user=user, kind=kind, key=key, sent_at=now)
        except IntegrityError:
            continue
        fresh.append(key)
    return fresh


def _can_receive(user: User | None) -> bool:
    return user is not None and user.is_active and bool(user.email) and not opted_out(user)


def _deliver(
    user: User | None,
    kind: str,
    keys: list[str],
    subject: str,
    lines: list[str],
    *,
    now: datetime,
) -> int:
    """Put one mail of the ``lines`` whose keys ``user`` has not heard of in the outbox."""
    if user is None or not _can_receive(user):
        return 0
    with transaction.atomic():
        fresh = _claim(user, kind, keys, now=now)
        if not fresh:
            return 0
        body = "\n".join(line for key, line in zip(keys, lines, strict=True) if key in fresh)
        mail = OutboxMail.objects.create(user=user, subject=subject, body=body, created_at=now)
        NotificationSent.objects.filter(user=user, kind=kind, key__in=fresh).update(mail=mail)
        mail_send_task.enqueue(mail.pk)
    return 1


@task()
def mail_send_task(mail_id: int, attempt: int = 1) -> str:
    """Send one outbox mail (``outbox_send``); a failed send is retried with backoff, and a mail
    already sent is not sent again. Defined beside the outbox it serves, so this module, which
    queues it, does not import ``curation.tasks`` (which imports this module)."""
    with retrying(mail_send_task, attempt, mail_id):
        return outbox_send(mail_id)


def outbox_send(mail_id: int) -> str:
    """Send a pending outbox mail and mark it sent, together; its state afterwards.

    A failing send raises (the caller's retry tries again) and leaves the mail pending, with the
    attempt and the error recorded; the send that finally succeeds clears the error.
    """
    try:
        with transaction.atomic():
            mail = (
                OutboxMail.objects.select_for_update()
                .select_related("user")
                .filter(pk=mail_id)
                .first()
            )
            if mail is None:
                return "gone"
            if mail.state != OutboxMail.State.PENDING:
                return str(mail.state)
            if not _can_receive(mail.user):
                mail.state = OutboxMail.State.DROPPED
            else:
                EmailMessage(
                    mail.subject,
                    mail.body,
                    None,
                    [mail.user.email],
                    headers={"Message-ID": f"<{mail.idempotency_key}@{MESSAGE_ID_DOMAIN}>"},
                ).send()
                mail.state = OutboxMail.State.SENT
                # The failure of an earlier attempt is no longer the mail's state.
                mail.last_error = ""
            mail.finished_at = clock.now()
            mail.attempts += 1
            mail.save(update_fields=["state", "finished_at", "attempts", "last_error"])
            return str(mail.state)
    except Exception as error:
        OutboxMail.objects.filter(pk=mail_id, state=OutboxMail.State.PENDING).update(
            attempts=F("attempts") + 1,
            last_error=reason_clipped(f"{type(error).__name__}: {error}"),
        )
        raise


def outbox_retry_stalled() -> int:
    """Start the retries again of pending mails whose retries ran out; how many."""
    stalled = OutboxMail.objects.filter(
        state=OutboxMail.State.PENDING,
        attempts__gte=int(getattr(settings, "TASK_MAX_ATTEMPTS", 5)),
    ).values_list("pk", flat=True)
    for mail_id in stalled:
        mail_send_task.enqueue(mail_id)
    return len(stalled)


def _link(item: Case | Skill | Lesson | Document) -> str:
    link = console_link(getattr(settings, "CONSOLE_BASE_URL", ""), item.get_absolute_url())
    return f" {link}" if link else ""


def notify_waiting_candidates(now: datetime | None = None) -> int:
    """Mail each reviewer the candidates of their tenants waiting longer than the wait time."""
    now = now or clock.now()
    cutoff = now - timedelta(hours=wait_hours())
    waiting = [
        (
            item.id,
            item.tenant,
            f"- {item.id} {quoted(item.title)} waits since {item.submitted_at:%Y-%m-%d %H:%M}"
            f"{_link(item)}",
        )
        for model in (Case, Skill, Lesson)
        for item in model.objects.filter(status=Status.CANDIDATE, submitted_at__lt=cutoff)
    ]
    if not waiting:
        return 0
    sent = 0
    for user in User.objects.filter(is_active=True).exclude(email=""):
        if not holds(user, REVIEW_CASE):
            continue
        mine = [(key, line) for key, tenant, line in waiting if may_access(user, tenant)]
        if mine:
            sent += _deliver(
                user,
                WAITING,
                [key for key, _ in mine],
                "Candidates are waiting for review",
                [line for _, line in mine],
                now=now,
            )
    return sent


def notify_revoked(item_id: str, now: datetime | None = None) -> int:
    for model in (Case, Skill, Lesson):
        item = model.objects.filter(pk=item_id).select_related("approved_by").first()
        if item is not None and item.status == Status.REVOKED:
            reason = quoted(item.revoked_reason) if item.revoked_reason else "no reason given"
            line = (
                f"{item.id} {quoted(item.title)}, which you approved, was revoked; "
                f"reason: {reason}{_link(item)}"
            )
            # What the revocation reached, as stored with it (the one impact every surface shows).
            impact = latest_impact(item.id)
            if impact is not None:
                line = "\n".join([line, *(f"  {part}" for part in impact_lines(impact))])
            return _deliver(
                item.approved_by,
                REVOKED,
                [item.id],
                "An item you approved was revoked",
                [line],
                now=now or clock.now(),
            )
    return 0


def notify_conflict(conflict_pk: int, now: datetime | None = None) -> int:
    conflict = LessonConflict.objects.filter(pk=conflict_pk).first()
    if conflict is None:
        return 0
    sent = 0
    approvers = {
        lesson.approved_by
        for lesson in Lesson.objects.filter(
            pk__in=[conflict.lesson_a_id, conflict.lesson_b_id]
        ).select_related("approved_by")
        if lesson.approved_by is not None
    }
    line = (
        f"{conflict.lesson_a_id} conflicts with {conflict.lesson_b_id} "
        f"(found by {quoted(conflict.found_by)})"
    )
    now = now or clock.now()
    for user in approvers:
        sent += _deliver(
            user,
            CONFLICT,
            [str(conflict.pk)],
            "A lesson you approved is in a conflict",
            [line],
            now=now,
        )
    return sent


# Why a lesson turned outdated, as its approvers read it (experience.lessons.outdating).
OUTDATED_CAUSES = {
    CONTRADICTED: "its counterexamples reach its support",
    CONFIDENCE_FELL: "its confidence fell below the threshold after having been above it",
}


def outdated_key(lesson_id: str, outdated_at: datetime) -> str:
    """One announcement per outdating: a lesson restored and outdated again is news again."""
    return f"{lesson_id}@{outdated_at.isoformat()}"


def lesson_approvers(lesson: Lesson) -> set[User]:
    """Whoever approved the lesson or any earlier version it replaced (of its tenant)."""
    approvers: set[User] = set()
    seen: set[str] = set()
    current: Lesson | None = lesson
    while current is not None and current.id not in seen:
        seen.add(current.id)
        if current.approved_by is not None:
            approvers.add(current.approved_by)
        current = (
            Lesson.objects.filter(pk=current.supersedes, tenant=lesson.tenant)
            .select_related("approved_by")
            .first()
            if current.supersedes
            else None
        )
    return approvers


def notify_outdated(key: str, now: datetime | None = None) -> int:
    """Tell the approvers of a lesson that turned outdated, while it still is (``key``:
    :func:`outdated_key`)."""
    lesson_id, _, _at = key.partition("@")
    lesson = Lesson.objects.filter(pk=lesson_id).select_related("approved_by").first()
    if lesson is None or lesson.status != Status.OUTDATED:
        return 0
    cause = OUTDATED_CAUSES.get(lesson.outdated_cause, lesson.outdated_cause)
    line = (
        f"{lesson.id} {quoted(lesson.title)}, which you approved, is outdated: {cause}; "
        f"restore it or revoke it{_link(lesson)}"
    )
    now = now or clock.now()
    return sum(
        _deliver(user, OUTDATED, [key], "A lesson you approved is outdated", [line], now=now)
        for user in sorted(lesson_approvers(lesson), key=lambda u: u.pk)
    )


def notify_document_submitted(document: Document, now: datetime | None = None) -> int:
    """Ask the operators who may approve a submitted knowledge version (its tenant's, not its
    author): one mail each, with its change note, in the outbox of the submission's transaction."""
    author = document.submitted_by.get_username() if document.submitted_by else "an operator"
    line = (
        f"{document.public_id} {quoted(document.title)} (tenant {document.tenant}) was "
        f"submitted for your approval by {author}; change note: {quoted(document.change_note)}"
        f"{_link(document)}"
    )
    # One announcement per version of a tenant's key (keys are per tenant).
    key = f"{document.tenant}/{document.public_id}"
    now = now or clock.now()
    return sum(
        _deliver(
            user,
            SUBMITTED,
            [key],
            "A knowledge version awaits your approval",
            [line],
            now=now,
        )
        for user in document_approvers(document)
    )
