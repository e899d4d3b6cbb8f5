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
from datetime import datetime

from django.db.models import Count

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
    """Confirming and refuting runs per item id (items with neither are left out)."""
    ids = list(dict.fromkeys(item_ids))
    if not ids:
        return {}
    counted: dict[str, dict[str, tuple[int, datetime | None]]] = {}
    for outcome in (Outcome.RESOLVED_BY_LEAD, Outcome.LEAD_WAS_WRONG):
        reports = RunOutcome.objects.filter(outcome=outcome)
        if now is not None:
            reports = reports.filter(reported_at__lte=now)
        rows = (
            Reference.objects.filter(item_id__in=ids, run_id__in=reports.values("run_id"))
            .values("item_id")
            .annotate(runs=Count("run_id", distinct=True))
        )
        for row in rows:
            counted.setdefault(row["item_id"], {})[outcome] = (row["runs"], None)
    last_confirmations = _last_confirmations(counted, now)
    return {
        item_id: Tally(
            confirming=by.get(Outcome.RESOLVED_BY_LEAD, (0, None))[0],
            refuting=by.get(Outcome.LEAD_WAS_WRONG, (0, None))[0],
            last_confirmed=last_confirmations.get(item_id),
        )
        for item_id, by in counted.items()
    }


def _last_confirmations(
    counted: dict[str, dict[str, tuple[int, datetime | None]]], now: datetime | None
) -> dict[str, datetime]:
    confirmed = [i for i, by in counted.items() if by.get(Outcome.RESOLVED_BY_LEAD)]
    if not confirmed:
        return {}
    reports = RunOutcome.objects.filter(outcome=Outcome.RESOLVED_BY_LEAD)
    if now is not None:
        reports = reports.filter(reported_at__lte=now)
    times = dict(reports.values_list("run_id", "reported_at"))
    last: dict[str, datetime] = {}
    for item_id, run_id in Reference.objects.filter(
        item_id__in=confirmed, run_id__in=list(times)
    ).values_list("item_id", "run_id"):
        at = times[run_id]
        if item_id not in last or at > last[item_id]:
            last[item_id] = at
    return last
