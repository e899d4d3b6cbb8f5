"""The replay's arms driven through the investigation runner with the scripted provider.

The hand-worked figures of the fixed policy (tests/evaluation/test_replay.py) must hold as they
are: the runner gathers the same evidence, its verified answer decides what the policy decided,
and nothing gets worse.
"""

from __future__ import annotations

from typing import Any

import pytest

from evaluation.domain import parse_ticket_set
from evaluation.replay import replay_tickets
from investigations.domain import Transcript, Turn
from investigations.scripted import ScriptedProvider
from tests.evaluation.conftest import demo_memory, ticket, ticket_set
from tests.evaluation.test_replay import KNOWN

__all__ = ["demo_memory"]

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("data", "with_memory", "without_memory"), KNOWN)
def test_the_scripted_provider_through_the_runner_keeps_every_figure(
    demo_memory: dict[str, Any],
    data: dict[str, Any],
    with_memory: dict[str, int],
    without_memory: dict[str, int],
) -> None:
    [result] = replay_tickets(parse_ticket_set(ticket_set(data)), provider=ScriptedProvider())
    with_score, without_score = result.scores
    assert with_score.counts() == with_memory
    assert without_score.counts() == without_memory
    assert any(
        step.kind == "answer" and step.result == "verified" for step in result.with_memory.steps
    )


class Hostile:
    """Claims the rules exclude the purchase, citing nothing this run returned."""

    name = "hostile"

    def next_turn(self, transcript: Transcript) -> Turn:
        return Turn(
            answer='{"conclusion": "The rules exclude it.", "conclusion_code": '
            '"rules_exclude_purchase", "followups": [], "citations": '
            '[{"id": "doc:rule-a@2", "quote": "milk tea only"}]}'
        )


def test_a_refused_answer_claims_nothing(demo_memory: dict[str, Any]) -> None:
    parsed = parse_ticket_set(ticket_set(ticket(1)))
    [result] = replay_tickets(parsed, provider=Hostile())
    for arm in (result.with_memory, result.without_memory):
        assert arm.claim is None
        assert arm.outcome == "escalated"
