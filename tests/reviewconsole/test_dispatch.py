"""The event dispatch: handlers run in the writer's transaction, in the order they subscribed."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django_tasks import task
from django_tasks_db.models import DBTaskResult

from knowledge.models import Synonym
from reviewconsole import dispatch
from reviewconsole.dispatch import Event, OutsideTransaction

EVENT = Event.LEXICON_CHANGED


class Refused(Exception):
    pass


@pytest.fixture
def heard(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any], bool]]:
    """``EVENT`` with no subscriber but the test's own; each call as (handler, payload, in a
    transaction)."""
    monkeypatch.setitem(dispatch._subscribers, EVENT, [])
    return []


def recorder(name: str, calls: list[Any], answer: object = None) -> Any:
    def handler(**payload: Any) -> object:
        calls.append((name, payload, transaction.get_connection().in_atomic_block))
        return answer

    return handler


@pytest.mark.django_db
def test_handlers_run_in_the_order_they_subscribed_and_answer(heard: list[Any]) -> None:
    first, second = recorder("first", heard, answer=1), recorder("second", heard, answer=2)
    dispatch.dispatch_subscribe(EVENT, first)
    dispatch.dispatch_subscribe(EVENT, second)
    dispatch.dispatch_subscribe(EVENT, first)  # once, however often asked
    assert dispatch.subscribers(EVENT) == (first, second)

    with transaction.atomic():
        answers = dispatch.dispatch(EVENT, item="x")

    assert answers == [1, 2]
    assert heard == [("first", {"item": "x"}, True), ("second", {"item": "x"}, True)]


def test_publishing_outside_a_transaction_is_refused(heard: list[Any]) -> None:
    dispatch.dispatch_subscribe(EVENT, recorder("handler", heard))
    with pytest.raises(OutsideTransaction):
        dispatch.dispatch(EVENT)
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

    def queue(**payload: Any) -> None:
        _noted.enqueue(str(payload["note"]))

    dispatch.dispatch_subscribe(EVENT, queue)
    with pytest.raises(Refused), transaction.atomic():
        dispatch.dispatch(EVENT, note="rolled back")
        raise Refused
    assert not DBTaskResult.objects.exists()

    with transaction.atomic():
        dispatch.dispatch(EVENT, note="committed")
    assert [row.args_kwargs["args"] for row in DBTaskResult.objects.all()] == [["committed"]]


@pytest.mark.django_db
def test_a_failing_handler_fails_the_write(heard: list[Any]) -> None:
    def refuse(**_: Any) -> None:
        raise Refused

    dispatch.dispatch_subscribe(EVENT, refuse)
    with pytest.raises(Refused), transaction.atomic():
        Synonym.objects.create(term="点数", canonical="积分")
        dispatch.dispatch(EVENT)
    assert not Synonym.objects.filter(term="点数").exists()


def test_every_event_is_named_after_its_app() -> None:
    apps = {"experience", "investigations", "knowledge"}
    for event in Event:
        app, subject, happened = event.value.split(".")
        assert app in apps and subject and happened, event
