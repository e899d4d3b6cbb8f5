"""A labelled query file (``eval_retrieval``) and the scores of what a retrieval returned for it.

The file is JSON Lines: one JSON object per line, one query each (blank lines are skipped). A
line says which retrieval it asks (``kind``: ``knowledge`` search or ``experience`` retrieval),
its text, its language, the ids that answer it (``expected``; empty for a *nothing-query*, a
question nothing in the scope answers, which must come back with nothing), the language of
those answers, and any scope field or time that differs from the command's flags. The fields
are listed in ``FIELDS``; docs/contracts.md ("Retrieval evaluation") is the reference.

The scores, per arm (lexical only, lexical + vector) and per group of queries:

- ``recall_at_k``: over the paraphrase queries (those with answers), the mean share of a
  query's expected ids among the first k items returned;
- ``hits_at_k``: how many paraphrase queries have at least one expected id in the first k;
- ``mrr``: the mean of 1 / the rank of the first expected id among all the items returned
  (0 when none is);
- ``answered_nothing`` and ``share``: how many nothing-queries came back empty, and their share.

A knowledge id ``doc:KEY`` expects any version of the document, ``doc:KEY@V`` that version.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reviewconsole import itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.scopes import SCOPE_FIELDS
from reviewconsole.timeparse import parse_aware_datetime

KNOWLEDGE = "knowledge"
EXPERIENCE = "experience"
KINDS = (KNOWLEDGE, EXPERIENCE)

LEXICAL = "lexical"
VECTOR = "vector"
ARMS = (LEXICAL, VECTOR)

# The prefixes an expected id of each kind starts with (reviewconsole.itemids).
ID_PREFIXES = {
    KNOWLEDGE: (itemids.DOCUMENT.prefix,),
    EXPERIENCE: tuple(kind.prefix for kind in (itemids.CASE, itemids.SKILL, itemids.LESSON)),
}
SCOPE_NAMES = SCOPE_FIELDS
# What each kind needs, as the API takes it (knowledge has no deployment; experience reads as of
# ``now``, knowledge as of the ticket's ``occurred_at`` and ``known_at``).
NEEDED = {
    KNOWLEDGE: (
        *(name for name in SCOPE_FIELDS if name != "deployment"),
        "occurred_at",
        "known_at",
    ),
    EXPERIENCE: (*SCOPE_FIELDS, "now"),
}
TIME_NAMES = ("occurred_at", "known_at", "now")
FIELDS = (
    "id",
    "kind",
    "query",
    "language",
    "answer_language",
    "expected",
    *SCOPE_NAMES,
    *TIME_NAMES,
    "facts",
)
MAX_LANGUAGE = 16

NOT_AN_OBJECT = "must be a JSON object (one query per line)"
NOT_JSON = "is not JSON ({problem})"
UNKNOWN_FIELD = "is not a field of a query line (fields: {fields})"
KIND_INVALID = f"must be one of {', '.join(KINDS)}"
TEXT_REQUIRED = "must be a non-empty string"
LANGUAGE_INVALID = f"must be a language code such as zh or en (at most {MAX_LANGUAGE} characters)"
EXPECTED_INVALID = "must be a list of item ids (empty for a query nothing answers)"
EXPECTED_KIND = "{value!r} is not an id a {kind} {what} returns (ids start with {prefixes})"
ANSWER_LANGUAGE_REQUIRED = "is required when expected names items (the language they are in)"
ANSWER_LANGUAGE_UNEXPECTED = "must be left out of a query nothing answers"
FACTS_INVALID = "must be an object of facts (name to value)"
FACTS_KIND = "only a knowledge search takes facts"
SCOPE_MISSING = "is missing: give it on the line or as the command's --{option}"
NO_QUERIES = "holds no query"
DUPLICATE_ID = "{value!r} is the id of line {line} already"
WHAT = {KNOWLEDGE: "search", EXPERIENCE: "retrieval"}
OPTIONS = {
    "tenant": "tenant",
    "brand": "brand",
    "store": "store",
    "campaign": "campaign",
    "deployment": "deployment",
    "occurred_at": "at",
    "known_at": "known-at",
    "now": "now",
}


def line_field(line: int, name: str) -> str:
    """The field a refusal names: the line of the file, then the field of that line."""
    return f"line {line}: {name}" if name else f"line {line}"


@dataclass(frozen=True)
class Query:
    line: int
    id: str
    kind: str
    text: str
    language: str
    answer_language: str | None
    expected: tuple[str, ...]
    scope: Mapping[str, str]
    times: Mapping[str, datetime]
    facts: Mapping[str, object] = field(default_factory=dict)

    @property
    def nothing(self) -> bool:
        """A question nothing in the scope answers: it must come back with nothing."""
        return not self.expected

    @property
    def pair(self) -> str:
        """``zh→en``: the query's language, then its answers' (``zh→∅`` for a nothing-query)."""
        return f"{self.language}→{self.answer_language or '∅'}"


def _text(raw: Mapping[str, Any], name: str, line: int, *, required: bool) -> str | None:
    value = raw.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailure(line_field(line, name), TEXT_REQUIRED)
    return value.strip()


def _language(raw: Mapping[str, Any], name: str, line: int) -> str | None:
    value = raw.get(name)
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not value.strip()
        or len(value.strip()) > MAX_LANGUAGE
        or any(ch.isspace() or ch in "→∅" for ch in value.strip())
    ):
        raise ValidationFailure(line_field(line, name), LANGUAGE_INVALID)
    return value.strip()


def query_parsed(raw: object, line: int, defaults: Mapping[str, Any]) -> Query:
    """One line's query, with the scope and times it leaves out taken from ``defaults`` (the
    command's flags); refusals name the line and the field."""
    if not isinstance(raw, dict):
        raise ValidationFailure(line_field(line, ""), NOT_AN_OBJECT)
    for name in raw:
        if name not in FIELDS:
            raise ValidationFailure(
                line_field(line, str(name)), UNKNOWN_FIELD.format(fields=", ".join(FIELDS))
            )
    kind = raw.get("kind")
    if kind not in KINDS:
        raise ValidationFailure(line_field(line, "kind"), KIND_INVALID)
    text = _text(raw, "query", line, required=True)
    language = _language(raw, "language", line)
    if language is None:
        raise ValidationFailure(line_field(line, "language"), LANGUAGE_INVALID)
    expected = raw.get("expected")
    if not isinstance(expected, list) or not all(
        isinstance(item, str) and item.strip() for item in expected
    ):
        raise ValidationFailure(line_field(line, "expected"), EXPECTED_INVALID)
    prefixes = ID_PREFIXES[kind]
    for item in expected:
        if not item.strip().startswith(prefixes):
            raise ValidationFailure(
                line_field(line, "expected"),
                EXPECTED_KIND.format(
                    value=item, kind=kind, what=WHAT[kind], prefixes=", ".join(prefixes)
                ),
            )
    answer_language = _language(raw, "answer_language", line)
    if expected and answer_language is None:
        raise ValidationFailure(line_field(line, "answer_language"), ANSWER_LANGUAGE_REQUIRED)
    if not expected and answer_language is not None:
        raise ValidationFailure(line_field(line, "answer_language"), ANSWER_LANGUAGE_UNEXPECTED)
    facts = raw.get("facts", {})
    if not isinstance(facts, dict):
        raise ValidationFailure(line_field(line, "facts"), FACTS_INVALID)
    if facts and kind != KNOWLEDGE:
        raise ValidationFailure(line_field(line, "facts"), FACTS_KIND)
    scope: dict[str, str] = {}
    times: dict[str, datetime] = {}
    for name in NEEDED[kind]:
        if name in TIME_NAMES:
            given = raw.get(name)
            if given is not None:
                times[name] = parse_aware_datetime(given, field=line_field(line, name))
            elif defaults.get(name) is not None:
                times[name] = defaults[name]
            else:
                raise ValidationFailure(
                    line_field(line, name), SCOPE_MISSING.format(option=OPTIONS[name])
                )
            continue
        value = _text(raw, name, line, required=False) or defaults.get(name)
        if not value:
            raise ValidationFailure(
                line_field(line, name), SCOPE_MISSING.format(option=OPTIONS[name])
            )
        scope[name] = str(value)
    if kind == KNOWLEDGE and raw.get("deployment") is not None:
        raise ValidationFailure(
            line_field(line, "deployment"), "a knowledge search has no deployment"
        )
    if kind == EXPERIENCE:
        for name in ("occurred_at", "known_at"):
            if raw.get(name) is not None:
                raise ValidationFailure(
                    line_field(line, name), "an experience retrieval reads as of now"
                )
    if kind == KNOWLEDGE and raw.get("now") is not None:
        raise ValidationFailure(
            line_field(line, "now"), "a knowledge search reads as of occurred_at and known_at"
        )
    query_id = _text(raw, "id", line, required=False) or f"line {line}"
    return Query(
        line=line,
        id=query_id,
        kind=kind,
        text=str(text),
        language=language,
        answer_language=answer_language,
        expected=tuple(dict.fromkeys(item.strip() for item in expected)),
        scope=scope,
        times=times,
        facts=facts,
    )


