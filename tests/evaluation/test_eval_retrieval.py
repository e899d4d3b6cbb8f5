"""``eval_retrieval``: a labelled query file scored through the retrievals agents use.

A tiny world (three documents, one case) under the fake embedder (``tests.semantic.fakes``:
texts are near when they name the same concept, whatever their words), and a query file whose
scores are computed by hand below from what each arm can find:

- lexical: a query finds the items it shares a token with;
- vector: also the items naming the query's concept (threshold, delivery), nothing else.
"""

from __future__ import annotations

import io
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from experience.cases import services as case_services
from experience.cases.schema import parse_case
from experience.runs.models import Reference, Run, RunOwner
from knowledge.services import documents_import
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.experience.conftest import SCOPE, approve_checked, case_data
from tests.helpers import tenants_exist
from tests.knowledge.conftest import document

CONCEPTS = "tests.semantic.fakes.concepts"
AT = "2026-10-01T12:00:00+08:00"
NOW = datetime.fromisoformat(AT)
KNOWLEDGE_SCOPE = ["--store", "store-100", "--campaign", "campaign-x"]

THRESHOLD = document(
    doc_key="rule-threshold", title="活动X满减规则", text="满50元减10元，起用金额以活动商品计。"
)
CHANNEL = document(
    doc_key="rule-channel", title="活动X渠道限制", text="活动X的优惠券仅限小程序下单使用。"
)
DELIVERY = document(
    doc_key="delivery-en", title="Courier orders", text="Courier orders (delivery) take coupons."
)


def line(**fields: Any) -> str:
    return json.dumps(fields, ensure_ascii=False)


@pytest.fixture
def world(
    settings: Any, operator: User, reviewer: User, second_reviewer: User, frozen_clock: Any
) -> str:
    """The documents and an approved delivery case (外卖: the delivery concept), embedded."""
    settings.SEMANTIC_EMBEDDER = CONCEPTS
    frozen_clock(NOW)
    tenants_exist(settings.DEMO_TENANT)
    documents_import(items=[THRESHOLD, CHANNEL, DELIVERY], actor=operator)
    data = case_data(title="外卖订单优惠券无法使用", summary="顾客在外卖订单里用券失败。")
    case, _ = case_services.case_submit(content=parse_case(data), actor=reviewer)
    approve_checked(case, actor=second_reviewer)
    return str(case.id)


@pytest.fixture
def searcher(db: None) -> User:
    tenants_exist(settings.DEMO_TENANT)
    return user_set_role(username="sam-agent", role=Role.AGENT, tenants=[settings.DEMO_TENANT])


def queries(case_id: str) -> list[str]:
    knowledge = {"kind": "knowledge"}
    experience = {"kind": "experience", **{f: SCOPE[f] for f in ("store", "campaign")}}
    experience["deployment"] = SCOPE["deployment"]
    return [
        # Q1 en→zh: no shared token; the threshold concept.
        line(
            id="q1",
            **knowledge,
            query="threshold?",
            language="en",
            answer_language="zh",
            expected=["doc:rule-threshold"],
        ),
        # Q2 zh→zh: the channel rule's own words; no concept.
        line(
            id="q2",
            **knowledge,
            query="小程序下单",
            language="zh",
            answer_language="zh",
            expected=["doc:rule-channel@1"],
        ),
        # Q3 zh→en: the delivery concept only.
        line(
            id="q3",
            **knowledge,
            query="配送",
            language="zh",
            answer_language="en",
            expected=["doc:delivery-en"],
        ),
        # Q4 en→zh, experience: the case's delivery concept only.
        line(
            id="q4",
            **experience,
            query="delivery",
            language="en",
            answer_language="zh",
            expected=[case_id],
        ),
        # Q5 zh→zh: the channel rule shares more words than the expected threshold rule.
        line(
            id="q5",
            **knowledge,
            query="活动X的优惠券仅限小程序下单",
            language="zh",
            answer_language="zh",
            expected=["doc:rule-threshold"],
        ),
        # Q6 zh→zh: both rules share 活动; two expected, one fits in the top 1.
        line(
            id="q6",
            **knowledge,
            query="活动X",
            language="zh",
            answer_language="zh",
            expected=["doc:rule-threshold", "doc:rule-channel"],
        ),
        "",
        # N1 en: nothing shares a word or a concept with it.
        line(id="n1", **knowledge, query="wifi password", language="en", expected=[]),
        # N2 zh: the threshold concept (门槛), without a shared token: the vector arm's guess.
        line(id="n2", **knowledge, query="门槛是多少", language="zh", expected=[]),
    ]


