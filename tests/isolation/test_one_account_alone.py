"""The two-account sweep: no single account removes, restores or approves memory alone.

Issue 37 (items 1 and 2). Two accounts act: an agent (a bearer token for the API and MCP, a
password for the console) and a reviewer, who submitted the memory (another reviewer approved
it). The agent refutes what it read by every path an outcome takes (the API, MCP, the
``run_outcome`` command, the run page's outcome form) and nothing leaves retrieval or the context
block; the reviewer cannot restore her own outdated lesson by any path (the console, the
re-review queue, a command, the admin) nor approve her own candidate; the agent approves and
restores nothing. Memory leaves reuse by a reviewer's decision (her report of the run's outcome),
and comes back by another reviewer's.
"""

# The experience fixtures are imported; pytest passes them as same-named arguments.
# ruff: noqa: F811

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from io import StringIO
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from mcp import Client as McpClient

from agentapi.mcp_server import build_server
from agentapi.services import token_create
from curation.models import ReReview, ReReviewReason, ReReviewStatus
from curation.scan import curation_scan
from experience.cases import selectors, services
from experience.cases.models import Case, Skill
from experience.cases.schema import parse_skill
from experience.cases.tools import tool_specs
from experience.core.models import Status
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import Lesson
from experience.retrieval.block import experience_context
from experience.retrieval.service import retrieve_experience
from experience.review import decisions
from experience.review.outcomes import run_outcome_report
from reviewconsole import clock
from reviewconsole.models import Action, Event
from reviewconsole.roles import Role
from tests.experience.conftest import (  # noqa: F401 (fixtures)
    SCOPE,
    approved_case,
    at_now,
    case_data,
    skill_data,
    submit_case,
)
from tests.experience.lessons.test_lessons import (  # noqa: F401 (fixtures)
    approved_lesson,
    lesson_data,
    submit_lesson,
    two_cases,
)

pytestmark = pytest.mark.django_db

WORDS = "优惠券 无法使用"
PASSWORD = "x-Pass-12345"


@dataclass
class World:
    agent: User
    token: str
    reviewer: User  # submitted everything below; another reviewer approved it
    lesson: Lesson
    cases: list[Case]
    skill: Skill
    candidate: Case  # the reviewer's own, not yet approved


@pytest.fixture
def world(
    approved_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    submit_case: Callable[..., Case],
    agent: User,
    reviewer: User,
    second_reviewer: User,
) -> World:
    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))  # 0.667, in recall
    skill, _ = services.skill_submit(
        content=parse_skill(skill_data([c.id for c in two_cases]), tool_specs()), actor=reviewer
    )
    decisions.skill_approve(skill=skill, actor=second_reviewer, reason="two incidents")
    candidate = submit_case(case_data(incident="INC-9", title="二号店优惠券：候选"))
    agent.set_password(PASSWORD)
    agent.save(update_fields=["password"])
    return World(
        agent=agent,
        token=token_create(user=agent, name="sweep").text,
        reviewer=reviewer,
        lesson=lesson,
        cases=two_cases,
        skill=selectors.skill_get(skill.id),
        candidate=candidate,
    )


def memory_state() -> dict[str, str]:
    """Every item's status: what the sweep holds unchanged."""
    return {
        item_id: status
        for model in (Case, Skill, Lesson)
        for item_id, status in model.objects.values_list("id", "status")
    }


def in_reuse(world: World, actor: User, probe: str) -> tuple[set[str], set[str]]:
    """What retrieval returns and what the context block holds, read under fresh run ids."""
    found = retrieve_experience(WORDS, SCOPE, clock.now(), f"{probe}-r", 10, actor=actor)
    block = experience_context(WORDS, SCOPE, clock.now(), f"{probe}-b", 4000, actor=actor)
    return {i["id"] for i in found["items"]}, {i["id"] for i in block["items"]}


