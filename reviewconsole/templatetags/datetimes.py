"""The ``date`` and ``time`` filters, built into every template in place of Django's own.

They format exactly as Django's do, in the current time zone, except for an instant whose local
time cannot be represented (see ``reviewconsole.display``): that one is shown in UTC, marked
``UTC`` unless the format names the zone itself, instead of failing the page.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.template import defaultfilters
from django.utils import timezone

from reviewconsole.display import ShownInUtc, showable

register = template.Library()

# Format characters that already say which zone (or offset) the text is in.
ZONE_FORMATS = frozenset("eOPTZcrU")


def _formatted(value: Any, arg: str | None, formatter: Any) -> str:
    shown = showable(value)
    if isinstance(shown, datetime) and not isinstance(shown, ShownInUtc):
        # What Django does before its own filters run: aware values in the current zone.
        shown = timezone.localtime(shown) if timezone.is_aware(shown) else shown
    text: str = formatter(shown, arg)
    if isinstance(shown, ShownInUtc) and text and not ZONE_FORMATS & set(arg or ""):
        text += " UTC"
    return text


@register.filter(is_safe=False)
def date(value: Any, arg: str | None = None) -> str:
    return _formatted(value, arg, defaultfilters.date)


@register.filter(is_safe=False)
def time(value: Any, arg: str | None = None) -> str:
    return _formatted(value, arg, defaultfilters.time)


# A name of its own, for Python code and for templates that want to be explicit.
when = date


@register.filter(is_safe=False)
def instant(value: Any, arg: str | None = "Y-m-d H:i:s") -> str:
    """An instant kept as ISO text (in JSON: a run's context, a search result) shown like any
    stored datetime: in the console's time zone. Text that is no ISO instant shows as it is."""
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
        if timezone.is_naive(parsed):
            return value
        value = parsed
    if not isinstance(value, datetime):
        return "" if value is None else str(value)
    return date(value, arg)
