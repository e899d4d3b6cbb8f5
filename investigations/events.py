"""The event a stored investigation publishes for the apps above ``investigations``
(``reviewconsole.dispatch``)."""

from __future__ import annotations

from dataclasses import dataclass

from investigations.models import Investigation
from reviewconsole.dispatch import Published


@dataclass(frozen=True, kw_only=True)
class InvestigationStored(Published):
    """An investigation just stored."""

    investigation: Investigation
