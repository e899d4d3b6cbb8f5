"""The availability gate as ORM expressions, built (``textsearch.gate``) from the terms
``experience.core.availability`` declares: a query filtered by one of these keeps exactly the
rows whose fields the matching predicate admits (``tests/experience/core/test_availability.py``
checks it on every database).

``prefix`` is the lookup path of the gated row (``"lesson__"`` from a ``LessonCase``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from django.db.models import Q

from experience.core import domain
from experience.core.availability import CITED_CASE_GATE, ITEM_GATE
from textsearch.gate import gate_q as gate_q
from textsearch.gate import term_q as term_q


def available_q(now: datetime, prefix: str = "") -> Q:
    """The rows ``availability.item_available`` admits."""
    return gate_q(ITEM_GATE, now, prefix)


def usable_case_q(now: datetime, prefix: str = "") -> Q:
    """The case rows ``availability.case_usable`` admits."""
    return gate_q(CITED_CASE_GATE, now, prefix)


def admitted_q(scope: Mapping[str, str], now: datetime, prefix: str = "") -> Q:
    """The rows ``domain.admits`` admits: of exactly ``scope``, and available."""
    return Q(**{f"{prefix}{name}": scope[name] for name in domain.SCOPE_FIELDS}) & available_q(
        now, prefix
    )
