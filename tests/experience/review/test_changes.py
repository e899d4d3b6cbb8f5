"""Requesting changes on a candidate, revising it and the threads on its evidence (issue items 1
and 2): the services' permissions, tenants, four eyes on fix-and-accept, audit events, and
nothing written on bad input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.cases.models import Case
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.review import changes
from experience.review.decisions import case_approve
from reviewconsole import conversations
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action, ChangeRequest, Event, ReviewComment, ReviewThread
from reviewconsole.roles import Role
from tests.experience.conftest import approve_checked, case_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def candidate(submit_case: Callable[..., Case], operator: User) -> Case:
    """A candidate submitted by an operator (who may submit but not review)."""
    data = case_data()
    data["diagnosis"]["evidence"][0].pop("verified")
    return submit_case(data, actor=operator)


def _revised(case: Case, **changes_: Any) -> dict[str, Any]:
    data = changes.revision_data(case)
    data.update(changes_)
    return data


def _events(action: Action) -> list[Event]:
    return list(Event.objects.filter(action=action).order_by("id"))


def test_a_reviewer_returns_a_candidate_with_an_anchored_note(
    candidate: Case, reviewer: User, operator: User
) -> None:
    request = changes.case_changes_request(
        case=candidate, actor=reviewer, note="Cite the store list.", anchor="evidence:diagnosis/0"
    )
    assert request.returned_to == operator and request.open
    thread = ReviewThread.objects.get(change_request=request)
    assert thread.anchor == "evidence:diagnosis/0" and thread.status == "open"
    assert [c.body for c in thread.comments.all()] == ["Cite the store list."]
    candidate.refresh_from_db()
    assert candidate.status == Status.CANDIDATE
    (event,) = _events(Action.CHANGES_REQUEST)
    assert event.target == candidate.id and event.actor == reviewer
    assert list(conversations.changes_requested_of(operator)) == [request]
    assert list(conversations.changes_requested_of(reviewer)) == []


@pytest.mark.parametrize(
    ("note", "anchor", "field"),
    [("  ", "", "note"), ("fix it", "nowhere", "anchor"), ("x" * 4001, "", "note")],
)
def test_bad_input_names_the_field_and_writes_nothing(
    candidate: Case, reviewer: User, note: str, anchor: str, field: str
) -> None:
    before = Event.objects.count()
    with pytest.raises(ValidationFailure) as refused:
        changes.case_changes_request(case=candidate, actor=reviewer, note=note, anchor=anchor)
    assert refused.value.field == field
    assert Event.objects.count() == before
    assert not ChangeRequest.objects.exists() and not ReviewThread.objects.exists()


def test_only_a_reviewer_other_than_the_submitter_returns_it(
    candidate: Case,
    operator: User,
    make_user: Callable[..., User],
    submit_case: Callable[..., Case],
    reviewer: User,
) -> None:
    other_operator = make_user("otto", Role.OPERATOR)
    for actor in (operator, other_operator):
        with pytest.raises((PermissionRefused, ReviewRefused)):
            changes.case_changes_request(case=candidate, actor=actor, note="change it")
    own = submit_case(case_data(title="a reviewer's own"), actor=reviewer)
    with pytest.raises(ReviewRefused) as refused:
        changes.case_changes_request(case=own, actor=reviewer, note="change it")
    assert refused.value.unmet == ["own_submission"]
    assert not ChangeRequest.objects.exists()


def test_another_tenants_case_is_an_unknown_id(
    candidate: Case, make_user: Callable[..., User]
) -> None:
    from reviewconsole.services import user_set_role

    outsider = user_set_role(username="tess", role=Role.REVIEWER, tenants=["milkbar"])
    with pytest.raises(ValidationFailure) as refused:
        changes.case_changes_request(case=candidate, actor=outsider, note="change it")
    assert refused.value.field == "id"
    with pytest.raises(ValidationFailure):
        changes.case_resubmit(case=candidate, data=_revised(candidate, title="t"), actor=outsider)
    assert not ChangeRequest.objects.exists()


def test_a_case_is_returned_once_until_it_is_revised(
    candidate: Case, reviewer: User, second_reviewer: User
) -> None:
    changes.case_changes_request(case=candidate, actor=reviewer, note="one")
    with pytest.raises(ValidationFailure):
        changes.case_changes_request(case=candidate, actor=second_reviewer, note="two")
    assert ChangeRequest.objects.count() == 1


def test_the_submitter_revises_and_the_rounds_are_kept(
    candidate: Case, reviewer: User, operator: User, second_reviewer: User
) -> None:
    request = changes.case_changes_request(
        case=candidate, actor=reviewer, note="Say which store.", anchor="section:diagnosis"
    )
    revision = changes.case_resubmit(
        case=candidate, data=_revised(candidate, title="二号店：门店列表漏配"), actor=operator
    )
    candidate.refresh_from_db()
    request.refresh_from_db()
    assert candidate.status == Status.SUPERSEDED and candidate.superseded_by == revision.id
    assert revision.status == Status.CANDIDATE and revision.submitted_by == operator
    assert request.resubmitted_as == revision.id and not request.open
    assert list(conversations.changes_requested_of(operator)) == []
    (event,) = _events(Action.CHANGES_RESUBMIT)
    assert event.target == candidate.id and event.details["revision"] == revision.id
    rounds = conversations.rounds_of(changes.subject_of(revision))
    assert [r.item_id for r in rounds] == [candidate.id, revision.id]
    assert rounds[0].requests == [request] and len(rounds[0].threads) == 1
    # The thread of the first round is still open: the approval goes through and says so.
    approve_checked(revision, actor=second_reviewer)
    (approval,) = _events(Action.CASE_APPROVE)
    assert approval.details["open_threads"] == 1


def test_another_operator_may_not_resubmit(
    candidate: Case, reviewer: User, make_user: Callable[..., User]
) -> None:
    changes.case_changes_request(case=candidate, actor=reviewer, note="fix")
    other_operator = make_user("otto", Role.OPERATOR)
    before = Case.objects.count()
    with pytest.raises(PermissionRefused):
        changes.case_resubmit(
            case=candidate, data=_revised(candidate, title="t"), actor=other_operator
        )
    assert Case.objects.count() == before
    assert not _events(Action.CHANGES_RESUBMIT)


def test_fix_and_accept_keeps_four_eyes(
    candidate: Case, reviewer: User, second_reviewer: User
) -> None:
    """The reviewer's small fix is a version they submitted: they may not approve it."""
    changes.case_changes_request(case=candidate, actor=reviewer, note="typo in the title")
    revision = changes.case_resubmit(
        case=candidate, data=_revised(candidate, title="二号店优惠券：门店漏配"), actor=reviewer
    )
    assert revision.submitted_by == reviewer
    with pytest.raises(ReviewRefused) as refused:
        case_approve(case=revision, actor=reviewer, reason="fixed")
    assert "own_submission" in refused.value.unmet
    approve_checked(revision, actor=second_reviewer)
    revision.refresh_from_db()
    assert revision.status == Status.APPROVED and revision.approved_by == second_reviewer


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ("same", "case"),
        ("other-tenant", "scope.tenant"),
        ("broken", "title"),
    ],
)
def test_a_bad_revision_names_the_field_and_writes_nothing(
    candidate: Case, operator: User, reviewer: User, data: str, field: str
) -> None:
    changes.case_changes_request(case=candidate, actor=reviewer, note="fix")
    body = changes.revision_data(candidate)
    if data == "other-tenant":
        body["scope"] = {**body["scope"], "tenant": "milkbar"}
        body["title"] = "moved"
    elif data == "broken":
        body["title"] = ""
    before = (Case.objects.count(), Event.objects.count())
    with pytest.raises(ValidationFailure) as refused:
        changes.case_resubmit(case=candidate, data=body, actor=operator)
    assert refused.value.field == field
    assert (Case.objects.count(), Event.objects.count()) == before
    candidate.refresh_from_db()
    assert candidate.status == Status.CANDIDATE


