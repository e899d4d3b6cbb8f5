"""The experience memory's pure core: identity, scope, approval rules, the retrieval gate, recipes.

Availability (approved, approved by now, within validity) has its own home,
``experience.core.availability``; the gate here adds the exact scope to it.

No Django imports: every function takes plain values (the clock included) so these rules can
be tested exhaustively without a database (docs/architecture.md, Layers inside an app).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from experience.core import availability
from experience.core.availability import CitedCase, GateFields, case_usable
from knowledge.domain import expand, rank_branch, reciprocal_rank_fusion, sha256_hex, tokenize
from reviewconsole import itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.scopes import SCOPE_FIELDS as SCOPE_FIELDS
from reviewconsole.scopes import validate_scope_value

CASE_PREFIX = itemids.CASE_PREFIX
SKILL_PREFIX = itemids.SKILL_PREFIX
ITEM_ID = re.compile(f"{itemids.CASE.pattern}|{itemids.SKILL.pattern}")

# --- unmet condition names (docs/contracts.md, Unmet conditions) ----------------------------

REASON_REQUIRED = "reason_required"
NOT_CANDIDATE = "not_candidate"
NOT_APPROVED = "not_approved"
EXPIRED = "expired"
OWN_SUBMISSION = "own_submission"
# The decider's account and the submitter's are one person's (``reviewconsole.accounts``).
NOT_INDEPENDENT = "not_independent"
NO_DIAGNOSIS = "no_diagnosis"
NO_CHECKED_DIAGNOSIS_EVIDENCE = "no_checked_diagnosis_evidence"
NO_COUNTEREVIDENCE = "no_counterevidence"
NOT_REVIEWER = "not_reviewer"
TOO_FEW_INCIDENTS = "too_few_incidents"
CASE_UNAVAILABLE = "case_unavailable"
SCOPE_MISMATCH = "scope_mismatch"
CITES_HELDOUT_TICKET = "cites_heldout_ticket"
PROMPT_TOOL_NOT_ALLOWED = "prompt_tool_not_allowed"
NO_RECIPE = "no_recipe"

MIN_SKILL_INCIDENTS = 2

# --- lifecycle -------------------------------------------------------------------------------

CANDIDATE = "candidate"
APPROVED = availability.APPROVED
REJECTED = "rejected"
REVOKED = "revoked"
SUPERSEDED = "superseded"
# Lessons only (experience.lessons.domain.outdated_cause): still revocable.
OUTDATED = "outdated"
REVOCABLE = frozenset({APPROVED, OUTDATED})


# --- identity --------------------------------------------------------------------------------


def content_id(prefix: str, canonical: Mapping[str, Any]) -> str:
    """``case:<sha256>`` / ``skill:<sha256>`` of the RFC 8785 canonical JSON of the content."""
    return f"{prefix}{sha256_hex(dict(canonical))}"


def item_type(item_id: str) -> str | None:
    """``case``, ``skill`` or ``document``, by the id's prefix alone."""
    kind = itemids.kind_of(item_id)
    return kind.name if kind else None


# --- scope -----------------------------------------------------------------------------------


def validate_scope(value: object, *, field: str = "scope") -> dict[str, str]:
    """All five scope fields, exact values, no placeholders, nothing else."""
    if not isinstance(value, dict):
        raise ValidationFailure(field, "must be an object with " + ", ".join(SCOPE_FIELDS))
    unknown = sorted(set(value) - set(SCOPE_FIELDS))
    if unknown:
        raise ValidationFailure(f"{field}.{unknown[0]}", "is not a scope field")
    return {
        name: validate_scope_value(value.get(name), field=f"{field}.{name}")
        for name in SCOPE_FIELDS
    }


