"""``/metrics`` (issue 29, item 4): Prometheus metrics, readable only by those allowed to scrape.

What a scrape must show: request latency by view, knowledge search and experience retrieval
latency, the task queue's depth and the age of its oldest due task, failed tasks, investigations
by status. Who may read it: a caller with the metrics token, or one from an allowed network
that did not come through a proxy; anyone else gets a 404.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django_tasks import task
from django_tasks_db.models import DBTaskResult
from prometheus_client.parser import text_string_to_metric_families

from tests.api.conftest import BearerClient, Demo, retrieve_body, search_body
from tests.investigations.test_api import PATH as INVESTIGATIONS
from tests.investigations.test_api import body as investigation_body

pytestmark = pytest.mark.django_db


def scrape(client: Client | None = None, **extra: Any) -> dict[tuple[str, tuple[Any, ...]], float]:
    """Every sample of a scrape, by name and sorted labels."""
    response = (client or Client()).get("/metrics", **extra)
    assert response.status_code == 200, response.status_code
    assert response["Content-Type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def value(samples: dict[tuple[str, tuple[Any, ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


# --- who may read it -----------------------------------------------------------------------------


def test_metrics_answer_a_loopback_scrape_by_default(client: Client) -> None:
    assert client.get("/metrics").status_code == 200


def test_metrics_are_not_found_from_other_networks_or_through_a_proxy(
    client: Client, settings: Any
) -> None:
    assert client.get("/metrics", REMOTE_ADDR="203.0.113.9").status_code == 404
    # The load balancer on this host forwards the world's requests from a loopback address.
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 404
    settings.METRICS_ALLOWED_NETWORKS = []
    assert client.get("/metrics").status_code == 404
    assert client.post("/metrics").status_code == 404


def test_metrics_answer_the_token_from_anywhere_and_refuse_a_wrong_one(
    client: Client, settings: Any
) -> None:
    settings.METRICS_ALLOWED_NETWORKS = []
    settings.METRICS_TOKEN = "scrape-secret-0123456789"
    # A scrape by the instance's address over plain HTTP: no host check, no HTTPS redirect.
    settings.ALLOWED_HOSTS = ["console.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    right: dict[str, Any] = {
        "HTTP_AUTHORIZATION": "Bearer scrape-secret-0123456789",
        "HTTP_HOST": "10.0.0.7",
    }
    assert client.get("/metrics", REMOTE_ADDR="203.0.113.9", **right).status_code == 200
    wrong: dict[str, Any] = {"HTTP_AUTHORIZATION": "Bearer scrape-secret-0123456780"}
    assert client.get("/metrics", **wrong).status_code == 404
    settings.METRICS_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    # A wrong token is refused even from an allowed network.
    assert client.get("/metrics", **wrong).status_code == 404


def test_metrics_allowed_reads_networks_of_either_family(settings: Any) -> None:
    from django.test import RequestFactory

    from reviewconsole.metrics import metrics_allowed

    settings.METRICS_ALLOWED_NETWORKS = ["10.1.0.0/16", "::1/128"]
    factory = RequestFactory()
    assert metrics_allowed(factory.get("/metrics", REMOTE_ADDR="10.1.2.3"))
    assert metrics_allowed(factory.get("/metrics", REMOTE_ADDR="::1"))
    assert not metrics_allowed(factory.get("/metrics", REMOTE_ADDR="10.2.0.1"))
    assert not metrics_allowed(factory.get("/metrics", REMOTE_ADDR="not-an-address"))


# --- what it shows -------------------------------------------------------------------------------


def test_requests_searches_and_retrievals_are_timed_by_view_and_service(
    agent_client: BearerClient, demo: Demo
) -> None:
    before = scrape()
    assert agent_client.post_json("/api/v1/knowledge/search", search_body()).status_code == 200
    assert agent_client.post_json("/api/v1/experience/retrieve", retrieve_body()).status_code == 200
    agent_client.get("/no/such/page")
    after = scrape()

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert (
        grew("console_search_duration_seconds_count", service="knowledge", status="retrieved") == 1
    )
    assert grew("console_search_duration_seconds_count", service="experience", status="ok") == 1
    request = "console_http_request_duration_seconds_count"
    assert grew(request, view="api-v1:knowledge_search", method="POST", status="200") == 1
    assert grew(request, view="api-v1:experience_retrieve", method="POST", status="200") == 1
    assert grew(request, view="unresolved", method="GET", status="404") == 1
    # No path is a label: only the names of views.
    assert not any("/no/such/page" in str(labels) for _, labels in after)


@task()
def noop() -> None:
    return None


def test_the_task_queue_depth_oldest_due_age_and_failures_come_from_the_database(
    settings: Any, frozen_clock: Callable[[datetime], Any]
) -> None:
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    now = datetime.now().astimezone()
    frozen_clock(now)
    first, second, failed = (noop.enqueue() for _ in range(3))
    DBTaskResult.objects.filter(pk=first.id).update(enqueued_at=now - timedelta(seconds=90))
    DBTaskResult.objects.filter(pk=second.id).update(enqueued_at=now - timedelta(seconds=5))
    DBTaskResult.objects.filter(pk=failed.id).update(status="FAILED")
    # Deferred to the future: not due, not counted in the depth.
    noop.using(run_after=now + timedelta(hours=1)).enqueue()

    samples = scrape()
    assert value(samples, "console_tasks", status="READY") == 3
    assert value(samples, "console_tasks", status="FAILED") == 1
    assert value(samples, "console_tasks_due") == 2
    assert value(samples, "console_tasks_oldest_due_age_seconds") == pytest.approx(90, abs=1)


def test_investigations_are_counted_by_status(
    agent_client: BearerClient, demo: Demo, at_now: datetime
) -> None:
    assert value(scrape(), "console_investigations", status="answered") == 0
    response = agent_client.post_json(INVESTIGATIONS, investigation_body(run_id="metrics-1"))
    assert response.status_code == 200 and response.json()["status"] == "answered"
    samples = scrape()
    assert value(samples, "console_investigations", status="answered") == 1
    assert value(samples, "console_investigations", status="error") == 0


def test_workers_alive_are_counted(settings: Any) -> None:
    from reviewconsole import clock
    from reviewconsole.health import heartbeat_beat

    now = clock.now()
    heartbeat_beat("w-recent", started_at=now)
    heartbeat_beat("w-gone", started_at=now, now=now - timedelta(hours=1))
    assert value(scrape(), "console_workers_alive") == 1


def test_a_scrape_reveals_no_user_or_tenant(
    agent: User, agent_client: BearerClient, demo: Demo
) -> None:
    agent_client.post_json("/api/v1/knowledge/search", search_body())
    text = Client().get("/metrics").content.decode()
    assert agent.username not in text
    assert "teahouse" not in text
