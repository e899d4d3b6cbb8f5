"""Writes of runs: the reads recorded under a run id and a stored skill run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import Field

from experience.core import domain
from experience.runs.claims import run_claim
from experience.runs.events import SkillRunStored
from experience.runs.models import Reference, Run, RunCitation
from reviewconsole.audit import event_record
from reviewconsole.dispatch import dispatch
from reviewconsole.models import Action
from reviewconsole.reasons import reason_clipped

# The one run-id rule is the core's (reviewconsole.runids: the API's bodies and ticket-set files
# share it); retrieval and the context block still import it from here with the writers.
from reviewconsole.runids import RUN_ID_INVALID as RUN_ID_INVALID
from reviewconsole.runids import validate_run_id as validate_run_id
from reviewconsole.writelock import write_retried

_REFERENCE_COLUMNS = ("run_id", "item_id", "item_type", "in_block", "read_at")


def references_record(
    *, run_id: str, items: Iterable[tuple[str, str]], at: datetime, in_block: bool = False
) -> None:
    """One Reference per ``(item_id, item_type)`` read inside ``run_id``, all read at ``at``;
    ``in_block`` when they were read into a context block (a revocation's impact names those).

    Every read writes here (retrieval, the context block, reads by id, skill runs), a row per
    returned item, so the rows go in as one parameterised INSERT of the model's own table and
    columns, the time prepared once by the model's field: ``bulk_create`` would build and
    prepare a model instance per row, which costs more than the database's insert
    (``bench/bench_experience.py`` prints both). Like ``bulk_create``, it sends no signals.
    """
    rows = [(run_id, item_id, kind, in_block) for item_id, kind in items]
    if not rows:
        return
    meta = Reference._meta
    fields = [f for name in _REFERENCE_COLUMNS if isinstance(f := meta.get_field(name), Field)]
    read_at = fields[-1].get_db_prep_save(at, connection)
    quote = connection.ops.quote_name
    table = quote(meta.db_table)
    columns = ", ".join(quote(field.column or field.name) for field in fields)
    places = ", ".join(["%s"] * len(fields))
    # The model's own table and column names, quoted; every value is a parameter.
    sql = f"INSERT INTO {table} ({columns}) VALUES ({places})"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.executemany(sql, [(*row, read_at) for row in rows])


@write_retried
@transaction.atomic
def run_store(
    *,
    run_id: str,
    skill_id: str,
    scope: Mapping[str, str | None],
    context: Mapping[str, Any],
    steps: list[dict[str, Any]],
    observations: list[dict[str, Any]],
    cases: list[str],
    status: str,
    reason: str,
    tool_calls: int,
    started_at: datetime,
    finished_at: datetime,
    cited_documents: Iterable[str],
    actor: User,
    prompt: Mapping[str, Any] | None = None,
) -> Run:
    # Stored under the run's stored id (``run_id`` is the name its caller chose).
    run_id = run_claim(run_id=run_id, actor=actor, tenant=scope.get("tenant"), at=started_at).run_id
    run = Run.objects.create(
        run_id=run_id,
        skill_id=skill_id[:80],
        context=dict(context),
        steps=steps,
        observations=observations,
        cases=cases,
        status=status,
        reason=reason,
        tool_calls=tool_calls,
        started_at=started_at,
        finished_at=finished_at,
        actor=actor,
        prompt=dict(prompt or {}),
        **{name: (scope.get(name) or "")[:64] for name in domain.SCOPE_FIELDS},
    )
    # Curation, above: the run's after-action review, queued.
    dispatch(SkillRunStored(run=run, now=finished_at))
    RunCitation.objects.bulk_create(
        RunCitation(run=run, run_id_text=run_id, document_id=document_id)
        for document_id in sorted(set(cited_documents))
    )
    event_record(
        actor=actor,
        action=Action.SKILL_RUN,
        target=skill_id[:200],
        # The run's own account of itself (tool errors, evidence ids) may run long; the run row
        # keeps it whole, the event its start.
        reason=reason_clipped(reason),
        details={"run_id": run_id, "status": status, "tool_calls": tool_calls},
        at=finished_at,
    )
    return run
