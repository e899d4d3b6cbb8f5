"""Command inputs refused as every other path refuses them, writing nothing (issue 24.10)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django_tasks_db.models import DBTaskResult

from experience.cases.models import Case
from experience.core.models import Status
from experience.core.review import NO_SUCH_SKILL
from experience.retrieval.block import BUDGET_INVALID
from experience.runs.models import Reference, Run
from reviewconsole.cli import FILE_IS_DIRECTORY
from reviewconsole.models import Event
from reviewconsole.reasons import MAX_REASON, REASON_TOO_LONG
from reviewconsole.services import system_agent
from tests.api.conftest import NOW, SCOPE, Demo, demo
from tests.helpers import run_json

pytestmark = pytest.mark.django_db

__all__ = ["demo"]


@pytest.fixture
def at_now(frozen_clock: Callable[[datetime], Any]) -> datetime:
    frozen_clock(NOW)
    return NOW


@pytest.fixture(autouse=True)
def made_system_agent(db: None) -> User:
    """The account recall and run_skill act as, made (and audited) on first use: made here, so
    what a refusal writes is measured alone."""
    return system_agent()


def _written() -> tuple[int, ...]:
    return (
        Run.objects.count(),
        Reference.objects.count(),
        Event.objects.count(),
        DBTaskResult.objects.count(),
    )


def _scope_flags() -> list[str]:
    return [part for name, value in SCOPE.items() for part in (f"--{name}", value)]


def test_restore_of_a_directory_says_it_is_a_directory(tmp_path: Path) -> None:
    status, answer = run_json("restore", str(tmp_path), "--yes")
    assert status != 0
    assert answer == {
        "ok": False,
        "error": FILE_IS_DIRECTORY.format(path=tmp_path),
        "field": "FILE",
    }


@pytest.mark.parametrize("budget", ["abc", "0", "32001"])
def test_recall_budget_is_refused_naming_budget(demo: Demo, budget: str) -> None:
    before = _written()
    status, answer = run_json(
        "recall",
        "券",
        *_scope_flags(),
        "--run-id",
        "r-1",
        "--format",
        "context",
        "--budget",
        budget,
    )
    assert status != 0
    assert answer == {"ok": False, "error": BUDGET_INVALID, "field": "budget"}
    assert _written() == before


def test_review_reason_is_capped_as_the_console_caps_it(
    demo: Demo, reviewer: User, make_user: Callable[[str, str], User]
) -> None:
    case_id = demo.cases[0]
    before = _written()
    # One character over the cap. (The cap is checked when the audit event is recorded, after
    # the revocation's effects ran in this test's immediate task backend: the mail's quoting of
    # a reason is quadratic in its length, and a 100,000-character reason took half an hour.)
    status, answer = run_json(
        "review", "revoke", case_id, "--as", reviewer.username, "--reason", "x" * (MAX_REASON + 1)
    )
    assert status != 0
    assert answer == {"ok": False, "error": REASON_TOO_LONG, "field": "reason"}
    assert Case.objects.get(pk=case_id).status == Status.APPROVED
    assert _written() == before

    status, answer = run_json(
        "review", "revoke", case_id, "--as", reviewer.username, "--reason", "x" * MAX_REASON
    )
    assert (status, answer["status"]) == (0, Status.REVOKED)


def test_review_verify_note_has_the_same_cap(demo: Demo, reviewer: User) -> None:
    (candidate, *_) = demo.candidates
    status, answer = run_json(
        "review",
        "verify",
        candidate,
        "--evidence",
        "diagnosis/0",
        "--as",
        reviewer.username,
        "--note",
        "x" * (MAX_REASON + 1),
    )
    assert status != 0
    assert answer["field"] == "note"


@pytest.mark.parametrize("skill_id", ["skill:nope", "skill:" + "0" * 64])
def test_run_skill_of_an_unknown_id_is_refused_and_writes_nothing(
    demo: Demo, skill_id: str
) -> None:
    before = _written()
    status, answer = run_json(
        "run_skill",
        skill_id,
        *_scope_flags(),
        "--at",
        "2026-09-18T14:00:00+08:00",
        "--known-at",
        "2026-09-18T14:10:00+08:00",
        "--run-id",
        "run-nope",
    )
    assert status != 0
    assert answer["ok"] is False
    assert answer["field"] == "skill_id"
    if skill_id.endswith("0" * 64):
        assert answer["error"] == NO_SUCH_SKILL
    assert not Run.objects.filter(run_id="run-nope").exists()
    assert _written() == before


def test_run_skill_of_another_tenants_skill_answers_as_an_unknown_one(
    demo: Demo, make_user: Callable[[str, str], User]
) -> None:
    status, answer = run_json(
        "run_skill",
        demo.skill,
        *_scope_flags()[:1],
        "other-co",
        *_scope_flags()[2:],
        "--at",
        "2026-09-18T14:00:00+08:00",
        "--known-at",
        "2026-09-18T14:10:00+08:00",
        "--run-id",
        "run-other",
    )
    assert (status, answer) == (1, {"ok": False, "error": NO_SUCH_SKILL, "field": "skill_id"})
    assert not Run.objects.filter(run_id="run-other").exists()