def run(tmp_path: Path, lines: list[str], *args: str) -> dict[str, Any]:
    path = tmp_path / "queries.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = io.StringIO()
    call_command(
        "eval_retrieval", str(path), "--json", "--now", AT, *KNOWLEDGE_SCOPE, *args, stdout=out
    )
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def test_the_scores_of_both_arms_are_the_hand_computed_ones(
    world: str, searcher: User, tmp_path: Path
) -> None:
    result = run(tmp_path, queries(world), "-k", "1", "--as", "sam-agent")

    assert result["ok"] and result["arms"] == ["lexical", "vector"]
    assert result["embedder"] == "fake:concepts-v1"
    assert (result["k"], result["paraphrases"], result["nothing"]) == (1, 6, 2)
    lexical, vector = result["summary"]["lexical"], result["summary"]["vector"]
    # Lexical: q2 rank 1 (recall 1), q5 rank 2 (recall@1 0), q6 rank 1 (one of two: 0.5), the
    # rest nothing. recall (1 + 0.5) / 6, MRR (1 + 1/2 + 1) / 6.
    assert lexical["paraphrases"] == {
        "queries": 6,
        "hits_at_k": 2,
        "recall_at_k": 0.25,
        "mrr": 0.417,
    }
    # Vector: q1, q3, q4 found by their concept at rank 1 as well.
    assert vector["paraphrases"] == {
        "queries": 6,
        "hits_at_k": 5,
        "recall_at_k": 0.75,
        "mrr": 0.917,
    }
    assert lexical["nothing"] == {
        "queries": 2,
        "answered_nothing": 2,
        "share": 1.0,
        "items_returned": 0,
    }
    assert vector["nothing"] == {
        "queries": 2,
        "answered_nothing": 1,
        "share": 0.5,
        "items_returned": 1,
    }
    assert [
        (p["pair"], p["queries"], p["hits_at_k"], p["recall_at_k"], p["mrr"])
        for p in lexical["pairs"]
    ] == [
        ("en→zh", 2, 0, 0.0, 0.0),
        ("zh→en", 1, 0, 0.0, 0.0),
        ("zh→zh", 3, 2, 0.5, 0.833),
    ]
    assert [
        (p["pair"], p["queries"], p["hits_at_k"], p["recall_at_k"], p["mrr"])
        for p in vector["pairs"]
    ] == [
        ("en→zh", 2, 2, 1.0, 1.0),
        ("zh→en", 1, 1, 1.0, 1.0),
        ("zh→zh", 3, 2, 0.5, 0.833),
    ]
    assert [(n["language"], n["answered_nothing"]) for n in vector["nothing_by_language"]] == [
        ("en", 1),
        ("zh", 0),
    ]
    assert vector["kinds"]["experience"]["paraphrases"]["hits_at_k"] == 1
    assert lexical["kinds"]["experience"]["paraphrases"]["hits_at_k"] == 0
    assert lexical["semantic"] == {"off": 8} and vector["semantic"] == {"used": 8}
    by_id = {r["id"]: r for r in result["results"]}
    assert by_id["q5"]["lexical"]["rank"] == 2 and by_id["q5"]["lexical"]["found_at_k"] == 0
    assert [i["id"] for i in by_id["n2"]["vector"]["returned"]] == ["doc:rule-threshold@1"]
    assert by_id["n2"]["vector"]["returned"][0]["found_by"] == ["vector"]
    assert by_id["n2"]["pair"] == "zh→∅" and by_id["q3"]["pair"] == "zh→en"


def test_the_evaluation_records_no_read_and_claims_no_run(
    world: str, searcher: User, tmp_path: Path
) -> None:
    before = (Run.objects.count(), Reference.objects.count(), RunOwner.objects.count())

    result = run(tmp_path, queries(world), "--as", "sam-agent")

    # The case was returned (a retrieval records that read and claims its run id) ...
    assert result["summary"]["vector"]["kinds"]["experience"]["paraphrases"]["hits_at_k"] == 1
    # ... and nothing of it is left.
    assert (Run.objects.count(), Reference.objects.count(), RunOwner.objects.count()) == before


