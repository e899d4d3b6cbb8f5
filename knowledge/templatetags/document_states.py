"""What a document version's page and rows say of its state beyond its status."""

from __future__ import annotations

from django import template

from knowledge.models import Document
from reviewconsole import clock

register = template.Library()


@register.filter
def valid_from_passed(document: Document) -> bool:
    """Not yet approved, and its ``valid_from`` is already past: it applies from its approval."""
    return document.valid_from_passed(clock.now())
