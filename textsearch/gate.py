"""A gate's terms (``textsearch.domain.Term``) as an ORM filter: a query filtered by
:func:`gate_q` keeps exactly the rows whose fields :func:`textsearch.domain.gate_holds` admits
(the clients' database tests hold the two together on every database).

``prefix`` is the lookup path of the gated row (``"lesson__"`` from a ``LessonCase``,
``"document__"`` from a ``DocumentStore``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Q

from textsearch.domain import Comparison, Term, instant_of

# SQL's NULL comparisons are never true, as a missing time never passes a term (unless the
# term names a missing end open, which is asked for explicitly).
_LOOKUPS = {
    Comparison.IS: "exact",
    Comparison.AT_OR_BEFORE_NOW: "lte",
    Comparison.AFTER_NOW: "gt",
}


def term_q(term: Term, now: Any, prefix: str = "") -> Q:
    value = term.value if term.comparison is Comparison.IS else instant_of(term, now)
    condition = Q(**{f"{prefix}{term.field}__{_LOOKUPS[term.comparison]}": value})
    if term.open_when_missing:
        condition = Q(**{f"{prefix}{term.field}__isnull": True}) | condition
    return condition


def gate_q(terms: Sequence[Term], now: Any, prefix: str = "") -> Q:
    """The rows ``terms`` admit at ``now`` (an instant, or instants by name)."""
    condition = Q()
    for term in terms:
        condition &= term_q(term, now, prefix)
    return condition
