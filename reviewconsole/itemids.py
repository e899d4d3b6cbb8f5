"""Item ids: the one parser and formatter of ``case:…``, ``skill:…``, ``lesson:…`` and ``doc:KEY@VERSION``.

Cases and skills are named by content: the prefix and the 64 hex digits of a SHA-256 (the
``digest``, which console URLs carry). A knowledge document is named by its key and version.
The formats are in docs/contracts.md (Item ids). Each kind is one entry of ``KINDS``, so a
kind added later is one more ``Kind``.

Pure: no Django import, so every app (and the import formats) can use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from reviewconsole.errors import ValidationFailure

DIGEST = r"[0-9a-f]{64}"  # a SHA-256 in lower-case hex
DOCUMENT_KEY = r"[A-Za-z0-9_-]{1,100}"  # a slug, as knowledge URLs take it
VERSION = r"[1-9][0-9]{0,8}"


class Shape(Enum):
    """What follows a kind's prefix: a digest, or ``KEY@VERSION``."""

    DIGEST = "digest"
    VERSIONED = "versioned"


@dataclass(frozen=True)
class Kind:
    name: str
    prefix: str
    shape: Shape
    example: str
    # The console page of an item of this kind: a URL name, reversed with ``ItemId.url_args``.
    url_name: str

    @property
    def pattern(self) -> str:
        """A regular expression matching a whole id of this kind (no anchors, no groups)."""
        body = DIGEST if self.shape is Shape.DIGEST else f"{DOCUMENT_KEY}@{VERSION}"
        return re.escape(self.prefix) + body


CASE = Kind("case", "case:", Shape.DIGEST, "case:<64 hex digits>", "experience:case-detail")
SKILL = Kind("skill", "skill:", Shape.DIGEST, "skill:<64 hex digits>", "experience:skill-detail")
LESSON = Kind(
    "lesson", "lesson:", Shape.DIGEST, "lesson:<64 hex digits>", "experience:lesson-detail"
)
DOCUMENT = Kind("document", "doc:", Shape.VERSIONED, "doc:KEY@VERSION", "knowledge:document-detail")
KINDS: tuple[Kind, ...] = (CASE, SKILL, LESSON, DOCUMENT)

CASE_PREFIX = CASE.prefix
SKILL_PREFIX = SKILL.prefix
DOCUMENT_PREFIX = DOCUMENT.prefix

UNKNOWN_KIND = "must start with " + ", ".join(kind.prefix for kind in KINDS)
NOT_TEXT = "must be a text id"
# Everything after an id that names a part of the item (``doc:KEY@1#section``, ``…/page-2``).
PART_SEPARATORS = "#/"


def _by_prefix(text: str) -> Kind | None:
    return next((kind for kind in KINDS if text.startswith(kind.prefix)), None)


def malformed(kind: Kind) -> str:
    return f"must look like {kind.example}"


def wrong_kind(kinds: tuple[Kind, ...]) -> str:
    return "must be a " + " or ".join(kind.example for kind in kinds) + " id"


@dataclass(frozen=True, order=True)
class ItemId:
    kind: Kind
    key: str
    # The document version; None for content-named kinds.
    version: int | None = None

    @classmethod
    def case(cls, digest: str) -> ItemId:
        return cls(CASE, digest)

    @classmethod
    def skill(cls, digest: str) -> ItemId:
        return cls(SKILL, digest)

    @classmethod
    def document(cls, key: str, version: int) -> ItemId:
        return cls(DOCUMENT, key, version)

    def __str__(self) -> str:
        return format_id(self)

    @property
    def digest(self) -> str:
        """The hex part of a content-named id (what case and skill URLs carry)."""
        if self.kind.shape is not Shape.DIGEST:
            raise ValueError(f"{self} is not named by a digest")
        return self.key

    @property
    def key_version(self) -> tuple[str, int]:
        """The key and version of a versioned id (a document's)."""
        if self.version is None:
            raise ValueError(f"{self} has no version")
        return self.key, self.version

    @property
    def url_args(self) -> tuple[str | int, ...]:
        if self.version is None:
            return (self.key,)
        return (self.key, self.version)


def format_id(item: ItemId) -> str:
    if item.version is None:
        return f"{item.kind.prefix}{item.key}"
    return f"{item.kind.prefix}{item.key}@{item.version}"


def parse(text: object, *, field: str = "id", kinds: tuple[Kind, ...] = KINDS) -> ItemId:
    """The id ``text`` names; a ValidationFailure on ``field`` when it is not one of ``kinds``."""
    if not isinstance(text, str):
        raise ValidationFailure(field, NOT_TEXT)
    kind = _by_prefix(text)
    if kind is None:
        raise ValidationFailure(field, UNKNOWN_KIND if kinds == KINDS else wrong_kind(kinds))
    if kind not in kinds:
        raise ValidationFailure(field, wrong_kind(kinds))
    body = text[len(kind.prefix) :]
    if kind.shape is Shape.DIGEST:
        if not re.fullmatch(DIGEST, body):
            raise ValidationFailure(field, malformed(kind))
        return ItemId(kind, body)
    key, _, version = body.rpartition("@")
    if not re.fullmatch(DOCUMENT_KEY, key) or not re.fullmatch(VERSION, version):
        raise ValidationFailure(field, malformed(kind))
    return ItemId(kind, key, int(version))


def parse_reference(text: str, *, field: str = "id") -> tuple[ItemId, str]:
    """An id followed by an optional part (``doc:KEY@1#rule-3``): the id, and the part."""
    separator = re.search(f"[{re.escape(PART_SEPARATORS)}]", text)
    cut = separator.start() if separator else len(text)
    return parse(text[:cut], field=field), text[cut:]


def kind_of(text: str) -> Kind | None:
    """The kind an id claims by its prefix, without checking the rest."""
    return _by_prefix(text)


def digest_of(text: str, *, field: str = "id") -> str:
    """The hex part of a case, skill or lesson id."""
    return parse(text, field=field, kinds=(CASE, SKILL, LESSON)).digest
