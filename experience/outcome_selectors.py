"""Reads of run outcomes: what the reported outcomes say about each item the runs read.

``outcome_tallies`` is how outcomes reach the confidence estimator
(``experience.lesson_domain.confidence``): a run reported ``resolved_by_lead`` confirms every
case, skill and lesson it read, ``lead_was_wrong`` refutes each of them, ``unresolved`` says
nothing. Each run counts once per item however often the item was read inside it, and only its
latest reported outcome counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from django.db import connection
from django.utils.dateparse import parse_datetime

from experience.models import Reference
from experience.outcome_models import Outcome, RunOutcome


@dataclass(frozen=True)
class Tally:
    confirming: int = 0
    refuting: int = 0
    # When the latest confirming outcome was reported: a confirmation, as an approval is.
    last_confirmed: datetime | None = None


NONE = Tally()


def outcome_tallies(item_ids: Iterable[str], now: datetime | None = None) -> dict[str, Tally]:
    """Confirming and refuting runs per item id (items with neither are left out).

    One statement: the references of the items joined with the outcomes of their runs, counted
    per item and outcome, with the latest confirming report.
    """
    ids = list(dict.fromkeys(item_ids))
    if not ids:
        return {}
    reference = Reference._meta.db_table
    outcome = RunOutcome._meta.db_table
    quote = connection.ops.quote_name
    params: list[Any] = [Outcome.RESOLVED_BY_LEAD, Outcome.LEAD_WAS_WRONG]
    until = ""
    if now is not None:
        until = f" AND o.{quote('reported_at')} <= %s"
        params.append(connection.ops.adapt_datetimefield_value(now))
    counted: dict[str, dict[str, int]] = {}
    last: dict[str, datetime | None] = {}
    with connection.cursor() as cursor:
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            cursor.execute(
                # Only quoted table and column names and placeholders are formatted in.
                f"SELECT r.{quote('item_id')}, o.{quote('outcome')},"  # noqa: S608
                f" COUNT(DISTINCT r.{quote('run_id')}), MAX(o.{quote('reported_at')})"
                f" FROM {quote(reference)} r JOIN {quote(outcome)} o"
                f" ON o.{quote('run_id')} = r.{quote('run_id')}"
                f" WHERE o.{quote('outcome')} IN (%s, %s){until}"
                f" AND r.{quote('item_id')} IN ({', '.join(['%s'] * len(chunk))})"
                f" GROUP BY r.{quote('item_id')}, o.{quote('outcome')}",
                [*params, *chunk],
            )
            for item_id, kind, runs, latest in cursor.fetchall():
                counted.setdefault(item_id, {})[kind] = int(runs)
                if kind == Outcome.RESOLVED_BY_LEAD:
                    last[item_id] = aware_column(latest)
    return {
        item_id: Tally(
            confirming=by.get(Outcome.RESOLVED_BY_LEAD, 0),
            refuting=by.get(Outcome.LEAD_WAS_WRONG, 0),
            last_confirmed=last.get(item_id),
        )
        for item_id, by in counted.items()
    }


# Ids per statement: well inside every backend's limit on bound parameters.
_CHUNK = 900


def aware_column(value: Any) -> datetime | None:
    """A datetime column as the ORM returns it: aware (UTC where the database keeps no zone)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return _parsed(str(value))


@lru_cache(maxsize=4096)
def _parsed(text: str) -> datetime | None:
    """A datetime column's text (SQLite keeps them as text, UTC): parsed once per text, since
    rows repeat them (a lesson's approval on each of its rows, a batch's shared validity)."""
    parsed = parse_datetime(text)
    if parsed is not None and parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


class OutcomeBatch:
    """Outcome tallies for one call that asks several times (retrieval: the scope's lessons, then
    the returned cases and skills): the first question also reads the ids given ``ahead``, so a
    later question about them is answered from memory instead of another statement."""

    def __init__(self, now: datetime | None, ahead: Iterable[str] = ()) -> None:
        self.now = now
        self._ahead: list[str] | None = list(ahead)
        self._known: dict[str, Tally] = {}
        self._read: set[str] = set()

    def tallies(self, item_ids: Iterable[str]) -> dict[str, Tally]:
        ids = list(dict.fromkeys(item_ids))
        missing = [i for i in ids if i not in self._read]
        ahead, self._ahead = self._ahead or [], None
        if missing:
            wanted = list(dict.fromkeys([*missing, *ahead]))
            self._known.update(outcome_tallies(wanted, self.now))
            self._read.update(wanted)
        return {i: self._known[i] for i in ids if i in self._known}
