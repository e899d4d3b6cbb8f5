"""A status, kind or outcome shown as a badge: ``{{ case.status|badge }}``.

The one place that writes the badge markup: the class names the value (console.css colours
``badge-<value>``), the text is the value translated.
"""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext

register = template.Library()


@register.filter
def badge(value: object) -> SafeString:
    text = str(value)
    return format_html('<span class="badge badge-{}">{}</span>', text, gettext(text))
