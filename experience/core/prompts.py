"""Prompt-form skills: a constrained sub-agent prompt instead of a recipe. Pure: no Django.

A prompt skill's body (``SkillContent.prompt``, docs/contracts.md, Import formats) is

- ``instructions``: the prompt the sub-agent follows, written and reviewed by people;
- ``inputs``: the declared input fields, a flat object schema (string, integer and boolean
  properties) of what the caller hands the run (unstructured text, mostly);
- ``output``: the declared output shape, an object schema of the subset below, which the
  sub-agent's ``output`` must match;
- ``tools``: the read-only investigation tools it may call, a subset of the registered ones;
- ``max_calls``: its call budget.

The schema subset (``shape_checked``): an object of at most ``MAX_PROPERTIES`` properties, each
``string`` (``minLength``, ``maxLength``, ``enum``), ``integer`` or ``number`` (``minimum``,
``maximum``), ``boolean``, or, in an output, an ``array`` (``items`` one of those scalars,
``minItems``, ``maxItems``); every property may carry a ``description``; ``required`` lists
property names; no other property is allowed (``additionalProperties`` may only be false).
Any other keyword is refused naming its path, so what a reviewer reads is all there is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reviewconsole.errors import ValidationFailure

MAX_INSTRUCTIONS = 8_000
MAX_PROPERTIES = 12
MAX_INPUTS = 8
MAX_STRING = 2_000
MAX_INPUT_STRING = 2_000
MAX_ITEMS = 20
MAX_DESCRIPTION = 500
MAX_ENUM = 20
MAX_PROMPT_TOOLS = 4
MIN_CALLS = 1
MAX_PROMPT_CALLS = 8
PROPERTY_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")

PROMPT_FIELDS = frozenset({"instructions", "inputs", "output", "tools", "max_calls"})
OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "description"})
SCALAR_KEYS = {
    "string": frozenset({"type", "description", "minLength", "maxLength", "enum"}),
    "integer": frozenset({"type", "description", "minimum", "maximum"}),
    "number": frozenset({"type", "description", "minimum", "maximum"}),
    "boolean": frozenset({"type", "description"}),
}
ARRAY_KEYS = frozenset({"type", "description", "items", "minItems", "maxItems"})
INPUT_TYPES = ("string", "integer", "boolean")
OUTPUT_TYPES = ("string", "integer", "number", "boolean", "array")

# Names of operations that change something: never a tool of a prompt skill, whatever a
# registry says (named in the refusal so the author sees why).
WRITE_NAMES = frozenset(
    {
        "propose_case",
        "run_outcome",
        "investigate",
        "import_cases",
        "import_knowledge",
        "review",
        "approve",
        "reject",
        "revoke",
        "verify",
        "delete",
        "update",
        "write",
        "send",
        "shell",
        "bash",
        "exec",
        "eval",
        "python",
        "sql",
        "run_sql",
        "command",
        "script",
        "code",
        "subprocess",
        "system",
    }
)

NOT_A_KEYWORD = "is not a keyword of the schema subset prompt skills use"
UNKNOWN_TOOL = "is not a registered investigation tool"
WRITE_TOOL = "changes something; a prompt skill may call only read-only tools"
NOT_READ_ONLY = "is not read-only for a prompt skill ({why})"
TOOL_TWICE = "is named twice"


@dataclass(frozen=True)
class PromptTool:
    """A registered investigation tool as a prompt skill's declaration sees it: its name, and
    whether a prompt skill may call it (``read_only``), with why not when it may not."""

    name: str
    read_only: bool
    why_not: str = ""


@dataclass(frozen=True)
class PromptSpec:
    instructions: str
    inputs: Mapping[str, Any]
    output: Mapping[str, Any]
    tools: tuple[str, ...]
    max_calls: int

    def as_json(self) -> dict[str, Any]:
        return {
            "instructions": self.instructions,
            "inputs": dict(self.inputs),
            "output": dict(self.output),
            "tools": list(self.tools),
            "max_calls": self.max_calls,
        }


# --- the schema subset -------------------------------------------------------------------------


def _path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _integer(value: object, path: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationFailure(path, f"must be an integer from {low} to {high}")
    return value


def _number(value: object, path: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationFailure(path, "must be a number")
    return value


def _description(schema: Mapping[str, Any], path: str) -> None:
    text = schema.get("description")
    if text is not None and (not isinstance(text, str) or len(text) > MAX_DESCRIPTION):
        raise ValidationFailure(
            _path(path, "description"), f"must be a string of at most {MAX_DESCRIPTION} characters"
        )


def _reject_keys(schema: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    for key in sorted(set(schema) - allowed, key=str):
        raise ValidationFailure(_path(path, str(key)), NOT_A_KEYWORD)


def _scalar(schema: object, path: str, types: Sequence[str]) -> dict[str, Any]:
    if not isinstance(schema, dict):
        raise ValidationFailure(path, "must be a schema object with a type")
    kind = schema.get("type")
    if kind not in types:
        raise ValidationFailure(_path(path, "type"), "must be one of " + ", ".join(types))
    if kind == "array":
        return _array(schema, path)
    _reject_keys(schema, SCALAR_KEYS[str(kind)], path)
    _description(schema, path)
    if kind == "string":
        low = _integer(schema.get("minLength", 0), _path(path, "minLength"), 0, MAX_STRING)
        high = _integer(
            schema.get("maxLength", MAX_STRING), _path(path, "maxLength"), 1, MAX_STRING
        )
        if low > high:
            raise ValidationFailure(_path(path, "minLength"), "must not exceed maxLength")
        if "enum" in schema:
            enum = schema["enum"]
            if (
                not isinstance(enum, list)
                or not 1 <= len(enum) <= MAX_ENUM
                or not all(isinstance(v, str) and low <= len(v) <= high for v in enum)
                or len(set(enum)) != len(enum)
            ):
                raise ValidationFailure(
                    _path(path, "enum"),
                    f"must be a list of 1-{MAX_ENUM} distinct strings within the length bounds",
                )
    elif kind in ("integer", "number"):
        bounds = {
            name: _number(schema[name], _path(path, name))
            for name in ("minimum", "maximum")
            if name in schema
        }
        if kind == "integer" and any(not isinstance(v, int) for v in bounds.values()):
            raise ValidationFailure(path, "an integer's bounds must be integers")
        if "minimum" in bounds and "maximum" in bounds and bounds["minimum"] > bounds["maximum"]:
            raise ValidationFailure(_path(path, "minimum"), "must not exceed maximum")
    return dict(schema)


def _array(schema: Mapping[str, Any], path: str) -> dict[str, Any]:
    _reject_keys(schema, ARRAY_KEYS, path)
    _description(schema, path)
    if "items" not in schema:
        raise ValidationFailure(_path(path, "items"), "is required")
    _scalar(schema["items"], _path(path, "items"), ("string", "integer", "number", "boolean"))
    low = _integer(schema.get("minItems", 0), _path(path, "minItems"), 0, MAX_ITEMS)
    high = _integer(schema.get("maxItems", MAX_ITEMS), _path(path, "maxItems"), 1, MAX_ITEMS)
    if low > high:
        raise ValidationFailure(_path(path, "minItems"), "must not exceed maxItems")
    return dict(schema)


def shape_checked(
    value: object, path: str, *, types: Sequence[str], max_properties: int = MAX_PROPERTIES
) -> dict[str, Any]:
    """An object schema of the subset, its properties of ``types``; refused naming the path."""
    if not isinstance(value, dict):
        raise ValidationFailure(path, 'must be an object schema {"type": "object", "properties"}')
    _reject_keys(value, OBJECT_KEYS, path)
    if value.get("type") != "object":
        raise ValidationFailure(_path(path, "type"), 'must be "object"')
    _description(value, path)
    if value.get("additionalProperties", False) is not False:
        raise ValidationFailure(
            _path(path, "additionalProperties"), "must be false (only declared properties)"
        )
    properties = value.get("properties")
    if not isinstance(properties, dict) or not properties:
        raise ValidationFailure(_path(path, "properties"), "must be a non-empty object")
    if len(properties) > max_properties:
        raise ValidationFailure(
            _path(path, "properties"), f"must have at most {max_properties} properties"
        )
    checked = {}
    for name, schema in properties.items():
        where = _path(_path(path, "properties"), str(name))
        if not isinstance(name, str) or not PROPERTY_NAME.fullmatch(name):
            raise ValidationFailure(
                where, "a property name is a lower-case letter, then letters, digits or _"
            )
        checked[name] = _scalar(schema, where, types)
    required = value.get("required", [])
    if not isinstance(required, list) or not all(isinstance(n, str) for n in required):
        raise ValidationFailure(_path(path, "required"), "must be a list of property names")
    for i, name in enumerate(required):
        if name not in checked:
            raise ValidationFailure(f"{_path(path, 'required')}[{i}]", "is not a declared property")
        if required.index(name) != i:
            raise ValidationFailure(f"{_path(path, 'required')}[{i}]", "is named twice")
    shape: dict[str, Any] = {"type": "object", "properties": checked, "required": list(required)}
    if "description" in value:
        shape["description"] = value["description"]
    shape["additionalProperties"] = False
    return shape


def _value_problems(schema: Mapping[str, Any], value: object, path: str) -> list[str]:
    kind = schema.get("type")
    if kind == "string":
        if not isinstance(value, str):
            return [f"{path}: must be a string"]
        if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", MAX_STRING):
            return [f"{path}: length out of bounds"]
        if "enum" in schema and value not in schema["enum"]:
            return [f"{path}: must be one of " + ", ".join(schema["enum"])]
        return []
    if kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(
            value, int if kind == "integer" else int | float
        ):
            return [f"{path}: must be {'an integer' if kind == 'integer' else 'a number'}"]
        if "minimum" in schema and value < schema["minimum"]:
            return [f"{path}: below {schema['minimum']}"]
        if "maximum" in schema and value > schema["maximum"]:
            return [f"{path}: above {schema['maximum']}"]
        return []
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{path}: must be true or false"]
    if kind == "array":
        if not isinstance(value, list):
            return [f"{path}: must be a list"]
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", MAX_ITEMS):
            return [f"{path}: number of items out of bounds"]
        problems: list[str] = []
        for i, item in enumerate(value):
            problems += _value_problems(schema["items"], item, f"{path}[{i}]")
        return problems
    return [f"{path}: undeclared type"]


def shape_problems(shape: Mapping[str, Any], value: object, path: str = "output") -> list[str]:
    """Why ``value`` does not match the declared object ``shape`` (each naming its path)."""
    if not isinstance(value, Mapping):
        return [f"{path}: must be an object"]
    properties: Mapping[str, Any] = shape.get("properties") or {}
    problems = [
        f"{path}.{name}: is required" for name in shape.get("required") or [] if name not in value
    ]
    for name in value:
        if name not in properties:
            problems.append(f"{path}.{name}: is not a declared property")
    for name, schema in properties.items():
        if name in value:
            problems += _value_problems(schema, value[name], f"{path}.{name}")
    return problems


# --- the prompt --------------------------------------------------------------------------------


def tools_checked(
    value: object, registered: Mapping[str, PromptTool], path: str = "tools"
) -> tuple[str, ...]:
    """The declared tools: registered, read-only for a prompt skill, each named once."""
    if not isinstance(value, list) or not value:
        raise ValidationFailure(path, "must be a non-empty list of tool names")
    if len(value) > MAX_PROMPT_TOOLS:
        raise ValidationFailure(path, f"must name at most {MAX_PROMPT_TOOLS} tools")
    names: list[str] = []
    for i, name in enumerate(value):
        where = f"{path}[{i}]"
        if not isinstance(name, str) or not name.strip():
            raise ValidationFailure(where, "must name a tool")
        problem = tool_problem(name, registered)
        if problem:
            raise ValidationFailure(where, problem)
        if name in names:
            raise ValidationFailure(where, f"{name!r} {TOOL_TWICE}")
        names.append(name)
    return tuple(names)


def tool_problem(name: str, registered: Mapping[str, PromptTool]) -> str | None:
    """Why a prompt skill may not call ``name`` now (None: it may)."""
    tool = registered.get(name)
    if tool is None:
        message = WRITE_TOOL if name.strip().lower() in WRITE_NAMES else UNKNOWN_TOOL
        return f"{name!r} {message}"
    if not tool.read_only:
        return f"{name!r} " + NOT_READ_ONLY.format(why=tool.why_not or "it changes something")
    return None


def prompt_checked(
    value: object, registered: Mapping[str, PromptTool], *, path: str = "prompt"
) -> PromptSpec:
    """A prompt skill's body, every part checked; refused naming the JSON path."""
    if not isinstance(value, dict):
        raise ValidationFailure(
            path, 'must be an object {"instructions", "inputs", "output", "tools", "max_calls"}'
        )
    for key in sorted(set(value) - PROMPT_FIELDS, key=str):
        raise ValidationFailure(_path(path, str(key)), "is not a field of a prompt")
    for name in sorted(PROMPT_FIELDS):
        if name not in value:
            raise ValidationFailure(_path(path, name), "is required")
    instructions = value["instructions"]
    if not isinstance(instructions, str) or not instructions.strip():
        raise ValidationFailure(_path(path, "instructions"), "must be a non-empty string")
    if len(instructions.strip()) > MAX_INSTRUCTIONS:
        raise ValidationFailure(
            _path(path, "instructions"), f"must be at most {MAX_INSTRUCTIONS} characters"
        )
    inputs = shape_checked(
        value["inputs"], _path(path, "inputs"), types=INPUT_TYPES, max_properties=MAX_INPUTS
    )
    for name, schema in inputs["properties"].items():
        if schema["type"] == "string" and schema.get("maxLength", MAX_STRING) > MAX_INPUT_STRING:
            raise ValidationFailure(
                f"{path}.inputs.properties.{name}.maxLength", f"must be at most {MAX_INPUT_STRING}"
            )
    return PromptSpec(
        instructions=instructions.strip(),
        inputs=inputs,
        output=shape_checked(value["output"], _path(path, "output"), types=OUTPUT_TYPES),
        tools=tools_checked(value["tools"], registered, _path(path, "tools")),
        max_calls=_integer(
            value["max_calls"], _path(path, "max_calls"), MIN_CALLS, MAX_PROMPT_CALLS
        ),
    )