def test_threads_open_reply_resolve_reopen_with_their_events(
    candidate: Case, reviewer: User, operator: User, make_user: Callable[..., User]
) -> None:
    subject = changes.subject_of(candidate)
    thread = conversations.thread_open(
        subject=subject,
        anchor="evidence:observations/0",
        body="Is this the customer?",
        actor=reviewer,
    )
    conversations.thread_reply(subject=subject, number=thread.pk, body="Yes.", actor=operator)
    conversations.thread_resolve(subject=subject, number=thread.pk, actor=operator)
    with pytest.raises(ValidationFailure):
        conversations.thread_resolve(subject=subject, number=thread.pk, actor=reviewer)
    assert conversations.open_threads_count(subject) == 0
    conversations.thread_reopen(subject=subject, number=thread.pk, actor=reviewer)
    assert conversations.open_threads_count(subject) == 1
    assert [c.body for c in ReviewComment.objects.filter(thread=thread)] == [
        "Is this the customer?",
        "Yes.",
    ]
    assert [
        e.action
        for e in Event.objects.filter(action__startswith="reviewconsole.thread").order_by("id")
    ] == [
        Action.THREAD_OPEN,
        Action.THREAD_REPLY,
        Action.THREAD_RESOLVE,
        Action.THREAD_REOPEN,
    ]
    # Another operator (not the submitter, not a reviewer) takes no part.
    other_operator = make_user("otto", Role.OPERATOR)
    before = Event.objects.count()
    with pytest.raises(PermissionRefused):
        conversations.thread_reply(
            subject=subject, number=thread.pk, body="me too", actor=other_operator
        )
    assert Event.objects.count() == before


