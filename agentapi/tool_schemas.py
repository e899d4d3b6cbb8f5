"""The MCP tools' input schemas, lean and flat for LLM tool adapters (docs/agents.md, Tool
schemas).

The request models' JSON schema says exactly what the server accepts, but as Pydantic writes it:
an optional value is ``anyOf: [value, null]`` (adapters that strip ``anyOf`` lose its type), a
nested model is a bare ``$ref`` (OpenAI Agents' strict mode refuses one it cannot inline), every
property has a ``title`` no adapter reads, and the long patterns of scope values, times and run
ids repeat for every field. ``lean`` writes the same schema without those: models inlined, an
optional value as ``type: [T, "null"]``, titles dropped, and each repeated long value schema
once in ``$defs`` with its rule, referenced beside the property's own description and example
(the words an adapter keeps when it inlines the reference). Accepted
values are unchanged (the server validates with the request models either way).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

from agentapi.schemas import TYPE_RULES
from reviewconsole.scopes import SCOPE_VALUE_PATTERN

# Words about a value, not rules for it: they stay beside a ``$ref``.
ANNOTATIONS = ("description", "examples", "default")
# A value schema this long, used twice or more, is written once in ``$defs``.
SHARED_LENGTH = 120
SCHEMA_MAPS = ("properties", "$defs")
# Where an inlined model came from, while ``lean`` works (never published).
MODEL = "x-model"
SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SCHEMA_VALUES = ("items", "additionalProperties", "propertyNames", "not")


def lean(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (a model's JSON schema) as the tool publishes it."""
    defs = schema.get("$defs", {})
    flat: dict[str, Any] = _flattened({k: v for k, v in schema.items() if k != "$defs"}, defs)
    _trimmed(flat)
    shared = _shared(flat)
    if shared:
        flat["$defs"] = shared
    _unmarked(flat)
    return flat


def _unmarked(node: Any) -> None:
    if isinstance(node, dict):
        node.pop(MODEL, None)
        for value in node.values():
            _unmarked(value)
    elif isinstance(node, list):
        for value in node:
            _unmarked(value)


def _flattened(node: Any, defs: dict[str, Any]) -> Any:
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        target = copy.deepcopy(defs[name])
        # The referring property's own words win over the model's; the model's name is kept
        # until ``lean`` has named what it shares.
        merged = {**target, MODEL: name, **{k: v for k, v in node.items() if k != "$ref"}}
        return _flattened(merged, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _flattened(sub, defs) for name, sub in value.items()}
        elif key in SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_flattened(sub, defs) for sub in value]
        elif key in SCHEMA_VALUES and isinstance(value, dict):
            out[key] = _flattened(value, defs)
        else:
            out[key] = value
    return _nullable(out)


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [value, {type: null}]`` → the value with ``type: [T, "null"]``."""
    branches = node.get("anyOf")
    if not isinstance(branches, list) or len(branches) != 2 or {"type": "null"} not in branches:
        return node
    (value,) = [branch for branch in branches if branch != {"type": "null"}]
    kind = value.get("type")
    if not isinstance(kind, str) or "anyOf" in value:
        return node
    merged = {**value, **{k: v for k, v in node.items() if k != "anyOf"}}
    merged["type"] = [kind, "null"]
    if "const" in merged:
        merged["enum"] = [merged.pop("const")]
    if "enum" in merged:
        merged["enum"] = [*merged["enum"], None]
    return merged


def _core(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k not in ANNOTATIONS}


def _key(node: dict[str, Any]) -> str:
    return json.dumps(_core(node), sort_keys=True, ensure_ascii=False)


def _values(node: Any, depth: int = 0) -> list[tuple[int, dict[str, Any]]]:
    """Every property and array-item schema in ``node``, however deep, with its depth."""
    found: list[tuple[int, dict[str, Any]]] = []
    if not isinstance(node, dict):
        return found
    for sub in node.get("properties", {}).values():
        found.append((depth + 1, sub))
        found.extend(_values(sub, depth + 1))
    items = node.get("items")
    if isinstance(items, dict):
        found.append((depth + 1, items))
        found.extend(_values(items, depth + 1))
    return found


def _trimmed(flat: dict[str, Any]) -> None:
    """No ``default: null`` (an optional nullable value's absence says it), and examples only
    where an LLM reads them: the tool's arguments and leaf values (a nested object's example
    would repeat its fields')."""
    for depth, value in _values(flat):
        if value.get("default", "") is None:
            del value["default"]
        if depth > 1 and ("properties" in value or "items" in value):
            value.pop("examples", None)


def _name(core: dict[str, Any], taken: set[str]) -> str:
    kind = core.get("type")
    nullable = isinstance(kind, list) and "null" in kind
    if core.get("pattern") == SCOPE_VALUE_PATTERN:
        base = "ScopeValue"
    elif core.get("format") == "date-time":
        base = "DateTime"
    elif isinstance(core.get(MODEL), str):
        base = core[MODEL]
    else:
        base = "Value"
    name = base + ("OrNull" if nullable else "")
    number = 2
    while name in taken:
        name = f"{base}{number}" + ("OrNull" if nullable else "")
        number += 1
    return name


def _shared(flat: dict[str, Any]) -> dict[str, Any]:
    """Long value schemas used twice or more, moved to ``$defs`` (innermost first: a model
    repeated inside a repeated model is written once)."""
    defs: dict[str, Any] = {}
    names: dict[str, str] = {}
    while True:
        values = [value for _, value in _values(flat) if "$ref" not in value]
        counts = Counter(_key(value) for value in values)
        repeated = {
            key for key, count in counts.items() if count >= 2 and len(key) >= SHARED_LENGTH
        }
        if not repeated:
            return defs
        # The smallest repeated schemas first, so the larger ones that hold them match.
        key = min(repeated, key=len)
        for value in values:
            if _key(value) == key:
                _refer(value, key, names, defs)


def _refer(value: dict[str, Any], key: str, names: dict[str, str], defs: dict[str, Any]) -> None:
    if key not in names:
        names[key] = _name(_core(value), set(defs))
        defs[names[key]] = _core(value)
    annotations = {k: value[k] for k in ANNOTATIONS if k in value}
    # The value's own rule is said once, by its definition.
    for rule in TYPE_RULES:
        if annotations.get("description", "").endswith(f"; {rule}"):
            annotations["description"] = annotations["description"][: -len(rule) - 2]
            defs[names[key]]["description"] = rule
    value.clear()
    value.update({"$ref": f"#/$defs/{names[key]}", **annotations})
