"""Importing a file from the console: every problem of the file at once, and nothing written
unless there is none.

The formats and the writes are the commands' own (``import_cases``: cases, skills and lessons,
``experience.review.imports.items_import``; ``import_knowledge``: documents,
``knowledge.services.documents_import``). The commands stop at the first problem; a person
correcting a file wants them all, so ``console_import`` looks for every one before it writes:

1. each item is checked on its own by its format's rules (the import formats are pure), every
   field's refusal kept (``case_failures``, ``skill_failures``, ``lesson_failures``,
   ``document_failures``: the parses raise the first of the same failures);
2. if all parse, each item that stands alone (it cites no other item of the file by ``#N``) is
   imported on its own in a savepoint that is rolled back, so what only storing it finds (a
   tenant not the importer's, a conflict with what is stored, an unknown reference) is found
   for every item;
3. if none failed, the whole file is imported as the command imports it, in the same
   transaction; what only the whole file shows (an item twice in it, a reference to another
   item) is its one refusal.

Any refusal rolls everything back: ``ImportProblems`` carries them all, each naming its item
(``[N]``), the line it starts on and its field. A permission refusal is not a problem of the
file and is raised as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from experience.cases.prompting import prompt_tools
from experience.cases.schema import case_failures, item_kind, skill_failures
from experience.cases.tools import tool_specs
from experience.lessons.schema import lesson_failures
from experience.review.imports import NOT_A_LIST, items_import
from knowledge.schema import document_failures
from knowledge.services import documents_import
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure

ITEMS = "items"
DOCUMENTS = "documents"
KINDS = (ITEMS, DOCUMENTS)
DOCUMENTS_NOT_A_LIST = "must be a JSON array of documents"
# ``"#N"`` anywhere in an item: it cites another item of the same file.
_CITES_FILE = re.compile(r'"#(0|[1-9][0-9]{0,5})"')
_INDEX = re.compile(r"^\[(\d+)\]")


@dataclass(frozen=True)
class Problem:
    """One refusal: the item it is in (None: the file as a whole), the line that item starts
    on, the field within the item, and what is wrong."""

    item: int | None
    line: int | None
    field: str
    message: str


class ImportProblems(Exception):
    def __init__(self, problems: Sequence[Problem]) -> None:
        super().__init__("; ".join(f"{p.item} {p.field}: {p.message}" for p in problems))
        self.problems = list(problems)


@dataclass(frozen=True)
class Imported:
    """What the import stored: ids created, ids already there (identical content)."""

    created: list[str]
    unchanged: list[str]


def item_lines(text: str) -> list[int]:
    """The line (from 1) each element of a top-level JSON array starts on: pure, over text that
    parsed as JSON."""
    lines: list[int] = []
    depth = 0
    line = 1
    in_string = escaped = False
    expecting = False
    for char in text:
        if char == "\n":
            line += 1
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if expecting and not char.isspace() and char not in "]":
            lines.append(line)
            expecting = False
        if char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth == 1 and char == "[":
                expecting = True
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 1:
            expecting = True
    return lines


def _problem(
    failure: ValidationFailure, lines: Sequence[int], *, offset: int | None = None
) -> Problem:
    """``failure`` as a problem of its item; ``offset`` renumbers a failure found importing
    item ``offset`` alone (where it was ``[0]``)."""
    field = failure.field
    match = _INDEX.match(field)
    if match is None:
        if offset is None:
            return Problem(None, None, field, failure.message)
        index, rest = offset, field
    else:
        index = int(match.group(1)) if offset is None else offset
        rest = field[match.end() :]
    rest = rest.lstrip(".")
    line = lines[index] if index < len(lines) else None
    return Problem(index, line, rest, failure.message)


def _failures_alone(kind: str, raw: object) -> list[ValidationFailure]:
    """Every field failure of one item, by the rules its format's parse applies."""
    if kind == DOCUMENTS:
        return document_failures(raw)
    try:
        item = item_kind(raw)
    except ValidationFailure as failure:
        return [failure]
    if item == "lesson":
        return lesson_failures(raw)
    if item == "case":
        return case_failures(raw)
    return skill_failures(raw, tool_specs(), prompt_tools())


def _importer(kind: str, actor: User, now: datetime) -> Callable[[list[Any]], Imported]:
    def items(batch: list[Any]) -> Imported:
        stored = items_import(items=batch, actor=actor, now=now)
        return Imported(
            [s.id for s in stored if s.created], [s.id for s in stored if not s.created]
        )

    def documents(batch: list[Any]) -> Imported:
        result = documents_import(items=batch, actor=actor, now=now)
        return Imported(result.created, result.unchanged)

    return documents if kind == DOCUMENTS else items


class _RolledBack(Exception):
    pass


@transaction.atomic
def console_import(
    *, kind: str, items: object, actor: User, text: str = "", now: datetime | None = None
) -> Imported:
    """Import ``items`` (``kind``: ``items`` or ``documents``) as the command of that format
    does, or raise ``ImportProblems`` with every problem found and write nothing. ``text`` is
    the file the items were read from, for the lines the problems start on."""
    if kind not in KINDS:
        raise ValidationFailure("kind", f"must be one of {', '.join(KINDS)}")
    now = now or clock.now()
    if not isinstance(items, list):
        message = DOCUMENTS_NOT_A_LIST if kind == DOCUMENTS else NOT_A_LIST
        raise ImportProblems([Problem(None, None, "$", message)])
    lines = item_lines(text) if text else []
    problems: list[Problem] = []
    for index, raw in enumerate(items):
        problems.extend(
            _problem(failure.at(f"[{index}]"), lines) for failure in _failures_alone(kind, raw)
        )
    if problems:
        raise ImportProblems(problems)

    importer = _importer(kind, actor, now)
    for index, raw in enumerate(items):
        if _CITES_FILE.search(json.dumps(raw, ensure_ascii=False)):
            continue
        try:
            with transaction.atomic():
                importer([raw])
                raise _RolledBack
        except _RolledBack:
            pass
        except ValidationFailure as failure:
            problems.append(_problem(failure, lines, offset=index))
    if problems:
        raise ImportProblems(problems)
    try:
        with transaction.atomic():
            return importer(items)
    except ValidationFailure as failure:
        raise ImportProblems([_problem(failure, lines)]) from None