def inputs_checked(
    shape: Mapping[str, Any], given: Mapping[str, object], path: str = "inputs"
) -> tuple[dict[str, object], list[str]]:
    """The caller's inputs as the skill declares them, and the required ones not given (as
    ``inputs.NAME``). An undeclared or ill-typed input is refused naming ``inputs.NAME``; text
    stands for an integer or a boolean as a command line gives it ("3200", "true")."""
    if not isinstance(given, Mapping):
        raise ValidationFailure(path, "must be an object of the skill's declared inputs")
    properties: Mapping[str, Any] = shape.get("properties") or {}
    clean: dict[str, object] = {}
    for name in sorted(given, key=str):
        where = f"{path}.{name}"
        schema = properties.get(name)
        if schema is None:
            raise ValidationFailure(where, "is not an input this skill declares")
        value = given[name]
        if value is None or value == "":
            continue
        if schema["type"] == "integer" and isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise ValidationFailure(where, "must be an integer") from None
        if schema["type"] == "boolean" and isinstance(value, str):
            if value.strip().lower() not in ("true", "false"):
                raise ValidationFailure(where, "must be true or false")
            value = value.strip().lower() == "true"
        if (
            schema["type"] == "string"
            and isinstance(value, str)
            and any(ord(ch) < 32 and ch not in "\n\t" for ch in value)
        ):
            raise ValidationFailure(where, "must not contain control characters")
        problems = _value_problems(schema, value, where)
        if problems:
            raise ValidationFailure(where, problems[0].removeprefix(f"{where}: "))
        clean[name] = value
    missing = [f"{path}.{name}" for name in shape.get("required") or [] if name not in clean]
    return clean, missing
