"""Small checks shared by the JSON import formats. Pure: no Django imports.

Every failure names the JSON path of the offending value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reviewconsole.errors import ValidationFailure


def json_path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def reject_unknown_fields(
    obj: Mapping[str, Any], allowed: frozenset[str], path: str, message: str
) -> None:
    """Refuse the first (in sorted order) key of ``obj`` that ``allowed`` does not list."""
    unknown = sorted(set(obj) - allowed, key=str)
    if unknown:
        raise ValidationFailure(json_path(path, str(unknown[0])), message)


def bounded_text(value: object, path: str, limit: int, *, required: bool = True) -> str:
    """A stripped string of at most ``limit`` characters; "" for an absent optional value."""
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ValidationFailure(path, "must be a string")
    text = value.strip()
    if required and not text:
        raise ValidationFailure(path, "must not be empty")
    if len(text) > limit:
        raise ValidationFailure(path, f"must be at most {limit} characters (got {len(text)})")
    return text
