"""Importing one file of cases, skills and lessons: all or nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction

from experience.cases.prompting import prompt_tools
from experience.cases.schema import (
    FILE_REFERENCE,
    CaseContent,
    SkillContent,
    item_kind,
    parse_case,
    parse_skill,
)
from experience.cases.services import (
    CASE_REFERENCE_DUPLICATE,
    CASE_REFERENCE_NOT_CASE,
    CASE_REFERENCE_OUT_OF_RANGE,
    SUBMIT_REFUSED,
    SUBMIT_SKILL_REFUSED,
    Submitted,
    case_submit,
)
from experience.cases.services import skill_store as skill_store
from experience.cases.tools import tool_specs
from experience.core.models import SubmittedVia
from experience.lessons.schema import LessonContent, parse_lesson
from experience.lessons.services import lessons_import
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure
from reviewconsole.permissions import (
    ADD_CASE,
    ADD_SKILL,
    require,
)

NOT_A_LIST = "must be a JSON array of cases, skills and lessons"


@transaction.atomic
def items_import(*, items: object, actor: User, now: datetime | None = None) -> list[Submitted]:
    """Import a JSON array of cases and skills as candidates: all or nothing; every item is
    stored at one moment."""
    now = now or clock.now()
    if not isinstance(items, list):
        raise ValidationFailure("$", NOT_A_LIST)
    specs = tool_specs()
    prompts = prompt_tools()
    parsed: list[CaseContent | SkillContent | LessonContent] = []
    for index, raw in enumerate(items):
        try:
            kind = item_kind(raw)
            if kind == "lesson":
                parsed.append(parse_lesson(raw))
            else:
                parsed.append(
                    parse_case(raw) if kind == "case" else parse_skill(raw, specs, prompts)
                )
        except ValidationFailure as failure:
            raise failure.at(f"[{index}]") from None
    if any(isinstance(item, CaseContent) for item in parsed):
        require(actor, ADD_CASE, message=SUBMIT_REFUSED)
    if any(isinstance(item, SkillContent) for item in parsed):
        require(actor, ADD_SKILL, message=SUBMIT_SKILL_REFUSED)

    # Cases first, so a skill may cite a case that appears later in the same file.
    stored: dict[int, Submitted] = {}
    for index, item in enumerate(parsed):
        if isinstance(item, CaseContent):
            try:
                case, created = case_submit(
                    content=item, actor=actor, via=SubmittedVia.IMPORT, now=now
                )
            except ValidationFailure as failure:
                raise failure.at(f"[{index}]") from None
            stored[index] = Submitted(case.id, "case", created)
    for index, item in enumerate(parsed):
        if isinstance(item, SkillContent):
            try:
                resolved = _resolve_file_references(item, parsed, stored)
                skill, created = skill_store(
                    resolved, actor=actor, via=SubmittedVia.IMPORT, now=now
                )
            except ValidationFailure as failure:
                raise failure.at(f"[{index}]") from None
            stored[index] = Submitted(skill.id, "skill", created)
    # Lessons last: they cite cases of this file; their module builds on this one.

    lessons_import(parsed=parsed, stored=stored, actor=actor, now=now)
    return [stored[index] for index in range(len(parsed))]


def _resolve_file_references(
    skill: SkillContent,
    parsed: Sequence[CaseContent | SkillContent | LessonContent],
    stored: Mapping[int, Submitted],
) -> SkillContent:
    """Replace each ``#N`` by the id of item N of the same file (counted from 0)."""
    resolved: list[str] = []
    for i, ref in enumerate(skill.cases):
        match = FILE_REFERENCE.fullmatch(ref)
        if match is None:
            case_id = ref
        else:
            n = int(match.group(1))
            if n >= len(parsed):
                raise ValidationFailure(f"cases[{i}]", f"{ref} {CASE_REFERENCE_OUT_OF_RANGE}")
            target = parsed[n]
            if not isinstance(target, CaseContent):
                raise ValidationFailure(f"cases[{i}]", f"{ref} {CASE_REFERENCE_NOT_CASE}")
            case_id = stored[n].id
        if case_id in resolved:
            raise ValidationFailure(f"cases[{i}]", CASE_REFERENCE_DUPLICATE)
        resolved.append(case_id)
    return skill.resolved(tuple(resolved))
