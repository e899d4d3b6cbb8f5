"""The import format of prompt-form skills (issue 27, item 3): every part checked at import,
refused naming its JSON path; a recipe skill's content and id are what they were."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from experience.cases.schema import parse_skill
from experience.cases.tools import tool_specs
from experience.core import prompts
from experience.core.prompts import PromptTool, inputs_checked, shape_problems
from reviewconsole.errors import ValidationFailure
from tests.experience.conftest import PROMPT_OUTPUT, prompt_data, prompt_skill_data, skill_data

CASES = ["case:" + "a" * 64, "case:" + "b" * 64]
# The investigation runner's registrations (investigations.declarations.PROMPT_TOOLS).
REGISTERED = {
    "search_knowledge": PromptTool("search_knowledge", read_only=True),
    "retrieve_experience": PromptTool("retrieve_experience", read_only=True),
    "run_skill": PromptTool("run_skill", read_only=False, why_not="it runs another skill"),
}


def parsed(data: dict[str, Any]) -> Any:
    return parse_skill(data, tool_specs(), REGISTERED)


def refused(data: dict[str, Any]) -> ValidationFailure:
    with pytest.raises(ValidationFailure) as failure:
        parsed(data)
    return failure.value


def with_prompt(**changes: Any) -> dict[str, Any]:
    return prompt_skill_data(CASES, prompt=prompt_data(**changes))


def test_a_prompt_skill_is_parsed_with_its_form_and_body() -> None:
    content = parsed(prompt_skill_data(CASES))

    assert content.form == "prompt"
    assert content.recipe == ()
    assert content.prompt.tools == ("search_knowledge",)
    assert content.prompt.max_calls == 2
    assert "recipe" not in content.canonical() and content.canonical()["prompt"]["max_calls"] == 2
    assert content.id.startswith("skill:")


def test_a_recipe_skills_content_has_exactly_the_fields_it_had() -> None:
    content = parsed(skill_data(CASES))

    assert content.form == "recipe"
    assert set(content.canonical()) == {
        "type", "scope", "title", "when", "recipe", "cases", "valid_from", "valid_to",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("tools", "field", "words"),
    [
        (["search_knowledge", "read_minds"], "prompt.tools[1]", "not a registered"),
        (["propose_case"], "prompt.tools[0]", "read-only"),
        (["shell"], "prompt.tools[0]", "read-only"),
        (["run_skill"], "prompt.tools[0]", "not read-only"),
        (["search_knowledge", "search_knowledge"], "prompt.tools[1]", "twice"),
        ([], "prompt.tools", "non-empty"),
    ],
)
def test_an_unknown_or_write_tool_is_refused_naming_it(
    tools: list[str], field: str, words: str
) -> None:
    failure = refused(with_prompt(tools=tools))

    assert failure.field == field
    assert words in failure.message


def test_without_the_runners_registrations_every_tool_is_unknown() -> None:
    with pytest.raises(ValidationFailure) as failure:
        parse_skill(prompt_skill_data(CASES), tool_specs())

    assert failure.value.field == "prompt.tools[0]"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"max_calls": 0}, "prompt.max_calls"),
        ({"max_calls": prompts.MAX_PROMPT_CALLS + 1}, "prompt.max_calls"),
        ({"max_calls": True}, "prompt.max_calls"),
        ({"instructions": "  "}, "prompt.instructions"),
        ({"instructions": "x" * (prompts.MAX_INSTRUCTIONS + 1)}, "prompt.instructions"),
        ({"output": {"type": "array"}}, "prompt.output.type"),
        (
            {"output": {**PROMPT_OUTPUT, "properties": {"s": {"type": "string", "pattern": ".*"}}}},
            "prompt.output.properties.s.pattern",
        ),
        (
            {"output": {**PROMPT_OUTPUT, "additionalProperties": True}},
            "prompt.output.additionalProperties",
        ),
        (
            {"output": {**PROMPT_OUTPUT, "required": ["missing"]}},
            "prompt.output.required[0]",
        ),
        (
            {"output": {**PROMPT_OUTPUT, "properties": {"Bad Name": {"type": "string"}}}},
            "prompt.output.properties.Bad Name",
        ),
        (
            {"output": {**PROMPT_OUTPUT, "properties": {"x": {"type": "object"}}}},
            "prompt.output.properties.x.type",
        ),
        (
            {
                "inputs": {
                    "type": "object",
                    "properties": {"photos": {"type": "array", "items": {"type": "string"}}},
                }
            },
            "prompt.inputs.properties.photos.type",
        ),
        ({"tools": "search_knowledge"}, "prompt.tools"),
        ({"instructions": "ok", "code": "rm -rf /"}, "prompt.code"),
    ],
)
def test_each_part_of_the_prompt_is_checked(change: dict[str, Any], field: str) -> None:
    assert refused(with_prompt(**change)).field == field


def test_a_skill_has_a_recipe_or_a_prompt_never_both_nor_neither() -> None:
    both = skill_data(CASES, prompt=prompt_data())
    neither = skill_data(CASES)
    neither.pop("recipe")

    assert refused(both).field == "prompt"
    assert refused(neither).field == "recipe"


def test_a_missing_prompt_field_is_named() -> None:
    body = prompt_data()
    body.pop("output")

    assert refused(prompt_skill_data(CASES, prompt=body)).field == "prompt.output"


def test_the_declared_output_shape_is_held_to_exactly() -> None:
    shape = prompts.shape_checked(
        copy.deepcopy(PROMPT_OUTPUT), "output", types=prompts.OUTPUT_TYPES
    )

    assert shape_problems(shape, {"conclusion_code": "rules_do_not_explain", "rule_ids": []}) == []
    assert shape_problems(shape, {"conclusion_code": "cause_found", "rule_ids": []}) == [
        "output.conclusion_code: must be one of "
        + ", ".join(shape["properties"]["conclusion_code"]["enum"])
    ]
    assert shape_problems(shape, {"rule_ids": ["x"] * 6}) == [
        "output.conclusion_code: is required",
        "output.rule_ids: number of items out of bounds",
    ]
    assert shape_problems(shape, {"conclusion_code": "ask_for_facts", "rule_ids": [], "x": 1}) == [
        "output.x: is not a declared property"
    ]
    assert shape_problems(shape, ["not", "an", "object"]) == ["output: must be an object"]


def test_inputs_are_taken_as_declared() -> None:
    shape = prompts.shape_checked(
        {
            "type": "object",
            "properties": {
                "complaint": {"type": "string", "maxLength": 10},
                "cups": {"type": "integer", "minimum": 1},
                "member": {"type": "boolean"},
            },
            "required": ["complaint", "cups"],
        },
        "inputs",
        types=prompts.INPUT_TYPES,
    )

    assert inputs_checked(shape, {"complaint": "券用不了", "cups": "2", "member": "true"}) == (
        {"complaint": "券用不了", "cups": 2, "member": True},
        [],
    )
    assert inputs_checked(shape, {"member": False}) == (
        {"member": False},
        ["inputs.complaint", "inputs.cups"],
    )
    refusals: list[tuple[dict[str, object], str]] = [
        ({"cups": "two"}, "inputs.cups"),
        ({"cups": 0}, "inputs.cups"),
        ({"complaint": "x" * 11}, "inputs.complaint"),
        ({"complaint": "a\x00b"}, "inputs.complaint"),
        ({"order": "A-1"}, "inputs.order"),
    ]
    for bad, field in refusals:
        with pytest.raises(ValidationFailure) as failure:
            inputs_checked(shape, bad)
        assert failure.value.field == field
