"""What every value entering from outside must be, whichever door it comes through.

Command-line files, console uploads, API bodies and MCP arguments all use these rules, so they
accept and refuse the same things. Pure: no Django imports. Every refusal names the field (a
JSON path such as ``messages[3].text``, or ``FILE`` for the file as a whole):

- JSON text nested deeper than ``MAX_DEPTH`` levels is refused before it is parsed: Python's
  parser, and everything that walks the parsed value, would otherwise run out of stack.
- A string (value or object key) holding a NUL character or a lone surrogate is refused: no
  database stores the first (PostgreSQL refuses it, SQLite would cut text at it) and the second
  is not Unicode text at all.
- An integer beyond ±2**53 is refused (JSON readers hold numbers as IEEE-754 doubles, so larger
  ones change silently), as are NaN and the infinities, which JSON cannot express.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from reviewconsole.errors import ValidationFailure
from reviewconsole.fields import json_path

MAX_DEPTH = 64
# Integers that survive every JSON reader unchanged.
MAX_JSON_INT = 2**53
# What a database integer column holds on every supported database.
MAX_DB_INT = 2**31 - 1
# More digits than any integer within MAX_JSON_INT has (sign included).
_MAX_INT_DIGITS = len(str(-MAX_JSON_INT))

NUL_TEXT = "must not contain NUL characters"
BAD_UNICODE = "must be valid Unicode text"
TOO_DEEP = f"nests deeper than {MAX_DEPTH} levels"
INT_OUT_OF_RANGE = f"must be an integer between -{MAX_JSON_INT} and {MAX_JSON_INT}"
NOT_FINITE = "must be a finite number"
NOT_UTF8 = "is not UTF-8 text"
NOT_JSON = "is not valid JSON (line {line}, column {column}: {problem})"

# A JSON string literal (escapes included), and the brackets left once strings are removed.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class _HugeInteger:
    """Stands in for an integer literal too long to convert; refused with its path later."""


_HUGE = _HugeInteger()


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, or None when it can."""
    if "\x00" in value:
        return NUL_TEXT
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return BAD_UNICODE
    return None


def storable_text(value: str, *, field: str) -> str:
    """``value`` unchanged, or a refusal naming ``field``."""
    problem = text_problem(value)
    if problem is not None:
        raise ValidationFailure(field, problem)
    return value


def db_integer(value: object, *, field: str, minimum: int = 1) -> int:
    """An integer a database column holds: ``minimum`` to 2**31-1; booleans are refused."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_DB_INT:
        raise ValidationFailure(field, f"must be an integer from {minimum} to {MAX_DB_INT}")
    return value


def _printable(key: str) -> str:
    """A key as it can be shown in an error even when it is not storable text itself."""
    return key.replace("\x00", "\\u0000").encode("utf-8", "backslashreplace").decode("utf-8")


def check_tree(value: object, path: str = "", *, depth_limit: int = MAX_DEPTH) -> None:
    """Refuse, naming its path, the first value of a parsed JSON value that breaks a rule.

    Iterative, so even a value nested far beyond the limit is refused, never a crash."""
    stack: list[tuple[object, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= depth_limit:
                raise ValidationFailure(where, TOO_DEEP)
            if isinstance(item, list):
                children = [(child, f"{where}[{i}]") for i, child in enumerate(item)]
            else:
                children = []
                for key, child in item.items():
                    key_path = json_path(where, _printable(str(key)))
                    if isinstance(key, str) and (problem := text_problem(key)) is not None:
                        raise ValidationFailure(key_path, f"(a field name) {problem}")
                    children.append((child, key_path))
            stack.extend((child, at, depth + 1) for child, at in reversed(children))
        elif isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                raise ValidationFailure(where, problem)
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int | _HugeInteger):
            if isinstance(item, _HugeInteger) or abs(item) > MAX_JSON_INT:
                raise ValidationFailure(where, INT_OUT_OF_RANGE)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValidationFailure(where, NOT_FINITE)


def nesting_exceeds(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON ``text`` opens more than ``limit`` arrays or objects inside each other."""
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _integer(literal: str) -> int | _HugeInteger:
    return int(literal) if len(literal) <= _MAX_INT_DIGITS else _HUGE


def load_json(raw: bytes | str, *, field: str = "FILE") -> Any:
    """Parse JSON text from outside and check it with ``check_tree``.

    Refusals of the text as a whole name ``field``; those of a value name its JSON path."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ValidationFailure(field, NOT_UTF8) from None
    if nesting_exceeds(raw):
        raise ValidationFailure(field, TOO_DEEP)
    try:
        value = json.loads(raw, parse_int=_integer, parse_constant=float)
    except json.JSONDecodeError as exc:
        message = NOT_JSON.format(line=exc.lineno, column=exc.colno, problem=exc.msg)
        raise ValidationFailure(field, message) from None
    except RecursionError:
        # Only reachable when the text fooled the bracket count above (it was not JSON anyway).
        raise ValidationFailure(field, TOO_DEEP) from None
    try:
        check_tree(value)
    except ValidationFailure as failure:
        raise ValidationFailure(failure.field or field, failure.message) from None
    return value
