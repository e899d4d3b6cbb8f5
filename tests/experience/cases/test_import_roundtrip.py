"""Imports keep every kind whole (issue 37, item 11).

A prompt-form skill imported from a file (the documented format) keeps its prompt, so it is the
same skill, with the same id, as the one the file describes; and what the console stores of each
item (its ``content``, the import format) imports again into the same ids and content.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experience.cases import services
from experience.cases.models import Case, Skill
from experience.cases.prompting import prompt_tools
from experience.cases.schema import SkillContent, parse_skill
from experience.cases.services import skill_store
from experience.cases.tools import tool_specs
from experience.core.models import SubmittedVia
from experience.core.review import ReviewRefused
from experience.lessons.models import Lesson
from experience.review import decisions
from experience.review.imports import items_import
from reviewconsole.errors import ValidationFailure
from tests.experience.conftest import NOW, case_data, prompt_data, prompt_skill_data, skill_data
from tests.helpers import run_json

pytestmark = pytest.mark.django_db

MODELS: dict[str, Any] = {"case": Case, "skill": Skill, "lesson": Lesson}


def _lesson_data(supports: list[str], **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": "lesson",
        "lesson_type": "failure_lesson",
        "scope": case_data()["scope"],
        "scene": {"tags": ["优惠券"], "description": "小程序优惠券无法使用"},
        "precondition": "活动规则限定了适用门店",
        "conclusion": "先核对活动适用门店",
        "supports": supports,
        "valid_from": case_data()["valid_from"],
        "valid_to": case_data()["valid_to"],
    }
    data.update(changes)
    return data


def test_an_imported_prompt_skill_keeps_its_prompt_and_its_id(
    reviewer: User, tmp_path: Path
) -> None:
    file = [
        case_data(incident="INC-1"),
        case_data(incident="INC-2", title="二号店水果茶券不可用：商品列表漏配"),
        prompt_skill_data(["#0", "#1"]),
    ]
    path = tmp_path / "items.json"
    path.write_text(json.dumps(file, ensure_ascii=False), encoding="utf-8")

    status, result = run_json("import_cases", str(path), "--as", reviewer.username)

    assert status == 0, result
    case_ids = [result["items"][0]["id"], result["items"][1]["id"]]
    expected = parse_skill(prompt_skill_data(case_ids), tool_specs(), prompt_tools())
    skill = Skill.objects.get(pk=result["items"][2]["id"])
    assert skill.id == expected.id
    assert skill.prompt == expected.canonical()["prompt"]
    assert skill.prompt["instructions"] == prompt_data()["instructions"]
    assert skill.prompt["tools"] == ["search_knowledge"]
    assert skill.recipe == [] and "recipe" not in skill.content
    assert skill.content == expected.canonical()


def test_a_skill_with_neither_recipe_nor_prompt_is_never_stored(reviewer: User) -> None:
    """Whatever builds a skill's content, the store refuses one without a body."""
    content = parse_skill(skill_data(["case:" + "a" * 64]), tool_specs())
    bodiless = SkillContent(
        scope=content.scope,
        title=content.title,
        when=content.when,
        recipe=(),
        cases=content.cases,
        valid_from=content.valid_from,
        valid_to=content.valid_to,
    )
    with pytest.raises(ValidationFailure) as refused:
        skill_store(bodiless, actor=reviewer, via=SubmittedVia.IMPORT, now=NOW)
    assert refused.value.field == "recipe"
    assert not Skill.objects.exists()


# Files of every kind: two to three cases, a recipe or prompt skill citing some of them by file
# reference, and a lesson supported by some of them; the words vary.
words = (
    st.text(alphabet="优惠券门店配置缓存abcxyz ", min_size=1, max_size=30)
    .map(str.strip)
    .filter(bool)
)


@st.composite
def files(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(min_value=2, max_value=3))
    cases = [
        case_data(
            incident=f"INC-{n}",
            title=draw(words),
            summary=draw(st.sampled_from(["", "顾客在二号店小程序使用优惠券失败。"])),
        )
        for n in range(count)
    ]
    cited = draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=count, unique=True))
    refs = [f"#{n}" for n in cited]
    if draw(st.booleans()):
        skill = prompt_skill_data(
            refs,
            when=draw(words),
            prompt=prompt_data(max_calls=draw(st.integers(1, 8)), instructions=draw(words)),
        )
    else:
        skill = skill_data(refs, title=draw(words))
    supports = draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=count, unique=True))
    lesson = _lesson_data([f"#{n}" for n in supports], conclusion=draw(words))
    return [*cases, skill, lesson]


def _snapshot(ids: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Each item as stored: id, content, and the columns built from it."""
    rows = []
    for item_id, kind in ids:
        item = MODELS[kind].objects.get(pk=item_id)
        row: dict[str, Any] = {"id": item.id, "content": item.content, "tenant": item.tenant}
        if kind == "case":
            row["evidence"] = list(
                item.evidence_items.order_by("position").values_list("key", "source_id", "excerpt")
            )
        elif kind == "skill":
            row["recipe"], row["prompt"] = item.recipe, item.prompt
            row["cases"] = list(item.case_links.values_list("case_id", "position"))
        else:
            row["conclusion"] = item.conclusion
            row["cases"] = list(item.case_links.values_list("case_id", "relation", "position"))
        rows.append(row)
    return rows


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(file=files())
def test_export_then_import_gives_the_same_ids_and_content(
    reviewer: User, file: list[dict[str, Any]]
) -> None:
    with transaction.atomic():
        first = items_import(items=file, actor=reviewer)
        ids = [(item.id, item.type) for item in first]
        exported = _snapshot(ids)
        # The export: what the console keeps of each item, in the file's order.
        export = json.loads(json.dumps([row["content"] for row in exported]))
        transaction.set_rollback(True)
    assert not Case.objects.exists()
    with transaction.atomic():
        again = items_import(items=export, actor=reviewer)
        assert [(item.id, item.type) for item in again] == ids
        assert all(item.created for item in again)
        assert _snapshot(ids) == exported
        transaction.set_rollback(True)


def test_a_skill_stored_without_its_body_earlier_is_not_approvable(
    reviewer: User, second_reviewer: User
) -> None:
    """A prompt skill an earlier import stored as recipe [] and prompt {} cannot be mended (its
    prompt is gone) and must not become approved memory: it is refused naming what it lacks."""
    first, second = items_import(
        items=[
            case_data(incident="INC-1"),
            case_data(incident="INC-2", title="二号店水果茶券不可用：商品列表漏配"),
        ],
        actor=reviewer,
    )
    for submitted in (first, second):
        case = Case.objects.get(pk=submitted.id)
        services.evidence_check(case=case, key="diagnosis/0", actor=second_reviewer)
        decisions.case_approve(case=case, actor=second_reviewer, reason="checked")
    (stored,) = items_import(items=[skill_data([first.id, second.id])], actor=reviewer)
    # As the defect stored it (the content is immutable to the ORM, so in SQL).
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE experience_skill SET recipe = %s, prompt = %s WHERE id = %s",
            ["[]", "{}", stored.id],
        )
    with pytest.raises(ReviewRefused) as refused:
        decisions.skill_approve(
            skill=Skill.objects.get(pk=stored.id), actor=second_reviewer, reason="two incidents"
        )
    assert refused.value.unmet == ["no_recipe"]
    assert Skill.objects.get(pk=stored.id).status == "candidate"
