"""A write takes its moment once, at its edge, and every row and event it writes carries it.

The clock's seam is patched with a counter: a write that is given no ``now`` reads the clock
exactly once; a write given ``now`` never reads it. Background tasks are queued, not run (each is
an operation of its own, with its own moment). The demo loaders date what they load by passing
``now`` down, and never set the clock.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction

from console.demo import load_demo_world
from curation.models import ReReview, ReReviewStatus
from evaluation.demo import MEMORY_APPROVED_AT, prepare_demo_memory
from experience.cases import selectors, services
from experience.cases.models import Case
from experience.lessons import services as lessons
from experience.lessons.schema import parse_lesson
from experience.review import decisions, revocation
from experience.review import imports as review_imports
from experience.review.documents import document_revoke
from experience.runs.models import Reference, RevocationImpact, RunFollowUp
from knowledge.models import Document
from knowledge.services import document_approve, documents_import
from reviewconsole import clock
from reviewconsole.models import Event, Tenant
from reviewconsole.roles import Role
from reviewconsole.services import user_update
from tests.experience.conftest import NOW, SCOPE, case_data
from tests.experience.lessons.test_lessons import lesson_data
from tests.knowledge.conftest import document

pytestmark = pytest.mark.django_db

MOMENT = NOW + timedelta(hours=3)
GIVEN = NOW + timedelta(days=2)


class CountingClock:
    def __init__(self, at: datetime) -> None:
        self.at = at
        self.reads = 0

    def __call__(self) -> datetime:
        self.reads += 1
        return self.at


@pytest.fixture(autouse=True)
def queued_tasks(settings: Any) -> None:
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"}}


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> Callable[[], CountingClock]:
    """``counting()`` pins the seam at ``MOMENT`` from here on and counts its reads."""

    def start() -> CountingClock:
        counter = CountingClock(MOMENT)
        monkeypatch.setattr(clock, "now", counter)
        return counter

    return start


def events_since(last: int) -> list[Event]:
    return list(Event.objects.filter(pk__gt=last).order_by("pk"))


def last_event() -> int:
    return Event.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


@pytest.fixture
def checked_candidate(submit_case: Callable[..., Case], second_reviewer: User) -> Case:
    case = submit_case()
    services.evidence_check(case=case, key="diagnosis/0", actor=second_reviewer)
    return case


# --- one read per write -----------------------------------------------------------------------


def test_case_approve_reads_the_clock_once(
    checked_candidate: Case, second_reviewer: User, counting: Callable[[], CountingClock]
) -> None:
    last, counter = last_event(), counting()
    decisions.case_approve(case=checked_candidate, actor=second_reviewer, reason="checked")
    assert counter.reads == 1
    assert selectors.case_get(checked_candidate.id).approved_at == MOMENT
    assert [e.created_at for e in events_since(last)] == [MOMENT]


def test_approving_a_new_version_supersedes_the_old_one_at_the_same_moment(
    approved_case: Callable[..., Case],
    submit_case: Callable[..., Case],
    second_reviewer: User,
    counting: Callable[[], CountingClock],
) -> None:
    old = approved_case()
    new = submit_case(case_data(supersedes=old.id, summary="补充：门店列表已更正。"))
    services.evidence_check(case=new, key="diagnosis/0", actor=second_reviewer)
    last, counter = last_event(), counting()
    decisions.case_approve(case=new, actor=second_reviewer, reason="corrected")
    assert counter.reads == 1
    assert selectors.case_get(old.id).superseded_at == MOMENT
    assert {e.created_at for e in events_since(last)} == {MOMENT}
    assert len(events_since(last)) == 2


def test_lesson_approve_reads_the_clock_once(
    approved_case: Callable[..., Case],
    reviewer: User,
    second_reviewer: User,
    counting: Callable[[], CountingClock],
) -> None:
    case = approved_case()
    lesson, _ = lessons.lesson_submit(content=parse_lesson(lesson_data([case.id])), actor=reviewer)
    last, counter = last_event(), counting()
    decisions.lesson_approve(lesson=lesson, actor=second_reviewer, reason="one incident")
    assert counter.reads == 1
    lesson.refresh_from_db()
    assert lesson.approved_at == MOMENT
    assert {e.created_at for e in events_since(last)} == {MOMENT}


def test_case_revoke_reads_the_clock_once_for_the_item_its_impact_and_follow_ups(
    approved_case: Callable[..., Case],
    second_reviewer: User,
    counting: Callable[[], CountingClock],
) -> None:
    case = approved_case()
    Reference.objects.create(run_id="run-r", item_id=case.id, item_type="case", read_at=NOW)
    entry = ReReview.objects.create(
        item_id=case.id,
        item_type="case",
        tenant=case.tenant,
        title=case.title,
        reason="unused",
        detected_at=NOW,
    )
    last, counter = last_event(), counting()
    outcome = revocation.case_revoke(case=case, actor=second_reviewer, reason="wrong store")
    assert counter.reads == 1
    assert outcome.impact is not None and outcome.impact.runs == ["run-r"]
    assert selectors.case_get(case.id).revoked_at == MOMENT
    assert RevocationImpact.objects.get(item_id=case.id).created_at == MOMENT
    assert RunFollowUp.objects.get(run_id="run-r").flagged_at == MOMENT
    entry.refresh_from_db()
    assert (entry.status, entry.resolved_at) == (ReReviewStatus.CLOSED, MOMENT)
    assert [e.created_at for e in events_since(last)] == [MOMENT]


def test_document_approve_and_revoke_read_the_clock_once_each(
    operator: User, make_user: Callable[[str, str], User], counting: Callable[[], CountingClock]
) -> None:
    documents_import(items=[document(approved=False)], actor=operator)
    draft = Document.objects.get()
    second = make_user("otto", Role.OPERATOR)
    last, counter = last_event(), counting()
    document_approve(document=draft, actor=second, reason="checked the sheet")
    assert counter.reads == 1
    document_revoke(document=draft, actor=second, reason="superseded rulebook")
    assert counter.reads == 2
    draft.refresh_from_db()
    assert draft.approved_at == draft.revoked_at == MOMENT
    assert {e.created_at for e in events_since(last)} == {MOMENT}
    assert RevocationImpact.objects.get(item_id=draft.public_id).created_at == MOMENT


def test_an_import_stores_every_item_at_one_moment(
    reviewer: User, counting: Callable[[], CountingClock]
) -> None:
    items = [case_data(incident="INC-7", title="七号事件"), lesson_data(["#0"])]
    items[0]["scope"] = {**SCOPE, "tenant": "fresh-tenant"}
    items[1]["scope"] = {**SCOPE, "tenant": "fresh-tenant"}
    last, counter = last_event(), counting()
    submitted = review_imports.items_import(items=items, actor=reviewer)
    assert counter.reads == 1
    assert Tenant.objects.get(name="fresh-tenant").created_at == MOMENT
    assert selectors.case_get(submitted[0].id).submitted_at == MOMENT
    assert {e.created_at for e in events_since(last)} == {MOMENT}
    assert len(events_since(last)) >= 4  # tenant, case, its import check, lesson


def test_an_admin_edit_of_several_kinds_writes_all_its_events_at_one_moment(
    admin_user: User, reviewer: User, counting: Callable[[], CountingClock]
) -> None:
    last, counter = last_event(), counting()
    user_update(
        actor=admin_user,
        user=reviewer,
        role=Role.OPERATOR,
        is_active=True,
        tenants=["teahouse"],
        profile={"first_name": "Rita"},
    )
    assert counter.reads == 1
    assert [e.created_at for e in events_since(last)] == [MOMENT] * 3


def test_a_write_given_its_moment_never_reads_the_clock(
    checked_candidate: Case,
    second_reviewer: User,
    reviewer: User,
    counting: Callable[[], CountingClock],
) -> None:
    last, counter = last_event(), counting()
    decisions.case_approve(case=checked_candidate, actor=second_reviewer, reason="ok", now=GIVEN)
    lesson, _ = lessons.lesson_submit(
        content=parse_lesson(lesson_data([checked_candidate.id])), actor=reviewer, now=GIVEN
    )
    decisions.lesson_approve(lesson=lesson, actor=second_reviewer, reason="ok", now=GIVEN)
    revocation.case_revoke(case=checked_candidate, actor=second_reviewer, reason="no", now=GIVEN)
    assert counter.reads == 0
    assert {e.created_at for e in events_since(last)} == {GIVEN}


# --- the demo loaders -------------------------------------------------------------------------


class _Watched(types.ModuleType):
    """The clock module, recording every attempt to set one of its names."""

    sets: list[str]

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "sets":
            self.sets.append(name)
        super().__setattr__(name, value)


@pytest.fixture
def watched_clock() -> Iterator[_Watched]:
    module = sys.modules["reviewconsole.clock"]
    original = module.__class__
    module.__class__ = _Watched
    watched: Any = module
    watched.sets = []
    try:
        yield watched
    finally:
        module.__class__ = original
        del module.__dict__["sets"]


FAR = datetime.fromisoformat("2031-06-01T00:00:00+00:00")


def test_the_console_demo_is_dated_by_passing_now_and_leaves_the_clock_alone(
    watched_clock: _Watched, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The seam answers a moment years away: whatever the demo dated by the clock would show it.
    seam = CountingClock(FAR)
    monkeypatch.setattr(clock, "now", seam)
    watched_clock.sets.clear()
    at = datetime.fromisoformat("2027-02-10T09:30:00+08:00")
    with transaction.atomic():
        load_demo_world(now=at)
    assert watched_clock.sets == [] and clock.now is seam
    approved = [c.approved_at for c in Case.objects.exclude(approved_at=None)]
    assert approved and all(a is not None and at - timedelta(days=30) < a < at for a in approved)
    assert all(e <= at for e in Event.objects.values_list("created_at", flat=True))


def test_the_replay_memory_is_dated_by_its_timeline_and_leaves_the_clock_alone(
    watched_clock: _Watched, monkeypatch: pytest.MonkeyPatch
) -> None:
    seam = CountingClock(FAR)
    monkeypatch.setattr(clock, "now", seam)
    watched_clock.sets.clear()
    with transaction.atomic():
        timeline = prepare_demo_memory()
        for event in timeline:
            event.apply()
    assert watched_clock.sets == [] and clock.now is seam and seam.reads == 0
    approved = {c.approved_at for c in Case.objects.exclude(approved_at=None)}
    assert approved == {MEMORY_APPROVED_AT}
    assert Case.objects.filter(revoked_at=timeline[0].at).count() == 1
