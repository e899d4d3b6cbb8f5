"""Issuing and revoking agent API tokens: atomic and audited (checking one: ``agentapi.auth``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import User
from django.db import transaction

from agentapi.models import ApiToken
from agentapi.tokens import token_generate, token_prefix
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action
from reviewconsole.roles import TOKEN_ROLE
from reviewconsole.services import user_manage_check

MAX_NAME_LENGTH = 100
NAME_TOO_LONG = f"must be at most {MAX_NAME_LENGTH} characters"
INACTIVE_USER = "is not an active user"
NOT_AN_AGENT = (
    "is not in the agent role: API tokens are issued to agents' service accounts only "
    "(make one with `manage.py add_user NAME --role agent`)"
)
UNKNOWN_PREFIX = "no API token with this prefix"
ALREADY_REVOKED = "this token is already revoked"
# Marking every request would turn each read into a write; once a minute is enough to audit use.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class IssuedToken:
    """The stored row and the token text, which exists only here and is shown once."""

    token: ApiToken
    text: str


@transaction.atomic
def token_create(*, user: User, name: str = "", actor: User | None = None) -> IssuedToken:
    if not user.is_active:
        raise ValidationFailure("USER", INACTIVE_USER)
    if not user.groups.filter(name=TOKEN_ROLE).exists():
        raise ValidationFailure("USER", NOT_AN_AGENT)
    name = name.strip()
    if len(name) > MAX_NAME_LENGTH:
        raise ValidationFailure("--name", NAME_TOO_LONG)
    new = token_generate()
    token = ApiToken.objects.create(
        user=user, name=name, prefix=new.prefix, token_hash=new.digest, created_at=clock.now()
    )
    event_record(
        actor=actor,
        action=Action.AGENT_TOKEN_CREATE,
        target=f"token:{token.prefix}",
        details={"user": user.get_username(), "name": name},
    )
    return IssuedToken(token=token, text=new.text)


@transaction.atomic
def token_revoke(*, token: ApiToken, actor: User | None = None, reason: str = "") -> ApiToken:
    """Revoke ``token``. Without ``actor`` (the shell) any token; an admin, only the tokens of
    users it manages."""
    token = ApiToken.objects.select_for_update().select_related("user").get(pk=token.pk)
    if actor is not None:
        user_manage_check(actor=actor, user=token.user)
    if token.revoked_at is not None:
        raise ValidationFailure("token", ALREADY_REVOKED)
    token.revoked_at = clock.now()
    token.save(update_fields=["revoked_at"])
    event_record(
        actor=actor,
        action=Action.AGENT_TOKEN_REVOKE,
        target=f"token:{token.prefix}",
        reason=reason.strip(),
        details={"user": token.user.get_username(), "name": token.name},
    )
    return token


def token_by_prefix(text: str, *, field: str = "PREFIX") -> ApiToken:
    """The token named by its prefix (as the admin lists it) or by the full token text."""
    prefix = token_prefix(text) or text.strip()
    token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
    if token is None:
        raise ValidationFailure(field, UNKNOWN_PREFIX)
    return token
