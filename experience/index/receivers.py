"""Keep the retrieval index in step with the items it holds and the lexicon.

Connected once by ``ExperienceConfig.ready``; every receiver runs in the writer's transaction.
"""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save

from experience.cases.models import Case, Skill
from experience.index import lesson_inputs
from experience.index.postings import item_saved
from experience.index.tasks import expanded_refresh_task
from experience.lessons.models import Lesson
from knowledge.models import Synonym


def _lexicon_changed(**kwargs: object) -> None:
    # In the lexicon change's transaction: the task exists exactly when the change committed.
    expanded_refresh_task.enqueue()


def receivers_connect() -> None:
    for model in (Case, Skill, Lesson):
        post_save.connect(
            item_saved, sender=model, dispatch_uid=f"experience.index.{model.__name__}"
        )
    post_save.connect(_lexicon_changed, sender=Synonym, dispatch_uid="experience.index.lexicon")
    post_delete.connect(
        _lexicon_changed, sender=Synonym, dispatch_uid="experience.index.lexicon.delete"
    )
    # A lesson's entry keeps its confidence inputs: every change to them rewrites it.
    lesson_inputs.receivers_connect()
