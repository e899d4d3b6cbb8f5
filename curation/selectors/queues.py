"""How much waits in each curation queue (the curation home page)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from curation.models import Thread
from curation.selectors.proposals import proposal_queue
from curation.selectors.rereview import rereview_queue
from curation.selectors.similarity import near_duplicate_queue
from reviewconsole.tenancy import visible

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

    Viewer = User | AnonymousUser | None


def queue_counts(user: Viewer) -> dict[str, Any]:
    return {
        "near_duplicates": near_duplicate_queue(user).count(),
        "rereview": rereview_queue(user).count(),
        "proposals": proposal_queue(user).count(),
        "threads": visible(Thread.objects.all(), user).count(),
    }
