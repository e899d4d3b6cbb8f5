"""``/healthz`` and ``/readyz`` (issue 29, item 4): what a load balancer and a process manager ask.

``/healthz``: the process answers, without the database or a login. ``/readyz``: the database
answers, no migration is unapplied, and some worker wrote its heartbeat recently; 503 otherwise,
with each check's status and nothing that names a host, an account or an error text.
"""

from __future__ import annotations

import io
import json
import signal
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.utils import OperationalError
from django.test import Client
from django_tasks import task
from django_tasks_db.models import DBTaskResult

from reviewconsole import clock
from reviewconsole.health import Heartbeat, heartbeat_beat
from reviewconsole.models import WorkerHeartbeat

DATABASE_TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


@pytest.fixture
def database_tasks(settings: Any) -> None:
    settings.TASKS = DATABASE_TASKS


@pytest.fixture
def signals_kept() -> Iterator[None]:
    """The worker installs its own SIGINT/SIGTERM handlers; give the test process its own back."""
    kept = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    if hasattr(signal, "SIGQUIT"):
        kept[signal.SIGQUIT] = signal.getsignal(signal.SIGQUIT)
    yield
    for number, handler in kept.items():
        signal.signal(number, handler)


def body(response: Any) -> dict[str, Any]:
    assert response["Content-Type"] == "application/json"
    answer: dict[str, Any] = json.loads(response.content)
    return answer


# --- /healthz ------------------------------------------------------------------------------------


def test_healthz_answers_without_login_session_or_database(client: Client) -> None:
    # No database mark: any query (a session read, a login lookup) would fail the test.
    response = client.get("/healthz")
    assert response.status_code == 200
    assert body(response) == {"status": "ok"}
    assert "Set-Cookie" not in response.headers
    assert response["Cache-Control"] == "no-store"


def test_healthz_answers_a_probe_over_http_by_address_in_production(
    client: Client, settings: Any
) -> None:
    # A load balancer probes each instance by its address, over plain HTTP: neither the host
    # check nor the HTTPS redirect may turn that into a 400 or a 301.
    settings.ALLOWED_HOSTS = ["console.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    response = client.get("/healthz", HTTP_HOST="10.0.0.7:8000")
    assert response.status_code == 200
    # The rest of the site keeps both.
    assert client.get("/accounts/login/", HTTP_HOST="10.0.0.7:8000").status_code == 400


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_health_paths_refuse_writes(client: Client, path: str) -> None:
    response = client.post(path)
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"


def test_healthz_is_not_throttled(client: Client) -> None:
    answers = {client.get("/healthz").status_code for _ in range(200)}
    assert answers == {200}


# --- /readyz -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_readyz_ready_with_migrations_applied_and_a_recent_worker(
    client: Client, database_tasks: None
) -> None:
    heartbeat_beat("worker-a", started_at=clock.now())
    response = client.get("/readyz")
    assert response.status_code == 200
    answer = body(response)
    assert answer["status"] == "ready"
    assert answer["checks"]["database"] == {"status": "ok"}
    assert answer["checks"]["migrations"] == {"status": "ok", "unapplied": 0}
    assert answer["checks"]["workers"]["status"] == "ok"
    assert answer["checks"]["workers"]["alive"] == 1
    assert "worker-a" not in response.content.decode()


@pytest.mark.django_db
def test_readyz_not_ready_without_any_worker(client: Client, database_tasks: None) -> None:
    response = client.get("/readyz")
    assert response.status_code == 503
    answer = body(response)
    assert answer["status"] == "not_ready"
    assert answer["checks"]["workers"] == {
        "status": "failing",
        "alive": 0,
        "last_seen_seconds": None,
    }
    assert answer["checks"]["database"]["status"] == "ok"


@pytest.mark.django_db
def test_readyz_not_ready_when_the_last_heartbeat_is_older_than_the_setting(
    client: Client, database_tasks: None, settings: Any
) -> None:
    settings.READY_WORKER_MAX_AGE = 60
    now = clock.now()
    heartbeat_beat("worker-a", started_at=now, now=now - timedelta(seconds=61))
    response = client.get("/readyz")
    assert response.status_code == 503
    workers = body(response)["checks"]["workers"]
    assert workers["status"] == "failing"
    assert workers["alive"] == 0
    assert workers["last_seen_seconds"] >= 61

    settings.READY_WORKER_MAX_AGE = 120
    assert client.get("/readyz").status_code == 200


