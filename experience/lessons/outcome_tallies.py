"""Reads of run outcomes: what the reported outcomes say about each item the runs read.

``outcome_tallies`` is how outcomes reach the confidence estimator
(``experience.lessons.domain.confidence``): each run that read an item (or a version the item
superseded or absorbed in a merge: a new version inherits every outcome of its predecessors) and
has a reported ``resolved_by_lead`` or ``lead_was_wrong`` is a vote of the account that reported
it, marked with whether that account held the review permission then (``reviewed``: only such
votes count, in either direction); ``unresolved`` says nothing. Only each run's latest outcome
counts.
``experience.lessons.domain.counted_outcomes`` then folds the votes per account (the rule and its
bound live there).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from django.db import connection
from django.utils.dateparse import parse_datetime

from experience.cases.models import Case, Skill
from experience.lessons import domain as ld
from experience.lessons.models import Lesson
from experience.runs.models import Outcome, Reference, RunOutcome


@dataclass(frozen=True)
class Tally:
    """The outcome votes on one item, one per reporting account."""

    votes: tuple[ld.OutcomeVote, ...] = ()

    def counted(self, *, in_open_conflict: bool = False) -> ld.CountedOutcomes:
        if not self.votes:  # most items: no votes count nothing, whatever the conflict
            return ld.NO_COUNTED_OUTCOMES
        return ld.counted_outcomes(self.votes, in_open_conflict=in_open_conflict)


NONE = Tally()


def outcome_tallies(item_ids: Iterable[str], now: datetime | None = None) -> dict[str, Tally]:
    """The outcome votes per item id (items without any are left out).

    One statement: the references of the items, and of every earlier version of each (found by
    following ``superseded_by`` back through cases, skills and lessons, merges included), joined
    with the outcomes of their runs and grouped per item, outcome and reporting account.
    """
    ids = list(dict.fromkeys(item_ids))
    if not ids:
        return {}
    # item -> account -> [confirmed, refuted, reviewer, confirmed_at, refuted_as_reviewer]
    votes: dict[str, dict[int, list[Any]]] = defaultdict(dict)
    with connection.cursor() as cursor:
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            sql, filters = _votes_statement(len(chunk), now)
            cursor.execute(sql, [*chunk, *chunk, *chunk, *chunk, *filters, *filters])
            for item_id, kind, account, reviewed, latest in cursor.fetchall():
                vote = votes[item_id].setdefault(int(account), [False, False, False, None, False])
                if kind == Outcome.LEAD_WAS_WRONG:
                    vote[1] = True
                    vote[4] = vote[4] or bool(reviewed)
                    continue
                vote[0] = True
                if reviewed:
                    vote[2] = True
                    at = aware_column(latest)
                    if at is not None and (vote[3] is None or at > vote[3]):
                        vote[3] = at
    return {
        item_id: Tally(
            tuple(
                ld.OutcomeVote(
                    account, confirmed, refuted, reviewer, confirmed_at, refuted_by_reviewer
                )
                for account, (
                    confirmed,
                    refuted,
                    reviewer,
                    confirmed_at,
                    refuted_by_reviewer,
                ) in sorted(by.items())
            )
        )
        for item_id, by in votes.items()
    }


def _votes_statement(size: int, now: datetime | None) -> tuple[str, list[Any]]:
    """The votes statement for ``size`` ids and the parameters of each branch's filter; bound as
    the ids three times (the lineage's start, one per table), the ids (direct reads), the
    filter, the filter (inherited reads)."""
    q = connection.ops.quote_name
    marks = ", ".join(["%s"] * size)
    superseded_by = q("superseded_by")

    # Only quoted table and column names and placeholders are formatted in. The versions'
    # filter is the condition of the partial indexes on superseded_by (experience.models).
    def versions(where: str) -> str:
        return " UNION ALL ".join(
            f"SELECT {q('id')} AS later_id, {superseded_by} AS heir_id"  # noqa: S608
            f" FROM {q(model._meta.db_table)} WHERE NOT ({superseded_by} = '') AND {where}"
            for model in (Case, Skill, Lesson)
        )

    filters = f"o.{q('outcome')} IN (%s, %s)"
    branch_params: list[Any] = [Outcome.RESOLVED_BY_LEAD, Outcome.LEAD_WAS_WRONG]
    if now is not None:
        filters += f" AND o.{q('reported_at')} <= %s"
        branch_params.append(connection.ops.adapt_datetimefield_value(now))
    columns = (
        f"o.{q('outcome')}, o.{q('reported_by_id')}, o.{q('reviewed')}, MAX(o.{q('reported_at')})"
    )
    grouping = f"o.{q('outcome')}, o.{q('reported_by_id')}, o.{q('reviewed')}"
    joined = (
        f"{q(Reference._meta.db_table)} r JOIN {q(RunOutcome._meta.db_table)} o"
        f" ON o.{q('run_id')} = r.{q('run_id')}"
    )
    sql = (
        "WITH RECURSIVE lineage(item, heir) AS ("  # noqa: S608
        f"{versions(f'{superseded_by} IN ({marks})')}"
        " UNION SELECT v.later_id, l.heir FROM lineage l JOIN"
        f" ({versions('1 = 1')}) v ON v.heir_id = l.item)"
        f" SELECT r.{q('item_id')}, {columns} FROM {joined}"
        f" WHERE r.{q('item_id')} IN ({marks}) AND {filters}"
        f" GROUP BY r.{q('item_id')}, {grouping}"
        # The (usually empty) lineage drives this branch: CROSS JOIN keeps SQLite from starting
        # at the references or outcomes, which it would scan whole.
        f" UNION ALL SELECT l.heir, {columns} FROM lineage l"
        f" CROSS JOIN {q(Reference._meta.db_table)} r"
        f" JOIN {q(RunOutcome._meta.db_table)} o ON o.{q('run_id')} = r.{q('run_id')}"
        f" WHERE r.{q('item_id')} = l.item AND {filters} GROUP BY l.heir, {grouping}"
    )
    return sql, branch_params


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
