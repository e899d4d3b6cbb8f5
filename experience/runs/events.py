"""The event a stored skill run publishes for the apps above ``experience``
(``reviewconsole.dispatch``)."""

from __future__ import annotations

from dataclasses import dataclass

from experience.runs.models import Run
from reviewconsole.dispatch import Published


@dataclass(frozen=True, kw_only=True)
class SkillRunStored(Published):
    """A skill run just stored."""

    run: Run
