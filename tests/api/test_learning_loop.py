"""The learning loop, done when: an agent runs a skill through the API and reports the outcome;
the after-action review the background task drafted waits in the review queue with its trace one
click away; a reviewer approves it; the next context block of the scope carries it with its
confidence. Nobody types a maintenance command (the task backend of the tests runs each task as
it is queued, as a worker would right after)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from curation.aar_drafts import DRAFTER
from curation.models import RunDraft
from experience.cases.models import Case
from experience.cases.services import evidence_check
from experience.core.models import Status
from experience.review.decisions import case_approve
from tests.api.conftest import BearerClient, Demo, retrieve_body, run_body

pytestmark = pytest.mark.django_db


def test_a_skill_run_becomes_reviewed_experience_in_the_next_context_block(
    agent_client: BearerClient, demo: Demo, reviewer: User, second_reviewer: User
) -> None:
    ran = agent_client.post_json(f"/api/v1/skills/{demo.skill}/run", run_body(run_id="loop-1"))
    assert ran.status_code == 200, ran.content
    reported = agent_client.post_json(
        "/api/v1/runs/loop-1/outcome", {"outcome": "resolved_by_lead", "note": "门店列表已补"}
    )
    assert reported.status_code == 200, reported.content

    # The drafting task made a candidate case from the run, by the drafter, never approved.
    draft = Case.objects.get(pk=RunDraft.objects.get(run_id="loop-1").case_id)
    assert draft.status == Status.CANDIDATE and draft.submitted_by.username == DRAFTER

    # It waits in the reviewers' queue; its page says which run it came from, linked to the trace.
    console = Client()
    console.force_login(reviewer)
    assert draft.id in console.get(reverse("experience:queue")).content.decode()
    page = console.get(draft.get_absolute_url()).content.decode()
    assert reverse("experience:run-detail", args=["loop-1"]) in page
    assert console.get(reverse("experience:run-detail", args=["loop-1"])).status_code == 200

    for evidence in draft.evidence_items.filter(section="diagnosis"):
        evidence_check(case=draft, key=evidence.key, actor=second_reviewer)
    case_approve(case=draft, actor=second_reviewer, reason="the trace shows it")

    block = agent_client.post_json(
        "/api/v1/experience/context", {**retrieve_body(run_id="loop-2"), "budget": 2_000}
    ).json()
    [item] = [item for item in block["items"] if item["id"] == draft.id]
    assert item["type"] == "case" and isinstance(item["confidence"], float)
    [line] = [line for line in block["block"].splitlines() if draft.id in line]
    assert f"confidence={item['confidence']:.3f}" in line
