"""Curation's reactions to experience writes, inside the transaction of the write.

Experience knows nothing of curation; these receivers listen to its rows being saved:

- a newly stored case queues a background task (``curation.tasks.case_index_task``, in the
  transaction of the write) that gives it its similarity signature and its near-duplicate links
  (similar cases of the same scope), whichever way it was submitted (console, import or an
  agent's proposal);
- a case or skill leaving ``approved`` (superseded by a reviewed new version, or revoked) closes
  its re-review entries, so that queue empties as the reviews happen.
"""

from __future__ import annotations

from typing import Any

from experience.cases.models import Case, Skill
from experience.core.models import Status


def case_saved(sender: type[Case], instance: Case, created: bool, **kwargs: Any) -> None:
    from curation.rereview import rereview_close_for
    from curation.tasks import case_index_task

    if created:
        case_index_task.enqueue(instance.pk)
        return
    update_fields = kwargs.get("update_fields") or ()
    if "status" in update_fields and instance.status != Status.APPROVED:
        rereview_close_for(instance)


def skill_saved(sender: type[Skill], instance: Skill, created: bool, **kwargs: Any) -> None:
    from curation.rereview import rereview_close_for

    update_fields = kwargs.get("update_fields") or ()
    if not created and "status" in update_fields and instance.status != Status.APPROVED:
        rereview_close_for(instance)
