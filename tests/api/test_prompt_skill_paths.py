"""A prompt-form skill is offered to agents like a recipe skill (issue 27, item 3): the HTTP
API, MCP and the ``run_skill`` command run it through the investigation runner, take its
declared inputs, refuse undeclared ones naming them, and leave a recipe skill's answer as it was.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.cases import services
from experience.cases.models import Skill
from experience.cases.prompting import prompt_tools
from experience.cases.schema import parse_skill
from experience.cases.tools import tool_specs
from experience.review import decisions
from experience.runs.models import Run
from tests.api.conftest import SCOPE, BearerClient, Demo, demo, run_body
from tests.experience.conftest import prompt_skill_data
from tests.helpers import run_json
from tests.mcp.test_server import agent_token, call, refusal

__all__ = ["agent_token", "demo"]

pytestmark = pytest.mark.django_db

COMPLAINT = "两杯水果茶，小程序优惠券用不了"
RECIPE_KEYS = {
    "status", "reason", "run_id", "skill", "missing", "tool_calls", "steps", "observations", "cases",
}  # fmt: skip


@pytest.fixture
def prompt_skill(demo: Demo, operator: User, reviewer: User) -> Skill:
    """Submitted by the operator, approved by a reviewer: the demo's two incidents."""
    content = parse_skill(
        prompt_skill_data(demo.cases, scope=dict(SCOPE)), tool_specs(), prompt_tools()
    )
    skill, _ = services.skill_submit(content=content, actor=operator)
    decisions.skill_approve(skill=skill, actor=reviewer, reason="两个不同事故，工具只读")
    return skill


def test_the_api_runs_a_prompt_skill_with_its_inputs(
    agent_client: BearerClient, prompt_skill: Skill
) -> None:
    response = agent_client.post_json(
        f"/api/v1/skills/{prompt_skill.id}/run",
        run_body(inputs={"complaint": COMPLAINT}, provider="scripted"),
    )

    assert response.status_code == 200, response.content
    result = response.json()
    assert result["form"] == "prompt" and result["status"] == "needs_review", result["reason"]
    assert result["verification"]["ok"] is True
    assert set(result["output"]) == {"conclusion_code", "rule_ids", "summary"}
    assert result["steps"][0]["outcome"] == "ok"
    assert Run.objects.get(run_id="run-api-1").prompt["form"] == "prompt"


def test_the_api_keeps_a_recipe_skills_answer_exactly(
    agent_client: BearerClient, demo: Demo
) -> None:
    response = agent_client.post_json(f"/api/v1/skills/{demo.skill}/run", run_body())

    result = response.json()
    assert set(result) == RECIPE_KEYS
    assert set(result["steps"][0]) == {"index", "tool", "arguments", "status"}


@pytest.mark.parametrize(
    ("inputs", "loc"),
    [({"order": "A-1"}, "order"), ({"complaint": True}, "complaint")],
)
def test_the_api_refuses_an_undeclared_or_ill_typed_input_naming_it(
    agent_client: BearerClient, prompt_skill: Skill, inputs: dict[str, Any], loc: str
) -> None:
    response = agent_client.post_json(
        f"/api/v1/skills/{prompt_skill.id}/run", run_body(inputs=inputs)
    )

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "inputs", loc]
    assert not Run.objects.exists()


def test_the_api_refuses_inputs_to_a_recipe_skill(agent_client: BearerClient, demo: Demo) -> None:
    response = agent_client.post_json(
        f"/api/v1/skills/{demo.skill}/run", run_body(inputs={"complaint": COMPLAINT})
    )

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "inputs"]
    assert not Run.objects.exists()


def test_the_api_refuses_live_when_no_model_is_configured(
    agent_client: BearerClient, prompt_skill: Skill, settings: Any
) -> None:
    settings.CONSOLE_LLM_BASE_URL = ""
    response = agent_client.post_json(
        f"/api/v1/skills/{prompt_skill.id}/run",
        run_body(inputs={"complaint": COMPLAINT}, provider="live"),
    )

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "provider"]
    assert not Run.objects.exists()


def test_mcp_runs_a_prompt_skill(agent_token: str, prompt_skill: Skill) -> None:
    result = call(
        agent_token,
        "run_skill",
        {
            "skill_id": prompt_skill.id,
            **run_body(run_id="mcp-prompt-1", inputs={"complaint": COMPLAINT}),
        },
    )

    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["form"] == "prompt"
    assert result.structured_content["status"] == "needs_review"


def test_mcp_names_an_undeclared_input(agent_token: str, prompt_skill: Skill) -> None:
    result = call(
        agent_token,
        "run_skill",
        {"skill_id": prompt_skill.id, **run_body(run_id="mcp-prompt-2", inputs={"x": "1"})},
    )

    assert refusal(result)["error"] == "invalid"
    assert refusal(result)["loc"] == ["inputs", "x"]
    assert not Run.objects.exists()


def test_the_command_runs_a_prompt_skill_with_inputs(prompt_skill: Skill, agent: User) -> None:
    status, result = run_json(
        "run_skill", prompt_skill.id,
        *(f"--{name}={value}" for name, value in SCOPE.items()),
        "--at", "2026-09-18T14:00:00+08:00", "--known-at", "2026-09-18T14:10:00+08:00",
        "--channel", "miniapp", "--product", "fruit-tea", "--basket-cents", "3200",
        "--run-id", "cli-prompt-1", "--input", f"complaint={COMPLAINT}", "--as", agent.username,
    )  # fmt: skip

    assert status == 0, result
    assert result["form"] == "prompt" and result["status"] == "needs_review"


def test_the_command_refuses_an_undeclared_input_naming_it(
    prompt_skill: Skill, agent: User
) -> None:
    status, result = run_json(
        "run_skill", prompt_skill.id,
        *(f"--{name}={value}" for name, value in SCOPE.items()),
        "--at", "2026-09-18T14:00:00+08:00", "--known-at", "2026-09-18T14:10:00+08:00",
        "--run-id", "cli-prompt-2", "--input", "order=A-1", "--as", agent.username,
    )  # fmt: skip

    assert status != 0
    assert result == {"ok": False, "error": result["error"], "field": "inputs.order"}
    assert not Run.objects.exists()


def test_reading_a_prompt_skill_tells_its_form_and_inputs(
    agent_client: BearerClient, prompt_skill: Skill, demo: Demo
) -> None:
    prompt = agent_client.get(f"/api/v1/skills/{prompt_skill.id}").json()
    recipe = agent_client.get(f"/api/v1/skills/{demo.skill}").json()

    assert prompt["form"] == "prompt" and prompt["recipe"] == []
    assert prompt["prompt"]["inputs"]["required"] == ["complaint"]
    assert prompt["prompt"]["tools"] == ["search_knowledge"]
    assert "form" not in recipe and "prompt" not in recipe
