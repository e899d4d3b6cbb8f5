"""The event a lesson's storage publishes for the apps above ``experience``
(``reviewconsole.dispatch``)."""

from __future__ import annotations

from dataclasses import dataclass

from experience.lessons.models import Lesson
from reviewconsole.dispatch import Published


@dataclass(frozen=True, kw_only=True)
class LessonStored(Published):
    """A new candidate lesson row: submitted, proposed by an agent, imported, drafted from a run,
    merged or narrowed."""

    lesson: Lesson
