"""``read_request_open`` / ``read_request_record``: the opening recall and the context block share.

Besides its own rules, the preamble is held against the two reads it is written for: for every
bad request below it refuses exactly as ``retrieve_experience`` and ``experience_context`` do
(same exception, field and message), so either can open with it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User

from experience.cases.models import Case
from experience.core.models import ItemType
from experience.retrieval import block, context, service
from experience.retrieval.request import (
    MAX_QUERY,
    QUERY_REQUIRED,
    QUERY_TOO_LONG,
    ReadRequest,
    Size,
    read_request_open,
    read_request_record,
)
from experience.runs.models import Reference, RunOwner
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import TenantMembership
from reviewconsole.roles import Role
from reviewconsole.runids import RUN_ID_INVALID
from reviewconsole.scopes import PLACEHOLDER_SCOPE
from reviewconsole.tenancy import NOT_IN_TENANT
from reviewconsole.timeparse import NOT_AWARE
from tests.experience.conftest import NOW, QUERY, SCOPE

pytestmark = pytest.mark.django_db

AT = NOW + timedelta(minutes=5)
LIMIT = Size("limit", 3, 1, service.MAX_LIMIT, service.LIMIT_INVALID)
REFUSED = service.USE_REFUSED


def opened(actor: Any, **changes: Any) -> ReadRequest:
    arguments: dict[str, Any] = {
        "actor": actor,
        "query": QUERY,
        "scope": SCOPE,
        "now": NOW,
        "run_id": "run-1",
        "size": LIMIT,
        "refused": REFUSED,
        "at": AT,
    }
    return read_request_open(**{**arguments, **changes})


def test_a_complete_request_is_exact_and_stamped_with_the_instant_given(agent: User) -> None:
    request = opened(agent, scope={**SCOPE, "store": "  store-002 "})
    assert request.complete and request.missing == ()
    assert dict(request.scope) == SCOPE
    assert (request.query, request.size, request.now, request.run_id, request.at) == (
        QUERY,
        3,
        NOW,
        "run-1",
        AT,
    )


def test_without_an_instant_the_clock_is_read_once(agent: User, monkeypatch: Any) -> None:
    reads: list[datetime] = []

    def counted() -> datetime:
        reads.append(AT)
        return AT

    monkeypatch.setattr("reviewconsole.clock.now", counted)
    assert opened(agent, at=None).at == AT
    assert len(reads) == 1


@pytest.mark.parametrize("name", ["tenant", "brand", "store", "campaign", "deployment"])
def test_a_missing_field_is_named_and_its_tenant_is_not_checked(name: str, agent: User) -> None:
    TenantMembership.objects.create(user=agent, tenant="another-tenant")
    request = opened(agent, scope={**SCOPE, name: None})
    assert not request.complete
    assert request.missing == (name,) and dict(request.scope) == {}
    with pytest.raises(ValueError):
        read_request_record(request, [])
    assert not RunOwner.objects.exists()


def test_the_size_is_the_callers_own_field() -> None:
    budget = Size("budget", 0, context.MIN_BUDGET, context.MAX_BUDGET, block.BUDGET_INVALID)
    for value in (0, True, "200", 10**9, None):
        with pytest.raises(ValidationFailure) as refusal:
            Size("budget", value, 16, 4000, "m").checked()
        assert (refusal.value.field, refusal.value.message) == ("budget", "m")
    with pytest.raises(ValidationFailure):
        budget.checked()
    assert Size("limit", 20, 1, 20, "m").checked() == 20


def test_recording_claims_the_run_and_records_each_read_at_the_requests_instant(
    approved_case: Callable[..., Case], agent: User, make_user: Callable[[str, str], User]
) -> None:
    case = approved_case()
    request = opened(agent)
    read_request_record(request, [(case.id, ItemType.CASE)])
    owner = RunOwner.objects.get(run_id="run-1")
    assert (owner.owner, owner.tenant, owner.first_read_at) == (agent, SCOPE["tenant"], AT)
    assert list(Reference.objects.values_list("run_id", "item_id", "item_type", "read_at")) == [
        ("run-1", case.id, "case", AT)
    ]
    # Nothing found still opens the run.
    read_request_record(opened(agent, run_id="run-2"), [])
    assert RunOwner.objects.filter(run_id="run-2", owner=agent).exists()
    # Another account's read under the same id opens its own run, stored under an id of its own.
    other = make_user("agent-8", Role.AGENT)
    read_request_record(opened(other), [(case.id, ItemType.CASE)])
    others = RunOwner.objects.get(name="run-1", owner=other)
    assert others.run_id != "run-1" and others.tenant == SCOPE["tenant"]
    assert list(Reference.objects.filter(run_id="run-1").values_list("item_id", flat=True)) == [
        case.id
    ]
    assert Reference.objects.filter(run_id=others.run_id).count() == 1


# --- the same refusals as the two reads it opens ----------------------------------------------

BAD = [
    pytest.param({"query": ""}, ("query", QUERY_REQUIRED), id="empty-query"),
    pytest.param({"query": "   "}, ("query", QUERY_REQUIRED), id="blank-query"),
    pytest.param({"query": 7}, ("query", QUERY_REQUIRED), id="query-not-text"),
    pytest.param({"query": "x" * (MAX_QUERY + 1)}, ("query", QUERY_TOO_LONG), id="long-query"),
    pytest.param({"now": NOW.replace(tzinfo=None)}, ("now", NOT_AWARE), id="naive-now"),
    pytest.param({"run_id": "has space"}, ("run_id", RUN_ID_INVALID), id="run-id-space"),
    pytest.param({"run_id": ""}, ("run_id", RUN_ID_INVALID), id="run-id-empty"),
    pytest.param({"run_id": "r" * 101}, ("run_id", RUN_ID_INVALID), id="run-id-long"),
    pytest.param(
        {"scope": {**SCOPE, "store": "*"}}, ("scope.store", PLACEHOLDER_SCOPE), id="placeholder"
    ),
    # The first failing check wins: the query before the instant, the instant before the run id,
    # the run id before the scope.
    pytest.param(
        {"query": "", "now": NOW.replace(tzinfo=None), "run_id": "a b"},
        ("query", QUERY_REQUIRED),
        id="query-first",
    ),
    pytest.param(
        {"now": NOW.replace(tzinfo=None), "run_id": "a b", "scope": {**SCOPE, "store": "*"}},
        ("now", NOT_AWARE),
        id="now-before-run-id",
    ),
    pytest.param(
        {"run_id": "a b", "scope": {**SCOPE, "store": "*"}},
        ("run_id", RUN_ID_INVALID),
        id="run-id-before-scope",
    ),
]


def _as_retrieval(agent: Any, **changes: Any) -> Any:
    a = {"query": QUERY, "scope": SCOPE, "now": NOW, "run_id": "run-1", **changes}
    return lambda: service.retrieve_experience(
        a["query"], a["scope"], a["now"], a["run_id"], a.get("limit", 3), actor=agent
    )


def _as_block(agent: Any, **changes: Any) -> Any:
    a = {"query": QUERY, "scope": SCOPE, "now": NOW, "run_id": "run-1", **changes}
    return lambda: block.experience_context(
        a["query"], a["scope"], a["now"], a["run_id"], a.get("budget", 200), actor=agent
    )


def refusal_of(call: Callable[[], Any]) -> tuple[str, str]:
    with pytest.raises(ValidationFailure) as refusal:
        call()
    return refusal.value.field, refusal.value.message


@pytest.mark.parametrize(("changes", "expected"), BAD)
def test_bad_requests_are_refused_as_recall_and_the_block_refuse_them(
    changes: dict[str, Any], expected: tuple[str, str], agent: User, at_now: datetime
) -> None:
    assert refusal_of(lambda: opened(agent, **changes)) == expected
    assert refusal_of(_as_retrieval(agent, **changes)) == expected
    budget = Size("budget", 200, context.MIN_BUDGET, context.MAX_BUDGET, block.BUDGET_INVALID)
    assert refusal_of(lambda: opened(agent, size=budget, **changes)) == expected
    assert refusal_of(_as_block(agent, **changes)) == expected
    assert not RunOwner.objects.exists()


def test_the_size_is_checked_after_the_query_and_before_the_instant(
    agent: User, at_now: datetime
) -> None:
    naive = NOW.replace(tzinfo=None)
    limit = Size("limit", 0, 1, service.MAX_LIMIT, service.LIMIT_INVALID)
    assert refusal_of(lambda: opened(agent, size=limit, now=naive)) == (
        "limit",
        service.LIMIT_INVALID,
    )
    assert refusal_of(_as_retrieval(agent, limit=0, now=naive)) == ("limit", service.LIMIT_INVALID)
    budget = Size("budget", 0, context.MIN_BUDGET, context.MAX_BUDGET, block.BUDGET_INVALID)
    assert refusal_of(lambda: opened(agent, size=budget, now=naive)) == (
        "budget",
        block.BUDGET_INVALID,
    )
    assert refusal_of(_as_block(agent, budget=0, now=naive)) == ("budget", block.BUDGET_INVALID)
    assert refusal_of(lambda: opened(agent, size=limit, query="")) == ("query", QUERY_REQUIRED)
    assert refusal_of(_as_retrieval(agent, limit=0, query="")) == ("query", QUERY_REQUIRED)


def test_the_permission_comes_first_and_the_tenant_last(
    agent: User, operator: User, at_now: datetime
) -> None:
    for nobody in (None, AnonymousUser(), operator):
        with pytest.raises(PermissionRefused) as refused:
            opened(nobody, query="")
        assert refused.value.message == REFUSED
        with pytest.raises(PermissionRefused):
            _as_retrieval(nobody, query="")()
    TenantMembership.objects.create(user=agent, tenant="another-tenant")
    with pytest.raises(PermissionRefused) as refused:
        opened(agent)
    assert refused.value.unmet == NOT_IN_TENANT
    with pytest.raises(PermissionRefused) as refused:
        _as_retrieval(agent)()
    assert refused.value.unmet == NOT_IN_TENANT
    # A bad value is refused before the tenant is looked at.
    assert refusal_of(lambda: opened(agent, run_id="a b")) == ("run_id", RUN_ID_INVALID)
    assert refusal_of(_as_retrieval(agent, run_id="a b")) == ("run_id", RUN_ID_INVALID)
    assert not RunOwner.objects.exists()
