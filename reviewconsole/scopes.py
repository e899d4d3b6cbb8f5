"""Scope values: what a memory declares about where it applies. Pure, no Django imports."""

from __future__ import annotations

import re

from reviewconsole.errors import ValidationFailure

# Values that pretend to declare a scope while declaring nothing.
PLACEHOLDERS = frozenset({"unknown", "n/a", "na", "none", "null", "*", "any", "all", "-", "?"})
SCOPE_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,63}")

EMPTY_SCOPE = "must not be empty"
PLACEHOLDER_SCOPE = "is a placeholder; declare the exact value this applies to"
BAD_SCOPE = "must be 1-64 letters, digits or . _ : / - starting with a letter or digit"


def validate_scope_value(value: object, *, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailure(field, EMPTY_SCOPE)
    text = value.strip()
    if text.lower() in PLACEHOLDERS:
        raise ValidationFailure(field, PLACEHOLDER_SCOPE)
    if not SCOPE_VALUE.fullmatch(text):
        raise ValidationFailure(field, BAD_SCOPE)
    return text
