"""The actor of an investigation owns its run id: they may report the run's outcome."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from investigations.models import Investigation


def investigation_actors(run_id: str) -> list[int]:
    return [
        actor
        for actor in Investigation.objects.filter(run_id=run_id).values_list("actor_id", flat=True)
        if actor is not None
    ]


def investigation_run_ids(tenant: str) -> QuerySet[Any]:
    """The run ids of ``tenant``'s investigations, as a subquery."""
    return Investigation.objects.filter(tenant=tenant).values("run_id")