def test_a_scope_without_vectors_is_refused_and_reported_with_allow_unindexed(
    world: str, searcher: User, tmp_path: Path, settings: Any
) -> None:
    settings.SEMANTIC_EMBEDDER = "tests.semantic.fakes.other_model"  # nothing packed with it
    lines = [queries(world)[0]]

    with pytest.raises(CommandError, match="reembed --wait"):
        run(tmp_path, lines, "--as", "sam-agent")
    result = run(tmp_path, lines, "--as", "sam-agent", "--allow-unindexed")

    assert result["summary"]["vector"]["semantic"] == {"not_indexed": 1}
    assert "not_indexed 1" in result["warnings"][0]


def test_with_the_embedder_off_only_lexical_only_runs(
    world: str, searcher: User, tmp_path: Path, settings: Any
) -> None:
    settings.SEMANTIC_EMBEDDER = "off"
    lines = queries(world)[1:2]

    with pytest.raises(CommandError, match="--lexical-only"):
        run(tmp_path, lines, "--as", "sam-agent")
    result = run(tmp_path, lines, "--as", "sam-agent", "--lexical-only")

    assert result["arms"] == ["lexical"] and result["embedder"] is None
    assert result["summary"]["lexical"]["paraphrases"]["hits_at_k"] == 1


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("not json", "line 2"),
        ('["a list"]', "line 2"),
        (line(kind="search", query="x", language="en", expected=[]), "line 2: kind"),
        (line(kind="knowledge", query=" ", language="en", expected=[]), "line 2: query"),
        (line(kind="knowledge", query="x", expected=[]), "line 2: language"),
        (line(kind="knowledge", query="x", language="en", expected="doc:a"), "line 2: expected"),
        (line(kind="knowledge", query="x", language="en", expected=["case:1"]), "line 2: expected"),
        (
            line(kind="knowledge", query="x", language="en", expected=["doc:a"]),
            "line 2: answer_language",
        ),
        (
            line(kind="knowledge", query="x", language="en", expected=[], answer_language="zh"),
            "line 2: answer_language",
        ),
        (
            line(kind="knowledge", query="x", language="en", expected=[], expect=["doc:a"]),
            "line 2: expect",
        ),
        (
            line(kind="knowledge", query="x", language="en", expected=[], known_at="2026-10-01"),
            "line 2: known_at",
        ),
        (line(kind="experience", query="x", language="en", expected=[]), "line 2: deployment"),
        (line(id="n1", kind="knowledge", query="x", language="en", expected=[]), "line 2: id"),
    ],
)
def test_a_wrong_line_is_refused_naming_its_line_and_field(
    text: str, field: str, searcher: User, tmp_path: Path
) -> None:
    first = line(id="n1", kind="knowledge", query="wifi", language="en", expected=[])
    path = tmp_path / "queries.jsonl"
    path.write_text(first + "\n" + text + "\n", encoding="utf-8")
    out = io.StringIO()

    with pytest.raises(CommandError):
        call_command(
            "eval_retrieval",
            str(path),
            "--json",
            "--lexical-only",
            "--now",
            AT,
            *KNOWLEDGE_SCOPE,
            stdout=out,
        )

    refusal = json.loads(out.getvalue())
    assert refusal["ok"] is False and refusal["field"] == field


def test_without_json_the_report_is_a_markdown_table(
    world: str, searcher: User, tmp_path: Path
) -> None:
    path = tmp_path / "queries.jsonl"
    path.write_text("\n".join(queries(world)[:2]) + "\n", encoding="utf-8")
    out = io.StringIO()

    call_command(
        "eval_retrieval", str(path), "--now", AT, *KNOWLEDGE_SCOPE, "--as", "sam-agent", stdout=out
    )

    table = out.getvalue()
    assert "| queries | n | lexical | lexical + vector |" in table
    # q1 (en→zh) is found only by meaning, q2 (zh→zh) by both arms: recall · found · MRR.
    assert "| &nbsp;&nbsp;en→zh | 1 | 0.000 · 0/1 · 0.000 | 1.000 · 1/1 · 1.000 |" in table
    assert "| &nbsp;&nbsp;zh→zh | 1 | 1.000 · 1/1 · 1.000 | 1.000 · 1/1 · 1.000 |" in table
