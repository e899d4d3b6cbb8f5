"""The event dispatch: handlers run in the writer's transaction, in the order they subscribed,
take the event and answer nothing."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import transaction
from django_tasks import task
from django_tasks_db.models import DBTaskResult

from knowledge.models import Synonym
from reviewconsole import dispatch
from reviewconsole.dispatch import OutsideTransaction, Published
from tests.experience.conftest import NOW


@dataclass(frozen=True, kw_only=True)
class Noted(Published):
    note: str = ""


class Refused(Exception):
    pass


@pytest.fixture
def heard(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Noted, bool]]:
    """``Noted`` with no subscriber but the test's own; each call as (handler, event, in a
    transaction)."""
    monkeypatch.setitem(dispatch._subscribers, Noted, [])
    return []


def recorder(name: str, calls: list[Any], answer: object = None) -> Any:
    def handler(event: Noted) -> object:
        calls.append((name, event, transaction.get_connection().in_atomic_block))
        return answer

    return handler


@pytest.mark.django_db
def test_handlers_run_in_the_order_they_subscribed_and_their_answers_go_nowhere(
    heard: list[Any],
) -> None:
    first, second = recorder("first", heard, answer=1), recorder("second", heard, answer=2)
    dispatch.dispatch_subscribe(Noted, first)
    dispatch.dispatch_subscribe(Noted, second)
    dispatch.dispatch_subscribe(Noted, first)  # once, however often asked
    assert dispatch.subscribers(Noted) == (first, second)

    event = Noted(note="x", now=NOW)
    with transaction.atomic():
        dispatch.dispatch(event)

    assert heard == [("first", event, True), ("second", event, True)]


def test_an_event_is_frozen_and_carries_the_moment_of_its_write() -> None:
    event = Noted(note="x", now=NOW)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.note = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Noted(note="x")  # type: ignore[call-arg]


def test_publishing_outside_a_transaction_is_refused(heard: list[Any]) -> None:
    dispatch.dispatch_subscribe(Noted, recorder("handler", heard))
    with pytest.raises(OutsideTransaction):
        dispatch.dispatch(Noted(now=NOW))
    assert heard == []


@task()
def _noted(note: str) -> str:
    return note


@pytest.mark.django_db
def test_what_a_handler_writes_commits_or_rolls_back_with_the_write(
    heard: list[Any], settings: Any
) -> None:
    """The queue is a table: a task a handler queues exists exactly when the write committed."""
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}

    def queue(event: Noted) -> None:
        _noted.enqueue(event.note)

    dispatch.dispatch_subscribe(Noted, queue)
    with pytest.raises(Refused), transaction.atomic():
        dispatch.dispatch(Noted(note="rolled back", now=NOW))
        raise Refused
    assert not DBTaskResult.objects.exists()

    with transaction.atomic():
        dispatch.dispatch(Noted(note="committed", now=NOW))
    assert [row.args_kwargs["args"] for row in DBTaskResult.objects.all()] == [["committed"]]


@pytest.mark.django_db
def test_a_failing_handler_fails_the_write(heard: list[Any]) -> None:
    def refuse(event: Noted) -> None:
        raise Refused

    dispatch.dispatch_subscribe(Noted, refuse)
    with pytest.raises(Refused), transaction.atomic():
        Synonym.objects.create(term="点数", canonical="积分")
        dispatch.dispatch(Noted(now=NOW))
    assert not Synonym.objects.filter(term="点数").exists()