def confidences(world: World) -> dict[str, float]:
    now = clock.now()
    found = lesson_selectors.item_confidences([c.id for c in world.cases], [world.skill.id], now)
    values = {item_id: score.value for item_id, score in found.items()}
    values[world.lesson.id] = lesson_selectors.lesson_confidence(
        lesson_selectors.lesson_get(world.lesson.id), now
    ).value
    return values


# --- the agent's refutations, by every path --------------------------------------------------


def refute_over_api(world: World, run_id: str) -> None:
    headers = {"Authorization": f"Bearer {world.token}"}
    client = Client(headers=headers)
    body = {"query": WORDS, "scope": dict(SCOPE), "run_id": run_id}
    read = client.post(
        "/api/v1/experience/retrieve", data=json.dumps(body), content_type="application/json"
    )
    assert read.status_code == 200, read.content
    answer = client.post(
        f"/api/v1/runs/{run_id}/outcome",
        data=json.dumps({"outcome": "lead_was_wrong"}),
        content_type="application/json",
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["counts"] is False


def refute_over_mcp(world: World, run_id: str) -> None:
    server = build_server(world.token, manage_connections=False)

    async def scenario() -> Any:
        async with McpClient(server) as client:
            read = await client.call_tool(
                "retrieve_experience", {"query": WORDS, "scope": dict(SCOPE), "run_id": run_id}
            )
            assert not read.is_error
            return await client.call_tool(
                "run_outcome", {"run_id": run_id, "outcome": "lead_was_wrong"}
            )

    answer = async_to_sync(scenario)()
    assert not answer.is_error
    assert answer.structured_content["counts"] is False


def refute_by_command(world: World, run_id: str) -> None:
    retrieve_experience(WORDS, SCOPE, clock.now(), run_id, 10, actor=world.agent)
    out = StringIO()
    call_command(
        "run_outcome", run_id, "--outcome", "lead_was_wrong", "--as", world.agent.username,
        "--json", stdout=out,
    )  # fmt: skip
    assert json.loads(out.getvalue())["counts"] is False


def refute_on_the_console(world: World, run_id: str) -> None:
    """Agents are service accounts: the console refuses them at the door, its outcome form
    included (a reviewer's report there is a reviewer's decision: the control test below)."""
    retrieve_experience(WORDS, SCOPE, clock.now(), run_id, 10, actor=world.agent)
    client = Client()
    assert client.login(username=world.agent.username, password=PASSWORD)
    answer = client.post(
        reverse("experience:run-outcome", args=[run_id]), {"outcome": "lead_was_wrong"}
    )
    assert answer.status_code == 403


PATHS = {
    "api": refute_over_api,
    "mcp": refute_over_mcp,
    "command": refute_by_command,
    "console": refute_on_the_console,
}


@pytest.mark.parametrize("path", list(PATHS))
def test_an_agents_refutation_takes_nothing_out_by_any_path(world: World, path: str) -> None:
    state, scores = memory_state(), confidences(world)
    recalled, blocked = in_reuse(world, world.agent, "before")
    assert world.lesson.id in recalled and {c.id for c in world.cases} <= blocked

    for n in range(3):  # the same account, fresh run ids: still nothing
        PATHS[path](world, f"{path}-refute-{n}")
        assert memory_state() == state
        assert confidences(world) == scores
        recalled, blocked = in_reuse(world, world.agent, f"{path}-after-{n}")
        assert world.lesson.id in recalled and {c.id for c in world.cases} <= blocked

    assert curation_scan().outdated == []
    assert memory_state() == state
    assert not Event.objects.filter(action=Action.LESSON_OUTDATE).exists()
    if path == "console":
        assert not ReReview.objects.filter(reason=ReReviewReason.REFUTED).exists()
        return
    # What the agent said is shown and queued for a reviewer, naming its runs.
    entry = ReReview.objects.get(item_id=world.lesson.id, reason=ReReviewReason.REFUTED)
    assert entry.status == ReReviewStatus.OPEN
    assert entry.runs == [f"{path}-refute-{n}" for n in range(3)]
    assert (
        lesson_selectors.lesson_confidence(
            lesson_selectors.lesson_get(world.lesson.id), clock.now()
        ).inputs.unconfirmed_refutations
        == 1
    )


def test_the_refutation_counts_once_a_reviewer_reports_the_run(world: World) -> None:
    """The control: the agent's refutation counts when a reviewer reports that run's outcome,
    here on the run page's outcome form."""
    refute_over_api(world, "api-refute")
    answer = logged_in(world.reviewer).post(
        reverse("experience:run-outcome", args=["api-refute"]), {"outcome": "lead_was_wrong"}
    )
    assert answer.status_code in (302, 303)
    assert Lesson.objects.get(pk=world.lesson.id).status == Status.OUTDATED
    recalled, _blocked = in_reuse(world, world.agent, "after")
    assert world.lesson.id not in recalled


# --- restoring and approving one's own ----------------------------------------------------------


@pytest.fixture
def outdated(world: World) -> Iterator[World]:
    """The lesson outdated by the reviewer's decision: her report of the agent's run."""
    refute_by_command(world, "run-out")
    run_outcome_report(run_id="run-out", outcome="lead_was_wrong", actor=world.reviewer)
    assert Lesson.objects.get(pk=world.lesson.id).status == Status.OUTDATED
    yield world


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_no_single_account_restores_the_lesson_by_any_path(
    outdated: World, make_user: Callable[[str, str], User]
) -> None:
    world = outdated
    lesson = Lesson.objects.get(pk=world.lesson.id)
    state = memory_state()
    restore = reverse("experience:lesson-restore", args=[lesson.digest])
    for user in (world.reviewer, world.agent):
        # The lesson page's form, and the re-review queue's (it posts to the same address).
        answer = logged_in(user).post(restore, {"reason": "it still holds"})
        assert answer.status_code in (403, 422), (user.username, answer.status_code)
        # No command restores (``review`` approves, rejects, revokes, verifies).
        with pytest.raises((CommandError, SystemExit)):
            call_command(
                "review", "restore", lesson.id, "--as", user.username, "--reason", "holds",
                "--json", stdout=StringIO(), stderr=StringIO(),
            )  # fmt: skip
        # Nor the admin: every memory model is read-only there.
        change = reverse("admin:experience_lesson_change", args=[lesson.pk])
        answer = logged_in(user).post(change, {"status": Status.APPROVED})
        assert answer.status_code in (302, 403), (user.username, answer.status_code)
    admin = make_user("ada", Role.ADMIN)
    change = reverse("admin:experience_lesson_change", args=[lesson.pk])
    assert logged_in(admin).post(change, {"status": Status.APPROVED}).status_code == 403
    entry = ReReview.objects.get(item_id=lesson.id, reason=ReReviewReason.OUTDATED)
    entry_change = reverse("admin:curation_rereview_change", args=[entry.pk])
    assert logged_in(admin).post(entry_change, {"status": "closed"}).status_code == 403
    assert memory_state() == state
    assert not Event.objects.filter(action=Action.LESSON_RESTORE).exists()
    # Another reviewer may.
    done = logged_in(make_user("rhea", Role.REVIEWER)).post(restore, {"reason": "it holds"})
    assert done.status_code == 303
    assert Lesson.objects.get(pk=lesson.id).status == Status.APPROVED


def test_no_single_account_approves_its_own_or_anything_as_an_agent(world: World) -> None:
    state = memory_state()
    for user in (world.reviewer, world.agent):
        out = StringIO()
        with pytest.raises(CommandError):
            call_command(
                "review", "approve", world.candidate.id, "--as", user.username,
                "--reason", "looks right", "--json", stdout=out,
            )  # fmt: skip
        assert json.loads(out.getvalue())["ok"] is False
        answer = logged_in(user).post(
            reverse("experience:case-review", args=[world.candidate.digest]),
            {"decision": "approve", "reason": "looks right"},
        )
        assert answer.status_code in (403, 422), (user.username, answer.status_code)
    assert memory_state() == state
