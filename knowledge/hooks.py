"""What revoking a knowledge document reaches, recorded by apps that knowledge does not import.

An app that records reads of documents (runs whose tool results cited one) registers a recorder at
start-up (its ``AppConfig.ready``). A revocation calls every recorder inside its own transaction;
a recorder computes what the revocation reaches, stores it with the revocation and returns it as
``{"skills": [...], "runs": [...]}``.

Every call names the document's tenant beside its id: ``doc:KEY@N`` names a document only within
a tenant, so another tenant's runs that cited its own ``doc:KEY@N`` are not reached.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# ``(item_id, tenant, actor, reason, now)``: ``now`` is the revocation's moment, stored with it.
RevocationRecorder = Callable[[str, str, "User", str, datetime], Mapping[str, Sequence[str]]]
revocation_recorders: list[RevocationRecorder] = []


def revocation_recorder_register(recorder: RevocationRecorder) -> None:
    if recorder not in revocation_recorders:
        revocation_recorders.append(recorder)


def revocation_record(
    *, item_id: str, tenant: str, actor: User, reason: str, now: datetime
) -> dict[str, list[str]]:
    """Every recorder's impact of revoking ``item_id`` of ``tenant``, merged (sorted, each id
    once)."""
    merged: dict[str, set[str]] = {"skills": set(), "runs": set()}
    for recorder in revocation_recorders:
        for kind, ids in recorder(item_id, tenant, actor, reason, now).items():
            merged.setdefault(kind, set()).update(ids)
    return {kind: sorted(ids) for kind, ids in merged.items()}


# What revoking a document would reach, asked before anything is written (the console's preview
# before a revocation is confirmed). The app that registers a recorder registers its previewer.
RevocationPreviewer = Callable[[str, str], Mapping[str, Sequence[str]]]
revocation_previewers: list[RevocationPreviewer] = []


def revocation_previewer_register(previewer: RevocationPreviewer) -> None:
    if previewer not in revocation_previewers:
        revocation_previewers.append(previewer)


def revocation_preview(*, item_id: str, tenant: str) -> dict[str, list[str]]:
    """What revoking ``item_id`` of ``tenant`` would reach now, merged as
    ``revocation_record`` merges."""
    merged: dict[str, set[str]] = {"skills": set(), "runs": set()}
    for previewer in revocation_previewers:
        for kind, ids in previewer(item_id, tenant).items():
            merged.setdefault(kind, set()).update(ids)
    return {kind: sorted(ids) for kind, ids in merged.items()}
