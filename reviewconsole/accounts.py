"""Whose eyes an account is: four eyes across accounts, not just across account ids.

An admin who creates an account and sets its password can log in as it: the two accounts are
one person's. Four eyes asks for two people, so every decision that needs a second pair of eyes
(approving a case, skill, lesson or document version, restoring an outdated lesson, a check of
evidence that counts toward approval) compares **holders**, not accounts:

- an account made on the shell (``add_user``, ``createsuperuser``) or before accounts were
  recorded is its own holder: whoever runs the shell runs the deployment;
- an account an admin created without a password is its own holder (the admin never knew its
  credentials; the password is set on the shell);
- an account an admin created with a password is held by that admin's holder, and so on up a
  chain of admins: admin A creates admin B with a password, B creates reviewers R1 and R2, and
  R1, R2, B and A are all A's;
- a later role change keeps the holder (an operator A made becomes a reviewer: still A's; an
  admin demoted to reviewer is still the holder of what it made). The password the owner sets
  after logging in does not free the account either (the holder could have set it); setting it
  on the shell (``add_user NAME --role R --password …``) does.

Any other way of making accounts (a sign-on backend that creates users on first login, a new
command) records who made it through ``account_created``; without a record an account counts as
made on the shell.

Two accounts are independent when their holders differ. ``holder_of`` is what the review rules
read (``experience.core.domain.common_unmet``, ``knowledge.services``); ``provenance`` is what
approval events record, so the audit log names who created the account that approved each item.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.contrib.auth.models import User
from django.db.models import F, IntegerField, Value
from django.db.models.expressions import Combinable
from django.db.models.functions import Coalesce

from reviewconsole import clock
from reviewconsole.models import AccountOrigin

# The unmet condition of a decision whose decider is not independent of the submitter.
NOT_INDEPENDENT = "not_independent"


def holder_of(user_id: int) -> int:
    """The account whose person may act through account ``user_id`` (itself when free)."""
    found = AccountOrigin.objects.filter(user_id=user_id).values_list("holder_id", flat=True)
    return int(next(iter(found), user_id))


def holder_of_loaded(user: User) -> int:
    """``holder_of`` for an account read with its ``origin`` (``select_related``)."""
    try:
        origin = user.origin
    except AccountOrigin.DoesNotExist:
        return int(user.pk)
    return int(origin.holder_id)


def holders_of(user_ids: Iterable[int]) -> dict[int, int]:
    ids = set(user_ids)
    held = dict(AccountOrigin.objects.filter(user_id__in=ids).values_list("user_id", "holder_id"))
    return {user_id: int(held.get(user_id, user_id)) for user_id in ids}


def independent(first: int, second: int) -> bool:
    """Whether accounts ``first`` and ``second`` are two people's (their holders differ)."""
    return holder_of(first) != holder_of(second)


def holder_expression(user_path: str) -> Combinable:
    """The holder of the account at ``user_path`` (a foreign key to a user), in SQL: the
    recorded holder, else the account itself."""
    return Coalesce(
        F(f"{user_path}__origin__holder_id"), F(f"{user_path}_id"), output_field=IntegerField()
    )


def account_created(
    *, user: User, actor: User | None, password_set: bool, now: datetime | None = None
) -> AccountOrigin | None:
    """Record who made ``user``. Nothing for the shell (``actor`` None): such an account is its
    own holder, as an account without a record is."""
    if actor is None:
        return None
    holder = holder_of(int(actor.pk)) if password_set else int(user.pk)
    return AccountOrigin.objects.create(
        user=user,
        created_by=actor,
        created_at=now or clock.now(),
        password_by_creator=password_set,
        holder_id=holder,
    )


def password_set_on_shell(user: User) -> None:
    """The shell set ``user``'s password: whoever held the account no longer knows it."""
    AccountOrigin.objects.filter(user=user).update(
        holder_id=Value(user.pk), password_by_creator=False
    )


def provenance(user: User) -> dict[str, str | bool | None]:
    """What a decision's audit event records of its decider's account."""
    origin = (
        AccountOrigin.objects.filter(user_id=user.pk)
        .values("created_by__username", "password_by_creator")
        .first()
    )
    if origin is None:
        return {"account_created_by": None}
    return {
        "account_created_by": origin["created_by__username"],
        "account_password_by_creator": origin["password_by_creator"],
    }
