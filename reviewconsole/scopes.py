"""Scope values: what a memory declares about where it applies. Pure, no Django imports."""

from __future__ import annotations

import re

from reviewconsole.errors import ValidationFailure

# Values that pretend to declare a scope while declaring nothing.
PLACEHOLDERS = frozenset({"unknown", "n/a", "na", "none", "null", "*", "any", "all", "-", "?"})
SCOPE_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,63}")

# The five fields of a scope, in the order every key, page and file lists them.
SCOPE_FIELDS = ("tenant", "brand", "store", "campaign", "deployment")

EMPTY_SCOPE = "must not be empty"
PLACEHOLDER_SCOPE = "is a placeholder; declare the exact value this applies to"
BAD_SCOPE = "must be 1-64 letters, digits or . _ : / - starting with a letter or digit"


def _any_case(word: str) -> str:
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word)


# SCOPE_VALUE without the placeholders, as a whole-string pattern that JSON Schema (ECMA-262)
# and Python both read, so an API schema states the placeholder rule instead of describing it.
SCOPE_VALUE_PATTERN = (
    "^(?!(?:"
    + "|".join(_any_case(word) for word in sorted(PLACEHOLDERS) if SCOPE_VALUE.fullmatch(word))
    + ")$)"
    + SCOPE_VALUE.pattern
    + "$"
)


def validate_scope_value(value: object, *, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailure(field, EMPTY_SCOPE)
    text = value.strip()
    if text.lower() in PLACEHOLDERS:
        raise ValidationFailure(field, PLACEHOLDER_SCOPE)
    if not SCOPE_VALUE.fullmatch(text):
        raise ValidationFailure(field, BAD_SCOPE)
    return text
