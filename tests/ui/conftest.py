"""Console fixtures: one user per role with a CSRF-enforcing client, and review data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from experience.cases.models import Case, Skill
from experience.runs.models import Run
from knowledge.services import documents_import
from reviewconsole.cli import read_json_file
from tests.ui.factories import approved_case, approved_skill, record_run, submit_case

ROLES = ("anonymous", "agent", "operator", "reviewer", "admin")


def csrf_client(user: User | None) -> Client:
    """A browser-like client: CSRF enforced, a token cookie from a real page."""
    client = Client(enforce_csrf_checks=True)
    if user is not None:
        client.force_login(user)
    # Every page, a 403 included, carries the token (the language switcher posts with it).
    client.get("/" if user is not None else "/accounts/login/")
    return client


def csrf_token(client: Client) -> str:
    return client.cookies["csrftoken"].value


@pytest.fixture
def users(
    agent: User, operator: User, reviewer: User, admin_user: User, second_reviewer: User
) -> dict[str, User | None]:
    return {
        "anonymous": None,
        "agent": agent,
        "operator": operator,
        "reviewer": reviewer,
        "admin": admin_user,
        "second_reviewer": second_reviewer,
    }


@pytest.fixture
def knowledge(operator: User) -> None:
    documents_import(
        items=read_json_file(str(Path(settings.BASE_DIR) / "fixtures" / "knowledge.json")),
        actor=operator,
    )


@pytest.fixture
def candidate(operator: User) -> Case:
    """A candidate case submitted by the operator, nothing checked yet."""
    return submit_case(operator, incident="INC-UI-CANDIDATE")


@pytest.fixture
def memory(operator: User, reviewer: User, second_reviewer: User) -> dict[str, Any]:
    """Two approved cases of distinct incidents, an approved skill citing them, and a run."""
    first = approved_case(submitter=operator, reviewer=reviewer, incident="INC-UI-1")
    second = approved_case(submitter=operator, reviewer=reviewer, incident="INC-UI-2")
    skill: Skill = approved_skill(
        submitter=operator, reviewer=second_reviewer, case_ids=[first.id, second.id]
    )
    run: Run = record_run("run-ui-1", skill, [first.id, second.id])
    return {"cases": [first, second], "skill": skill, "run": run}
