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

    def __init__(self, at: datetime | None) -> None:
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "CONSOLE_EMBEDDER": "off",
            "DJANGO_SETTINGS_MODULE": "console.settings",
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
def other_instance() -> Iterator[Callable[[datetime | None], Instance]]:
    started: list[Instance] = []

    def start(at: datetime | None = None) -> Instance:
        started.append(Instance(at))
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
    other_instance: Callable[[datetime | None], Instance],
) -> None:
    from experience.cases import selectors as case_selectors
    from experience.review import revocation
    from knowledge.models import Document
    from knowledge.services import document_revoke

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
    other_instance: Callable[[datetime | None], Instance],
) -> None:
    from experience.cases.models import Case
    from experience.cases.services import case_approve, evidence_check
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
    other_instance: Callable[[datetime | None], Instance],
) -> None:
    from knowledge.services import synonym_set

    b = other_instance(NOW)
    search = {"json": search_body(query="quanquan"), "headers": bearer(agent)}
    for _ in range(2):
        assert evidence_ids(b.request("post", "/api/v1/knowledge/search", **search)) == []

    # A teaches the lexicon a new word; the reindex it queues runs (here, at once) in A.
    synonym_set(term="quanquan", canonical="优惠券", actor=operator)

    assert "doc:rule-b@1" in evidence_ids(b.request("post", "/api/v1/knowledge/search", **search))
