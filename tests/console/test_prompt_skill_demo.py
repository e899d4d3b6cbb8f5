"""The demo's prompt-form skill (issue 27, item 3): one, approved by a reviewer other than its
author on two approved cases of distinct incidents, run once through the runner; its page shows
the form, the prompt, the tools and the budget, in English and in Chinese."""

from __future__ import annotations

import json
from datetime import datetime
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from console.demo import PROMPT_SKILL, PROMPT_SKILL_RUN
from experience.cases.models import Skill
from experience.core.models import Status
from experience.runs.models import Run
from tests.helpers import clock_frozen

pytestmark = pytest.mark.django_db

NOW = datetime.fromisoformat("2027-02-10T09:30:00+08:00")


@pytest.fixture
def loaded() -> dict[str, Any]:
    out = StringIO()
    with clock_frozen(NOW):
        call_command("load_demo", "--no-replay", "--json", stdout=out)
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def page(skill: Skill, language: str) -> str:
    client = Client(headers={"Accept-Language": language})
    client.force_login(User.objects.get(username="ravi"))
    kind, digest = skill.id.split(":", 1)
    response = client.get(f"/{kind}s/{digest}/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_demo_has_one_reviewed_prompt_skill_run_through_the_runner(
    loaded: dict[str, Any],
) -> None:
    prompt_skills = [skill for skill in Skill.objects.all() if skill.form == "prompt"]

    assert [skill.id for skill in prompt_skills] == [loaded["prompt_skill"]]
    skill = prompt_skills[0]
    assert skill.status == Status.APPROVED
    assert skill.approved_by_id != skill.submitted_by_id
    incidents = {case.incident for case in skill.cases.all()}
    assert len(incidents) == 2 and all(case.status == Status.APPROVED for case in skill.cases.all())
    run = Run.objects.get(run_id=PROMPT_SKILL_RUN)
    assert run.skill_id == skill.id and run.status == "needs_review", run.reason
    assert run.prompt["verification"]["ok"] is True
    assert run.prompt["trace"][0]["tool"] == "search_knowledge"


def test_loading_twice_keeps_one_prompt_skill_and_one_run(loaded: dict[str, Any]) -> None:
    with clock_frozen(NOW):
        call_command("load_demo", "--no-replay", stdout=StringIO())

    assert sum(skill.form == "prompt" for skill in Skill.objects.all()) == 1
    assert Run.objects.filter(run_id=PROMPT_SKILL_RUN).count() == 1


def test_the_skill_page_shows_the_form_prompt_tools_and_budget(loaded: dict[str, Any]) -> None:
    skill = Skill.objects.get(pk=loaded["prompt_skill"])

    english = page(skill, "en")
    chinese = page(skill, "zh-hans")

    assert "Prompt: a constrained sub-agent for unstructured input" in english
    assert "at most 3 tool calls" in english
    assert "提示型：处理非结构化输入的强约束子代理" in chinese
    assert "最多 3 次工具调用" in chinese
    for html in (english, chinese):
        assert PROMPT_SKILL["prompt"]["instructions"][:20] in html
        assert '<dd id="prompt-tools"><code>search_knowledge</code></dd>' in html
        assert "<code>complaint</code>" in html and "<code>rule_ids</code>" in html
        assert "<code>maxItems: 5</code>" in html


def test_a_recipe_skills_page_says_its_form(loaded: dict[str, Any]) -> None:
    recipe = Skill.objects.get(pk=loaded["skills"][0])

    html = page(recipe, "en")

    assert "Recipe: a deterministic script of read-only steps" in html
    assert 'id="prompt-tools"' not in html


def test_the_prompt_runs_trace_shows_its_verification_and_output(
    loaded: dict[str, Any],
) -> None:
    client = Client(headers={"Accept-Language": "zh-hans"})
    client.force_login(User.objects.get(username="rita"))

    html = client.get(f"/runs/{PROMPT_SKILL_RUN}/").content.decode()

    assert "提示型技能运行" in html
    assert "<code>rules_do_not_explain</code>" in html
    assert "&quot;rule_ids&quot;" in html