def given_scope_checked(values: Mapping[str, object], *, field: str = "scope") -> None:
    """Each scope field a request gives is an exact value (no placeholder such as ``*``),
    refused naming ``scope.<name>`` as the API's body names it; a field not given is an answer
    (``missing_scope``), not a refusal."""
    for name in SCOPE_FIELDS:
        value = values.get(name)
        if isinstance(value, str) and value.strip():
            validate_scope_value(value, field=f"{field}.{name}")


def missing_scope(values: Mapping[str, object]) -> list[str]:
    """Scope fields that the caller did not give (never guessed, never widened)."""
    return [
        name
        for name in SCOPE_FIELDS
        if not isinstance(values.get(name), str) or not str(values.get(name)).strip()
    ]


def same_scope(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    return a is b or all(a.get(name) == b.get(name) for name in SCOPE_FIELDS)


def differing_scope_fields(a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    return [name for name in SCOPE_FIELDS if a.get(name) != b.get(name)]


# --- review rules ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Reviewer:
    user_id: int
    can_review: bool
    # The account whose person may act through this one (``reviewconsole.accounts``); None:
    # the account itself.
    holder: int | None = None

    def independent_of(self, submitted_by: int, submitter_holder: int | None) -> bool:
        """Whether this reviewer is another person than the submitter, not merely another
        account (an admin's account and one it created with a password are one person's)."""
        mine = self.user_id if self.holder is None else self.holder
        theirs = submitted_by if submitter_holder is None else submitter_holder
        return mine != theirs


def check_counts(*, checked_by: int, submitted_by: int) -> bool:
    """Four eyes on evidence: a check counts toward approval only when someone other than the
    item's submitter made it (the approver's own check counts). Both are holders
    (``reviewconsole.accounts``): a check by an account the submitter holds, or that holds the
    submitter's, is the submitter's own. ``experience.cases.selectors`` counts checks in SQL by this
    rule; a test holds the two together."""
    return checked_by != submitted_by


@dataclass(frozen=True)
class CaseFacts:
    """What approval of a case looks at; the service reads it from the rows."""

    status: str
    submitted_by: int
    valid_to: datetime
    diagnosis_statement: str
    # Diagnosis evidence items with a check that counts (check_counts).
    checked_diagnosis_evidence: int
    counterevidence_with_evidence: int
    submitter_holder: int | None = None


class Submitted(Protocol):
    """What every kind's approval facts hold (``CaseFacts``, ``SkillFacts``,
    ``experience.lessons.domain.LessonFacts``)."""

    @property
    def status(self) -> str: ...

    @property
    def submitted_by(self) -> int: ...

    @property
    def valid_to(self) -> datetime: ...

    @property
    def submitter_holder(self) -> int | None: ...


def common_unmet(item: Submitted, *, reviewer: Reviewer, reason: str, now: datetime) -> list[str]:
    """What approving any kind of item needs: a reviewer other than its submitter, and another
    person than the submitter (not an account either holds), a reason, a candidate whose
    validity has not ended."""
    unmet = []
    if not reviewer.can_review:
        unmet.append(NOT_REVIEWER)
    if not reason.strip():
        unmet.append(REASON_REQUIRED)
    if item.status != CANDIDATE:
        unmet.append(NOT_CANDIDATE)
    if item.valid_to <= now:
        unmet.append(EXPIRED)
    unmet += four_eyes_unmet(
        reviewer, submitted_by=item.submitted_by, submitter_holder=item.submitter_holder
    )
    return unmet


def four_eyes_unmet(
    reviewer: Reviewer, *, submitted_by: int, submitter_holder: int | None
) -> list[str]:
    """Four eyes on a decision (approval, restore): the decider is not the submitter's account
    (``own_submission``) nor another account of the same person (``not_independent``)."""
    if reviewer.user_id == submitted_by:
        return [OWN_SUBMISSION]
    if not reviewer.independent_of(submitted_by, submitter_holder):
        return [NOT_INDEPENDENT]
    return []


def case_approval_unmet(
    case: CaseFacts, *, reviewer: Reviewer, reason: str, now: datetime
) -> list[str]:
    """Every unmet condition of approving a case, by name."""
    unmet = common_unmet(case, reviewer=reviewer, reason=reason, now=now)
    if not states_cause(case.diagnosis_statement):
        unmet.append(NO_DIAGNOSIS)
    if case.checked_diagnosis_evidence < 1:
        unmet.append(NO_CHECKED_DIAGNOSIS_EVIDENCE)
    if case.counterevidence_with_evidence < 1:
        unmet.append(NO_COUNTEREVIDENCE)
    return unmet


# What a case's own content leaves unmet: no check or reason by a reviewer meets it, only a new
# version can, so its page says it cannot be approved as it stands and offers reject or request
# changes. A diagnosis without checked evidence is one of them only when it cites none.
UNMET_BY_CONTENT = (NO_DIAGNOSIS, NO_COUNTEREVIDENCE, EXPIRED)


def case_unmet_as_it_stands(unmet: Iterable[str], *, diagnosis_evidence: int) -> list[str]:
    """The unmet conditions of approving a case that only a new version of it can meet."""
    unmet = list(unmet)
    blocked = [name for name in unmet if name in UNMET_BY_CONTENT]
    if NO_CHECKED_DIAGNOSIS_EVIDENCE in unmet and diagnosis_evidence == 0:
        blocked.append(NO_CHECKED_DIAGNOSIS_EVIDENCE)
    return blocked


# A diagnosis that says the cause is not known yet states no cause. Matched on the statement with
# case folded and runs of spaces collapsed; deliberately phrase-based (a diagnosis that names a
# cause and mentions an "unknown" thing in passing still counts).
_NO_CAUSE_EN = re.compile(
    r"^\W*(unknown|undetermined|unclear|not known|tbd|n/?a|none|todo|\?+|-+)\W*$"
    r"|\b(root )?causes? (is |are |was |were |remains? |still |yet |not yet |so far )*"
    r"(unknown|undetermined|unclear|unconfirmed|not (yet )?(known|determined|identified|found|"
    r"clear|confirmed|established))\b"
    r"|\b(unknown|undetermined|unclear|unidentified) (root )?cause"
    r"|\bno (root )?cause (was |has been |is )?(yet )?(found|identified|determined)"
    r"|\b(not|never) (yet )?(been )?(determined|identified|established)\b"
    r"|\bto be determined\b|\btbd\b|\bstill under investigation\b"
    r"|\b(cannot|can't|could not|couldn't|unable to) (yet )?(be )?(determine|identify|establish|find)"
)
_NO_CAUSE_ZH = re.compile(
    r"^\W*(未知|不明|不详|待定|待查|无|暂无|不清楚)\W*$"
    r"|(尚|仍|还|暂)?(未|没有?|无法|不能|不)(能)?(确定|确认|查明|查清|明确|找到|定位|清楚|明)(的)?(具体)?(根本|根|真正)?原因"
    r"|原因(尚|仍|还|暂|目前)?(未|不|没有?|无法|待)(知|明|详|清楚|确定|确认|查明|查清|定位|找到)"
    r"|(未知|不明|不详)(的)?(根本)?原因|原因(未知|不明|不详|待定|待查)"
    r"|(尚|仍|还|暂)(未|无法|不能)(确定|确认|查明|定位)|待(确定|确认|查明|排查|定位)"
)


def states_cause(statement: str) -> bool:
    """Whether a diagnosis states a cause: not empty, and not a statement that the cause is
    unknown or not yet determined ("尚未确定原因", "root cause unknown", "TBD")."""
    text = " ".join(statement.split()).casefold()
    if not text:
        return False
    return not (_NO_CAUSE_EN.search(text) or _NO_CAUSE_ZH.search(text))


@dataclass(frozen=True)
class SkillFacts:
    status: str
    submitted_by: int
    scope: Mapping[str, str]
    valid_to: datetime
    cases: tuple[CitedCase, ...]
    # A prompt skill's declared tools that are not (or no longer) registered read-only
    # investigation tools.
    disallowed_tools: tuple[str, ...] = ()
    submitter_holder: int | None = None
    # A recipe with steps or a prompt; a row stored without either (an import that dropped a
    # prompt) has nothing to run.
    has_body: bool = True


def skill_approval_unmet(
    skill: SkillFacts, *, reviewer: Reviewer, reason: str, now: datetime
) -> list[str]:
    """Approval of a skill: the common rules plus ≥ 2 usable cited cases of distinct incidents."""
    unmet = common_unmet(skill, reviewer=reviewer, reason=reason, now=now)
    if not all(case_usable(case, now) for case in skill.cases):
        unmet.append(CASE_UNAVAILABLE)
    if any(not same_scope(case.scope, skill.scope) for case in skill.cases):
        unmet.append(SCOPE_MISMATCH)
    if distinct_incidents(skill.cases, now) < MIN_SKILL_INCIDENTS:
        unmet.append(TOO_FEW_INCIDENTS)
    if skill.disallowed_tools:
        unmet.append(PROMPT_TOOL_NOT_ALLOWED)
    if not skill.has_body:
        unmet.append(NO_RECIPE)
    return unmet


def distinct_incidents(cases: Iterable[CitedCase], now: datetime) -> int:
    """How many incidents the cases usable at ``now`` describe: two summaries of one incident
    (its canonical id, after incident merges) are one incident; an unusable case counts none."""
    return len({case.incident for case in cases if case_usable(case, now)})


def rejection_unmet(*, status: str, reviewer: Reviewer, reason: str) -> list[str]:
    unmet = []
    if not reviewer.can_review:
        unmet.append(NOT_REVIEWER)
    if not reason.strip():
        unmet.append(REASON_REQUIRED)
    if status != CANDIDATE:
        unmet.append(NOT_CANDIDATE)
    return unmet


def revocation_unmet(*, status: str, reviewer: Reviewer, reason: str) -> list[str]:
    unmet = []
    if not reviewer.can_review:
        unmet.append(NOT_REVIEWER)
    if not reason.strip():
        unmet.append(REASON_REQUIRED)
    if status not in REVOCABLE:
        unmet.append(NOT_APPROVED)
    return unmet


# --- retrieval gate ----------------------------------------------------------------------------


def admits(item: GateFields, scope: Mapping[str, str], now: datetime) -> bool:
    """The gate before any read: the exact scope, and available now (``availability``); a
    revoked item is closed for every ``now`` (revocation is current)."""
    return same_scope(item.scope, scope) and availability.item_available(item, now)


# --- recipes ---------------------------------------------------------------------------------

MAX_RECIPE_STEPS = 3
STEP_KEYS = frozenset({"tool", "arguments"})
# Names a recipe might use to smuggle in something executable; named in the error message.
EXECUTABLE_NAMES = frozenset(
    {
        "shell",
        "bash",
        "sh",
        "exec",
        "eval",
        "python",
        "py",
        "sql",
        "query_sql",
        "run_sql",
        "command",
        "script",
        "code",
        "subprocess",
        "system",
    }
)
RECIPE_EMPTY = "must have at least one step"
RECIPE_TOO_LONG = f"must have at most {MAX_RECIPE_STEPS} steps"
UNKNOWN_TOOL = "is not a registered read-only tool"
EXECUTABLE_TOOL = "is executable; recipes may only name registered read-only tools"
UNKNOWN_ARGUMENT = "is not an argument of this tool"
SCOPE_ARGUMENT = "is a scope argument; the executor binds the current scope, a recipe cannot"
STEP_KEY = "is not part of a recipe step (only tool and arguments)"


@dataclass(frozen=True)
class StringArgument:
    min_length: int
    max_length: int

    def validate(self, value: object, *, field: str) -> str:
        if not isinstance(value, str):
            raise ValidationFailure(field, "must be a string")
        if not self.min_length <= len(value) <= self.max_length:
            raise ValidationFailure(
                field,
                f"must be {self.min_length}-{self.max_length} characters (got {len(value)})",
            )
        if not value.strip():
            raise ValidationFailure(field, "must not be blank")
        if any(ord(ch) < 32 for ch in value):
            raise ValidationFailure(field, "must not contain control characters")
        return value


@dataclass(frozen=True)
class ToolSpec:
    """What a recipe may say about a tool: its name and its allowed arguments (all required)."""

    name: str
    arguments: Mapping[str, StringArgument] = field(default_factory=dict)


@dataclass(frozen=True)
class RecipeStep:
    tool: str
    arguments: Mapping[str, str]

    def as_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": dict(self.arguments)}


# Anything that names where a memory applies; the executor takes these from the current scope.
SCOPE_ARGUMENT_NAMES = frozenset(
    {*SCOPE_FIELDS, "stores", "occurred_at", "known_at", "facts", "scope", "context", "limit"}
)


def validate_recipe(
    value: object, tools: Mapping[str, ToolSpec], *, field: str = "recipe"
) -> tuple[RecipeStep, ...]:
    """1-3 steps, each a registered tool with exactly its declared arguments."""
    if not isinstance(value, list):
        raise ValidationFailure(field, "must be a list of steps")
    if not value:
        raise ValidationFailure(field, RECIPE_EMPTY)
    if len(value) > MAX_RECIPE_STEPS:
        raise ValidationFailure(field, RECIPE_TOO_LONG)
    return tuple(_validate_step(step, tools, field=f"{field}[{i}]") for i, step in enumerate(value))


def _validate_step(step: object, tools: Mapping[str, ToolSpec], *, field: str) -> RecipeStep:
    if not isinstance(step, dict):
        raise ValidationFailure(field, 'must be an object {"tool": NAME, "arguments": {...}}')
    for key in sorted(set(step) - STEP_KEYS, key=str):
        raise ValidationFailure(f"{field}.{key}", STEP_KEY)
    name = step.get("tool")
    if not isinstance(name, str) or not name:
        raise ValidationFailure(f"{field}.tool", "must name a tool")
    spec = tools.get(name)
    if spec is None:
        message = EXECUTABLE_TOOL if name.strip().lower() in EXECUTABLE_NAMES else UNKNOWN_TOOL
        raise ValidationFailure(f"{field}.tool", f"{name!r} {message}")
    arguments = step.get("arguments")
    if not isinstance(arguments, dict):
        raise ValidationFailure(f"{field}.arguments", "must be an object")
    for key in sorted(arguments, key=str):
        if key in SCOPE_ARGUMENT_NAMES:
            raise ValidationFailure(f"{field}.arguments.{key}", SCOPE_ARGUMENT)
        if key not in spec.arguments:
            raise ValidationFailure(f"{field}.arguments.{key}", UNKNOWN_ARGUMENT)
    clean = {}
    for key, argument in spec.arguments.items():
        if key not in arguments:
            raise ValidationFailure(f"{field}.arguments.{key}", "is required")
        clean[key] = argument.validate(arguments[key], field=f"{field}.arguments.{key}")
    return RecipeStep(tool=name, arguments=clean)


# --- ranking ---------------------------------------------------------------------------------


def rank_items(
    query: str, items: Iterable[tuple[str, str]], lexicon: Mapping[str, str]
) -> list[str]:
    """Ids of ``(id, text)`` items ranked as knowledge search ranks documents (raw + expanded, RRF)."""
    materialised = list(items)
    raw = rank_branch(tokenize(query), ((i, tokenize(text)) for i, text in materialised))
    expanded_query = tokenize(expand(query, lexicon))
    expanded = rank_branch(
        expanded_query, ((i, tokenize(expand(text, lexicon))) for i, text in materialised)
    )
    return reciprocal_rank_fusion([raw, expanded])
