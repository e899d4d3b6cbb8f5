"""The two-tenant sweep: for a user of another tenant, tenant A's memory does not exist.

The demo world (tenant ``teahouse``: documents, cases, skills, lessons and their conflict, runs,
an investigation, a thread, a proposal, a re-review entry, a replay report) is loaded, and a
reviewer, an operator, an admin and an agent of tenant ``riverside`` ask for every one of its
ids on every console page and API endpoint that takes an id, reading and writing. Each answer
must be the answer for an id nobody has (same status; the same page once the id itself is taken
out), and no write may change anything. The per-item regression tests live beside this file
(test_keys.py, test_runs.py, test_registry.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from agentapi.services import token_create
from curation.models import NearDuplicate, ReReview, SkillProposal, Thread
from evaluation.models import ReplayReport
from experience.cases.models import Case, Skill
from experience.lessons.models import Lesson, LessonConflict
from experience.runs.models import RunOwner
from investigations.models import Investigation, InvestigationRequest
from knowledge.models import Document
from reviewconsole.models import Event
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.helpers import tenants_exist

pytestmark = pytest.mark.django_db

A = "teahouse"
B = "riverside"
NO_DIGEST = "0" * 64
NO_PK = 987_654
NO_RUN = "no-such-run-0001"
NO_THREAD = "no-such-thread-0001"
NO_KEY = "no-such-document"

# What differs between two renderings of one page whatever they show: CSRF tokens and nonces.
_VOLATILE = re.compile(r'(csrfmiddlewaretoken" value="|X-CSRFToken": "|nonce="|csrftoken=)[^"&;]*')


def _normal(body: bytes, *ids: str) -> str:
    text = _VOLATILE.sub(r"\1…", body.decode("utf-8", "replace"))
    for item_id in sorted(ids, key=len, reverse=True):
        text = text.replace(item_id, "ID")
    return text


@dataclass(frozen=True)
class Probe:
    """One page or endpoint, asked for tenant A's id and for an unknown one."""

    name: str
    method: str
    known: str
    unknown: str
    ids: tuple[str, str]
    data: dict[str, str] | None = None


@pytest.fixture
def world(shared_demo_replay: None) -> Iterator[dict[str, Any]]:
    call_command("load_demo", "--json", stdout=StringIO())
    tenants_exist(B)
    yield {}


def _console_probes() -> list[Probe]:
    probes: list[Probe] = []

    def page(
        name: str, known_args: list[Any], unknown_args: list[Any], ids: tuple[str, str]
    ) -> None:
        probes.append(
            Probe(
                name, "GET", reverse(name, args=known_args), reverse(name, args=unknown_args), ids
            )
        )

    def post(
        name: str,
        known_args: list[Any],
        unknown_args: list[Any],
        ids: tuple[str, str],
        data: dict[str, str],
    ) -> None:
        probes.append(
            Probe(
                name,
                "POST",
                reverse(name, args=known_args),
                reverse(name, args=unknown_args),
                ids,
                data,
            )
        )

    for case in Case.objects.filter(tenant=A)[:3]:
        ids = (case.digest, NO_DIGEST)
        for name in (
            "experience:case-detail",
            "experience:case-checklist",
            "curation:case-similar",
        ):
            page(name, [case.digest], [NO_DIGEST], ids)
        post("experience:case-check", [case.digest], [NO_DIGEST], ids, {"key": "diagnosis/0"})
        post(
            "experience:case-review",
            [case.digest],
            [NO_DIGEST],
            ids,
            {"decision": "approve", "reason": "x"},
        )
        post(
            "experience:case-revoke",
            [case.digest],
            [NO_DIGEST],
            ids,
            {"reason": "x", "confirm": "1"},
        )
    for skill in Skill.objects.filter(tenant=A):
        ids = (skill.digest, NO_DIGEST)
        for name in (
            "experience:skill-detail",
            "experience:skill-checklist",
            "curation:skill-support",
        ):
            page(name, [skill.digest], [NO_DIGEST], ids)
        post(
            "experience:skill-review",
            [skill.digest],
            [NO_DIGEST],
            ids,
            {"decision": "approve", "reason": "x"},
        )
        post(
            "experience:skill-revoke",
            [skill.digest],
            [NO_DIGEST],
            ids,
            {"reason": "x", "confirm": "1"},
        )
    for lesson in Lesson.objects.filter(tenant=A):
        ids = (lesson.digest, NO_DIGEST)
        page("experience:lesson-detail", [lesson.digest], [NO_DIGEST], ids)
        post(
            "experience:lesson-review",
            [lesson.digest],
            [NO_DIGEST],
            ids,
            {"decision": "approve", "reason": "x"},
        )
    for conflict in LessonConflict.objects.filter(tenant=A):
        page("experience:lesson-conflict", [conflict.pk], [NO_PK], (str(conflict.pk), str(NO_PK)))
    for owner in RunOwner.objects.filter(tenant=A):
        ids = (owner.run_id, NO_RUN)
        page("experience:run-detail", [owner.run_id], [NO_RUN], ids)
        post("experience:run-outcome", [owner.run_id], [NO_RUN], ids, {"outcome": "lead_was_wrong"})
        post("experience:run-follow-up", [owner.run_id], [NO_RUN], ids, {"reason": "x"})
    for investigation in Investigation.objects.all():
        page(
            "investigations:investigation-detail",
            [investigation.pk],
            [NO_PK],
            (str(investigation.pk), str(NO_PK)),
        )
    for request in InvestigationRequest.objects.all():
        page("investigations:request-detail", [request.pk], [NO_PK], (str(request.pk), str(NO_PK)))
    for report in ReplayReport.objects.all():
        for name in (
            "evaluation:report-detail",
            "evaluation:report-json",
            "evaluation:report-chart",
        ):
            page(name, [report.pk], [NO_PK], (str(report.pk), str(NO_PK)))
    for thread in Thread.objects.filter(tenant=A):
        ids = (thread.thread_id, NO_THREAD)
        for name in ("curation:thread-detail", "curation:thread-preview"):
            page(name, [thread.thread_id], [NO_THREAD], ids)
    for proposal in SkillProposal.objects.filter(tenant=A):
        ids = (str(proposal.pk), str(NO_PK))
        page("curation:proposal-detail", [proposal.pk], [NO_PK], ids)
        post("curation:proposal-dismiss", [proposal.pk], [NO_PK], ids, {"reason": "x"})
    for entry in ReReview.objects.filter(tenant=A):
        ids = (str(entry.pk), str(NO_PK))
        post("curation:rereview-confirm", [entry.pk], [NO_PK], ids, {"reason": "x"})
    for link in NearDuplicate.objects.all():
        page("curation:link-compare", [link.pk], [NO_PK], (str(link.pk), str(NO_PK)))
        post(
            "curation:link-resolve",
            [link.pk],
            [NO_PK],
            (str(link.pk), str(NO_PK)),
            {"decision": "different", "reason": "x"},
        )
    for document in Document.objects.filter(tenant=A)[:3]:
        ids = (document.doc_key, NO_KEY)
        page(
            "knowledge:document-detail",
            [document.doc_key, document.version],
            [NO_KEY, document.version],
            ids,
        )
    return probes


