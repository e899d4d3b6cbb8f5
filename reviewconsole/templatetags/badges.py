"""A status, kind or outcome shown as a badge: ``{{ case.status|badge }}``.

The one place that writes the badge markup: the class names the value (console.css colours
``badge-<value>``), the text is the value translated; a code of several words
(``needs_review``) reads as words, the code itself in the tooltip.
"""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext

register = template.Library()


@register.filter
def code_text(value: object) -> str:
    """A code as people read it: its translation, else its words (``needs review``)."""
    text = str(value)
    shown = gettext(text)
    return text.replace("_", " ") if shown == text else shown


@register.filter
def badge(value: object) -> SafeString:
    text = str(value)
    if "_" not in text:
        return format_html('<span class="badge badge-{}">{}</span>', text, gettext(text))
    # A machine code (``needs_review``): words for people, the code on hover.
    return format_html(
        '<span class="badge badge-{}" title="{}">{}</span>', text, text, code_text(text)
    )
