"""The import format of lessons (``"type": "lesson"``), validated into a frozen value.

The format is in docs/contracts.md (Import formats). Pure: no Django imports; every error names
its JSON path, as ``experience.cases.schema`` does for cases and skills.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from experience.cases.schema import (
    BAD_CASE_REFERENCE,
    CASE_ID,
    FILE_REFERENCE,
    MAX_TEXT,
    NOT_A_FIELD,
    _require,
    _validity,
)
from experience.core.domain import content_id, validate_scope
from experience.lessons.domain import LESSON_TYPES, LessonShape, normalise_tag
from reviewconsole import itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.fields import FieldChecks, bounded_text, every_failure, reject_unknown_fields
from reviewconsole.inputs import check_tree
from reviewconsole.timeparse import to_utc_iso

LESSON_PREFIX = itemids.LESSON.prefix
LESSON_ID = re.compile(itemids.LESSON.pattern)
MAX_TAGS = 20
MAX_TAG = 60
MAX_DESCRIPTION = 2_000
MAX_CITED = 20

LESSON_FIELDS = frozenset(
    {
        "type",
        "lesson_type",
        "scope",
        "scene",
        "precondition",
        "conclusion",
        "supports",
        "contradicts",
        "valid_from",
        "valid_to",
        "supersedes",
    }
)
LESSON_REQUIRED = (
    "lesson_type",
    "scope",
    "scene",
    "precondition",
    "conclusion",
    "supports",
    "valid_from",
    "valid_to",
)
SCENE_FIELDS = frozenset({"tags", "description"})
BAD_LESSON_TYPE = "must be one of " + ", ".join(LESSON_TYPES)
CITED_TWICE = "cites the same case twice"
SUPPORTS_AND_CONTRADICTS = "is cited both as support and as a contradiction"


@dataclass(frozen=True)
class LessonContent:
    lesson_type: str
    scope: Mapping[str, str]
    tags: tuple[str, ...]
    description: str
    precondition: str
    conclusion: str
    # Case ids, or "#N" references into the same file until the importer resolves them.
    supports: tuple[str, ...]
    contradicts: tuple[str, ...]
    valid_from: datetime
    valid_to: datetime
    supersedes: str = ""

    def canonical(self) -> dict[str, Any]:
        return {
            "type": "lesson",
            "lesson_type": self.lesson_type,
            "scope": dict(self.scope),
            "scene": {"tags": sorted(self.tags), "description": self.description},
            "precondition": self.precondition,
            "conclusion": self.conclusion,
            "supports": sorted(self.supports),
            "contradicts": sorted(self.contradicts),
            "valid_from": to_utc_iso(self.valid_from),
            "valid_to": to_utc_iso(self.valid_to),
            "supersedes": self.supersedes or None,
        }

    @property
    def id(self) -> str:
        return content_id(LESSON_PREFIX, self.canonical())

    @property
    def title(self) -> str:
        return self.description[:300]

    def search_text(self) -> str:
        """What retrieval ranks a lesson by: scene tags and description, precondition, conclusion."""
        return "\n".join(
            [" ".join(self.tags), self.description, self.precondition, self.conclusion]
        )

    def unresolved(self) -> tuple[str, ...]:
        return tuple(ref for ref in (*self.supports, *self.contradicts) if ref.startswith("#"))

    def resolved(self, supports: tuple[str, ...], contradicts: tuple[str, ...]) -> LessonContent:
        return replace(self, supports=supports, contradicts=contradicts)

    def shape(self, lesson_id: str = "") -> LessonShape:
        return LessonShape(
            id=lesson_id or self.id,
            lesson_type=self.lesson_type,
            scope=self.scope,
            tags=frozenset(self.tags),
            description=self.description,
            conclusion=self.conclusion,
            supports=frozenset(self.supports),
            contradicts=frozenset(self.contradicts),
        )


def _tags(value: object, path: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ValidationFailure(path, "must be a list of tags")
    if len(value) > MAX_TAGS:
        raise ValidationFailure(path, f"must have at most {MAX_TAGS} tags")
    tags: list[str] = []
    for i, tag in enumerate(value):
        clean = normalise_tag(bounded_text(tag, f"{path}[{i}]", MAX_TAG, required=True))
        if clean in tags:
            raise ValidationFailure(f"{path}[{i}]", "repeats a tag")
        tags.append(clean)
    return tuple(tags)


def _cited(value: object, path: str, *, required: bool) -> tuple[str, ...]:
    if value is None and not required:
        return ()
    if not isinstance(value, list) or (required and not value):
        raise ValidationFailure(
            path,
            "must be a non-empty list of case ids" if required else ("must be a list of case ids"),
        )
    if len(value) > MAX_CITED:
        raise ValidationFailure(path, f"must cite at most {MAX_CITED} cases")
    refs: list[str] = []
    for i, ref in enumerate(value):
        if not isinstance(ref, str) or not (
            CASE_ID.fullmatch(ref) or FILE_REFERENCE.fullmatch(ref)
        ):
            raise ValidationFailure(f"{path}[{i}]", BAD_CASE_REFERENCE)
        if ref in refs:
            raise ValidationFailure(f"{path}[{i}]", CITED_TWICE)
        refs.append(ref)
    return tuple(refs)


def _scene(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationFailure("scene", 'must be an object {"tags", "description"}')
    reject_unknown_fields(value, SCENE_FIELDS, "scene", NOT_A_FIELD)
    for name in ("tags", "description"):
        if name not in value:
            raise ValidationFailure(f"scene.{name}", "is required")
    return value


def _supersedes(value: object) -> str:
    if value is not None and (not isinstance(value, str) or not LESSON_ID.fullmatch(value)):
        raise ValidationFailure("supersedes", "must be the id of a lesson (lesson:<sha256>)")
    return value or ""


def _lesson(obj: object, checks: FieldChecks) -> LessonContent | None:
    """The lesson ``obj`` is; None when ``checks`` kept a failure (it raises the first one in a
    parse)."""
    if not isinstance(obj, dict):
        raise ValidationFailure("", "a lesson must be a JSON object")
    check_tree(obj)
    item: dict[str, Any] = obj
    checks.unknown(item, LESSON_FIELDS, "", NOT_A_FIELD)
    if item.get("type", "lesson") != "lesson":
        checks.fail(ValidationFailure("type", 'must be "lesson"'))
    _require(item, LESSON_REQUIRED, checks)
    if not checks.failed("lesson_type") and item["lesson_type"] not in LESSON_TYPES:
        checks.fail(ValidationFailure("lesson_type", BAD_LESSON_TYPE))
    validity = _validity(item, "", checks)
    scene = checks.check("scene", lambda: _scene(item["scene"]))
    supports = checks.check("supports", lambda: _cited(item["supports"], "supports", required=True))
    contradicts = checks.check(
        "contradicts", lambda: _cited(item.get("contradicts"), "contradicts", required=False)
    )
    for i, ref in enumerate(contradicts or ()):
        if ref in (supports or ()):
            checks.fail(ValidationFailure(f"contradicts[{i}]", SUPPORTS_AND_CONTRADICTS))
    supersedes = checks.check("supersedes", lambda: _supersedes(item.get("supersedes")))
    scope = checks.check("scope", lambda: validate_scope(item["scope"]))
    tags = description = None
    if scene is not None:
        tags = checks.check("scene.tags", lambda: _tags(scene["tags"], "scene.tags"))
        description = checks.check(
            "scene.description",
            lambda: bounded_text(scene["description"], "scene.description", MAX_DESCRIPTION),
        )
    precondition = checks.check(
        "precondition", lambda: bounded_text(item["precondition"], "precondition", MAX_TEXT)
    )
    conclusion = checks.check(
        "conclusion", lambda: bounded_text(item["conclusion"], "conclusion", MAX_TEXT)
    )
    if (
        checks.failures
        or validity is None
        or scope is None
        or tags is None
        or description is None
        or precondition is None
        or conclusion is None
        or supports is None
        or contradicts is None
    ):
        return None
    return LessonContent(
        lesson_type=item["lesson_type"],
        scope=scope,
        tags=tags,
        description=description,
        precondition=precondition,
        conclusion=conclusion,
        supports=supports,
        contradicts=contradicts,
        valid_from=validity[0],
        valid_to=validity[1],
        supersedes=supersedes or "",
    )


def parse_lesson(obj: object) -> LessonContent:
    content = _lesson(obj, FieldChecks())
    assert content is not None  # a parse raises its first failure
    return content


def lesson_failures(obj: object) -> list[ValidationFailure]:
    """Every field failure of one lesson item (``parse_lesson`` raises the first of them)."""
    return every_failure(lambda checks: _lesson(obj, checks))
