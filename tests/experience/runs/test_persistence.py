"""Restart persistence: a file database written by one process is read by a fresh one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.experience.conftest import case_data
from tests.helpers import manage_many_on_sqlite

MANAGE = str(Path(settings.BASE_DIR) / "manage.py")
SCOPE_FLAGS = [
    "--tenant", "teahouse", "--brand", "leaf-and-cup", "--store", "store-002",
    "--campaign", "campaign-b", "--deployment", "release-1",
]  # fmt: skip


def manage(database: Path, *args: str) -> dict[str, Any]:
    """Run one command in a new process against ``database`` and return its JSON object."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}"}
    completed = subprocess.run(  # noqa: S603 - fixed arguments, our own manage.py
        [sys.executable, MANAGE, *args, "--skip-checks"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return json.loads(completed.stdout) if "--json" in args else {}


def written_in_one_process(database: Path, *commands: list[str]) -> list[dict[str, Any]]:
    """``commands`` in one new process against ``database`` (tests/manage_many.py), each one's
    JSON object: the writes before a restart need not each start a process of their own."""
    done = manage_many_on_sqlite(database, *[[*command, "--skip-checks"] for command in commands])
    for command in done:
        assert command.returncode == 0, command.stdout + command.stderr
    return [json.loads(command.stdout) if "--json" in command.args else {} for command in done]


def test_memory_survives_a_restart(sqlite_database: Path, tmp_path: Path) -> None:
    database = sqlite_database
    items = tmp_path / "cases.json"
    # The processes run on the real clock, so the case is valid around the real "now".
    today = datetime.now(UTC)
    window = {
        "valid_from": (today - timedelta(days=30)).isoformat(),
        "valid_to": (today + timedelta(days=365)).isoformat(),
    }
    items.write_text(json.dumps([case_data(**window)], ensure_ascii=False), encoding="utf-8")
    *_, imported = written_in_one_process(
        database,
        ["add_user", "rita", "--role", "reviewer", "--json"],
        ["add_user", "ravi", "--role", "reviewer", "--json"],
        ["import_cases", str(items), "--as", "rita", "--json"],
    )
    case_id = imported["items"][0]["id"]
    # rita's own "verified" check does not count: ravi checks the diagnosis before approving.
    _, approved = written_in_one_process(
        database,
        ["review", "verify", case_id, "--evidence", "diagnosis/0", "--as", "ravi"],
        ["review", "approve", case_id, "--as", "ravi", "--reason", "ok", "--json"],
    )
    assert approved["status"] == "approved"

    # Each call below is a new process: nothing survives but the file.
    recalled = manage(
        database, "recall", "优惠券无法使用", *SCOPE_FLAGS, "--run-id", "run-1", "--json"
    )
    assert [item["id"] for item in recalled["items"]] == [case_id]
    again, revoked = written_in_one_process(
        database,
        ["import_cases", str(items), "--as", "rita", "--json"],
        ["review", "revoke", case_id, "--as", "ravi", "--reason", "x", "--json"],
    )
    assert again["items"][0] == {"index": 0, "id": case_id, "type": "case", "created": False}
    assert revoked["impact"] == {"skills": [], "runs": ["run-1"]}
    after = manage(
        database, "recall", "优惠券无法使用", *SCOPE_FLAGS, "--run-id", "run-2", "--json"
    )
    assert after["items"] == []


@pytest.mark.django_db
def test_recorded_reads_are_the_rows_the_model_reads_back() -> None:
    """Reads are recorded with one hand-written INSERT; the model reads back each
    ``(item, kind)`` once, at the instant given (an offset other than UTC kept as the same
    instant), and an empty read records nothing."""
    from experience.runs.models import Reference
    from experience.runs.records import references_record

    at = datetime(2026, 9, 18, 14, 0, 7, 250_000, tzinfo=timezone(timedelta(hours=8)))
    reads = [("case:" + "a" * 64, "case"), ("skill:" + "b" * 64, "skill")]
    references_record(run_id="run-rows", items=iter(reads), at=at)
    references_record(run_id="run-empty", items=[], at=at)
    stored = Reference.objects.filter(run_id="run-rows").order_by("item_id")
    assert [(r.item_id, r.item_type, r.read_at) for r in stored] == [(i, k, at) for i, k in reads]
    assert not Reference.objects.filter(run_id="run-empty").exists()
