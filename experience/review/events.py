"""The events review decisions publish for the apps above ``experience``
(``reviewconsole.dispatch``): what curation does about them is listed in docs/architecture.md,
"Events". What a decision sets in motion inside ``experience`` (the index, the lesson inputs, the
impact) is called by name in the decision, never published."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User

from experience.cases.models import Case, Skill
from experience.lessons.models import Lesson, LessonConflict
from reviewconsole.dispatch import Published


@dataclass(frozen=True, kw_only=True)
class ItemStatusChanged(Published):
    """A case, skill or lesson whose new status was just saved (approved, rejected, superseded,
    revoked, outdated, restored)."""

    item: Case | Skill | Lesson


@dataclass(frozen=True, kw_only=True)
class LessonConflictOpened(Published):
    """A lesson conflict just recorded."""

    conflict: LessonConflict


@dataclass(frozen=True, kw_only=True)
class LessonConflictClosed(Published):
    """A lesson conflict just resolved."""

    conflict: LessonConflict


@dataclass(frozen=True, kw_only=True)
class RunOutcomeReported(Published):
    """A run's outcome just reported (or changed); ``items`` are what the run read, as
    ``(item_id, item_type)``."""

    run_id: str
    outcome: str
    reviewed: bool
    actor: User
    items: tuple[tuple[str, str], ...]
