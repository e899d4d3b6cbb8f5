"""What revoking a knowledge document reaches, recorded by apps that knowledge does not import.

An app that records reads of documents (runs whose tool results cited one) registers a recorder at
start-up (its ``AppConfig.ready``). A revocation calls every recorder inside its own transaction;
a recorder computes what the revocation reaches, stores it with the revocation and returns it as
``{"skills": [...], "runs": [...]}``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.contrib.auth.models import User

RevocationRecorder = Callable[[str, "User", str], Mapping[str, Sequence[str]]]
revocation_recorders: list[RevocationRecorder] = []


def revocation_recorder_register(recorder: RevocationRecorder) -> None:
    if recorder not in revocation_recorders:
        revocation_recorders.append(recorder)


def revocation_record(*, item_id: str, actor: User, reason: str) -> dict[str, list[str]]:
    """Every recorder's impact of revoking ``item_id``, merged (sorted, each id once)."""
    merged: dict[str, set[str]] = {"skills": set(), "runs": set()}
    for recorder in revocation_recorders:
        for kind, ids in recorder(item_id, actor, reason).items():
            merged.setdefault(kind, set()).update(ids)
    return {kind: sorted(ids) for kind, ids in merged.items()}
