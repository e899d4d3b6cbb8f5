"""import_thread and curate: one JSON object on stdout, refusals name the path, nothing written."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User

from curation.models import ReReview, Thread
from experience.cases.models import Case
from tests.curation.conftest import THREAD_FILE, THREAD_ID, thread_json
from tests.experience.conftest import NOW, case_data
from tests.helpers import run_json


def test_import_thread_reports_the_thread_and_is_idempotent(operator: User) -> None:
    status, result = run_json("import_thread", str(THREAD_FILE), "--as", "olivia")
    assert status == 0
    assert result == {
        "ok": True,
        "thread_id": THREAD_ID,
        "tenant": "teahouse",
        "messages": 11,
        "created": True,
    }
    status, result = run_json("import_thread", str(THREAD_FILE), "--as", "olivia")
    assert (status, result["created"]) == (0, False)


def test_import_thread_refuses_naming_the_json_path(operator: User, tmp_path: Path) -> None:
    data = thread_json()
    data["messages"][2]["time"] = "2026-09-18 14:06"
    bad = tmp_path / "thread.json"
    bad.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    status, result = run_json("import_thread", str(bad), "--as", "olivia")
    assert status == 1
    assert result["ok"] is False and result["field"] == "messages[2].time"
    assert not Thread.objects.exists()


def test_import_thread_refuses_malformed_json_and_unknown_users(
    operator: User, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    status, result = run_json("import_thread", str(broken), "--as", "olivia")
    assert (status, result["field"]) == (1, "FILE")
    status, result = run_json("import_thread", str(THREAD_FILE), "--as", "nobody")
    assert (status, result["field"]) == (1, "--as")


def test_import_thread_needs_a_role_that_submits_cases(agent: User) -> None:
    status, result = run_json("import_thread", str(THREAD_FILE), "--as", "agent-7")
    assert status == 1 and result["unmet"] == ["not_permitted"]
    assert not Thread.objects.exists()


def test_curate_prints_what_entered_the_queues(
    approve: Callable[..., Case], frozen_clock: Callable[[datetime], Any]
) -> None:
    case = approve(case_data(incident="INC-1"))
    later = NOW + timedelta(days=120)
    status, result = run_json("curate", "--now", later.isoformat(), "--days", "90")
    assert status == 0
    assert result["stale_after_days"] == 90
    assert [(e["item_id"], e["reason"]) for e in result["rereview"]] == [(case.id, "unused")]
    assert result["proposals"] == [] and result["closed"] == []
    assert ReReview.objects.count() == 1
    status, result = run_json("curate", "--now", later.isoformat(), "--days", "90")
    assert (status, result["rereview"]) == (0, [])


def test_curate_refuses_a_naive_time(db: None) -> None:
    status, result = run_json("curate", "--now", "2026-10-01T12:00:00")
    assert (status, result["field"]) == (1, "--now")
