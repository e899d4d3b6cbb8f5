"""The API schema states the scope-value rule as a pattern: what it admits, the server accepts."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from reviewconsole.errors import ValidationFailure
from reviewconsole.scopes import PLACEHOLDERS, SCOPE_VALUE_PATTERN, validate_scope_value

PATTERN = re.compile(SCOPE_VALUE_PATTERN)


def test_every_placeholder_is_outside_the_pattern_in_any_case() -> None:
    for word in PLACEHOLDERS:
        for spelling in (word, word.upper(), word.capitalize()):
            assert PATTERN.fullmatch(spelling) is None, spelling


def test_values_that_merely_start_like_a_placeholder_are_admitted() -> None:
    for value in ("allston", "anyway-store", "null1", "Nona", "na-east"):
        assert PATTERN.fullmatch(value)
        assert validate_scope_value(value, field="store") == value


@given(st.from_regex(SCOPE_VALUE_PATTERN, fullmatch=True).filter(lambda s: "\n" not in s))
def test_what_the_pattern_admits_the_server_accepts_unchanged(value: str) -> None:
    assert validate_scope_value(value, field="store") == value


@given(st.text(max_size=70))
def test_what_the_server_accepts_unstripped_the_pattern_admits(value: str) -> None:
    try:
        accepted = validate_scope_value(value, field="store")
    except ValidationFailure:
        assert PATTERN.fullmatch(value) is None or value != value.strip()
        return
    assert (PATTERN.fullmatch(value) is not None) == (accepted == value)
