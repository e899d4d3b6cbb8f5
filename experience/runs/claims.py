"""Whose a run is: the account, and the tenant, that opened it under the run id it chose.

A run id is chosen by its caller. A run is keyed by tenant, account and that id (its *name*): the
same name chosen by another account, or by the same account in another tenant, opens another run,
so no caller can read under, report on or squat on someone else's run, and no answer tells that
an id is taken anywhere else. Each run is stored under an id of its own (``RunOwner.run_id``, the
*stored id*): its name when no other run holds it, else the name with an unpredictable suffix.
Every row hanging off a run (reads, skill runs, investigations, outcomes, follow-ups, revocation
impact, console pages) is kept under its stored id; callers keep passing their names and are
answered with them.

``run_claim`` is called, in the writer's transaction, by every path that records reads or stores
a run (retrieval, the context block, skill runs, reads by id, investigations) and gives the
stored id to write under. ``run_named`` finds the run a caller means by an id (its own, or for a
reviewer a run of their tenants); another account's or tenant's run answers as an unknown id.
See docs/contracts.md (Run ids).
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction

from experience.runs.models import RunOwner
from reviewconsole.permissions import REVIEW_CASE, holds
from reviewconsole.runids import MAX_RUN_ID
from reviewconsole.tenancy import may_access

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# A stored id taken by another run gets this suffix: ``~`` and 8 hex digits.
SUFFIX_LENGTH = 9
# Attempts at a stored id before giving up: a collision of 32 random bits is rare, twice rarer.
ATTEMPTS = 5


def _stored_id(name: str, attempt: int) -> str:
    if attempt == 0:
        return name
    return f"{name[: MAX_RUN_ID - SUFFIX_LENGTH]}~{secrets.token_hex(4)}"


def _own(actor: User, name: str, tenant: str) -> RunOwner | None:
    """The actor's run called ``name`` in ``tenant`` (blank: their run with no tenant yet, else
    the latest they opened under that name); or the actor's run whose stored id ``name`` is,
    which the paths inside one run (an investigation's tools, a skill run's store) pass on."""
    mine = RunOwner.objects.select_for_update().filter(owner=actor)
    claim = mine.filter(name=name, tenant=tenant).first()
    if claim is None and not tenant:
        claim = mine.filter(name=name).order_by("-first_read_at", "-id").first()
    if claim is None:
        claim = mine.filter(run_id=name).first()
        if claim is not None and tenant and claim.tenant not in ("", tenant):
            claim = None
    if claim is None and tenant:
        # A run the actor opened with no tenant yet: its first read naming one fills it in.
        claim = mine.filter(name=name, tenant="").first()
    return claim


def run_claim(*, run_id: str, actor: User, tenant: str | None, at: datetime) -> RunOwner:
    """The run ``actor`` opened as ``run_id`` in ``tenant``, opened now if there is none; its
    ``run_id`` is the stored id to write under.

    ``tenant`` is the tenant of the scope the run reads in (blank when the scope named none: the
    owner's first read naming one fills it in). Never refused: another account's or tenant's run
    of the same name is another run.
    """
    tenant = tenant or ""
    for attempt in range(ATTEMPTS):
        # A savepoint each, so a concurrent first claim (of this run, or of the stored id) ends
        # in another lookup, not an error.
        try:
            with transaction.atomic():
                claim = _own(actor, run_id, tenant)
                if claim is None:
                    return RunOwner.objects.create(
                        run_id=_stored_id(run_id, attempt),
                        name=run_id,
                        owner=actor,
                        tenant=tenant,
                        first_read_at=at,
                    )
        except IntegrityError:
            continue
        if tenant and not claim.tenant:
            RunOwner.objects.filter(pk=claim.pk).update(tenant=tenant)
            claim.tenant = tenant
        return claim
    raise RuntimeError(f"no stored id could be given to run {run_id!r}")


def run_named(actor: User, run_id: str) -> RunOwner | None:
    """The run ``actor`` means by ``run_id``, or None when they have none by that id.

    Their own run of that name (the latest they opened, if they used the name in several
    tenants), or their run whose stored id it is; for a reviewer (``experience.review_case``),
    else the run of one of their tenants whose stored id it is (as its console page shows it),
    else the latest run of that name in their tenants. Another account's run, or another
    tenant's, is None exactly as an id nobody used."""
    mine = RunOwner.objects.filter(owner=actor)
    claim = mine.filter(name=run_id).order_by("-first_read_at", "-id").first()
    claim = claim or mine.filter(run_id=run_id).first()
    if claim is not None or not holds(actor, REVIEW_CASE):
        return claim
    stored = RunOwner.objects.filter(run_id=run_id).first()
    if stored is not None and may_access(actor, stored.tenant):
        return stored
    named = RunOwner.objects.filter(name=run_id).order_by("-first_read_at", "-id")
    return next((c for c in named if may_access(actor, c.tenant)), None)


def run_name(stored_id: str) -> str:
    """The name its owner gave the run stored as ``stored_id`` (itself for a run with no
    owner's claim)."""
    name = RunOwner.objects.filter(run_id=stored_id).values_list("name", flat=True).first()
    return name or stored_id


def run_owner(stored_id: str) -> RunOwner | None:
    """The run stored as ``stored_id``, or None for an id no run is stored under."""
    return RunOwner.objects.filter(run_id=stored_id).first()