def test_a_skill_and_a_lesson_are_sent_back_and_revised_as_a_case_is(
    approved_case: Callable[..., Case], operator: User, reviewer: User, second_reviewer: User
) -> None:
    from experience.cases.schema import parse_skill
    from experience.cases.services import skill_submit
    from experience.cases.tools import tool_specs
    from experience.lessons.schema import parse_lesson
    from experience.lessons.services import lesson_submit
    from tests.experience.conftest import skill_data
    from tests.experience.lessons.test_lessons import lesson_data

    first = approved_case(incident="INC-1", title="二号店优惠券无法使用：门店范围漏配")
    second = approved_case(incident="INC-2", title="二号店水果茶券不可用：门店列表缺失")
    skill, _ = skill_submit(
        content=parse_skill(skill_data([first.id, second.id]), tool_specs()), actor=operator
    )
    lesson, _ = lesson_submit(content=parse_lesson(lesson_data([first.id])), actor=operator)
    kinds: list[tuple[Any, Callable[..., Any], Callable[..., Any]]] = [
        (skill, changes.skill_changes_request, changes.skill_resubmit),
        (lesson, changes.lesson_changes_request, changes.lesson_resubmit),
    ]
    for item, request, resubmit in kinds:
        kind = item.id.split(":")[0]
        request(**{kind: item}, actor=reviewer, note="narrow the wording", anchor="field:title")
        data = changes.revision_data(item)
        data["valid_to"] = "2027-06-30T00:00:00+08:00"
        revision = resubmit(**{kind: item}, data=data, actor=operator)
        item.refresh_from_db()
        assert item.status == Status.SUPERSEDED and item.superseded_by == revision.id
        assert revision.submitted_by == operator and revision.status == Status.CANDIDATE
        rounds = conversations.rounds_of(changes.subject_of(revision))
        assert [r.item_id for r in rounds] == [item.id, revision.id]
    assert list(conversations.changes_requested_of(operator)) == []


def test_items_returned_to_a_user_are_only_those_of_tenants_they_see(
    candidate: Case, reviewer: User, operator: User
) -> None:
    from reviewconsole.services import user_set_role

    request = changes.case_changes_request(case=candidate, actor=reviewer, note="fix")
    assert list(conversations.changes_requested_of(operator)) == [request]
    user_set_role(username=operator.username, role=Role.OPERATOR, tenants=["milkbar"])
    moved = User.objects.get(pk=operator.pk)
    assert list(conversations.changes_requested_of(moved)) == []


def test_a_returned_item_waits_on_its_submitter_until_resubmitted(
    candidate: Case, reviewer: User, operator: User
) -> None:
    """The dashboard's "Waiting on you" lists what was sent back to the user, linking to the
    item, and forgets it once a revision answers it (issue 39, item 3)."""
    from django.test import Client
    from django.urls import reverse

    changes.case_changes_request(case=candidate, actor=reviewer, note="Cite the store list.")

    def returned(user: User) -> str:
        client = Client()
        client.force_login(user)
        html = client.get(reverse("home")).content.decode()
        if 'data-waiting="returned"' not in html:
            return ""
        return html.split('data-waiting="returned"', 1)[1].split("</ul>", 1)[0]

    waiting = returned(operator)
    assert f'href="{candidate.get_absolute_url()}"' in waiting
    assert "Cite the store list." in waiting and reviewer.username in waiting
    assert returned(reviewer) == ""
    changes.case_resubmit(
        case=candidate, data=_revised(candidate, title=candidate.title + "（修订）"), actor=operator
    )
    assert returned(operator) == ""
