"""Who a run id belongs to: the account, and the tenant, that opened it.

A run id is chosen by its caller, so without an owner it would be shared by everyone: another
account could read under it and then report (or replace) its outcome, and another tenant's reads
would mix into its impact. ``run_claim`` is called, in the writer's transaction, by every path
that records reads or stores a run under a run id (retrieval, the context block, skill runs,
reads by id, investigations). The first call claims the id; a later one by another account, or
by the owner under another tenant, is refused before anything is written. The refusal tells the
caller that the id is taken, so agents should choose unpredictable run ids (a UUID); see
docs/contracts.md (Run ids).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction

from experience.runs.models import RunOwner
from reviewconsole.errors import ValidationFailure

if TYPE_CHECKING:
    from django.contrib.auth.models import User

RUN_TAKEN = "is a run of another account or tenant; choose another run id"


def run_claim(*, run_id: str, actor: User, tenant: str | None, at: datetime) -> RunOwner:
    """Claim ``run_id`` for ``actor`` in ``tenant``, or confirm their claim; refuse anyone else's.

    ``tenant`` is the tenant of the scope the run reads in (blank when the scope named none: the
    owner's first read naming one fills it in).
    """
    tenant = tenant or ""
    # A savepoint, so a concurrent first claim of the same id ends in a lookup, not an error.
    with transaction.atomic():
        claim, created = RunOwner.objects.select_for_update().get_or_create(
            run_id=run_id, defaults={"owner": actor, "tenant": tenant, "first_read_at": at}
        )
    if created:
        return claim
    if claim.owner_id != actor.pk:
        raise ValidationFailure("run_id", RUN_TAKEN)
    if not tenant or claim.tenant == tenant:
        return claim
    if claim.tenant:
        raise ValidationFailure("run_id", RUN_TAKEN)
    RunOwner.objects.filter(pk=claim.pk).update(tenant=tenant)
    claim.tenant = tenant
    return claim


def run_owner(run_id: str) -> RunOwner | None:
    """The claim of ``run_id``, or None for an id nobody has read under."""
    return RunOwner.objects.filter(run_id=run_id).first()
