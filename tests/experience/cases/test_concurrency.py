"""Races with real threads and real connections, on SQLite (a file) and on PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections, transaction

from experience.cases import selectors, services
from experience.cases.executor import NEEDS_REVIEW, run_skill
from experience.cases.models import Case, Skill
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.demo import demo_context, load_demo_knowledge
from experience.review import decisions, revocation
from experience.runs.models import Run
from reviewconsole import clock
from reviewconsole.models import Action, Event
from tests.experience.conftest import SCOPE, approve_checked, case_data

pytestmark = pytest.mark.django_db(transaction=True)

# How long a thread's work may take before the test fails: waits end on their event (a thread
# done, a run finished), so a passing test never sits this out, however loaded the machine.
WORK_DEADLINE = 120


def in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` in ``count`` threads released together; results or raised exceptions."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def worker(index: int) -> None:
        try:
            barrier.wait()
            results[index] = work(index)
        except Exception as exc:  # collected and asserted on by the test
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WORK_DEADLINE)  # a deadline for a hang, not a wait of its own
    assert not any(thread.is_alive() for thread in threads), "a thread never finished"
    return results


@pytest.fixture
def candidate(reviewer: User, second_reviewer: User) -> Case:
    """A candidate the second reviewer has checked (a check by its submitter does not count)."""
    from experience.cases.schema import parse_case

    case, _ = services.case_submit(content=parse_case(case_data()), actor=reviewer)
    services.evidence_check(case=case, key="diagnosis/0", actor=second_reviewer)
    return case


def test_twenty_concurrent_approvals_give_one_approval_and_one_event(
    candidate: Case, second_reviewer: User
) -> None:
    results = in_threads(
        20, lambda _: decisions.case_approve(case=candidate, actor=second_reviewer, reason="ok")
    )

    approved = [r for r in results if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, ReviewRefused)]
    assert len(approved) == 1
    assert len(refused) == 19, [r for r in results if isinstance(r, Exception)][:3]
    assert all("not_candidate" in r.unmet for r in refused)
    assert Event.objects.filter(action=Action.CASE_APPROVE, target=candidate.id).count() == 1
    assert selectors.case_get(candidate.id).status == Status.APPROVED


def test_approve_racing_reject_ends_in_one_consistent_state(
    candidate: Case, second_reviewer: User
) -> None:
    def act(index: int) -> Any:
        if index % 2:
            return decisions.case_reject(case=candidate, actor=second_reviewer, reason="no")
        return decisions.case_approve(case=candidate, actor=second_reviewer, reason="ok")

    results = in_threads(10, act)

    assert sum(not isinstance(r, Exception) for r in results) == 1
    final = selectors.case_get(candidate.id).status
    assert final in {Status.APPROVED, Status.REJECTED}
    decided = Event.objects.filter(
        target=candidate.id, action__in=[Action.CASE_APPROVE, Action.CASE_REJECT]
    )
    assert decided.count() == 1
    assert decided.get().action == (
        Action.CASE_APPROVE if final == Status.APPROVED else Action.CASE_REJECT
    )


def test_approve_racing_revoke_ends_in_one_consistent_state(
    candidate: Case, second_reviewer: User
) -> None:
    def act(index: int) -> Any:
        if index % 2:
            return revocation.case_revoke(case=candidate, actor=second_reviewer, reason="wrong")
        return decisions.case_approve(case=candidate, actor=second_reviewer, reason="ok")

    results = in_threads(10, act)

    final = selectors.case_get(candidate.id)
    actions = list(
        Event.objects.filter(target=candidate.id)
        .exclude(action=Action.CASE_SUBMIT)
        .exclude(action=Action.CASE_VERIFY)
        .order_by("id")
        .values_list("action", flat=True)
    )
    # Either the revocations all came first (refused: not approved yet) and the case is approved,
    # or one approval then one revocation committed, in that order.
    assert actions in ([Action.CASE_APPROVE], [Action.CASE_APPROVE, Action.CASE_REVOKE])
    assert final.status == (Status.REVOKED if len(actions) == 2 else Status.APPROVED)
    assert sum(not isinstance(r, Exception) for r in results) == len(actions)


@pytest.fixture
def live_skill(operator: User, reviewer: User, second_reviewer: User) -> Skill:
    from experience.cases.schema import parse_case, parse_skill
    from experience.cases.tools import tool_specs
    from tests.experience.conftest import skill_data

    load_demo_knowledge(operator=operator)
    ids = []
    for incident in ("INC-1", "INC-2"):
        case, _ = services.case_submit(
            content=parse_case(case_data(incident=incident, title=f"券不可用 {incident}")),
            actor=reviewer,
        )
        approve_checked(case, actor=second_reviewer, reason="ok")
        ids.append(case.id)
    skill, _ = services.skill_submit(
        content=parse_skill(skill_data(ids), tool_specs()), actor=reviewer
    )
    decisions.skill_approve(skill=skill, actor=second_reviewer, reason="two incidents")
    return skill


def test_skill_runs_racing_a_revocation_never_succeed_after_it_committed(
    live_skill: Skill, second_reviewer: User, agent: User
) -> None:
    cited = live_skill.case_links.order_by("position").first()
    assert cited is not None
    succeeded = threading.Event()
    stop = threading.Event()

    def act(index: int) -> Any:
        if index == 0:
            # Revoke once a run has succeeded, while the runners keep going: the revocation
            # commits between runs in flight, whatever the machine's speed.
            succeeded.wait(timeout=WORK_DEADLINE)
            outcome = revocation.case_revoke(
                case=selectors.case_get(cited.case_id), actor=second_reviewer, reason="wrong"
            )
            stop.set()
            return outcome
        statuses: list[str] = []
        runs_after_revocation = 0
        while runs_after_revocation < 3:
            revoked_before_start = stop.is_set()
            result = run_skill(
                live_skill.id,
                SCOPE,
                demo_context(),
                run_id=f"race-{index}-{len(statuses)}",
                actor=agent,
            )
            statuses.append(result.status)
            if result.status == NEEDS_REVIEW:
                succeeded.set()
            runs_after_revocation += revoked_before_start
        return statuses

    results = in_threads(3, act)

    assert not any(isinstance(r, Exception) for r in results), results
    revoked_at = selectors.case_get(cited.case_id).revoked_at
    assert revoked_at is not None
    successes = Run.objects.filter(run_id__startswith="race-", status=NEEDS_REVIEW)
    assert successes.exists(), "no run succeeded before the revocation; the race was not exercised"
    assert not successes.filter(finished_at__gte=revoked_at).exists()
    late = Run.objects.filter(run_id__startswith="race-", started_at__gt=revoked_at)
    assert late.exists() and not late.filter(status=NEEDS_REVIEW).exists()


def test_identical_submissions_racing_store_one_row(reviewer: User) -> None:
    from experience.cases.schema import parse_case

    content = parse_case(case_data(incident="INC-RACE"))
    results = in_threads(10, lambda _: services.case_submit(content=content, actor=reviewer))

    assert not [r for r in results if isinstance(r, Exception)], results
    assert {case.id for case, _ in results} == {content.id}
    assert sum(created for _, created in results) == 1
    assert Case.objects.filter(pk=content.id).count() == 1
    assert Event.objects.filter(action=Action.CASE_SUBMIT, target=content.id).count() == 1


def test_a_revocation_is_dated_after_the_run_it_waited_for(
    live_skill: Skill, second_reviewer: User
) -> None:
    """A run's finish holds the cited case's row; a revocation arriving meanwhile waits for it.
    Its time is read once it holds the row, so a run that committed before it also finished
    before it: ``revoked_at`` orders the two as their commits did."""
    if connections["default"].vendor != "postgresql":
        pytest.skip(
            "SQLite admits one writer per transaction: the revocation's clock is read inside it"
        )
    cited = live_skill.case_links.order_by("position").first()
    assert cited is not None
    held = threading.Event()
    finished: list[Any] = []

    def revoker_waits() -> bool:
        with connections["default"].cursor() as cursor:
            # The statistics views are read once per transaction unless told to read again.
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            return bool(cursor.fetchone()[0])

    def act(index: int) -> Any:
        if index == 0:
            with transaction.atomic():
                # As a run's last re-check does (experience.cases.executor._lock_rows).
                list(Case.objects.select_for_update().filter(pk=cited.case_id))
                held.set()
                # Polled until the revocation is queued behind this row lock (its event is the
                # server's: a lock wait); the thread's join deadline guards a hang.
                while not revoker_waits():
                    time.sleep(0.005)
                finished.append(clock.now())
            return None
        held.wait(timeout=WORK_DEADLINE)
        return revocation.case_revoke(
            case=selectors.case_get(cited.case_id), actor=second_reviewer, reason="wrong"
        )

    results = in_threads(2, act)

    assert not any(isinstance(r, Exception) for r in results), results
    revoked_at = selectors.case_get(cited.case_id).revoked_at
    assert revoked_at is not None and finished
    assert revoked_at >= finished[0]
