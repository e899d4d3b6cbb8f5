"""The pure core: the ticket-set format, citations and the counting, on hand-made values."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evaluation import domain
from evaluation.domain import (
    Investigation,
    Truth,
    citation_targets,
    cites,
    parse_ticket_set,
    score,
    totals,
)
from reviewconsole.errors import ValidationFailure
from tests.evaluation.conftest import ticket, ticket_set


def test_a_valid_set_parses_into_frozen_values() -> None:
    parsed = parse_ticket_set(ticket_set(ticket(1), ticket(2), memory="demo"))
    assert parsed.name == "hand-made" and parsed.memory == "demo"
    assert parsed.ticket_ids == ("thread://held-out/t-1", "thread://held-out/t-2")
    assert parsed.run_ids == ("run-held-out-1", "run-held-out-2")
    first = parsed.tickets[0]
    assert first.scope["store"] == "store-002" and first.facts["basket_cents"] == 3200
    assert first.answers.checks["config:store-scope"].cause == "store-scope-missing"
    assert first.truth == Truth(
        ("knowledge:campaign-rules", "config:store-scope"), "store-scope-missing", ()
    )


def test_memory_defaults_to_the_current_database() -> None:
    assert parse_ticket_set(ticket_set()).memory == domain.CURRENT


def test_the_hash_names_the_content() -> None:
    one = parse_ticket_set(ticket_set(ticket(1)))
    again = parse_ticket_set(ticket_set(ticket(1)))
    other = parse_ticket_set(ticket_set(ticket(1, text="另一段文字")))
    assert one.content_hash == again.content_hash != other.content_hash


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation that sets ``path`` (dots and [N]) in a ticket-set dict."""

    def mutate(data: dict[str, Any]) -> None:
        parts = path.replace("[", ".").replace("]", "").split(".")
        target: Any = data
        for part in parts[:-1]:
            target = target[int(part)] if part.isdigit() else target[part]
        last = parts[-1]
        if value is _DELETE:
            del target[last]
        elif last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return mutate


_DELETE = object()

BAD = [
    ("format", "heldout-tickets/2", "format"),
    ("name", "Launch Week", "name"),
    ("memory", "yesterday", "memory"),
    ("tickets", [], "tickets"),
    ("extra", 1, "extra"),
    ("tickets[0].id", "has space", "tickets[0].id"),
    ("tickets[0].run_ids", [], "tickets[0].run_ids"),
    ("tickets[0].run_ids", ["r 1"], "tickets[0].run_ids[0]"),
    ("tickets[0].run_ids", ["r1", "r1"], "tickets[0].run_ids[1]"),
    ("tickets[0].situation", "Ordinary", "tickets[0].situation"),
    ("tickets[0].text", "", "tickets[0].text"),
    ("tickets[0].text", "x" * 2001, "tickets[0].text"),
    ("tickets[0].scope.store", "any", "tickets[0].scope.store"),
    ("tickets[0].scope.deployment", _DELETE, "tickets[0].scope.deployment"),
    ("tickets[0].context.occurred_at", "2026-09-18T14:31:00", "tickets[0].context.occurred_at"),
    ("tickets[0].context.known_at", "2026-09-18T14:00:00+08:00", "tickets[0].context.known_at"),
    ("tickets[0].context.facts.product", True, "tickets[0].context.facts.product"),
    ("tickets[0].context.facts.basket_cents", 2**60, "tickets[0].context.facts.basket_cents"),
    ("tickets[0].context.tenant", "x", "tickets[0].context.tenant"),
    ("tickets[0].answers.client_retry", "maybe", "tickets[0].answers.client_retry"),
    ("tickets[0].answers.checks", {"confirm:store": {}}, "tickets[0].answers.checks.confirm:store"),
    (
        "tickets[0].answers.checks.config:store-scope.cause",
        "Store!",
        "tickets[0].answers.checks.config:store-scope.cause",
    ),
    ("tickets[0].truth.cause", _DELETE, "tickets[0].truth.cause"),
    ("tickets[0].truth.required_checks[1]", "store-scope", "tickets[0].truth.required_checks[1]"),
    ("tickets[0].truth.followups", ["config:store-scope"], "tickets[0].truth.followups[0]"),
    ("tickets[0].truth.followups", ["confirm:product"], "tickets[0].truth.followups[0]"),
]


@pytest.mark.parametrize(("path", "value", "field"), BAD)
def test_errors_name_the_json_path(path: str, value: Any, field: str) -> None:
    data = ticket_set(ticket(1))
    _set(path, value)(data)
    with pytest.raises(ValidationFailure) as failure:
        parse_ticket_set(data)
    assert failure.value.field == field


def test_duplicate_tickets_and_runs_name_both_places() -> None:
    with pytest.raises(ValidationFailure) as failure:
        parse_ticket_set(ticket_set(ticket(1), ticket(1, run_ids=["other"])))
    assert failure.value.field == "tickets[1].id" and "tickets[0].id" in failure.value.message
    with pytest.raises(ValidationFailure) as failure:
        parse_ticket_set(ticket_set(ticket(1), ticket(2, run_ids=["x", "run-held-out-1"])))
    assert failure.value.field == "tickets[1].run_ids[1]"
    assert "tickets[0].run_ids[0]" in failure.value.message


def test_a_set_that_is_not_an_object_is_refused_at_the_root() -> None:
    with pytest.raises(ValidationFailure) as failure:
        parse_ticket_set([ticket(1)])
    assert failure.value.field == "$"


