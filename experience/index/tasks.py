"""Background task of the retrieval index (django-tasks; see ``reviewconsole.background``)."""

from __future__ import annotations

from django_tasks import task

from experience.index.postings import expanded_refreshed
from knowledge.events import LexiconChanged
from reviewconsole.background import retrying


@task()
def expanded_refresh_task(attempt: int = 1) -> int:
    """Bring every scope's expanded postings to the current lexicon (queued by each lexicon
    change); each scope is one transaction, and a scope already current is skipped, so running
    it again writes nothing twice. Returns the scopes refreshed."""

    with retrying(expanded_refresh_task, attempt):
        return expanded_refreshed()


def expanded_refresh_queue(event: LexiconChanged) -> None:
    """``LexiconChanged``: queue the refresh in the change's transaction, so the task exists
    exactly when the change committed."""
    expanded_refresh_task.enqueue()
