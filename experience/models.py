"""The app's models, gathered where Django looks for them.

Each subject keeps its rows in its own package (``core``, ``cases``, ``runs``, ``lessons``,
``index``); this module only imports them so that Django registers them with the app. Code
imports a model from its own package, never from here (docs/architecture.md).
"""

from experience.cases.models import Case, Evidence, EvidenceCheck, Skill, SkillCase
from experience.index.models import IndexDelta, IndexEntry, IndexPosting, IndexScope
from experience.lessons.models import Lesson, LessonCase, LessonConflict
from experience.runs.models import (
    Reference,
    RevocationImpact,
    Run,
    RunCitation,
    RunFollowUp,
    RunOutcome,
    RunOwner,
)

__all__ = [
    "Case",
    "Evidence",
    "EvidenceCheck",
    "IndexDelta",
    "IndexEntry",
    "IndexPosting",
    "IndexScope",
    "Lesson",
    "LessonCase",
    "LessonConflict",
    "Reference",
    "RevocationImpact",
    "Run",
    "RunCitation",
    "RunFollowUp",
    "RunOutcome",
    "RunOwner",
    "Skill",
    "SkillCase",
]