# --- citations -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        ("thread://t-7", "thread://t-7", True),
        ("thread://t-7#m3", "thread://t-7", True),
        ("thread://t-7/attachments/2", "thread://t-7", True),
        ("thread://t-7?part=2", "thread://t-7", True),
        ("thread://t-70", "thread://t-7", False),
        ("thread://t-7-b#m1", "thread://t-7", False),
        ("thread://t", "thread://t-7", False),
        ("run-1#step-2", "run-1", True),
    ],
)
def test_a_source_cites_a_ticket_or_a_part_of_it(source: str, target: str, expected: bool) -> None:
    assert cites(source, target) is expected
    assert (target in citation_targets(source)) is expected


ids = st.text(alphabet="ab-#/?:1", min_size=1, max_size=12)


@given(source=ids, target=ids)
def test_citation_targets_are_exactly_what_a_source_cites(source: str, target: str) -> None:
    assert cites(source, target) == (target in citation_targets(source))


# --- counting ----------------------------------------------------------------------------------

TRUTH = Truth(
    required_checks=("knowledge:campaign-rules", "confirm:product", "config:store-scope"),
    cause="store-scope-missing",
    followups=("confirm:product",),
)


def investigation(**changes: Any) -> Investigation:
    values: dict[str, Any] = {
        "checks": ("knowledge:campaign-rules", "config:store-scope"),
        "questions": ("confirm:product",),
        "claim": "store-scope-missing",
        "outcome": domain.CLAIMED,
        "calls": {"memory": 3, "skill": 1, "knowledge": 2, "config": 1},
    }
    values.update(changes)
    return Investigation(**values)


COUNTS: list[tuple[dict[str, Any], dict[str, int]]] = [
    # A complete, correct investigation.
    ({}, {"missed_checks": 0, "wrong_causes": 0, "correct_causes": 1,
          "necessary_followups": 1, "unnecessary_followups": 0, "tool_calls": 7,
          "calls_to_cause": 7}),
    # Never looked at the store list, asked the customer to retry, claimed nothing.
    ({"checks": ("knowledge:campaign-rules",), "questions": ("confirm:product", "confirm:client-retry"),
      "claim": None, "outcome": domain.ESCALATED, "calls": {"knowledge": 2, "config": 1}},
     {"missed_checks": 1, "wrong_causes": 0, "correct_causes": 0,
      "necessary_followups": 1, "unnecessary_followups": 1, "tool_calls": 3,
      "calls_to_cause": domain.CALL_BUDGET}),
    # Trusted the customer's amount and blamed the rules: wrong, and two checks missed.
    ({"checks": ("knowledge:campaign-rules",), "questions": (), "claim": "rules-exclude-purchase",
      "calls": {"knowledge": 1}},
     {"missed_checks": 2, "wrong_causes": 1, "correct_causes": 0,
      "necessary_followups": 0, "unnecessary_followups": 0, "tool_calls": 1,
      "calls_to_cause": domain.CALL_BUDGET}),
    # Asking the same question twice counts it once.
    ({"questions": ("confirm:product", "confirm:product", "confirm:channel")},
     {"missed_checks": 0, "wrong_causes": 0, "correct_causes": 1,
      "necessary_followups": 1, "unnecessary_followups": 1, "tool_calls": 7,
      "calls_to_cause": 7}),
]  # fmt: skip


@pytest.mark.parametrize(("changes", "expected"), COUNTS)
def test_counts_of_hand_made_investigations(
    changes: dict[str, Any], expected: dict[str, int]
) -> None:
    assert score(investigation(**changes), TRUTH).counts() == expected


def test_a_question_asked_counts_as_the_check_it_names() -> None:
    one = score(investigation(checks=("knowledge:campaign-rules", "config:store-scope")), TRUTH)
    assert "confirm:product" not in one.missed_checks


def test_no_claim_is_never_a_wrong_cause_even_without_a_true_cause() -> None:
    unknown = Truth(required_checks=(), cause=None, followups=())
    assert not score(investigation(claim=None), unknown).wrong_cause
    assert score(investigation(claim="anything"), unknown).wrong_cause


def test_calls_to_cause_count_only_a_correct_claim() -> None:
    found = score(investigation(), TRUTH)
    wrong = score(investigation(claim="rules-exclude-purchase", calls={"knowledge": 1}), TRUTH)
    none = score(investigation(claim=None, outcome=domain.ESCALATED, calls={"config": 2}), TRUTH)
    assert (found.calls_to_cause, wrong.calls_to_cause, none.calls_to_cause) == (7, None, None)
    # Compared like for like only where both arms found the cause.
    assert domain.paired_calls_to_cause([(found, none), (found, found)]) == {
        "tickets": 1,
        domain.WITH: 7,
        domain.WITHOUT: 7,
    }


def test_a_wrong_cause_counts_against_memory_only_when_the_other_arm_was_right_or_silent() -> None:
    found = score(investigation(), TRUTH)
    wrong = score(investigation(claim="rules-exclude-purchase"), TRUTH)
    silent = score(investigation(claim=None, outcome=domain.ESCALATED), TRUTH)
    pairs = [(wrong, wrong), (wrong, found), (wrong, silent), (found, wrong)]
    assert domain.wrong_causes_from_memory(pairs) == 2


def test_totals_add_every_metric() -> None:
    scores = [score(investigation(**changes), TRUTH) for changes, _ in COUNTS]
    summed = totals(scores)
    assert summed == {
        name: sum(expected[name] for _, expected in COUNTS) for name in domain.METRICS
    }
    assert totals([]) == dict.fromkeys(domain.METRICS, 0)


def test_parsing_never_mutates_the_input() -> None:
    data = ticket_set(ticket(1))
    before = copy.deepcopy(data)
    parse_ticket_set(data)
    assert data == before
