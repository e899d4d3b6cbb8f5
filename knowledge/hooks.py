"""What revoking a knowledge document reaches in apps that knowledge does not import.

The revocation itself publishes ``DOCUMENT_REVOKED`` (``reviewconsole.dispatch``): each
subscriber stores, in the revocation's transaction, what it reaches (experience: the runs whose
tool results cited the document) and answers it as ``{"skills": [...], "runs": [...]}``;
:func:`impact_merged` merges the answers for the revocation's audit event.

Before that, the revoke pages (console and admin) show what a revocation would reach. That is a
read asked before anything is written, not an effect of a write, so the app that stores the
impact registers a previewer here at start-up (its ``AppConfig.ready``).

Every call names the document's tenant beside its id: ``doc:KEY@N`` names a document only within
a tenant, so another tenant's runs that cited its own ``doc:KEY@N`` are not reached.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

Impact = Mapping[str, Sequence[str]]


def impact_merged(answers: Iterable[object]) -> dict[str, list[str]]:
    """The answers' impacts merged: per kind, each id once, sorted (``skills`` and ``runs``
    always present)."""
    merged: dict[str, set[str]] = {"skills": set(), "runs": set()}
    for answer in answers:
        if isinstance(answer, Mapping):
            for kind, ids in answer.items():
                merged.setdefault(kind, set()).update(ids)
    return {kind: sorted(ids) for kind, ids in merged.items()}


RevocationPreviewer = Callable[[str, str], Impact]
revocation_previewers: list[RevocationPreviewer] = []


def revocation_previewer_register(previewer: RevocationPreviewer) -> None:
    if previewer not in revocation_previewers:
        revocation_previewers.append(previewer)


def revocation_preview(*, item_id: str, tenant: str) -> dict[str, list[str]]:
    """What revoking ``item_id`` of ``tenant`` would reach now, merged as a revocation merges
    what it reached."""
    return impact_merged(previewer(item_id, tenant) for previewer in revocation_previewers)