def _client(user: User) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def _ask(client: Client, probe: Probe, path: str) -> Any:
    if probe.method == "GET":
        return client.get(path)
    return client.post(path, probe.data or {})


def _state() -> tuple[int, ...]:
    """What a write would change: events, and every status and lifecycle count that matters."""
    return (
        Event.objects.count(),
        Case.objects.filter(status="approved").count(),
        Skill.objects.filter(status="approved").count(),
        Lesson.objects.filter(status="approved").count(),
        ReReview.objects.filter(status="open").count(),
        SkillProposal.objects.filter(status="open").count(),
        NearDuplicate.objects.filter(status="open").count(),
    )


@pytest.mark.parametrize("role", [Role.REVIEWER, Role.OPERATOR, Role.ADMIN])
def test_every_console_page_answers_another_tenants_id_as_an_unknown_one(
    world: dict[str, Any], role: str
) -> None:
    outsider = user_set_role(username=f"outsider-{role}", role=role, tenants=[B])
    # One session asks for A's ids, another for unknown ones: each session's pending messages
    # (a refused write's, shown on the next page) then follow the same history.
    asks_known, asks_unknown = _client(outsider), _client(outsider)
    probes = _console_probes()
    assert len({probe.name for probe in probes}) >= 25  # the demo reaches every kind of page
    before = _state()
    mismatches = []
    for probe in probes:
        known = _ask(asks_known, probe, probe.known)
        unknown = _ask(asks_unknown, probe, probe.unknown)
        if known.status_code != unknown.status_code:
            mismatches.append(f"{probe.name}: {known.status_code} against {unknown.status_code}")
        elif _normal(known.content, *probe.ids) != _normal(unknown.content, *probe.ids):
            mismatches.append(f"{probe.name}: the answers differ beyond the id")
        elif known.status_code < 400 and probe.method == "GET":
            mismatches.append(f"{probe.name}: answered {known.status_code}")
    assert mismatches == [], "\n".join(mismatches)
    assert _state() == before


def test_every_api_read_answers_another_tenants_id_as_an_unknown_one(
    world: dict[str, Any],
) -> None:
    agent = user_set_role(username="agent-river", role=Role.AGENT, tenants=[B])
    headers = {"Authorization": f"Bearer {token_create(user=agent, name='sweep').text}"}
    client = Client(headers=headers)
    pairs: list[tuple[str, str]] = []
    for case in Case.objects.filter(tenant=A):
        pairs.append((f"/api/v1/cases/{case.id}", "/api/v1/cases/case:" + NO_DIGEST))
    for skill in Skill.objects.filter(tenant=A):
        pairs.append((f"/api/v1/skills/{skill.id}", "/api/v1/skills/skill:" + NO_DIGEST))
    for owner in RunOwner.objects.filter(tenant=A):
        pairs.append((f"/api/v1/runs/{owner.run_id}", f"/api/v1/runs/{NO_RUN}"))
    for investigation in Investigation.objects.all():
        pairs.append(
            (f"/api/v1/investigations/{investigation.run_id}", f"/api/v1/investigations/{NO_RUN}")
        )
    assert len(pairs) >= 8
    for known_path, unknown_path in pairs:
        known, unknown = client.get(known_path), client.get(unknown_path)
        assert known.status_code == unknown.status_code == 404, known_path
        assert known.json().keys() == unknown.json().keys(), known_path
