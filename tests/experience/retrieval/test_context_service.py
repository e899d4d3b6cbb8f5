"""``experience_context`` and ``recall --format context``: the gate, the reads, the budget."""

from __future__ import annotations

import json
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from experience.cases.models import Case
from experience.retrieval.block import BUDGET_INVALID, experience_context
from experience.retrieval.context import TOKENIZER, count_tokens
from experience.review import revocation
from experience.runs.models import Reference, RunOwner
from knowledge.domain import HISTORICAL_CASE_PREFIX
from reviewconsole.errors import PermissionRefused, ValidationFailure
from tests.experience.conftest import NOW, QUERY, SCOPE

pytestmark = pytest.mark.django_db

SCOPE_FLAGS = [f"--{name}={value}" for name, value in SCOPE.items()]


def recall(*args: str) -> tuple[dict[str, Any], bool]:
    out = StringIO()
    try:
        call_command("recall", *args, "--json", stdout=out)
    except CommandError:
        return json.loads(out.getvalue()), False
    return json.loads(out.getvalue()), True


def test_approved_case_is_in_the_block_and_read_under_the_run(
    approved_case: Callable[..., Case], agent: User
) -> None:
    case = approved_case()
    result = experience_context(QUERY, SCOPE, NOW, "run-c", 200, actor=agent)
    assert (result["status"], result["budget"], result["tokenizer"]) == ("ok", 200, TOKENIZER)
    assert result["items"] == [{"id": case.id, "type": "case", "confidence": 0.5}]
    assert case.id in result["block"] and HISTORICAL_CASE_PREFIX in result["block"]
    assert result["tokens"] == count_tokens(result["block"]) <= 200
    assert list(Reference.objects.values_list("run_id", "item_id")) == [("run-c", case.id)]
    assert RunOwner.objects.filter(run_id="run-c", owner=agent).exists()


def test_candidates_revoked_and_other_scopes_are_left_out(
    approved_case: Callable[..., Case],
    submit_case: Callable[..., Case],
    agent: User,
    second_reviewer: User,
) -> None:
    from tests.experience.conftest import case_data

    submit_case(case_data(incident="INC-9", title="优惠券无法使用：候选"))
    revoked = approved_case(incident="INC-8", title="优惠券无法使用：已撤销")
    revocation.case_revoke(case=revoked, actor=second_reviewer, reason="wrong")
    approved_case(incident="INC-7", scope={**SCOPE, "store": "store-001"})
    result = experience_context(QUERY, SCOPE, NOW, "run-x", 500, actor=agent)
    assert result["items"] == [] and result["block"] == ""
    assert not Reference.objects.exists()


def test_below_the_threshold_is_left_out(
    approved_case: Callable[..., Case], agent: User, settings: Any
) -> None:
    approved_case()
    settings.CONTEXT_CONFIDENCE_THRESHOLD = 0.51  # one fresh incident scores 0.5
    assert experience_context(QUERY, SCOPE, NOW, "run-t", 500, actor=agent)["items"] == []


def test_budget_cuts_the_block(approved_case: Callable[..., Case], agent: User) -> None:
    approved_case(incident="INC-1")
    approved_case(incident="INC-2", title="二号店优惠券无法使用：商品列表漏配")
    full = experience_context(QUERY, SCOPE, NOW, "run-1", 1_000, actor=agent)
    assert len(full["items"]) == 2
    first_line_budget = count_tokens("\n".join(full["block"].split("\n")[:2]))
    cut = experience_context(QUERY, SCOPE, NOW, "run-2", first_line_budget, actor=agent)
    assert cut["items"] == full["items"][:1]
    assert cut["tokens"] <= first_line_budget
    assert Reference.objects.filter(run_id="run-2").count() == 1


@pytest.mark.parametrize("budget", [0, -1, 32_001, True, "10"])
def test_bad_budget_is_refused_naming_the_field(agent: User, budget: Any) -> None:
    with pytest.raises(ValidationFailure) as refused:
        experience_context(QUERY, SCOPE, NOW, "run-1", budget, actor=agent)
    assert (refused.value.field, refused.value.message) == ("budget", BUDGET_INVALID)


def test_operator_may_not_read_the_block(operator: User) -> None:
    with pytest.raises(PermissionRefused):
        experience_context(QUERY, SCOPE, NOW, "run-1", 100, actor=operator)


def test_missing_scope_is_a_fallback(agent: User) -> None:
    result = experience_context(QUERY, {**SCOPE, "store": None}, NOW, "run-1", 100, actor=agent)
    assert (result["status"], result["missing"], result["items"], result["tokens"]) == (
        "fallback",
        ["store"],
        [],
        0,
    )


def test_recall_format_context(approved_case: Callable[..., Case]) -> None:
    case = approved_case()
    result, ok = recall(
        QUERY, *SCOPE_FLAGS, "--run-id", "run-r", "--now", NOW.isoformat(),
        "--format", "context", "--budget", "120",
    )  # fmt: skip
    assert ok
    assert set(result) >= {"status", "block", "items", "tokens", "budget", "tokenizer"}
    assert result["items"] == [{"id": case.id, "type": "case", "confidence": 0.5}]
    assert result["tokens"] <= result["budget"] == 120
    assert Reference.objects.filter(run_id="run-r", item_id=case.id).exists()


def test_recall_format_context_needs_a_budget(approved_case: Callable[..., Case]) -> None:
    result, ok = recall(QUERY, *SCOPE_FLAGS, "--run-id", "r", "--format", "context")
    assert not ok and result["field"] == "--budget"


def recall_text(*args: str) -> str:
    out = StringIO()
    call_command("recall", *args, stdout=out)
    return out.getvalue()


def test_the_text_of_an_empty_block_says_why(approved_case: Callable[..., Case]) -> None:
    """A budget too small for any item is named with the budget that would hold one; with room
    enough, an empty block means nothing of the scope is eligible."""
    from experience.retrieval.context import smallest_block

    approved_case()
    common = [QUERY, *SCOPE_FLAGS, f"--now={NOW.isoformat()}", "--format", "context"]
    small = recall_text(*common, "--run-id", "run-small", "--budget", "20")
    assert "tokens: 0 of 20" in small
    assert f"give --budget {smallest_block()} or more" in small
    roomy = recall_text(*common, "--run-id", "run-roomy", "--budget", str(smallest_block() + 400))
    assert "nothing fits" not in roomy and "confidence=" in roomy
    elsewhere = [QUERY, *[f for f in SCOPE_FLAGS if "--store=" not in f], "--store=store-999"]
    empty = recall_text(
        *elsewhere, f"--now={NOW.isoformat()}", "--format", "context", "--run-id", "run-none",
        "--budget", "2000",
    )  # fmt: skip
    assert "no reviewed item of this scope is eligible now" in empty


def test_the_text_of_recalled_items_shows_their_confidence(
    approved_case: Callable[..., Case],
) -> None:
    case = approved_case()
    text = recall_text(QUERY, *SCOPE_FLAGS, f"--now={NOW.isoformat()}", "--run-id", "run-t")
    assert case.id in text
    assert (
        "confidence 0.500" in text
    )  # one reviewed incident, nothing against it (the Wilson bound)
