"""Background tasks of the semantic index (django-tasks; see ``reviewconsole.background``)."""

from __future__ import annotations

from collections.abc import Iterable

from django_tasks import task

from reviewconsole.background import retrying
from semantic import embedders
from semantic.models import ScopeVectors
from semantic.packing import every_scope_packed, scope_packed, scopes_marked


@task()
def scope_vectors_task(space: str, scope: int, attempt: int = 1) -> int:
    """Embed a scope's new entries and pack its matrix (nothing when it is not dirty, so a task
    queued twice or run again writes once). Returns the items embedded."""
    with retrying(scope_vectors_task, attempt, space, scope):
        return scope_packed(space, scope)


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
    scopes_changed(space, scopes)


@task()
def reembed_task(attempt: int = 1) -> int:
    """Pack every scope of every space again with the configured embedder (after a model
    change: vectors of the old model are kept but never compared with the new ones)."""
    with retrying(reembed_task, attempt):
        return every_scope_packed()
