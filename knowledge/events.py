"""The events knowledge's writes publish for the apps above it (``reviewconsole.dispatch``): a
change of the synonym lexicon (the experience retrieval index refreshes its expanded postings)
and a version submitted for review (curation mails the approvers)."""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.models import Document
from reviewconsole.dispatch import Published


@dataclass(frozen=True, kw_only=True)
class LexiconChanged(Published):
    """A synonym set or deleted."""


@dataclass(frozen=True, kw_only=True)
class DocumentSubmitted(Published):
    """A draft version submitted for review, with its change note."""

    document: Document