def queries_parsed(text: str, defaults: Mapping[str, Any]) -> list[Query]:
    """Every query of a JSON Lines file's text, or the refusal of its first wrong line."""
    queries: list[Query] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValidationFailure(
                line_field(number, ""), NOT_JSON.format(problem=error.msg)
            ) from None
        query = query_parsed(raw, number, defaults)
        if "id" in raw:
            if query.id in seen:
                raise ValidationFailure(
                    line_field(number, "id"),
                    DUPLICATE_ID.format(value=query.id, line=seen[query.id]),
                )
            seen[query.id] = number
        queries.append(query)
    if not queries:
        raise ValidationFailure("FILE", NO_QUERIES)
    return queries


# --- scores ------------------------------------------------------------------------------------


def matches(expected: str, returned: str) -> bool:
    """Whether the returned id is the expected one (``doc:KEY`` stands for every version)."""
    if expected.startswith(itemids.DOCUMENT.prefix) and "@" not in expected:
        return returned.split("@", 1)[0] == expected
    return returned == expected


@dataclass(frozen=True)
class Scored:
    """What one arm returned for one query, and how it scores."""

    returned: tuple[str, ...]
    rank: int | None  # of the first expected id among all returned, from 1
    found_at_k: int  # distinct expected ids among the first k
    recall: float | None  # found_at_k / expected; None for a nothing-query


