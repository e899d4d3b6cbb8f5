"""How pages show an item id in little room: ``{{ item.id|short_id }}``.

The one place that decides the short form: a case or skill id shows its kind and the first
``SHOWN_HEX`` hex digits of its digest, and the full id in a ``title`` attribute. An id that is
short already (``doc:KEY@N``) or that names no item shows whole.
"""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from reviewconsole import itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.itemids import Shape

register = template.Library()

SHOWN_HEX = 12


def shortened(text: str) -> str:
    """The short form of ``text``: ``case:0123456789ab…`` for a content-named id, else ``text``."""
    try:
        item = itemids.parse(text)
    except ValidationFailure:
        return text
    if item.kind.shape is not Shape.DIGEST:
        return text
    return f"{item.kind.prefix}{item.digest[:SHOWN_HEX]}…"


@register.filter
def short_id(value: object) -> SafeString | str:
    if value is None or value == "":
        return ""
    text = str(value)
    return format_html('<span class="mono" title="{}">{}</span>', text, shortened(text))
