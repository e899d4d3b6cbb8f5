"""The command contracts (docs/contracts.md, Commands) through ``call_command(..., "--json")``."""

from __future__ import annotations

import json
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from experience.cases import selectors
from experience.cases.models import Case, EvidenceCheck, Skill
from experience.core import domain
from experience.runs.models import Reference, Run
from knowledge.services import documents_import
from reviewconsole.cli import read_json_file
from reviewconsole.models import Action, Event
from reviewconsole.roles import Role
from reviewconsole.services import SYSTEM_AGENT, system_agent
from tests.experience.conftest import NOW, QUERY, case_data, skill_data, without_verified

pytestmark = pytest.mark.django_db

SCOPE_FLAGS = [
    "--tenant", "teahouse", "--brand", "leaf-and-cup", "--store", "store-002",
    "--campaign", "campaign-b", "--deployment", "release-1",
]  # fmt: skip
TICKET_FLAGS = [
    "--at", "2026-09-18T14:00:00+08:00", "--known-at", "2026-09-18T14:10:00+08:00",
    "--channel", "miniapp", "--product", "fruit-tea", "--basket-cents", "3200",
]  # fmt: skip


def run(*args: str) -> tuple[dict[str, Any], bool]:
    """The single JSON object a command printed, and whether it exited successfully."""
    out = StringIO()
    try:
        call_command(*args, "--json", stdout=out)
    except CommandError:
        ok = False
    else:
        ok = True
    return json.loads(out.getvalue()), ok


def write(tmp_path: Path, items: Any) -> str:
    path = tmp_path / "items.json"
    path.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    return str(path)


# --- import_cases ------------------------------------------------------------------------------


def test_import_cases(tmp_path: Path, reviewer: User, at_now: Any) -> None:
    file = write(
        tmp_path,
        [case_data(incident="INC-1"), case_data(incident="INC-2"), skill_data(["#0", "#1"])],
    )
    result, ok = run("import_cases", file, "--as", reviewer.username)
    assert ok
    assert [(i["index"], i["type"], i["created"]) for i in result["items"]] == [
        (0, "case", True),
        (1, "case", True),
        (2, "skill", True),
    ]
    assert all(i["id"].startswith(f"{i['type']}:") for i in result["items"])
    again, ok = run("import_cases", file, "--as", reviewer.username)
    assert ok and [i["id"] for i in again["items"]] == [i["id"] for i in result["items"]]
    assert not any(i["created"] for i in again["items"])
    assert Case.objects.count() == 2 and Skill.objects.count() == 1


@pytest.mark.parametrize(
    ("items", "field"),
    [
        ([case_data(), case_data(scope={"tenant": "teahouse"})], "[1].scope.brand"),
        ([case_data(valid_to="2027-01-01T00:00:00")], "[0].valid_to"),
        (
            [skill_data(["#0"], recipe=[{"tool": "sql", "arguments": {"query": "x"}}])],
            "[0].recipe[0].tool",
        ),
        ({"type": "case"}, "$"),
    ],
)
def test_import_refusal_names_the_path_and_writes_nothing(
    tmp_path: Path, reviewer: User, at_now: Any, items: Any, field: str
) -> None:
    result, ok = run("import_cases", write(tmp_path, items), "--as", reviewer.username)
    assert not ok and result["ok"] is False and result["field"] == field
    assert (
        not Case.objects.exists() and not Event.objects.filter(action=Action.CASE_SUBMIT).exists()
    )


def test_import_verified_without_permission(tmp_path: Path, operator: User, at_now: Any) -> None:
    result, ok = run("import_cases", write(tmp_path, [case_data()]), "--as", operator.username)
    assert not ok and result["field"] == "[0].diagnosis.evidence[0].verified"
    assert not Case.objects.exists()


