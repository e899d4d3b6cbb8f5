"""``{{ thread.anchor|anchor_label }}``: what a review thread is about, as a page says it."""

from __future__ import annotations

from django import template

from reviewconsole.conversations import anchor_label as label_of

register = template.Library()


@register.filter
def anchor_label(anchor: str) -> str:
    return label_of(anchor)
