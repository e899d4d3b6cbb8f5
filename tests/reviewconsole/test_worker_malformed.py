"""A task row the worker cannot read is marked failed with the reason, and the worker goes on.

django-tasks-db reads a row's ``args_kwargs["args"]`` without guarding it, also while recording
the failure, so before the worker checked rows a hand-made row stopped it (``KeyError: 'args'``).
"""

from __future__ import annotations

import io
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_tasks import TaskResultStatus, task
from django_tasks_db.models import DBTaskResult

pytestmark = pytest.mark.django_db(transaction=True)

MALFORMED = "reviewconsole.background.MalformedTaskRow"
ECHO = "tests.reviewconsole.test_worker_malformed.echo"


@task()
def echo(value: str) -> str:
    return value


@pytest.fixture
def database_tasks(settings: Any) -> None:
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


@pytest.fixture
def signals_kept() -> Iterator[None]:
    """The worker installs its own SIGINT/SIGTERM handlers; give the test process its own back."""
    kept = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    if hasattr(signal, "SIGQUIT"):
        kept[signal.SIGQUIT] = signal.getsignal(signal.SIGQUIT)
    yield
    for number, handler in kept.items():
        signal.signal(number, handler)


def hand_made_row(*, args_kwargs: Any, task_path: str = ECHO) -> DBTaskResult[Any, Any]:
    return DBTaskResult.objects.create(
        args_kwargs=args_kwargs,
        task_path=task_path,
        backend_name="default",
        queue_name="default",
        run_after=timezone.now(),
    )


def run_worker_batch() -> None:
    call_command(
        "worker", "--batch", "--no-startup-delay", "--no-reload", "--verbosity", "0",
        stdout=io.StringIO(),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args_kwargs", "reason"),
    [
        ({"arguments": ["x"], "kwargs": {}}, "no 'args' list"),
        ({"args": "x", "kwargs": {}}, "no 'args' list"),
        ({"args": ["x"]}, "no 'kwargs' object"),
        (["x"], "not a JSON object"),
    ],
)
def test_a_row_with_malformed_arguments_fails_with_the_reason_and_the_worker_goes_on(
    database_tasks: None, signals_kept: None, args_kwargs: Any, reason: str
) -> None:
    malformed = hand_made_row(args_kwargs=args_kwargs)
    good = echo.enqueue("after the malformed row")

    run_worker_batch()

    malformed.refresh_from_db()
    assert malformed.status == TaskResultStatus.FAILED
    assert malformed.exception_class_path == MALFORMED
    assert reason in malformed.traceback
    done = DBTaskResult.objects.get(pk=good.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == "after the malformed row"


@pytest.mark.parametrize(
    "task_path", ["tests.reviewconsole.nowhere.echo", "tests.reviewconsole.test_worker_malformed"]
)
def test_a_row_naming_no_task_fails_with_the_reason_and_the_worker_goes_on(
    database_tasks: None, signals_kept: None, task_path: str
) -> None:
    malformed = hand_made_row(args_kwargs={"args": [], "kwargs": {}}, task_path=task_path)
    good = echo.enqueue("still runs")

    run_worker_batch()

    malformed.refresh_from_db()
    assert malformed.status == TaskResultStatus.FAILED
    assert task_path in malformed.traceback
    assert DBTaskResult.objects.get(pk=good.id).status == TaskResultStatus.SUCCESSFUL
