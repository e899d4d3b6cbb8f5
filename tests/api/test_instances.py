"""Several instances on one database (issue 29, item 3): what one instance changes, another honours.

Each test starts a second instance (``tests.instance_probe``): a process of its own, with its
own caches (the packed arrays of knowledge search and of the retrieval index, the kept evidence
rows, the lexicon, the semantic matrices), answering requests through the whole stack against the
test's database. The test process is instance A; the probe is instance B. B answers first, so
its caches hold the state before the change; A then changes it; B's next request must see it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection

from agentapi.services import token_create
from tests.api.conftest import NOW, Demo, retrieve_body, search_body
from tests.instance_probe import READY

pytestmark = pytest.mark.django_db(transaction=True)


def database_url() -> str:
    """The URL of the database this test runs on (the test database, not the configured one)."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = quote(str(db.get("USER") or ""), safe="")
    password = f":{quote(str(db['PASSWORD']), safe='')}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"


class Instance:
    """Another web instance: a process of its own, one request per line (tests.instance_probe)."""

    def __init__(self, at: datetime | None, **extra_env: str) -> None:
        env = {
            **os.environ,
            **extra_env,
            "DATABASE_URL": database_url(),
            "CONSOLE_EMBEDDER": "off",
            "DJANGO_SETTINGS_MODULE": "console.settings",
            # The test's fast password hasher, so either instance checks the other's passwords.
            "PROBE_SETTINGS": json.dumps({"PASSWORD_HASHERS": list(settings.PASSWORD_HASHERS)}),
        }
        if at is not None:
            env["PROBE_NOW"] = at.isoformat()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.instance_probe"],
            cwd=settings.BASE_DIR,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        first = self.process.stdout.readline().strip()
        assert first == READY, f"the second instance did not start: {first!r}"

    def request(self, method: str, path: str, **given: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"method": method, "path": path, **given}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, "the second instance stopped"
        return dict(json.loads(line))

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def other_instance() -> Iterator[Callable[..., Instance]]:
    started: list[Instance] = []

    def start(at: datetime | None = None, **extra_env: str) -> Instance:
        started.append(Instance(at, **extra_env))
        return started[-1]

    yield start
    for instance in started:
        instance.close()


def bearer(user: User) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_create(user=user, name='instances').text}"}


def evidence_ids(answer: dict[str, Any]) -> list[str]:
    assert answer["status"] == 200, answer
    return [item["id"] for item in answer["json"]["evidence"]]


def item_ids(answer: dict[str, Any]) -> set[str]:
    assert answer["status"] == 200, answer
    return {item["id"] for item in answer["json"]["items"]}


def test_a_revocation_through_one_instance_is_honoured_by_the_next_search_of_another(
    demo: Demo,
    agent: User,
    operator: User,
    second_reviewer: User,
    other_instance: Callable[..., Instance],
) -> None:
    from experience.cases import selectors as case_selectors
    from experience.review import revocation
    from experience.review.documents import document_revoke
    from knowledge.models import Document

    b = other_instance(NOW)
    headers = bearer(agent)
    search = {"json": search_body(), "headers": headers}
    retrieve = {"json": retrieve_body(limit=5), "headers": headers}
    # B answers first, twice: whatever it keeps per process is warm.
    for _ in range(2):
        assert "doc:rule-b@1" in evidence_ids(
            b.request("post", "/api/v1/knowledge/search", **search)
        )
        assert item_ids(b.request("post", "/api/v1/experience/retrieve", **retrieve)) == {
            *demo.cases,
            demo.skill,
        }

    # A revokes a rule and a case.
    document_revoke(
        document=Document.objects.get(doc_key="rule-b", version=1),
        actor=operator,
        reason="superseded by the new campaign terms",
    )
    revocation.case_revoke(
        case=case_selectors.case_get(demo.cases[0]), actor=second_reviewer, reason="wrong"
    )

    # B's next search and retrieval honour both.
    assert "doc:rule-b@1" not in evidence_ids(
        b.request("post", "/api/v1/knowledge/search", **search)
    )
    returned = item_ids(b.request("post", "/api/v1/experience/retrieve", **retrieve))
    assert demo.cases[0] not in returned
    assert demo.cases[1] in returned