@pytest.mark.django_db
def test_readyz_leaves_workers_out_when_switched_off_or_tasks_run_elsewhere(
    client: Client, settings: Any
) -> None:
    # The suite's tasks run where they are enqueued: no worker to wait for.
    response = client.get("/readyz")
    assert response.status_code == 200
    assert body(response)["checks"]["workers"] == {"status": "disabled"}

    settings.TASKS = DATABASE_TASKS
    settings.READY_WORKER_MAX_AGE = 0
    response = client.get("/readyz")
    assert response.status_code == 200
    assert body(response)["checks"]["workers"] == {"status": "disabled"}


@pytest.mark.django_db
def test_readyz_not_ready_while_a_migration_is_unapplied(client: Client) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM django_migrations WHERE app = %s AND name = %s",
            ["reviewconsole", "0012_worker_heartbeat"],
        )
    response = client.get("/readyz")
    assert response.status_code == 503
    assert body(response)["checks"]["migrations"] == {"status": "failing", "unapplied": 1}
    assert "worker_heartbeat" not in response.content.decode()


@pytest.mark.django_db
def test_readyz_not_ready_when_the_database_does_not_answer_and_says_nothing_of_it(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError('connection to server at "db.internal" failed: password for "app"')

    monkeypatch.setattr(connection, "cursor", refused)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert body(response) == {
        "status": "not_ready",
        "checks": {
            "database": {"status": "failing"},
            "migrations": {"status": "skipped"},
            "workers": {"status": "skipped"},
        },
    }
    assert b"db.internal" not in response.content


# --- the worker's heartbeat ----------------------------------------------------------------------


@task()
def heartbeats_seen() -> list[str]:
    """What a task sees while the worker runs it: the worker ids of the recent heartbeats."""
    return sorted(WorkerHeartbeat.objects.values_list("worker_id", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_worker_writes_its_heartbeat_while_running_and_removes_it_when_it_stops(
    database_tasks: None, signals_kept: None
) -> None:
    gone = clock.now() - timedelta(days=2)
    heartbeat_beat("long-gone", started_at=gone, now=gone)
    result = heartbeats_seen.enqueue()

    call_command(
        "worker", "--batch", "--no-startup-delay", "--no-reload", "--verbosity", "0",
        "--worker-id", "worker-under-test", stdout=io.StringIO(),
    )  # fmt: skip

    # Its own row was there while it ran; a worker gone for days was pruned at its start.
    assert DBTaskResult.objects.get(pk=result.id).return_value == ["worker-under-test"]
    # A clean stop removes the row: /readyz does not count a stopped worker.
    assert not WorkerHeartbeat.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_writes_once_per_interval_however_fast_the_loop_turns(
    settings: Any,
) -> None:
    settings.WORKER_HEARTBEAT_SECONDS = 10
    ticks = iter([100.0, 105.0, 109.9, 110.0])
    heartbeat = Heartbeat("w1", monotonic=lambda: next(ticks))
    assert [heartbeat.beat() for _ in range(4)] == [True, False, False, True]
    assert WorkerHeartbeat.objects.get().worker_id == "w1"


@pytest.mark.django_db(transaction=True)
def test_a_worker_busy_with_a_long_task_keeps_beating(settings: Any) -> None:
    import threading

    settings.WORKER_HEARTBEAT_SECONDS = 0.01
    beaten = threading.Event()

    class Watched(Heartbeat):
        def beat(self, *, force: bool = False) -> bool:
            written = super().beat(force=force)
            if written:
                beaten.set()
            return written

    heartbeat = Watched("busy")
    with heartbeat.during():
        # The task's thread does nothing but wait: only the heartbeat's thread writes.
        assert beaten.wait(timeout=120)  # a deadline for a hang only
    assert WorkerHeartbeat.objects.filter(worker_id="busy").exists()
