"""How the replay pages say a report's codes: a required check, an ending, a better direction.

The report's JSON keeps the codes (``config:store-scope``, ``resolved_unexplained``); a page
says them in words.
"""

from __future__ import annotations

from django import template
from django.utils.translation import gettext_lazy as _

from evaluation.domain import AWAITING_CUSTOMER, CLAIMED, ESCALATED, RESOLVED_UNEXPLAINED
from reviewconsole.display import local_times_in

register = template.Library()


CHECK_KINDS = {
    "knowledge": _("check the knowledge base: %(name)s"),
    "config": _("check the live configuration: %(name)s"),
    "confirm": _("confirm with the customer: %(name)s"),
}
ENDINGS = {
    CLAIMED: _("claimed a cause"),
    RESOLVED_UNEXPLAINED: _("resolved without an explained cause"),
    AWAITING_CUSTOMER: _("waiting for the customer"),
    ESCALATED: _("escalated to a person"),
}


def _words(slug: str) -> str:
    return slug.replace("-", " ").replace("_", " ")


@register.filter
def check_words(code: object) -> str:
    """``config:store-scope`` -> "check the live configuration: store scope"."""
    kind, _, name = str(code).partition(":")
    sentence = CHECK_KINDS.get(kind)
    return str(sentence) % {"name": _words(name)} if sentence else str(code)


@register.filter
def ending_words(code: object) -> str:
    return str(ENDINGS.get(str(code), _words(str(code))))


@register.filter
def cause_words(code: object) -> str:
    """A ticket set's cause slug (``store-scope-missing``) as words."""
    return _words(str(code)) if code else ""


@register.filter
def local_times(text: object) -> str:
    """A stored note's ISO times (``approved at 2026-09-18T06:30:00+00:00``) in the viewer's
    zone, as every other time on the page."""
    return local_times_in(str(text))
