"""Who read memory under a run id: the accounts that own the run and may report its outcome."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from experience.outcome_models import RunReader

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def reader_record(*, run_id: str, reader: User, at: datetime) -> None:
    """Remember that ``reader`` read memory under ``run_id`` (idempotent)."""
    RunReader.objects.get_or_create(run_id=run_id, reader=reader, defaults={"first_read_at": at})
