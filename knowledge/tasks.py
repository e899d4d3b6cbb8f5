"""Background task of knowledge search (django-tasks; see ``reviewconsole.background``)."""

from __future__ import annotations

from django_tasks import task

from reviewconsole.background import retrying


@task()
def lexicon_reindex_task(attempt: int = 1) -> int:
    """Bring the search index to the current lexicon (queued by each lexicon change, in its
    transaction). One transaction; searches keep answering under the index's previous lexicon
    until it commits. Returns the versions whose expanded token set changed."""
    from knowledge.lexicon import reindexed

    with retrying(lexicon_reindex_task, attempt):
        return reindexed()
