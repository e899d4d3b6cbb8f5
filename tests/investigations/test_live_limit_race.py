"""The live-investigation limit holds under concurrency and across transports.

Real threads on real connections, released together by a barrier: on PostgreSQL each request
reads and writes in its own transaction at the same moment, so a count taken outside the
insert's transaction lets every one of them through. On SQLite (a file) writers queue, and the
same tests check the same figures. An MCP ``investigate`` running a live model within the call
counts with the account's queued runs, whichever transport started each one
(docs/contracts.md, Limits).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import connections
from mcp import Client
from mcp.types import CallToolResult

from agentapi.limits import LIVE_RETRY_AFTER_SECONDS, TOO_MANY_LIVE
from agentapi.mcp_server import build_server
from agentapi.models import LiveRun
from agentapi.services import token_create
from investigations import services as investigation_services
from investigations.domain import Transcript, Turn
from investigations.models import InvestigationRequest
from investigations.scripted import ScriptedProvider
from reviewconsole.roles import Role
from tests.api.conftest import BearerClient
from tests.investigations.test_api import PATH, body
from tests.mcp.test_server import refusal

pytestmark = pytest.mark.django_db(transaction=True)

# How long a thread may take before the test fails: every wait ends on its event, so a passing
# test never sits this out, however loaded the machine.
WORK_DEADLINE = 120
LIMIT = 2


@pytest.fixture
def live_queued(settings: Any) -> None:
    """A live model configured, and tasks waiting in the database for a worker (none runs)."""
    settings.CONSOLE_API_LIVE_INVESTIGATIONS = LIMIT
    settings.CONSOLE_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    settings.CONSOLE_LLM_MODEL = "held"
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


class Tally:
    """Events counted as they happen; a waiter wakes when enough have."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.count = 0

    def note(self) -> None:
        with self._changed:
            self.count += 1
            self._changed.notify_all()

    def reached(self, count: int) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.count >= count, timeout=WORK_DEADLINE)


class HeldModel:
    """A live model that answers only when released: each run it serves stays in flight."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.entered = Tally()
        self.also_note: Tally | None = None

    def provider(self, name: str) -> ScriptedProvider:
        model = self

        class Held(ScriptedProvider):
            def next_turn(self, transcript: Transcript) -> Turn:
                if not transcript.rounds:
                    model.entered.note()
                    if model.also_note is not None:
                        model.also_note.note()
                    assert model.released.wait(WORK_DEADLINE), "the held model was never released"
                return super().next_turn(transcript)

        return Held()


@pytest.fixture
def held_model(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldModel]:
    held = HeldModel()
    monkeypatch.setattr(investigation_services, "provider_for", held.provider)
    yield held
    held.released.set()


def threads_released_together(count: int, work: Callable[[int], Any]) -> list[threading.Thread]:
    """Start ``count`` threads running ``work(i)`` from one barrier; each closes its connection."""
    barrier = threading.Barrier(count)

    def worker(index: int) -> None:
        try:
            barrier.wait()
            work(index)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    return threads


def joined(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(timeout=WORK_DEADLINE)  # a deadline for a hang, not a wait of its own
    assert not any(thread.is_alive() for thread in threads), "a thread never finished"


def mcp_investigate(token: str) -> CallToolResult:
    """One MCP ``investigate`` call with a live model, as a remote client makes it."""
    server = build_server(token, manage_connections=True)

    async def run() -> CallToolResult:
        async with Client(server) as client:
            return await client.call_tool("investigate", body(provider="live"))

    return async_to_sync(run)()


def test_twelve_simultaneous_live_requests_of_one_token_get_the_limit(
    agent: User, live_queued: None
) -> None:
    token = token_create(user=agent, name="flood").text
    statuses: list[int] = []
    answers: list[Any] = []

    def post(index: int) -> None:
        response = BearerClient(token).post_json(
            PATH, body(provider="live", run_id=f"flood-{index}")
        )
        statuses.append(response.status_code)
        answers.append(response.json())

    joined(threads_released_together(12, post))

    assert sorted(statuses) == [202] * LIMIT + [429] * (12 - LIMIT), answers
    assert InvestigationRequest.objects.filter(actor=agent).count() == LIMIT
    refused = [a for s, a in zip(statuses, answers, strict=True) if s == 429]
    assert all(a == {"detail": TOO_MANY_LIVE.format(limit=LIMIT)} for a in refused)


def test_live_runs_in_mcp_calls_count_against_the_api_and_back(
    agent: User, make_user: Callable[[str, str], User], live_queued: None, held_model: HeldModel
) -> None:
    token = token_create(user=agent, name="both").text
    calls: list[CallToolResult] = []
    running = threads_released_together(LIMIT, lambda _: calls.append(mcp_investigate(token)))
    assert held_model.entered.reached(LIMIT), "an MCP run never started"

    # Both places are held by runs the MCP server is answering within their calls.
    assert LiveRun.objects.filter(actor=agent).count() == LIMIT
    refused = BearerClient(token).post_json(PATH, body(provider="live", run_id="api-over"))
    assert refused.status_code == 429, refused.content
    assert refused.json() == {"detail": TOO_MANY_LIVE.format(limit=LIMIT)}
    over = mcp_investigate(token)
    assert refusal(over) == {
        "error": "rate_limited",
        "message": TOO_MANY_LIVE.format(limit=LIMIT),
        "retry_after": LIVE_RETRY_AFTER_SECONDS,
    }
    # Another account is not held back by this one.
    other = token_create(user=make_user("agent-9", Role.AGENT), name="other").text
    assert BearerClient(other).post_json(PATH, body(provider="live")).status_code == 202

    held_model.released.set()
    joined(running)
    assert [c.is_error for c in calls] == [False] * LIMIT, calls
    # Finished calls free their places.
    assert not LiveRun.objects.exists()
    accepted = BearerClient(token).post_json(PATH, body(provider="live", run_id="api-after"))
    assert accepted.status_code == 202, accepted.content


def test_simultaneous_live_runs_over_mcp_and_the_api_together_get_the_limit(
    agent: User, live_queued: None, held_model: HeldModel
) -> None:
    token = token_create(user=agent, name="mixed").text
    lock = threading.Lock()
    # One event per request before the model is released: an answer, or a run entering the model.
    settled = Tally()
    held_model.also_note = settled
    outcomes: list[str] = []

    def act(index: int) -> None:
        try:
            if index % 2:
                response = BearerClient(token).post_json(
                    PATH, body(provider="live", run_id=f"mixed-{index}")
                )
                outcome = {202: "accepted", 429: "refused"}.get(
                    response.status_code, f"{response.status_code} {response.content!r}"
                )
            else:
                result = mcp_investigate(token)
                refused = refusal(result).get("error") if result.is_error else None
                outcome = {None: "accepted", "rate_limited": "refused"}.get(
                    refused, repr(result.content)
                )
        except Exception as exc:  # reported by the assertions below
            outcome = f"{type(exc).__name__}: {exc}"
        with lock:
            outcomes.append(outcome)
        if outcome != "accepted" or index % 2:
            settled.note()

    threads = threads_released_together(12, act)
    assert settled.reached(12), "a request was neither answered nor running"
    with lock:
        answered_first = list(outcomes)
    in_model = held_model.entered.count
    assert answered_first.count("accepted") + in_model == LIMIT, (answered_first, in_model)
    held_model.released.set()
    joined(threads)
    assert outcomes.count("accepted") == LIMIT, outcomes
    assert outcomes.count("refused") == 12 - LIMIT, outcomes
