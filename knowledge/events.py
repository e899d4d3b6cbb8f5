"""The event a change of the synonym lexicon publishes for the apps above ``knowledge``
(``reviewconsole.dispatch``): the experience retrieval index refreshes its expanded postings."""

from __future__ import annotations

from dataclasses import dataclass

from reviewconsole.dispatch import Published


@dataclass(frozen=True, kw_only=True)
class LexiconChanged(Published):
    """A synonym set or deleted."""
