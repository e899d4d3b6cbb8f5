"""Background tasks of the semantic index (django-tasks; see ``reviewconsole.background``)."""

from __future__ import annotations

from collections.abc import Iterable

from django_tasks import task

from reviewconsole.background import retrying
from semantic import embedders
from semantic.models import PackedMatrix, ScopeVectors, VectorDelta
from semantic.packing import every_scope_packed, scope_packed, scopes_marked, vectors_merged


@task()
def scope_vectors_task(space: str, scope: int, attempt: int = 1) -> int:
    """Embed a scope's new entries and append them to its delta, or pack its matrix whole
    (nothing when it is not dirty, so a task queued twice or run again writes once). Returns
    the items embedded."""
    with retrying(scope_vectors_task, attempt, space, scope):
        return scope_packed(space, scope, merge=_merge_queued)


@task()
def vectors_merge_task(space: str, scope: int, attempt: int = 1) -> int:
    """Fold a scope's delta into its packed matrix (queued once when the delta reached its
    threshold; the rows appended meanwhile are folded too). Returns the rows folded."""
    with retrying(vectors_merge_task, attempt, space, scope):
        return vectors_merged(space, scope)


def _merge_queued(space: str, scope: int) -> None:
    vectors_merge_task.enqueue(space, scope)


def scopes_changed(space: str, scopes: Iterable[int]) -> None:
    """An index scope's entries changed: in the writer's transaction, mark its vectors dirty and
    queue their packing, so the task exists exactly when the change committed. Nothing while
    the vector branch is off."""
    if not embedders.enabled():
        return
    for scope in scopes_marked(space, list(scopes)):
        scope_vectors_task.enqueue(space, scope)


def space_reset(space: str, scopes: Iterable[int]) -> None:
    """A space's index was rebuilt with new scope rows: forget every packed matrix of the space
    (their scope and entry ids are gone) and queue the packing of the new ``scopes``. The items'
    vectors are kept, so nothing is embedded twice."""
    ScopeVectors.objects.filter(space=space).delete()
    PackedMatrix.objects.filter(space=space).delete()
    VectorDelta.objects.filter(space=space).delete()
    scopes_changed(space, scopes)


@task()
def reembed_task(attempt: int = 1) -> int:
    """Pack every scope of every space again with the configured embedder (after a model
    change: vectors of the old model are kept but never compared with the new ones)."""
    with retrying(reembed_task, attempt):
        return every_scope_packed()