def test_an_approval_through_one_instance_is_found_by_the_next_search_of_another(
    demo: Demo,
    agent: User,
    operator: User,
    second_reviewer: User,
    other_instance: Callable[..., Instance],
) -> None:
    from experience.cases.models import Case
    from experience.cases.services import evidence_check
    from experience.review.decisions import case_approve
    from knowledge.services import documents_import

    b = other_instance(NOW)
    headers = bearer(agent)
    search = {"json": search_body(), "headers": headers}
    retrieve = {"json": retrieve_body(limit=10), "headers": headers}
    for _ in range(2):
        assert "doc:rule-b-extra@1" not in evidence_ids(
            b.request("post", "/api/v1/knowledge/search", **search)
        )
        assert demo.candidates[0] not in item_ids(
            b.request("post", "/api/v1/experience/retrieve", **retrieve)
        )

    # A publishes an approved rule of the same scope and approves a candidate case.
    shipped = json.loads((settings.BASE_DIR / "fixtures" / "knowledge.json").read_text("utf-8"))
    rule_b = next(item for item in shipped if item["doc_key"] == "rule-b" and item["version"] == 1)
    documents_import(items=[{**rule_b, "doc_key": "rule-b-extra"}], actor=operator)
    candidate = Case.objects.get(pk=demo.candidates[0])
    for evidence in candidate.evidence_items.filter(section="diagnosis"):
        evidence_check(case=candidate, key=evidence.key, actor=second_reviewer)
    case_approve(case=candidate, actor=second_reviewer, reason="checked")

    assert "doc:rule-b-extra@1" in evidence_ids(
        b.request("post", "/api/v1/knowledge/search", **search)
    )
    assert demo.candidates[0] in item_ids(
        b.request("post", "/api/v1/experience/retrieve", **retrieve)
    )


def test_a_lexicon_change_through_one_instance_expands_the_next_search_of_another(
    demo: Demo,
    agent: User,
    operator: User,
    other_instance: Callable[..., Instance],
) -> None:
    from knowledge.services import synonym_set

    b = other_instance(NOW)
    search = {"json": search_body(query="quanquan"), "headers": bearer(agent)}
    for _ in range(2):
        assert evidence_ids(b.request("post", "/api/v1/knowledge/search", **search)) == []

    # A teaches the lexicon a new word; the reindex it queues runs (here, at once) in A.
    synonym_set(term="quanquan", canonical="优惠券", actor=operator)

    assert "doc:rule-b@1" in evidence_ids(b.request("post", "/api/v1/knowledge/search", **search))


# --- what instances share besides the data: sessions, login throttling, the API's rate --------


def test_a_session_opened_through_one_instance_is_valid_on_another(
    reviewer: User, other_instance: Callable[..., Instance]
) -> None:
    from django.test import Client

    from tests.conftest import PASSWORD

    b = other_instance()
    signed_in = b.request(
        "post", "/accounts/login/", data={"username": reviewer.username, "password": PASSWORD}
    )
    assert signed_in["status"] == 302, signed_in
    a = Client()
    a.cookies[settings.SESSION_COOKIE_NAME] = signed_in["cookies"][settings.SESSION_COOKIE_NAME]
    assert a.get("/").status_code == 200
    # Signing out through A ends the session on B too.
    a.post("/accounts/logout/")
    assert b.request("get", "/")["status"] == 302


def test_failed_sign_ins_through_one_instance_lock_the_account_on_another(
    reviewer: User, other_instance: Callable[..., Instance]
) -> None:
    from django.test import Client

    from tests.conftest import PASSWORD

    b = other_instance()
    wrong = {"username": reviewer.username, "password": "not-the-password"}
    for _ in range(settings.AXES_FAILURE_LIMIT):
        assert b.request("post", "/accounts/login/", data=wrong)["status"] in (200, 429)
    # The right password, through A, is refused while the lock holds.
    a = Client()
    response = a.post("/accounts/login/", {"username": reviewer.username, "password": PASSWORD})
    assert response.status_code == 429
    assert settings.SESSION_COOKIE_NAME not in response.cookies


def test_the_api_rate_reached_through_one_instance_applies_on_another(
    agent: User, other_instance: Callable[..., Instance], settings: Any, at_now: datetime
) -> None:
    from django.test import Client

    settings.CONSOLE_API_RATE = "3/m"
    b = other_instance(NOW, CONSOLE_API_RATE="3/m")
    headers = bearer(agent)
    a = Client(headers=headers)
    assert [a.get("/api/v1/ping").status_code for _ in range(2)] == [200, 200]
    assert b.request("get", "/api/v1/ping", headers=headers)["status"] == 200
    # The account's three requests are spent, whichever instance answered them.
    refused = b.request("get", "/api/v1/ping", headers=headers)
    assert refused["status"] == 429
    assert 0 < int(refused["headers"]["Retry-After"]) <= 60
    assert a.get("/api/v1/ping").status_code == 429


def test_a_scrape_of_one_process_adds_up_every_process_sharing_the_metrics_directory(
    other_instance: Callable[..., Instance], tmp_path: Any
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    # Two gunicorn workers of one instance: processes of their own, one metrics directory.
    shared = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    first, second = other_instance(**shared), other_instance(**shared)
    for process in (first, second, second):
        assert process.request("get", "/accounts/login/")["status"] == 200
    scraped = first.request("get", "/metrics")
    assert scraped["status"] == 200
    counts = {
        sample.labels["view"]: sample.value
        for family in text_string_to_metric_families(scraped["text"])
        for sample in family.samples
        if sample.name == "console_http_request_duration_seconds_count"
        and sample.labels["method"] == "GET"
    }
    assert counts["login"] == 3
