"""The import format of cases and skills, validated into frozen values, and the ticket context a
skill runs with (``TicketContext``, also the context of an investigation's ticket).

The format is described in docs/contracts.md, Import formats.

Pure: no Django imports. Every error names its JSON path; text no database stores, integers
beyond ±2**53 and deep nesting are refused (``reviewconsole.inputs``). ``verified`` flags are
kept apart from the content: a check is a reviewer's act, not part of what the case says.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from experience.core.domain import (
    CASE_PREFIX,
    SKILL_PREFIX,
    RecipeStep,
    ToolSpec,
    content_id,
    validate_recipe,
    validate_scope,
)
from experience.core.prompts import PromptSpec, PromptTool, prompt_checked
from reviewconsole import itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.fields import FieldChecks, every_failure, json_path, reject_unknown_fields
from reviewconsole.fields import bounded_text as _text
from reviewconsole.inputs import check_tree
from reviewconsole.timeparse import parse_aware_datetime, to_utc_iso

MAX_TITLE = 300
MAX_TEXT = 20_000
MAX_EXCERPT = 2_000
MAX_SOURCE_ID = 300
MAX_INCIDENT = 200
MAX_WHEN = 2_000
MAX_EVIDENCE_ITEMS = 50
MAX_COUNTEREVIDENCE = 20
MAX_SKILL_CASES = 20

CASE_ID = re.compile(itemids.CASE.pattern)
FILE_REFERENCE = re.compile(r"#(0|[1-9][0-9]{0,5})")

CASE_FIELDS = frozenset(
    {
        "type",
        "scope",
        "incident",
        "title",
        "summary",
        "observations",
        "diagnosis",
        "counterevidence",
        "outcome",
        "valid_from",
        "valid_to",
        "supersedes",
    }
)
CASE_REQUIRED = ("scope", "incident", "title", "valid_from", "valid_to")
SKILL_FIELDS = frozenset(
    {"type", "scope", "title", "when", "recipe", "prompt", "cases", "valid_from", "valid_to"}
)
# A skill has a recipe (a deterministic script) or a prompt (a constrained sub-agent), never both.
SKILL_REQUIRED = ("scope", "title", "when", "cases", "valid_from", "valid_to")
RECIPE = "recipe"
PROMPT = "prompt"
ONE_BODY = 'a skill has either a "recipe" or a "prompt", not both'
NO_BODY = 'is required (or "prompt", for a prompt-form skill)'
EVIDENCE_FIELDS = frozenset({"source_id", "excerpt", "verified"})
STATEMENT_FIELDS = frozenset({"statement", "evidence"})
COUNTER_FIELDS = frozenset({"hypothesis", "statement", "refutes", "evidence"})

NOT_A_FIELD = "is not a field of this item"
REQUIRED = "is required"
VALID_TO_ORDER = "must be after valid_from"
BAD_CASE_REFERENCE = (
    'must be a case id (case:<sha256>) or "#N", the N-th item (from 0) of the same file'
)


@dataclass(frozen=True)
class TicketContext:
    """The caller's knowledge context: when it happened, what was known, and the ticket's facts."""

    occurred_at: datetime | None
    known_at: datetime | None
    facts: Mapping[str, object] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "occurred_at": to_utc_iso(self.occurred_at),
            "known_at": to_utc_iso(self.known_at),
            "facts": dict(self.facts),
        }


@dataclass(frozen=True)
class EvidenceItem:
    key: str
    section: str
    source_id: str
    excerpt: str
    verified: bool

    def canonical(self) -> dict[str, Any]:
        return {"source_id": self.source_id, "excerpt": self.excerpt}


@dataclass(frozen=True)
class Statement:
    statement: str
    evidence: tuple[EvidenceItem, ...]

    def canonical(self) -> dict[str, Any]:
        return {"statement": self.statement, "evidence": [e.canonical() for e in self.evidence]}


@dataclass(frozen=True)
class Counterevidence:
    hypothesis: str
    statement: str
    refutes: str
    evidence: tuple[EvidenceItem, ...]

    def canonical(self) -> dict[str, Any]:
        return {
            "hypothesis": self.hypothesis,
            "statement": self.statement,
            "refutes": self.refutes,
            "evidence": [e.canonical() for e in self.evidence],
        }


@dataclass(frozen=True)
class CaseContent:
    scope: Mapping[str, str]
    incident: str
    title: str
    summary: str
    observations: tuple[EvidenceItem, ...]
    diagnosis: Statement
    counterevidence: tuple[Counterevidence, ...]
    outcome: Statement
    valid_from: datetime
    valid_to: datetime
    supersedes: str

    def canonical(self) -> dict[str, Any]:
        return {
            "type": "case",
            "scope": dict(self.scope),
            "incident": self.incident,
            "title": self.title,
            "summary": self.summary,
            "observations": [e.canonical() for e in self.observations],
            "diagnosis": self.diagnosis.canonical(),
            "counterevidence": [c.canonical() for c in self.counterevidence],
            "outcome": self.outcome.canonical(),
            "valid_from": to_utc_iso(self.valid_from),
            "valid_to": to_utc_iso(self.valid_to),
            "supersedes": self.supersedes or None,
        }

    @property
    def id(self) -> str:
        return content_id(CASE_PREFIX, self.canonical())

    def evidence(self) -> tuple[EvidenceItem, ...]:
        items = [*self.observations, *self.diagnosis.evidence]
        for entry in self.counterevidence:
            items.extend(entry.evidence)
        items.extend(self.outcome.evidence)
        return tuple(items)

    def search_text(self) -> str:
        """What retrieval ranks a case by: title, summary, observation excerpts, diagnosis."""
        parts = [
            self.title,
            self.summary,
            *(e.excerpt for e in self.observations),
            self.diagnosis.statement,
        ]
        return "\n".join(part for part in parts if part)


@dataclass(frozen=True)
class SkillContent:
    scope: Mapping[str, str]
    title: str
    when: str
    recipe: tuple[RecipeStep, ...]
    # Case ids, or "#N" references into the same file until the importer resolves them.
    cases: tuple[str, ...]
    valid_from: datetime
    valid_to: datetime
    # A prompt-form skill's body; None for a recipe skill (whose recipe is then non-empty).
    prompt: PromptSpec | None = None

    @property
    def form(self) -> str:
        return PROMPT if self.prompt is not None else RECIPE

    def canonical(self) -> dict[str, Any]:
        # A recipe skill's content (and so its id) is exactly what it was before prompt skills.
        body: dict[str, Any] = (
            {"prompt": self.prompt.as_json()}
            if self.prompt is not None
            else {"recipe": [step.as_json() for step in self.recipe]}
        )
        return {
            "type": "skill",
            "scope": dict(self.scope),
            "title": self.title,
            "when": self.when,
            **body,
            "cases": sorted(self.cases),
            "valid_from": to_utc_iso(self.valid_from),
            "valid_to": to_utc_iso(self.valid_to),
        }

    @property
    def id(self) -> str:
        return content_id(SKILL_PREFIX, self.canonical())

    def unresolved(self) -> tuple[str, ...]:
        return tuple(ref for ref in self.cases if ref.startswith("#"))

    def resolved(self, cases: tuple[str, ...]) -> SkillContent:
        """The same skill (recipe or prompt, and every other field) citing ``cases``."""
        return replace(self, cases=cases)


def _reject_unknown(obj: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    reject_unknown_fields(obj, allowed, path, NOT_A_FIELD)


def _evidence_list(
    value: object, path: str, key_prefix: str, section: str
) -> tuple[EvidenceItem, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValidationFailure(path, "must be a list of evidence items")
    if len(value) > MAX_EVIDENCE_ITEMS:
        raise ValidationFailure(path, f"must have at most {MAX_EVIDENCE_ITEMS} items")
    return tuple(
        _evidence(item, f"{path}[{i}]", f"{key_prefix}/{i}", section)
        for i, item in enumerate(value)
    )


def _evidence(value: object, path: str, key: str, section: str) -> EvidenceItem:
    if not isinstance(value, dict):
        raise ValidationFailure(path, 'must be an object {"source_id", "excerpt"}')
    _reject_unknown(value, EVIDENCE_FIELDS, path)
    for name in ("source_id", "excerpt"):
        if name not in value:
            raise ValidationFailure(f"{path}.{name}", REQUIRED)
    verified = value.get("verified", False)
    if not isinstance(verified, bool):
        raise ValidationFailure(f"{path}.verified", "must be true or false")
    return EvidenceItem(
        key=key,
        section=section,
        source_id=_text(value["source_id"], f"{path}.source_id", MAX_SOURCE_ID, required=True),
        excerpt=_text(value["excerpt"], f"{path}.excerpt", MAX_EXCERPT, required=True),
        verified=verified,
    )


def _statement(value: object, path: str, section: str) -> Statement:
    if value is None:
        return Statement("", ())
    if not isinstance(value, dict):
        raise ValidationFailure(path, 'must be an object {"statement", "evidence"}')
    _reject_unknown(value, STATEMENT_FIELDS, path)
    return Statement(
        statement=_text(value.get("statement"), f"{path}.statement", MAX_TEXT, required=False),
        evidence=_evidence_list(value.get("evidence"), f"{path}.evidence", section, section),
    )


def _counterevidence(value: object, path: str) -> tuple[Counterevidence, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValidationFailure(path, "must be a list of refuted hypotheses")
    if len(value) > MAX_COUNTEREVIDENCE:
        raise ValidationFailure(path, f"must have at most {MAX_COUNTEREVIDENCE} entries")
    entries = []
    for i, entry in enumerate(value):
        entry_path = f"{path}[{i}]"
        if not isinstance(entry, dict):
            raise ValidationFailure(
                entry_path, 'must be an object {"hypothesis", "statement", "refutes", "evidence"}'
            )
        _reject_unknown(entry, COUNTER_FIELDS, entry_path)
        for name in ("hypothesis", "statement", "refutes"):
            if name not in entry:
                raise ValidationFailure(f"{entry_path}.{name}", REQUIRED)
        entries.append(
            Counterevidence(
                hypothesis=_text(
                    entry["hypothesis"], f"{entry_path}.hypothesis", MAX_TEXT, required=True
                ),
                statement=_text(
                    entry["statement"], f"{entry_path}.statement", MAX_TEXT, required=True
                ),
                refutes=_text(entry["refutes"], f"{entry_path}.refutes", MAX_TEXT, required=True),
                evidence=_evidence_list(
                    entry.get("evidence"),
                    f"{entry_path}.evidence",
                    f"counterevidence/{i}",
                    "counterevidence",
                ),
            )
        )
    return tuple(entries)


def _valid_to(obj: Mapping[str, Any], path: str) -> datetime:
    if obj["valid_to"] is None:
        raise ValidationFailure(json_path(path, "valid_to"), REQUIRED)
    return parse_aware_datetime(obj["valid_to"], field=json_path(path, "valid_to"))


def _validity(
    obj: Mapping[str, Any], path: str, checks: FieldChecks
) -> tuple[datetime, datetime] | None:
    """``valid_from`` and ``valid_to``, the second after the first; None if either failed."""
    valid_from = checks.check(
        "valid_from",
        lambda: parse_aware_datetime(obj["valid_from"], field=json_path(path, "valid_from")),
    )
    valid_to = checks.check("valid_to", lambda: _valid_to(obj, path))
    if valid_from is None or valid_to is None:
        return None
    if valid_to <= valid_from:
        checks.fail(ValidationFailure(json_path(path, "valid_to"), VALID_TO_ORDER))
        return None
    return valid_from, valid_to


def _require(obj: Mapping[str, Any], names: tuple[str, ...], checks: FieldChecks) -> None:
    checks.require(obj, names, REQUIRED)


def _supersedes(value: object) -> str:
    if value is not None and (not isinstance(value, str) or not CASE_ID.fullmatch(value)):
        raise ValidationFailure("supersedes", "must be the id of a case (case:<sha256>)")
    return value or ""


def _case(obj: object, checks: FieldChecks) -> CaseContent | None:
    """The case ``obj`` is; None when ``checks`` kept a failure (it raises the first one in a
    parse)."""
    if not isinstance(obj, dict):
        raise ValidationFailure("", "a case must be a JSON object")
    check_tree(obj)
    item: dict[str, Any] = obj
    checks.unknown(item, CASE_FIELDS, "", NOT_A_FIELD)
    if item.get("type", "case") != "case":
        checks.fail(ValidationFailure("type", 'must be "case"'))
    _require(item, CASE_REQUIRED, checks)
    validity = _validity(item, "", checks)
    supersedes = checks.check("supersedes", lambda: _supersedes(item.get("supersedes")))
    v: dict[str, Any] = {
        "scope": checks.check("scope", lambda: validate_scope(item["scope"])),
        "incident": checks.check(
            "incident", lambda: _text(item["incident"], "incident", MAX_INCIDENT, required=True)
        ),
        "title": checks.check(
            "title", lambda: _text(item["title"], "title", MAX_TITLE, required=True)
        ),
        "summary": checks.check(
            "summary", lambda: _text(item.get("summary"), "summary", MAX_TEXT, required=False)
        ),
        "observations": checks.check(
            "observations",
            lambda: _evidence_list(
                item.get("observations"), "observations", "observations", "observations"
            ),
        ),
        "diagnosis": checks.check(
            "diagnosis", lambda: _statement(item.get("diagnosis"), "diagnosis", "diagnosis")
        ),
        "counterevidence": checks.check(
            "counterevidence",
            lambda: _counterevidence(item.get("counterevidence"), "counterevidence"),
        ),
        "outcome": checks.check(
            "outcome", lambda: _statement(item.get("outcome"), "outcome", "outcome")
        ),
    }
    if checks.failures or validity is None:
        return None
    return CaseContent(
        **v, valid_from=validity[0], valid_to=validity[1], supersedes=supersedes or ""
    )


def parse_case(obj: object) -> CaseContent:
    content = _case(obj, FieldChecks())
    assert content is not None  # a parse raises its first failure
    return content


def case_failures(obj: object) -> list[ValidationFailure]:
    """Every field failure of one case item (``parse_case`` raises the first of them)."""
    return every_failure(lambda checks: _case(obj, checks))


def _skill_cases(cases: object) -> tuple[str, ...]:
    if not isinstance(cases, list) or not cases:
        raise ValidationFailure("cases", "must be a non-empty list of case ids")
    if len(cases) > MAX_SKILL_CASES:
        raise ValidationFailure("cases", f"must cite at most {MAX_SKILL_CASES} cases")
    refs: list[str] = []
    for i, ref in enumerate(cases):
        if not isinstance(ref, str) or not (
            CASE_ID.fullmatch(ref) or FILE_REFERENCE.fullmatch(ref)
        ):
            raise ValidationFailure(f"cases[{i}]", BAD_CASE_REFERENCE)
        if ref in refs:
            raise ValidationFailure(f"cases[{i}]", "cites the same case twice")
        refs.append(ref)
    return tuple(refs)


def _skill(
    obj: object,
    tools: Mapping[str, ToolSpec],
    prompt_tools: Mapping[str, PromptTool] | None,
    checks: FieldChecks,
) -> SkillContent | None:
    if not isinstance(obj, dict):
        raise ValidationFailure("", "a skill must be a JSON object")
    check_tree(obj)
    item: dict[str, Any] = obj
    checks.unknown(item, SKILL_FIELDS, "", NOT_A_FIELD)
    if item.get("type", "skill") != "skill":
        checks.fail(ValidationFailure("type", 'must be "skill"'))
    _require(item, SKILL_REQUIRED, checks)
    if RECIPE in item and PROMPT in item:
        checks.fail(ValidationFailure(PROMPT, ONE_BODY), RECIPE, PROMPT)
    if RECIPE not in item and PROMPT not in item:
        checks.fail(ValidationFailure(RECIPE, NO_BODY))
    validity = _validity(item, "", checks)
    cases = checks.check("cases", lambda: _skill_cases(item["cases"]))
    v: dict[str, Any] = {
        "scope": checks.check("scope", lambda: validate_scope(item["scope"])),
        "title": checks.check(
            "title", lambda: _text(item["title"], "title", MAX_TITLE, required=True)
        ),
        "when": checks.check("when", lambda: _text(item["when"], "when", MAX_WHEN, required=True)),
        "recipe": checks.check(
            RECIPE, lambda: validate_recipe(item[RECIPE], tools) if RECIPE in item else ()
        ),
        "prompt": checks.check(
            PROMPT,
            lambda: prompt_checked(item[PROMPT], prompt_tools or {}) if PROMPT in item else None,
        ),
    }
    if checks.failures or validity is None or cases is None:
        return None
    return SkillContent(**v, cases=cases, valid_from=validity[0], valid_to=validity[1])


def parse_skill(
    obj: object,
    tools: Mapping[str, ToolSpec],
    prompt_tools: Mapping[str, PromptTool] | None = None,
) -> SkillContent:
    """A skill of either form. ``tools`` are the recipe tools; ``prompt_tools`` the registered
    investigation tools a prompt skill may declare (none given: every declared tool is unknown)."""
    content = _skill(obj, tools, prompt_tools, FieldChecks())
    assert content is not None  # a parse raises its first failure
    return content


def skill_failures(
    obj: object,
    tools: Mapping[str, ToolSpec],
    prompt_tools: Mapping[str, PromptTool] | None = None,
) -> list[ValidationFailure]:
    """Every field failure of one skill item (``parse_skill`` raises the first of them)."""
    return every_failure(lambda checks: _skill(obj, tools, prompt_tools, checks))


def evidence_objects(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The evidence objects of one raw case item, in place (e.g. to drop ``verified`` flags)."""
    found = list(item.get("observations") or [])
    for section in ("diagnosis", "outcome"):
        found.extend((item.get(section) or {}).get("evidence") or [])
    for entry in item.get("counterevidence") or []:
        found.extend(entry.get("evidence") or [])
    return found


def item_kind(obj: object) -> str:
    """``case``, ``skill`` or ``lesson`` from the ``type`` field of one import item."""
    if not isinstance(obj, dict):
        raise ValidationFailure("", "each item must be a JSON object")
    kind = obj.get("type")
    if kind not in ("case", "skill", "lesson"):
        raise ValidationFailure("type", 'must be "case", "skill" or "lesson"')
    return str(kind)