def scored(query: Query, returned: Sequence[str], k: int) -> Scored:
    rank = next(
        (
            position
            for position, item in enumerate(returned, start=1)
            if any(matches(expected, item) for expected in query.expected)
        ),
        None,
    )
    head = returned[:k]
    found = sum(1 for expected in query.expected if any(matches(expected, i) for i in head))
    recall = found / len(query.expected) if query.expected else None
    return Scored(tuple(returned), rank, found, recall)


def _rounded(value: float) -> float:
    return round(value, 3)


def paraphrase_summary(results: Iterable[tuple[Query, Scored]]) -> dict[str, Any]:
    rows = [(q, s) for q, s in results if not q.nothing]
    count = len(rows)
    return {
        "queries": count,
        "hits_at_k": sum(1 for _, s in rows if s.found_at_k > 0),
        "recall_at_k": _rounded(sum(s.recall or 0.0 for _, s in rows) / count) if count else None,
        "mrr": _rounded(sum(1 / s.rank for _, s in rows if s.rank) / count) if count else None,
    }


def nothing_summary(results: Iterable[tuple[Query, Scored]]) -> dict[str, Any]:
    rows = [(q, s) for q, s in results if q.nothing]
    count = len(rows)
    empty = sum(1 for _, s in rows if not s.returned)
    return {
        "queries": count,
        "answered_nothing": empty,
        "share": _rounded(empty / count) if count else None,
        "items_returned": sum(len(s.returned) for _, s in rows),
    }


def arm_summary(results: Sequence[tuple[Query, Scored]]) -> dict[str, Any]:
    """An arm's scores: over every query, per language pair and per kind."""
    pairs = sorted({q.pair for q, _ in results if not q.nothing})
    languages = sorted({q.language for q, _ in results if q.nothing})
    return {
        "paraphrases": paraphrase_summary(results),
        "nothing": nothing_summary(results),
        "pairs": [
            {"pair": pair, **paraphrase_summary((q, s) for q, s in results if q.pair == pair)}
            for pair in pairs
        ],
        "nothing_by_language": [
            {
                "language": language,
                **nothing_summary((q, s) for q, s in results if q.language == language),
            }
            for language in languages
        ],
        "kinds": {
            kind: {
                "paraphrases": paraphrase_summary((q, s) for q, s in results if q.kind == kind),
                "nothing": nothing_summary((q, s) for q, s in results if q.kind == kind),
            }
            for kind in KINDS
            if any(q.kind == kind for q, _ in results)
        },
    }
