"""Reads of runs: what was read under a run id, and the runs that read an item."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet

from experience.runs.models import Reference, Run, RunCitation, RunOwner

if TYPE_CHECKING:
    pass


def _claimed_elsewhere(tenant: str | None) -> QuerySet[RunOwner, Any] | None:
    """Run ids opened in a tenant other than ``tenant``: never part of its items' impact."""
    if tenant is None:
        return None
    return RunOwner.objects.exclude(tenant__in=["", tenant]).values("run_id")


def runs_referencing(item_ids: list[str], tenant: str | None = None) -> list[str]:
    """Run ids that read any of these items, leaving out runs opened in a tenant other than
    ``tenant``; answered from the (item_id, run_id) index and the run owners' unique index."""
    if not item_ids:
        return []
    reads = Reference.objects.filter(item_id__in=item_ids)
    elsewhere = _claimed_elsewhere(tenant)
    if elsewhere is not None:
        reads = reads.exclude(run_id__in=elsewhere)
    return sorted(set(reads.order_by().values_list("run_id", flat=True).distinct()))


def context_blocks_among(item_ids: list[str], runs: list[str]) -> list[str]:
    """Of ``runs`` (those :func:`runs_referencing` answered for ``item_ids``), the ones whose
    context block carried one of the items: from the partial index of block reads, which are
    few, kept to ``runs`` here rather than by the tenant's run owners again."""
    if not item_ids or not runs:
        return []
    blocks = Reference.objects.filter(item_id__in=item_ids, in_block=True)
    return sorted(set(blocks.order_by().values_list("run_id", flat=True).distinct()) & set(runs))


def runs_citing_document(public_id: str, tenant: str | None = None) -> list[str]:
    """Runs whose tool results cited the document: a skill run's citations, and the reads an
    investigation records for every document its searches returned; without runs opened in a
    tenant other than ``tenant``."""
    cited = RunCitation.objects.filter(document_id=public_id)
    read = Reference.objects.filter(item_id=public_id)
    elsewhere = _claimed_elsewhere(tenant)
    if elsewhere is not None:
        cited = cited.exclude(run_id_text__in=elsewhere)
        read = read.exclude(run_id__in=elsewhere)
    # One query: UNION also removes the repeats.
    return sorted(
        cited.order_by()
        .values_list("run_id_text", flat=True)
        .union(read.order_by().values_list("run_id", flat=True))
    )


def runs_for(run_id: str) -> QuerySet[Run]:
    return Run.objects.filter(run_id=run_id).prefetch_related("citations")


def references_for(run_id: str) -> QuerySet[Reference]:
    return Reference.objects.filter(run_id=run_id)
