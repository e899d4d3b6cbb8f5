"""The event a case's storage publishes for the apps above ``experience`` (``reviewconsole.dispatch``)."""

from __future__ import annotations

from dataclasses import dataclass

from experience.cases.models import Case
from reviewconsole.dispatch import Published


@dataclass(frozen=True, kw_only=True)
class CaseStored(Published):
    """A new case row: submitted, proposed by an agent, imported, re-certified or built from a
    thread."""

    case: Case