def test_import_bad_json_and_unknown_user(tmp_path: Path, reviewer: User) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[{", encoding="utf-8")
    result, ok = run("import_cases", str(bad), "--as", reviewer.username)
    assert not ok and result["field"] == "FILE"
    result, ok = run("import_cases", str(bad), "--as", "nobody")
    assert not ok and result["field"] == "--as"


# --- review --------------------------------------------------------------------------------------


def test_review_approve_refusal_lists_unmet(
    tmp_path: Path, operator: User, reviewer: User, at_now: Any
) -> None:
    result, _ = run(
        "import_cases", write(tmp_path, [without_verified(case_data())]), "--as", operator.username
    )
    case_id = result["items"][0]["id"]
    refusal, ok = run("review", "approve", case_id, "--as", reviewer.username)
    assert not ok
    assert refusal == {
        "ok": False,
        "id": case_id,
        "status": "candidate",
        "unmet": [domain.REASON_REQUIRED, domain.NO_CHECKED_DIAGNOSIS_EVIDENCE],
        "impact": {"skills": [], "runs": []},
    }
    refusal, ok = run("review", "approve", case_id, "--as", operator.username, "--reason", "ok")
    assert not ok and domain.NOT_REVIEWER in refusal["unmet"]
    assert selectors.case_get(case_id).status == "candidate"


def test_review_verify_then_approve(
    tmp_path: Path,
    operator: User,
    reviewer: User,
    second_reviewer: User,
    at_now: Any,
) -> None:
    result, _ = run(
        "import_cases", write(tmp_path, [without_verified(case_data())]), "--as", operator.username
    )
    case_id = result["items"][0]["id"]
    verified, ok = run(
        "review", "verify", case_id, "--evidence", "diagnosis/0", "--as", reviewer.username,
        "--note", "对照了原消息",
    )  # fmt: skip
    assert ok and (verified["ok"], verified["id"], verified["evidence"]) == (
        True,
        case_id,
        "diagnosis/0",
    )
    assert EvidenceCheck.objects.get().checked_by == reviewer
    approved, ok = run("review", "approve", case_id, "--as", reviewer.username, "--reason", "ok")
    assert ok and approved == {
        "ok": True,
        "id": case_id,
        "status": "approved",
        "unmet": [],
        "impact": {"skills": [], "runs": []},
    }


def test_review_verify_refusals(
    tmp_path: Path, operator: User, reviewer: User, at_now: Any
) -> None:
    result, _ = run(
        "import_cases", write(tmp_path, [without_verified(case_data())]), "--as", operator.username
    )
    case_id = result["items"][0]["id"]
    refusal, ok = run(
        "review", "verify", case_id, "--evidence", "diagnosis/0", "--as", operator.username
    )
    assert not ok and refusal["ok"] is False and refusal["unmet"] == [domain.NOT_REVIEWER]
    missing, ok = run(
        "review", "verify", case_id, "--evidence", "diagnosis/4", "--as", reviewer.username
    )
    assert not ok and missing["field"] == "evidence"
    assert not EvidenceCheck.objects.exists()


def test_review_reject_and_revoke_with_impact(
    approved_skill: Callable[..., Skill],
    submit_case: Callable[..., Case],
    second_reviewer: User,
) -> None:
    skill = approved_skill()
    case_id = skill.case_links.order_by("position").values_list("case_id", flat=True)[0]
    Reference.objects.create(run_id="run-7", item_id=skill.id, item_type="skill", read_at=NOW)
    candidate = submit_case(case_data(incident="INC-9"))
    rejected, ok = run(
        "review", "reject", candidate.id, "--as", second_reviewer.username, "--reason", "证据不足"
    )
    assert ok and rejected["status"] == "rejected"

    preview, ok = run("review", "revoke", case_id, "--as", second_reviewer.username, "--preview")
    assert ok and preview["impact"] == {"skills": [skill.id], "runs": ["run-7"]}
    assert preview["unmet"] == [domain.REASON_REQUIRED]
    assert selectors.case_get(case_id).status == "approved"

    no_reason, ok = run("review", "revoke", case_id, "--as", second_reviewer.username)
    assert not ok and no_reason["unmet"] == [domain.REASON_REQUIRED]
    revoked, ok = run(
        "review", "revoke", case_id, "--as", second_reviewer.username, "--reason", "错误"
    )
    assert ok and revoked == {
        "ok": True,
        "id": case_id,
        "status": "revoked",
        "unmet": [],
        "impact": {"skills": [skill.id], "runs": ["run-7"]},
    }


def test_review_revoke_knowledge_document(operator: User, reviewer: User, at_now: Any) -> None:
    documents_import(items=read_json_file("fixtures/knowledge.json"), actor=operator)
    refusal, ok = run(
        "review", "revoke", "doc:rule-b@1", "--as", reviewer.username, "--reason", "x"
    )
    assert not ok and refusal["unmet"] == ["not_permitted"]
    revoked, ok = run(
        "review", "revoke", "doc:rule-b@1", "--as", operator.username, "--reason", "规则有误"
    )
    assert ok and (revoked["status"], revoked["impact"]) == ("revoked", {"skills": [], "runs": []})
    unknown, ok = run("review", "revoke", "doc:nope@1", "--as", operator.username, "--reason", "x")
    assert not ok and unknown["ok"] is False


def test_review_unknown_id(reviewer: User) -> None:
    result, ok = run(
        "review", "approve", "case:" + "0" * 64, "--as", reviewer.username, "--reason", "x"
    )
    assert not ok and result["ok"] is False and result["field"] == "id"


# --- recall and run_skill --------------------------------------------------------------------------


def test_recall(approved_case: Callable[..., Case]) -> None:
    case = approved_case()
    result, ok = run(
        "recall", QUERY, *SCOPE_FLAGS, "--run-id", "run-r", "--now", "2026-10-02T00:00:00+08:00"
    )
    (item,) = result.pop("items")
    assert ok and result == {"status": "ok", "missing": []}
    assert {k: item[k] for k in ("id", "type", "title", "conflict")} == {
        "id": case.id,
        "type": "case",
        "title": case.title,
        "conflict": False,
    }
    assert 0 < item["confidence"] <= 0.5
    assert Reference.objects.filter(run_id="run-r", item_id=case.id).exists()


def test_recall_missing_scope_is_a_fallback_not_a_usage_error(
    approved_case: Callable[..., Case],
) -> None:
    approved_case()
    result, ok = run(
        "recall", QUERY, "--tenant", "teahouse", "--brand", "leaf-and-cup", "--run-id", "r"
    )
    assert ok and result == {
        "status": "fallback",
        "missing": ["store", "campaign", "deployment"],
        "items": [],
    }


def test_recall_naive_now_is_refused(approved_case: Callable[..., Case]) -> None:
    result, ok = run("recall", QUERY, *SCOPE_FLAGS, "--run-id", "r", "--now", "2026-10-02T00:00:00")
    assert not ok and result["field"] == "--now"


def test_run_skill(approved_skill: Callable[..., Skill], operator: User) -> None:
    documents_import(items=read_json_file("fixtures/knowledge.json"), actor=operator)
    skill = approved_skill()
    result, ok = run("run_skill", skill.id, *SCOPE_FLAGS, *TICKET_FLAGS, "--run-id", "run-k")
    assert ok
    assert {"status", "reason", "run_id", "tool_calls", "steps", "observations", "cases"} <= set(
        result
    )
    assert (result["status"], result["run_id"], result["tool_calls"]) == (
        "needs_review",
        "run-k",
        1,
    )
    assert sorted(result["cases"]) == sorted(skill.cases.values_list("id", flat=True))

    other = [*SCOPE_FLAGS[:-1], "release-2"]
    gated, ok = run("run_skill", skill.id, *other, *TICKET_FLAGS, "--run-id", "run-g")
    assert ok and (gated["status"], gated["tool_calls"]) == ("fallback", 0)

    partial, ok = run("run_skill", skill.id, *SCOPE_FLAGS, *TICKET_FLAGS[:4], "--run-id", "run-p")
    assert ok and (partial["status"], partial["tool_calls"]) == ("fallback", 1)

    no_scope, ok = run("run_skill", skill.id, *TICKET_FLAGS, "--run-id", "run-n")
    assert ok and no_scope["status"] == "fallback" and no_scope["tool_calls"] == 0
    assert Run.objects.count() == 4


def test_without_as_the_commands_act_as_the_system_agent(
    approved_skill: Callable[..., Skill], operator: User
) -> None:
    skill = approved_skill()
    recalled, ok = run("recall", QUERY, *SCOPE_FLAGS, "--run-id", "run-a", "--now", NOW.isoformat())
    assert ok and recalled["status"] == "ok"
    ran, ok = run("run_skill", skill.id, *SCOPE_FLAGS, *TICKET_FLAGS, "--run-id", "run-b")
    assert ok and ran["status"] == "fallback"
    agent = User.objects.get(username=SYSTEM_AGENT)
    assert list(agent.groups.values_list("name", flat=True)) == [Role.AGENT]
    assert Run.objects.get(run_id="run-b").actor == agent


def test_the_system_agent_is_refused_once_it_loses_the_use_permission(
    approved_case: Callable[..., Case],
) -> None:
    """The default account is not a way around the check: an administrator can stop it."""
    approved_case()
    agent = system_agent()
    agent.groups.clear()
    refused, ok = run("recall", QUERY, *SCOPE_FLAGS, "--run-id", "run-x")
    assert not ok and refused["unmet"] == ["not_permitted"]
    assert system_agent() == agent and not agent.groups.exists()
    assert not Reference.objects.filter(run_id="run-x").exists()
    unknown, ok = run("recall", QUERY, *SCOPE_FLAGS, "--run-id", "run-y", "--as", "nobody")
    assert not ok and unknown["field"] == "--as"


# --- experience_demo -----------------------------------------------------------------------------


def test_experience_demo_runs_the_four_replays_on_a_temporary_database() -> None:
    result, ok = run("experience_demo")
    assert ok and result["ok"] is True
    rows = [(r["status"], r["knowledge_search_executed"]) for r in result["replays"]]
    assert rows == [
        ("needs_review", True),
        ("fallback", False),
        ("fallback", True),
        ("fallback", False),
    ]
    # The revocation's impact names the runs that had read the case, not the gated one.
    assert result["replays"][3]["revocation_impact"]["runs"] == ["demo-replay-1", "demo-replay-3"]
    # The configured (test) database was not touched.
    assert not Case.objects.exists() and not Run.objects.exists()


def test_review_approve_knowledge_document(
    operator: User, make_user: Callable[[str, str], User], at_now: Any
) -> None:
    documents_import(items=read_json_file("fixtures/knowledge.json"), actor=operator)
    approver = make_user("oscar", Role.OPERATOR)  # not the draft's author
    approved, ok = run(
        "review", "approve", "doc:case-a-draft@1", "--as", approver.username, "--reason", "已确认"
    )
    assert ok and (approved["id"], approved["status"]) == ("doc:case-a-draft@1", "approved")
    again, ok = run(
        "review", "approve", "doc:case-a-draft@1", "--as", approver.username, "--reason", "x"
    )
    assert not ok and again["unmet"] == ["already_approved"]


def test_reindex_experience_rebuilds_the_index_with_the_lessons_kept_inputs(
    approved_case: Callable[..., Case], operator: User
) -> None:
    from experience.index.lesson_inputs import evidence_of
    from experience.index.models import IndexEntry
    from experience.lessons.models import Lesson, LessonCase

    first = approved_case(incident="INC-R1")
    second = approved_case(incident="INC-R2")
    lesson = Lesson.objects.create(
        id="lesson:" + "0" * 64,
        **{name: getattr(first, name) for name in ("tenant", "brand", "store", "campaign")},
        deployment=first.deployment,
        title="reindexed",
        valid_from=first.valid_from,
        valid_to=first.valid_to,
        content_hash="0" * 64,
        content={},
        submitted_by=operator,
        submitted_via="import",
        submitted_at=first.submitted_at,
        status="approved",
        approved_by=operator,
        approved_at=first.approved_at,
        lesson_type="failure_lesson",
        scene_tags=[],
        scene_description="reindexed",
        precondition="",
        conclusion="check the store list",
        search_text="reindexed",
    )
    for position, case in enumerate((first, second)):
        LessonCase.objects.create(lesson=lesson, case=case, relation="supports", position=position)
    # As a bulk load or an older backup leaves it: no index at all.
    IndexEntry.objects.all().delete()

    result, ok = run("reindex_experience")

    assert ok
    assert result["by_kind"] == {"case": 2, "lesson": 1}
    assert result["entries"] == IndexEntry.objects.count() == 3
    kept = IndexEntry.objects.get(item_id=lesson.id).evidence
    assert kept and kept == evidence_of([lesson.id])[lesson.id]
