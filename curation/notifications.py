"""Reviewer notifications by email (Django's email backend; the console backend by default).

A reviewer is told when candidates have waited longer than ``NOTIFY_CANDIDATE_WAIT_HOURS``, when
an item they approved is revoked, and when a lesson conflict involves a lesson they approved.
Each user may turn notifications off (``NotificationOptOut``); users without an email address get
none. ``NotificationSent`` makes each one go out once per user however often the task runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import IntegrityError, transaction

from curation.models import NotificationOptOut, NotificationSent
from experience.models import Case, Lesson, LessonConflict, Skill, Status
from reviewconsole import clock
from reviewconsole.permissions import REVIEW_CASE, holds
from reviewconsole.tenancy import may_access

WAITING = "waiting"
REVOKED = "revoked"
CONFLICT = "conflict"


def wait_hours() -> float:
    return float(getattr(settings, "NOTIFY_CANDIDATE_WAIT_HOURS", 24))


def opted_out(user: User) -> bool:
    return NotificationOptOut.objects.filter(user=user).exists()


def notifications_set(*, user: User, enabled: bool) -> None:
    if enabled:
        NotificationOptOut.objects.filter(user=user).delete()
    else:
        NotificationOptOut.objects.get_or_create(user=user, defaults={"since": clock.now()})


def _claim(user: User, kind: str, keys: Iterable[str]) -> list[str]:
    """The keys not yet sent to ``user``, now marked as sent."""
    fresh = []
    for key in keys:
        try:
            with transaction.atomic():
                NotificationSent.objects.create(user=user, kind=kind, key=key, sent_at=clock.now())
        except IntegrityError:
            continue
        fresh.append(key)
    return fresh


def _deliver(user: User | None, kind: str, keys: list[str], subject: str, lines: list[str]) -> int:
    if user is None or not user.is_active or not user.email or opted_out(user):
        return 0
    fresh = _claim(user, kind, keys)
    if not fresh:
        return 0
    body = "\n".join(line for key, line in zip(keys, lines, strict=True) if key in fresh)
    send_mail(subject, body, None, [user.email])
    return 1


def notify_waiting_candidates(now: datetime | None = None) -> int:
    """Mail each reviewer the candidates of their tenants waiting longer than the wait time."""
    cutoff = (now or clock.now()) - timedelta(hours=wait_hours())
    waiting = [
        (
            item.id,
            item.tenant,
            f"{item.id} ({item.title}) waits since {item.submitted_at:%Y-%m-%d %H:%M}",
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
            )
    return sent


def notify_revoked(item_id: str) -> int:
    for model in (Case, Skill, Lesson):
        item = model.objects.filter(pk=item_id).select_related("approved_by").first()
        if item is not None and item.status == Status.REVOKED:
            reason = item.revoked_reason or "no reason given"
            line = f"{item.id} ({item.title}), which you approved, was revoked: {reason}"
            return _deliver(
                item.approved_by, REVOKED, [item.id], "An item you approved was revoked", [line]
            )
    return 0


def notify_conflict(conflict_pk: int) -> int:
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
    line = f"{conflict.lesson_a_id} conflicts with {conflict.lesson_b_id} ({conflict.found_by})"
    for user in approvers:
        sent += _deliver(
            user, CONFLICT, [str(conflict.pk)], "A lesson you approved is in a conflict", [line]
        )
    return sent
