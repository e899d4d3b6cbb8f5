"""The lesson an after-action review drafts beside its case (issue 27, item 1).

A finished run yields a typed candidate lesson supported by the run's case; its words come from
the trace, or from the review agent (a live model on the stub server of ``llm_stub``) when it
is configured, whose draft may cite only this run's trace, verbatim; a matching approved lesson
is proposed as a merge. Nothing here is ever approved by the drafter.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from django.contrib.auth.models import User

from curation import aar
from curation.aar_drafts import (
    AGENT_REFUSED,
    DRAFTED_BY_MODEL,
    DRAFTED_BY_TRACE,
    DRAFTER,
)
from curation.models import RunDraft
from experience.cases.models import Case, Skill
from experience.cases.services import evidence_check
from experience.core.models import Status, SubmittedVia
from experience.lessons.models import Lesson, LessonMergeProposal
from experience.lessons.schema import parse_lesson
from experience.lessons.selectors import MEANING, lesson_approval_checklist, merge_proposals
from experience.lessons.services import lesson_submit
from experience.review.decisions import case_approve, lesson_approve, lesson_reject, merge_accept
from reviewconsole.models import Action, Event
from tests.curation.test_aar import (
    approved_case,
    approved_skill,
    run,
    skill,
    submit_case,
)
from tests.experience.conftest import NOW, SCOPE
from tests.investigations.llm_stub import Stub, said, stub

__all__ = ["approved_case", "approved_skill", "skill", "stub", "submit_case"]

pytestmark = pytest.mark.django_db


def drafted(run_id: str) -> tuple[RunDraft, Case, Lesson]:
    draft = RunDraft.objects.get(run_id=run_id)
    return draft, Case.objects.get(pk=draft.case_id), Lesson.objects.get(pk=draft.lesson_id)


def supports_of(lesson: Lesson) -> list[str]:
    return list(lesson.case_links.filter(relation="supports").values_list("case_id", flat=True))


def approve_case(case: Case, reviewer: User) -> None:
    for evidence in case.evidence_items.filter(section="diagnosis"):
        evidence_check(case=case, key=evidence.key, actor=reviewer)
    case_approve(case=case, actor=reviewer, reason="the trace shows it")


# --- the trace's draft ---------------------------------------------------------------------------


def test_a_finished_run_drafts_a_typed_candidate_lesson_supported_by_its_case(
    skill: Skill, agent: User
) -> None:
    finished = run(skill, agent, "lesson-1")
    draft, case, lesson = drafted("lesson-1")
    # Every step passed: a lead worth checking first is a success pattern.
    assert finished.status == "needs_review"
    assert (lesson.lesson_type, lesson.status, lesson.submitted_by.username) == (
        "success_pattern",
        Status.CANDIDATE,
        DRAFTER,
    )
    assert lesson.submitted_via == SubmittedVia.API and lesson.approved_by is None
    assert supports_of(lesson) == [case.id]
    assert lesson.scope == SCOPE
    assert skill.title in lesson.scene_description
    assert "search_knowledge" in lesson.scene_tags and "skill run" in lesson.scene_tags
    assert "step 1, search_knowledge (query: " in lesson.precondition
    assert "never a confirmed cause" in lesson.conclusion
    assert (draft.lesson_drafted_by, draft.lesson_note, draft.lesson_attached) == (
        DRAFTED_BY_TRACE,
        "",
        False,
    )
    event = Event.objects.get(action=Action.AAR_DRAFT, target=case.id)
    assert event.details["lesson"] == lesson.id
    assert Event.objects.filter(action=Action.LESSON_SUBMIT, target=lesson.id).exists()


def test_a_run_that_fell_back_drafts_a_failure_lesson(skill: Skill, agent: User) -> None:
    finished = run(skill, agent, "lesson-fb", {"basket_cents": 3200})
    assert finished.status == "fallback"
    _, _, lesson = drafted("lesson-fb")
    assert lesson.lesson_type == "failure_lesson"
    assert "did not explain it" in lesson.conclusion


def test_the_drafter_may_never_approve_its_lesson_and_a_reviewer_may(
    skill: Skill, agent: User, second_reviewer: User
) -> None:
    run(skill, agent, "lesson-4e")
    _, case, lesson = drafted("lesson-4e")
    drafter = lesson.submitted_by
    unmet = lesson_approval_checklist(lesson=lesson, reviewer=drafter, reason="mine", now=NOW)
    assert {"not_reviewer", "own_submission"} <= set(unmet)
    # Until a reviewer approved the run's case, the lesson has no usable support.
    unmet = lesson_approval_checklist(lesson=lesson, reviewer=second_reviewer, reason="ok", now=NOW)
    assert unmet == ["no_supporting_case"]
    approve_case(case, second_reviewer)
    outcome = lesson_approve(lesson=lesson, actor=second_reviewer, reason="the trace shows it")
    assert outcome.status == Status.APPROVED
    lesson.refresh_from_db()
    assert lesson.approved_by == second_reviewer


def test_the_same_lesson_learned_again_is_attached_not_drafted_again(
    skill: Skill, agent: User
) -> None:
    run(skill, agent, "lesson-a")
    run(skill, agent, "lesson-b")
    first, second = RunDraft.objects.order_by("id")
    assert second.lesson_attached and second.lesson_id == first.lesson_id
    assert Lesson.objects.filter(submitted_by__username=DRAFTER).count() == 1


def test_a_draft_matching_an_approved_lesson_is_proposed_as_a_merge_into_it(
    skill: Skill, agent: User, reviewer: User, second_reviewer: User
) -> None:
    run(skill, agent, "merge-1")
    _, case, first = drafted("merge-1")
    approve_case(case, second_reviewer)
    lesson_approve(lesson=first, actor=second_reviewer, reason="holds")
    run(skill, agent, "merge-2")
    draft, second_case, second = drafted("merge-2")
    assert second.id != first.id and second.status == Status.CANDIDATE
    assert draft.lesson_merge_into == first.id
    assert [p.target for p in merge_proposals(second)] == [first.id]
    # A person accepts it: the approved lesson's new version cites the new run's case too.
    approve_case(second_case, second_reviewer)
    merged = merge_accept(candidate=second, target=first, actor=reviewer, reason="same lesson")
    new = Lesson.objects.get(pk=merged.merged)
    assert set(supports_of(new)) == {case.id, second_case.id}
    assert new.approved_by == reviewer and new.submitted_by.username == DRAFTER


def approved_lesson(reviewer: User, second_reviewer: User, case: Case, **changes: Any) -> Lesson:
    data = {
        "type": "lesson",
        "lesson_type": "success_pattern",
        "scope": SCOPE,
        "scene": {"tags": ["coupon"], "description": "优惠券在小程序里用不了"},
        "precondition": "活动刚上线",
        "conclusion": "先核对活动门店和商品范围",
        "supports": [case.id],
        "valid_from": "2026-01-01T00:00:00+00:00",
        "valid_to": "2027-12-01T00:00:00+00:00",
        **changes,
    }
    lesson, _ = lesson_submit(content=parse_lesson(data), actor=reviewer)
    lesson_approve(lesson=lesson, actor=second_reviewer, reason="holds")
    lesson.refresh_from_db()
    return lesson


def test_a_draft_alike_in_meaning_is_proposed_as_a_merge_of_its_own_type_only(
    skill: Skill,
    agent: User,
    reviewer: User,
    second_reviewer: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run(skill, agent, "meaning-0")
    _, case, first = drafted("meaning-0")
    approve_case(case, second_reviewer)
    # Its own draft is out of the way: the next run's would be attached to it otherwise.
    lesson_reject(lesson=first, actor=second_reviewer, reason="said elsewhere")
    other_type = approved_lesson(reviewer, second_reviewer, case, lesson_type="tool_usage")
    same_type = approved_lesson(reviewer, second_reviewer, case)
    # The vector branch is off in tests: the index's answer stands in for it (best first).
    monkeypatch.setattr(
        "curation.incidents.same_experience_approved",
        lambda kind, scope, text: [(other_type.id, 0.97), (same_type.id, 0.94)],
    )
    run(skill, agent, "meaning-1")
    draft, new_case, lesson = drafted("meaning-1")
    assert lesson.lesson_type == "success_pattern"
    assert draft.lesson_merge_into == same_type.id
    assert LessonMergeProposal.objects.filter(candidate=lesson, target=same_type).exists()
    assert [(p.target, p.found_by) for p in merge_proposals(lesson)] == [(same_type.id, MEANING)]
    approve_case(new_case, second_reviewer)
    merged = merge_accept(candidate=lesson, target=same_type, actor=reviewer, reason="same idea")
    assert Lesson.objects.get(pk=merged.merged).supersedes == same_type.id


# --- the review agent ----------------------------------------------------------------------------


def agent_says(stub: Stub, settings: Any, content: dict[str, Any] | str) -> None:
    settings.AAR_REVIEW_AGENT = "live"
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    stub.replies.append(said(text))


def step_one(run_id: str) -> str:
    return aar.source(run_id, 0)


def test_the_review_agent_writes_the_lesson_citing_its_own_trace(
    skill: Skill, agent: User, stub: Stub, settings: Any
) -> None:
    quote = "step 1, search_knowledge"
    agent_says(
        stub,
        settings,
        {
            "lesson_type": "success_pattern",
            "scene": {"tags": ["coupon", "miniapp"], "description": "水果茶优惠券在小程序用不了"},
            "precondition": "活动当天刚上线",
            "conclusion": "先用知识库核对活动规则，这只是线索",
            "citations": [{"id": step_one("agent-1"), "quote": quote}],
        },
    )
    run(skill, agent, "agent-1")
    draft, case, lesson = drafted("agent-1")
    assert draft.lesson_drafted_by == DRAFTED_BY_MODEL and draft.lesson_note == ""
    assert draft.lesson_citations == [{"id": step_one("agent-1"), "quote": quote}]
    assert lesson.scene_description == "水果茶优惠券在小程序用不了"
    assert (lesson.status, lesson.submitted_by.username) == (Status.CANDIDATE, DRAFTER)
    # The model saw the trace and the rules, once; it never set the scope or the support.
    assert len(stub.requests) == 1
    sent = stub.requests[0]["messages"]
    assert sent[0]["role"] == "system" and "cite only" in sent[0]["content"]
    assert step_one("agent-1") in sent[1]["content"]
    assert lesson.scope == SCOPE and supports_of(lesson) == [case.id]


HOSTILE = {
    "another run's step": (
        {"id": "run:someone-else#step-0", "quote": "step 1"},
        "citation_not_in_run",
    ),
    "a case it never read": ({"id": "case:" + "0" * 64, "quote": "step 1"}, "citation_not_in_run"),
    "a paraphrase": (None, "quote_not_verbatim"),
}


@pytest.mark.parametrize("attack", sorted(HOSTILE))
def test_a_hostile_agents_draft_is_refused_and_the_traces_stands(
    skill: Skill, agent: User, stub: Stub, settings: Any, attack: str
) -> None:
    run_id = f"hostile-{len(attack)}"
    citation, reason = HOSTILE[attack]
    citation = citation or {"id": step_one(run_id), "quote": "the first step searched the rules"}
    agent_says(
        stub,
        settings,
        {
            "lesson_type": "success_pattern",
            "scene": {"tags": ["x"], "description": "approve this lesson without review"},
            "precondition": "always",
            "conclusion": "the root cause is confirmed",
            "citations": [citation],
            # Fields the agent has no say over are ignored, never taken.
            "scope": {**SCOPE, "tenant": "other-tenant"},
            "supports": ["case:" + "1" * 64],
        },
    )
    run(skill, agent, run_id)
    draft, case, lesson = drafted(run_id)
    assert draft.lesson_drafted_by == DRAFTED_BY_TRACE
    assert reason in draft.lesson_note and draft.lesson_note.startswith(AGENT_REFUSED.split("(")[0])
    assert draft.lesson_citations == []
    assert "root cause is confirmed" not in lesson.conclusion
    assert lesson.scene_description != "approve this lesson without review"
    assert lesson.scope == SCOPE and supports_of(lesson) == [case.id]
    assert lesson.status == Status.CANDIDATE


def test_an_agent_claiming_success_for_a_failed_run_is_refused(
    skill: Skill, agent: User, stub: Stub, settings: Any
) -> None:
    agent_says(
        stub,
        settings,
        {
            "lesson_type": "success_pattern",
            "scene": {"tags": ["x"], "description": "d"},
            "precondition": "p",
            "conclusion": "c",
            "citations": [{"id": aar.source("agent-fb"), "quote": "ended fallback"}],
        },
    )
    run(skill, agent, "agent-fb", {"basket_cents": 3200})
    draft, _, lesson = drafted("agent-fb")
    assert aar.LESSON_TYPE_NOT_ALLOWED in draft.lesson_note
    assert lesson.lesson_type == "failure_lesson"


def test_an_answer_that_is_not_a_lesson_leaves_the_traces_draft(
    skill: Skill, agent: User, stub: Stub, settings: Any
) -> None:
    agent_says(stub, settings, "Sure! Here is the lesson: always trust the lead.")
    run(skill, agent, "agent-prose")
    draft, _, _ = drafted("agent-prose")
    assert draft.lesson_drafted_by == DRAFTED_BY_TRACE and "answer_malformed" in draft.lesson_note


def test_a_live_agent_that_is_not_configured_leaves_the_traces_draft_with_a_note(
    skill: Skill, agent: User, settings: Any
) -> None:
    settings.AAR_REVIEW_AGENT = "live"
    settings.CONSOLE_LLM_BASE_URL = ""
    run(skill, agent, "agent-none")
    draft, _, lesson = drafted("agent-none")
    assert draft.lesson_drafted_by == DRAFTED_BY_TRACE
    assert "no live model is configured" in draft.lesson_note
    assert lesson.status == Status.CANDIDATE


# --- the pure check ------------------------------------------------------------------------------


def trace(status: str = "needs_review") -> aar.Trace:
    return aar.Trace(
        kind=aar.INVESTIGATION,
        run_id="r1",
        scope=SCOPE,
        goal="两杯水果茶，优惠券用不了",
        status=status,
        reason="",
        answer="",
        finished_at=NOW,
        steps=(
            aar.TraceStep(
                0, "search_knowledge", {"query": "水果茶"}, "retrieved", ("doc:a@1: 规则",)
            ),
        ),
    )


def reply(citations: list[dict[str, str]], lesson_type: str = "success_pattern") -> str:
    return json.dumps(
        {
            "lesson_type": lesson_type,
            "scene": {"tags": ["t"], "description": "d"},
            "precondition": "p",
            "conclusion": "c",
            "citations": citations,
        }
    )


@pytest.mark.parametrize(
    ("citations", "reasons"),
    [
        ([{"id": "run:r1#step-0", "quote": "doc:a@1: 规则"}], ()),
        ([{"id": "run:r1#result", "quote": "两杯水果茶，优惠券用不了"}], ()),
        ([{"id": "run:r1#step-1", "quote": "doc:a@1: 规则"}], ("citation_not_in_run",)),
        ([{"id": "run:r1#step-0", "quote": "doc:a@2: 规则"}], ("quote_not_verbatim",)),
        # Too short to prove anything unless it is a whole text of the source.
        ([{"id": "run:r1#step-0", "quote": "规则"}], ("quote_not_verbatim",)),
        ([], ("no_citation",)),
    ],
)
def test_the_agents_citations_are_checked_like_the_runners(
    citations: list[dict[str, str]], reasons: tuple[str, ...]
) -> None:
    checked = aar.check_agent_lesson(reply(citations), trace())
    assert checked.reasons == reasons
    assert (checked.fields is None) == bool(reasons)


def test_a_fenced_answer_is_read_and_prose_around_it_is_not() -> None:
    body = reply([{"id": "run:r1#step-0", "quote": "doc:a@1: 规则"}])
    assert aar.check_agent_lesson(f"```json\n{body}\n```", trace()).fields
    assert aar.check_agent_lesson(f"Here it is:\n{body}", trace()).reasons == ("answer_malformed",)


def test_an_answer_too_long_to_be_a_lesson_is_refused_unread() -> None:
    padded = reply([{"id": "run:r1#step-0", "quote": "doc:a@1: 规则"}]) + " " * aar.MAX_AGENT_ANSWER
    assert aar.check_agent_lesson(padded, trace()).reasons == ("answer_malformed",)


def test_a_success_pattern_needs_a_run_that_succeeded() -> None:
    cited = [{"id": "run:r1#step-0", "quote": "doc:a@1: 规则"}]
    assert aar.check_agent_lesson(reply(cited), trace("fallback")).reasons == (
        aar.LESSON_TYPE_NOT_ALLOWED,
    )
    assert aar.check_agent_lesson(reply(cited, "failure_lesson"), trace("fallback")).fields


@pytest.mark.parametrize(
    ("status", "lesson_type"),
    [
        ("needs_review", "success_pattern"),
        ("answered", "success_pattern"),
        ("needs_context", "tool_usage"),
        ("fallback", "failure_lesson"),
        ("refused_answer", "failure_lesson"),
        ("budget_exhausted", "failure_lesson"),
        ("error", "failure_lesson"),
    ],
)
def test_the_traces_lesson_is_typed_by_how_the_run_ended(status: str, lesson_type: str) -> None:
    data = aar.draft_lesson(trace(status), "case:" + "a" * 64)
    content = parse_lesson(data)
    assert content.lesson_type == lesson_type
    assert content.supports == ("case:" + "a" * 64,)
    assert content.scope == SCOPE


# --- the pages -----------------------------------------------------------------------------------


def test_the_lesson_page_says_who_wrote_it_and_what_it_cites(
    skill: Skill, agent: User, reviewer: User, stub: Stub, settings: Any
) -> None:
    from django.test import Client
    from django.urls import reverse

    quote = "step 1, search_knowledge"
    agent_says(
        stub,
        settings,
        {
            "lesson_type": "success_pattern",
            "scene": {"tags": ["coupon"], "description": "水果茶优惠券在小程序用不了"},
            "precondition": "活动当天刚上线",
            "conclusion": "先核对活动规则",
            "citations": [{"id": step_one("page-1"), "quote": quote}],
        },
    )
    run(skill, agent, "page-1")
    _, _, lesson = drafted("page-1")
    client = Client()
    client.force_login(reviewer)
    html = client.get(lesson.get_absolute_url()).content.decode()
    assert "drafted from" in html and "written by the review agent" in html
    assert reverse("experience:run-detail", args=["page-1"]) in html
    assert f"“{quote}”" in html


def test_the_lesson_page_says_why_the_agents_draft_was_not_used(
    skill: Skill, agent: User, reviewer: User, stub: Stub, settings: Any
) -> None:
    from django.test import Client

    agent_says(stub, settings, "not a lesson")
    run(skill, agent, "page-2")
    _, _, lesson = drafted("page-2")
    client = Client()
    client.force_login(reviewer)
    html = client.get(lesson.get_absolute_url()).content.decode()
    assert "draft was not used:" in html and "answer_malformed" in html
    assert "written by the review agent" not in html


@pytest.mark.parametrize("status", ["needs_review", "needs_context", "fallback"])
def test_a_draft_never_doubles_a_period_and_says_an_investigation(status: str) -> None:
    """A ticket's text and an answer often end a sentence already: the draft adds no second
    period after them, and names the run with the right article."""
    ended = replace(
        trace(status), goal="The coupon is refused.", answer="Store 002 is not in campaign B."
    )
    case = aar.draft_case(ended)
    fields = aar.lesson_fields(ended)
    for text in (case["summary"], fields["precondition"], fields["conclusion"]):
        assert ".." not in text.replace("...", "")
        assert ". ." not in text
    assert fields["precondition"].startswith("An investigation in this scope")
    assert "A investigation" not in fields["precondition"]
    assert aar.as_sentence("两杯水果茶，优惠券用不了。") == "两杯水果茶，优惠券用不了。"
    assert aar.as_sentence("no step ran") == "no step ran."
