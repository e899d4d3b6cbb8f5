"""After-action reviews drafted from finished runs: content, drafter, dedupe, never approved."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from html import unescape

import pytest
from django.contrib.auth.models import User

from curation import aar
from curation.aar_drafts import DRAFTER, aar_drafter, run_draft, trace_of_run
from curation.models import RunDraft
from curation.tasks import aar_draft_task
from experience.cases.executor import run_skill
from experience.cases.models import Case, EvidenceCheck, Skill
from experience.cases.schema import TicketContext
from experience.cases.selectors import case_approval_checklist
from experience.core.models import Status
from experience.runs.models import Run
from knowledge.services import documents_import
from reviewconsole.cli import read_json_file
from reviewconsole.models import Action, Event
from reviewconsole.permissions import REVIEW_CASE, VERIFY_EVIDENCE, holds
from tests.experience import conftest as experience_fixtures
from tests.experience.conftest import NOW, SCOPE

pytestmark = pytest.mark.django_db

# The experience tests' builders of approved cases and skills.
submit_case = experience_fixtures.submit_case
approved_case = experience_fixtures.approved_case
approved_skill = experience_fixtures.approved_skill

OCCURRED = datetime.fromisoformat("2026-09-18T14:00:00+08:00")
KNOWN = datetime.fromisoformat("2026-09-18T14:10:00+08:00")
FACTS = {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200}


@pytest.fixture
def skill(operator: User, at_now: datetime, approved_skill: Callable[..., Skill]) -> Skill:
    documents_import(items=read_json_file("fixtures/knowledge.json"), actor=operator)
    return approved_skill()


def run(skill: Skill, agent: User, run_id: str, facts: dict[str, object] | None = None) -> Run:
    context = TicketContext(occurred_at=OCCURRED, known_at=KNOWN, facts=facts or FACTS)
    run_skill(skill.id, SCOPE, context, run_id, NOW, actor=agent)
    return Run.objects.get(run_id=run_id)


def test_a_finished_run_drafts_an_unchecked_candidate(skill: Skill, agent: User) -> None:
    run(skill, agent, "aar-1")
    draft = RunDraft.objects.get(run_id="aar-1")
    case = Case.objects.get(pk=draft.case_id)
    assert (case.status, case.submitted_by.username, draft.attached) == (
        Status.CANDIDATE,
        DRAFTER,
        False,
    )
    assert case.submitted_by != agent
    assert not holds(case.submitted_by, REVIEW_CASE, VERIFY_EVIDENCE)
    assert not EvidenceCheck.objects.filter(evidence__case=case).exists()
    sources = {e.source_id for e in case.evidence_items.all()}
    assert aar.source("aar-1") in sources and aar.source("aar-1", 0) in sources
    assert "Goal:" in case.summary and "Key decisions:" in case.summary
    assert Event.objects.filter(action=Action.AAR_DRAFT, target=case.id).exists()


@pytest.mark.parametrize(
    ("facts", "status"),
    [(FACTS, "needs_review"), ({"basket_cents": 3200}, "fallback")],
)
def test_drafts_from_each_run_status(
    skill: Skill, agent: User, facts: dict[str, object], status: str
) -> None:
    finished = run(skill, agent, f"aar-{status}", facts)
    assert finished.status == status
    case = Case.objects.get(pk=RunDraft.objects.get(run_id=f"aar-{status}").case_id)
    assert aar.spoken(status) in case.summary


def test_a_near_duplicate_run_is_attached_not_drafted_again(skill: Skill, agent: User) -> None:
    run(skill, agent, "aar-a")
    run(skill, agent, "aar-b")
    first, second = RunDraft.objects.order_by("id")
    assert second.attached and second.case_id == first.case_id
    assert Case.objects.filter(submitted_by__username=DRAFTER).count() == 1


def test_the_task_drafts_once_however_often_it_runs(skill: Skill, agent: User) -> None:
    finished = run(skill, agent, "aar-once")
    for _ in range(3):
        aar_draft_task.call(aar.SKILL_RUN, finished.pk)
    assert RunDraft.objects.filter(run_id="aar-once").count() == 1
    assert Event.objects.filter(action=Action.AAR_DRAFT).count() == 1


def test_a_draft_is_never_approved_without_a_reviewer(
    skill: Skill, agent: User, second_reviewer: User
) -> None:
    run(skill, agent, "aar-r")
    case = Case.objects.get(pk=RunDraft.objects.get(run_id="aar-r").case_id)
    assert case.status == Status.CANDIDATE and case.approved_by is None
    # Unchecked evidence keeps it from approval until a reviewer checks it.
    unmet = case_approval_checklist(case=case, reviewer=second_reviewer, reason="ok", now=NOW)
    assert "no_checked_diagnosis_evidence" in unmet


def test_the_drafter_never_drafts_its_own_run(skill: Skill) -> None:
    drafter = aar_drafter()
    finished = run(skill, drafter, "aar-self")
    assert not RunDraft.objects.filter(run_id="aar-self").exists()
    assert aar_draft_task.call(aar.SKILL_RUN, finished.pk).startswith("not drafted")
    with pytest.raises(Exception, match="never reviews its own run"):
        run_draft(trace=trace_of_run(finished), caller_id=drafter.pk)


def test_the_case_page_says_drafted_from_run(skill: Skill, agent: User, reviewer: User) -> None:
    from django.test import Client
    from django.urls import reverse

    run(skill, agent, "aar-page")
    case = Case.objects.get(pk=RunDraft.objects.get(run_id="aar-page").case_id)
    client = Client()
    client.force_login(reviewer)
    html = client.get(case.get_absolute_url()).content.decode()
    assert "drafted from" in html
    assert reverse("experience:run-detail", args=["aar-page"]) in html
    # The summary keeps its lines: one sentence each, not one wall of text.
    assert "Goal: run the skill" in html and ".<br>Result: the skill run ended needs review" in html


def test_a_draft_names_the_skill_by_title_in_sentences_never_by_hash(
    skill: Skill, agent: User
) -> None:
    run(skill, agent, "aar-words")
    case = Case.objects.get(pk=RunDraft.objects.get(run_id="aar-words").case_id)
    hashes = re.compile(r"[0-9a-f]{64}")
    assert not hashes.search(case.title) and not hashes.search(case.summary)
    assert f"“{skill.title}” (skill:{skill.id.split(':')[1][:12]}…)" in case.title
    assert "basket_cents: 3200" in case.title and "=" not in case.summary
    lines = case.summary.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "Goal",
        "Result",
        "Key decisions",
        "Why",
        "Reusable",
    ]
    assert all(line.endswith(".") for line in lines)
    # The run's reason as its sentence, without the machine code in front of it.
    assert "all_steps_passed" not in case.summary and "step 1, search_knowledge (query: " in (
        case.summary
    )


def test_an_investigation_drafts_its_review(skill: Skill, agent: User) -> None:
    from investigations.services import investigation_run

    investigation = investigation_run(
        actor=agent,
        text="两杯水果茶，优惠券用不了",
        scope=SCOPE,
        occurred_at=OCCURRED,
        known_at=KNOWN,
        facts=FACTS,
        run_id="aar-inv",
    )
    draft = RunDraft.objects.get(run_id="aar-inv")
    assert draft.kind == aar.INVESTIGATION
    case = Case.objects.get(pk=draft.case_id)
    assert case.submitted_by.username == DRAFTER
    assert "两杯水果茶" in case.title and investigation.status in case.summary
    assert aar.source("aar-inv", 0) in {e.source_id for e in case.evidence_items.all()}


def test_the_learning_loop_from_run_to_context_block(
    skill: Skill, agent: User, second_reviewer: User
) -> None:
    from experience.cases.services import evidence_check
    from experience.retrieval.block import experience_context
    from experience.review.decisions import case_approve
    from experience.review.outcomes import run_outcome_report
    from tests.experience.conftest import QUERY

    run(skill, agent, "loop-1")
    run_outcome_report(run_id="loop-1", outcome="resolved_by_lead", actor=agent)
    draft = Case.objects.get(pk=RunDraft.objects.get(run_id="loop-1").case_id)
    for evidence in draft.evidence_items.filter(section="diagnosis"):
        evidence_check(case=draft, key=evidence.key, actor=second_reviewer)
    case_approve(case=draft, actor=second_reviewer, reason="the trace shows it")
    block = experience_context(QUERY, SCOPE, NOW, "loop-2", 2_000, actor=agent)
    assert draft.id in [item["id"] for item in block["items"]]
    assert draft.id in block["block"]


def test_a_replay_is_never_drafted(skill: Skill, agent: User) -> None:
    run(skill, agent, "replay-0001-with")
    assert not RunDraft.objects.filter(run_id="replay-0001-with").exists()


def test_a_draft_page_in_chinese_says_its_labels_and_kind_in_chinese(
    skill: Skill, agent: User, reviewer: User
) -> None:
    """The draft's words are stored as drafted; what the page puts around them is translated:
    the run kind of "drafted from", the title's "AAR of …" and the summary's line labels."""
    from django.test import Client

    run(skill, agent, "aar-zh")
    case = Case.objects.get(pk=RunDraft.objects.get(run_id="aar-zh").case_id)
    client = Client(headers={"Accept-Language": "zh-hans"})
    client.force_login(reviewer)
    html = client.get(case.get_absolute_url()).content.decode()
    drafted = re.search(r'<p class="subtitle">起草自(.*?)</p>', html, re.S)
    assert drafted is not None and "skill run" not in drafted.group(1)
    assert "技能运行" in drafted.group(1)
    heading = re.search(r"<h1>(.*?)</h1>", html, re.S)
    assert heading is not None and not heading.group(1).startswith("AAR of")
    assert "skill run" not in heading.group(1) and "aar-zh" in heading.group(1)
    summary = re.search(r"<dt>摘要</dt><dd>(.*?)</dd>", html, re.S)
    assert summary is not None
    for label in ("Goal:", "Result:", "Key decisions:", "Why:", "Reusable:", "the skill run"):
        assert label not in summary.group(1)
    assert summary.group(1).startswith("目标：")
    # The stored words are unchanged: the English page shows them as drafted.
    english = Client()
    english.force_login(reviewer)
    html = english.get(case.get_absolute_url()).content.decode()
    heading = re.search(r"<h1>(.*?)</h1>", html, re.S)
    assert heading is not None and unescape(heading.group(1)) == case.title


def test_drafted_from_links_the_run_only_for_who_may_open_it(
    skill: Skill, agent: User, reviewer: User, operator: User
) -> None:
    from django.test import Client
    from django.urls import reverse

    run(skill, agent, "aar-links")
    case = Case.objects.get(pk=RunDraft.objects.get(run_id="aar-links").case_id)
    run_url = reverse("experience:run-detail", args=["aar-links"])
    for user, linked in ((reviewer, True), (operator, False)):
        client = Client()
        client.force_login(user)
        html = client.get(case.get_absolute_url()).content.decode()
        assert "aar-links" in html
        assert (f'href="{run_url}"' in html) is linked, user.username
        assert client.get(run_url).status_code == (200 if linked else 403)
