"""``run_on_temporary_database`` / ``enter_temporary_database``: the one way a command runs on
a temporary database, never on the configured one."""

from __future__ import annotations

import json
import os
import subprocess
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections

from reviewconsole import temporary_database
from reviewconsole.cli import CommandRefused
from reviewconsole.errors import ValidationFailure
from reviewconsole.temporary_database import (
    INNER_FLAG,
    NOT_TEMPORARY,
    TEMPORARY_DATABASE_ENV,
    enter_temporary_database,
    run_on_temporary_database,
)


class FakeRun:
    """Stands in for ``subprocess.run``: records the call, answers with a prepared result."""

    def __init__(self, *, returncode: int = 0, stdout: str = "", stderr: str = "") -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr
        self.argv: list[str] = []
        self.env: dict[str, str] = {}
        self.database_existed_dir = False

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.argv, self.env = argv, kwargs["env"]
        self.timeout = kwargs["timeout"]
        self.database_existed_dir = Path(self.env[TEMPORARY_DATABASE_ENV]).parent.is_dir()
        return subprocess.CompletedProcess(argv, self.returncode, self.stdout, self.stderr)


@pytest.fixture
def fake_run(monkeypatch: pytest.MonkeyPatch) -> FakeRun:
    fake = FakeRun(stdout=json.dumps({"ok": True, "answer": 42}))
    monkeypatch.setattr("reviewconsole.temporary_database.subprocess.run", fake)
    return fake


def test_the_inner_command_runs_on_a_fresh_database_that_is_gone_afterwards(
    fake_run: FakeRun,
) -> None:
    result = run_on_temporary_database("replay", "FILE", "--memory", "demo", timeout=7)
    assert result == {"ok": True, "answer": 42}
    database = fake_run.env[TEMPORARY_DATABASE_ENV]
    assert fake_run.env["DATABASE_URL"] == f"sqlite:///{database}"
    assert database != str(connections["default"].settings_dict["NAME"])
    assert fake_run.database_existed_dir
    assert not Path(database).parent.exists()
    assert fake_run.argv[1].endswith("manage.py")
    assert fake_run.argv[2:] == [
        "replay",
        INNER_FLAG,
        "FILE",
        "--memory",
        "demo",
        "--json",
        "--skip-checks",
    ]
    assert fake_run.timeout == 7


def test_an_inner_refusal_is_raised_again_with_its_field(fake_run: FakeRun) -> None:
    fake_run.returncode = 1
    fake_run.stdout = json.dumps({"ok": False, "error": "changed", "field": "FILE"})
    with pytest.raises(ValidationFailure) as failure:
        run_on_temporary_database("replay", timeout=7)
    assert (failure.value.field, failure.value.message) == ("FILE", "changed")


def test_an_inner_refusal_without_a_field_names_the_command(fake_run: FakeRun) -> None:
    fake_run.returncode = 1
    fake_run.stdout = json.dumps({"ok": False, "error": "failed unexpectedly"})
    with pytest.raises(ValidationFailure) as failure:
        run_on_temporary_database("experience_demo", timeout=7)
    assert failure.value.field == "experience_demo"


def test_an_inner_refusal_with_more_details_is_forwarded_whole(fake_run: FakeRun) -> None:
    payload = {"ok": False, "error": "leaked", "field": "tickets[0]", "leaks": [{"x": 1}]}
    fake_run.returncode = 1
    fake_run.stdout = json.dumps(payload)
    with pytest.raises(CommandRefused) as refusal:
        run_on_temporary_database("replay", timeout=7)
    assert refusal.value.payload == payload


def test_a_crash_without_json_reports_the_end_of_stderr(fake_run: FakeRun) -> None:
    fake_run.returncode = 1
    fake_run.stdout = ""
    fake_run.stderr = "x" * 3000 + "Traceback: boom"
    with pytest.raises(ValidationFailure) as failure:
        run_on_temporary_database("replay", timeout=7)
    assert failure.value.field == "replay"
    assert failure.value.message.endswith("Traceback: boom")
    assert len(failure.value.message) < 2100


@pytest.mark.django_db
def test_the_inner_side_refuses_the_configured_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    migrated: list[str] = []
    monkeypatch.setattr(temporary_database, "call_command", lambda name, **_: migrated.append(name))
    monkeypatch.delenv(TEMPORARY_DATABASE_ENV, raising=False)
    with pytest.raises(ValidationFailure) as failure:
        enter_temporary_database()
    assert (failure.value.field, failure.value.message) == (INNER_FLAG, NOT_TEMPORARY)
    monkeypatch.setenv(TEMPORARY_DATABASE_ENV, os.path.join("elsewhere", "temporary.sqlite3"))
    with pytest.raises(ValidationFailure):
        enter_temporary_database()
    assert migrated == []


@pytest.mark.django_db
def test_the_inner_side_migrates_the_temporary_database(monkeypatch: pytest.MonkeyPatch) -> None:
    migrated: list[str] = []
    monkeypatch.setattr(temporary_database, "call_command", lambda name, **_: migrated.append(name))
    monkeypatch.setenv(TEMPORARY_DATABASE_ENV, str(connections["default"].settings_dict["NAME"]))
    enter_temporary_database()
    assert migrated == ["migrate"]


@pytest.mark.django_db
@pytest.mark.parametrize("command", ["experience_demo", "replay"])
def test_both_commands_refuse_the_inner_flag_on_the_configured_database(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TEMPORARY_DATABASE_ENV, raising=False)
    shipped = Path(settings.BASE_DIR) / "fixtures" / "heldout" / "tickets.json"
    arguments = [str(shipped)] if command == "replay" else []
    out = StringIO()
    with pytest.raises(CommandError):
        call_command(command, *arguments, INNER_FLAG, "--json", stdout=out)
    assert json.loads(out.getvalue())["error"] == NOT_TEMPORARY
