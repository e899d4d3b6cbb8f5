"""Threads into candidates, over plain values: the thread format and picking its messages into
a candidate case.

- **Thread format** (``parse_thread``, the console's import form): a JSON object
  ``{"id", "tenant", "title", "source"?, "messages": [...]}``. ``id`` is 1-100 letters, digits or
  ``. _ -``; ``tenant`` is the scope value of the tenant the thread belongs to (a placeholder
  such as ``*`` or ``unknown`` is refused): only members of that tenant (and deployment-wide
  users) import it, see it or build candidates from it, and a candidate built from it must have
  that tenant in its scope. Each message is ``{"id", "author", "role", "time", "text",
  "attachments"?}``: ``role`` is one of ``ROLES``, ``time`` is ISO 8601 with an offset, ``text``
  may be empty only when the message has attachments, each ``{"name", "text"}`` with the
  attachment's extracted text. Unknown fields are refused; every error names its JSON path.
- **Thread evidence** cites ``thread:<thread-id>#<message-id>``; an excerpt taken from the
  extracted text of a message's n-th attachment (from 1) cites
  ``thread:<thread-id>#<message-id>/attachment-<n>``. An excerpt is the whole text or a part of
  it, compared with whitespace runs collapsed; text that is not in the message is refused.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import datetime
from typing import Any

from knowledge.domain import sha256_hex
from reviewconsole.errors import ValidationFailure
from reviewconsole.fields import bounded_text as _text
from reviewconsole.fields import reject_unknown_fields
from reviewconsole.inputs import check_tree
from reviewconsole.scopes import SCOPE_FIELDS, validate_scope_value
from reviewconsole.timeparse import parse_aware_datetime, to_utc_iso

# --- thread format ---------------------------------------------------------------------------

THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
MESSAGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
ROLES = ("customer", "support", "engineer", "operations", "agent", "system")
# Roles whose words are a machine's, shown as such to the person picking evidence.
MACHINE_ROLES = frozenset({"agent", "system"})

MAX_TITLE = 300
MAX_SOURCE = 500
MAX_AUTHOR = 100
MAX_TEXT = 20_000
MAX_MESSAGES = 2_000
MAX_ATTACHMENTS = 20
MAX_ATTACHMENT_NAME = 200
MAX_EXCERPT = 2_000

THREAD_FIELDS = frozenset({"id", "tenant", "title", "source", "scope", "messages"})
# What a thread may say about where it happened besides its tenant: it prefills the builder's
# scope (the operator still confirms every value).
THREAD_SCOPE_FIELDS = tuple(name for name in SCOPE_FIELDS if name != "tenant")
NOT_A_SCOPE_FIELD = f"is not a scope field of a thread ({', '.join(THREAD_SCOPE_FIELDS)})"
MESSAGE_FIELDS = frozenset({"id", "author", "role", "time", "text", "attachments"})
ATTACHMENT_FIELDS = frozenset({"name", "text"})

NOT_A_FIELD = "is not a field of a thread"
REQUIRED = "is required"
BAD_THREAD_ID = "must be 1-100 letters, digits or . _ - starting with a letter or digit"
BAD_MESSAGE_ID = "must be 1-40 letters, digits or . _ - starting with a letter or digit"
DUPLICATE_MESSAGE_ID = "repeats the id of an earlier message"
BAD_ROLE = "must be one of " + ", ".join(ROLES)
EMPTY_MESSAGE = "must not be empty when the message has no attachments"
NO_MESSAGES = "must be a non-empty list of messages"
OTHER_TENANT = "must be the thread's tenant %r: evidence never moves to another tenant"


@dataclass(frozen=True)
class Attachment:
    name: str
    text: str


@dataclass(frozen=True)
class Message:
    id: str
    author: str
    role: str
    time: datetime
    text: str
    attachments: tuple[Attachment, ...] = ()

    def canonical(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "author": self.author,
            "role": self.role,
            "time": to_utc_iso(self.time),
            "text": self.text,
            "attachments": [{"name": a.name, "text": a.text} for a in self.attachments],
        }


@dataclass(frozen=True)
class ThreadContent:
    id: str
    tenant: str
    title: str
    source: str
    messages: tuple[Message, ...]
    scope: Mapping[str, str] = dataclass_field(default_factory=dict)

    def canonical(self) -> dict[str, Any]:
        canonical: dict[str, Any] = {
            "id": self.id,
            "tenant": self.tenant,
            "title": self.title,
            "source": self.source,
            "messages": [m.canonical() for m in self.messages],
        }
        # Only when given: a thread without a scope hashes as it did before threads had one.
        if self.scope:
            canonical["scope"] = dict(sorted(self.scope.items()))
        return canonical

    @property
    def content_hash(self) -> str:
        return sha256_hex(self.canonical())


def _reject_unknown(obj: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    reject_unknown_fields(obj, allowed, path, NOT_A_FIELD)


def parse_thread(obj: object) -> ThreadContent:
    """A thread in the import format; every error names its JSON path (``messages[3].time``)."""
    if not isinstance(obj, dict):
        raise ValidationFailure("$", "a thread must be a JSON object")
    check_tree(obj)
    _reject_unknown(obj, THREAD_FIELDS, "")
    for name in ("id", "tenant", "title", "messages"):
        if name not in obj:
            raise ValidationFailure(name, REQUIRED)
    thread_id = obj["id"]
    if not isinstance(thread_id, str) or not THREAD_ID.fullmatch(thread_id):
        raise ValidationFailure("id", BAD_THREAD_ID)
    tenant = validate_scope_value(obj["tenant"], field="tenant")
    raw_messages = obj["messages"]
    if not isinstance(raw_messages, list) or not raw_messages:
        raise ValidationFailure("messages", NO_MESSAGES)
    if len(raw_messages) > MAX_MESSAGES:
        raise ValidationFailure("messages", f"must have at most {MAX_MESSAGES} messages")
    messages: list[Message] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_messages):
        message = _message(raw, f"messages[{index}]")
        if message.id in seen:
            raise ValidationFailure(f"messages[{index}].id", DUPLICATE_MESSAGE_ID)
        seen.add(message.id)
        messages.append(message)
    return ThreadContent(
        id=thread_id,
        tenant=tenant,
        title=_text(obj["title"], "title", MAX_TITLE),
        source=_text(obj.get("source"), "source", MAX_SOURCE, required=False),
        messages=tuple(messages),
        scope=_thread_scope(obj.get("scope")),
    )


def _thread_scope(value: object) -> dict[str, str]:
    """The optional ``scope`` object: any of brand, store, campaign and deployment."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationFailure(
            "scope", "must be an object with brand, store, campaign, deployment"
        )
    reject_unknown_fields(value, frozenset(THREAD_SCOPE_FIELDS), "scope", NOT_A_SCOPE_FIELD)
    return {
        name: validate_scope_value(value[name], field=f"scope.{name}")
        for name in THREAD_SCOPE_FIELDS
        if name in value
    }


def _message(raw: object, path: str) -> Message:
    if not isinstance(raw, dict):
        raise ValidationFailure(path, 'must be an object {"id", "author", "role", "time", "text"}')
    _reject_unknown(raw, MESSAGE_FIELDS, path)
    for name in ("id", "author", "role", "time", "text"):
        if name not in raw:
            raise ValidationFailure(f"{path}.{name}", REQUIRED)
    message_id = raw["id"]
    if not isinstance(message_id, str) or not MESSAGE_ID.fullmatch(message_id):
        raise ValidationFailure(f"{path}.id", BAD_MESSAGE_ID)
    role = raw["role"]
    if role not in ROLES:
        raise ValidationFailure(f"{path}.role", BAD_ROLE)
    attachments = _attachments(raw.get("attachments"), f"{path}.attachments")
    text = _text(raw["text"], f"{path}.text", MAX_TEXT, required=False)
    if not text and not attachments:
        raise ValidationFailure(f"{path}.text", EMPTY_MESSAGE)
    return Message(
        id=message_id,
        author=_text(raw["author"], f"{path}.author", MAX_AUTHOR),
        role=str(role),
        time=parse_aware_datetime(raw["time"], field=f"{path}.time"),
        text=text,
        attachments=attachments,
    )


def _attachments(value: object, path: str) -> tuple[Attachment, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValidationFailure(path, 'must be a list of {"name", "text"} objects')
    if len(value) > MAX_ATTACHMENTS:
        raise ValidationFailure(path, f"must have at most {MAX_ATTACHMENTS} attachments")
    found = []
    for index, raw in enumerate(value):
        item_path = f"{path}[{index}]"
        if not isinstance(raw, dict):
            raise ValidationFailure(item_path, 'must be an object {"name", "text"}')
        _reject_unknown(raw, ATTACHMENT_FIELDS, item_path)
        for name in ("name", "text"):
            if name not in raw:
                raise ValidationFailure(f"{item_path}.{name}", REQUIRED)
        found.append(
            Attachment(
                name=_text(raw["name"], f"{item_path}.name", MAX_ATTACHMENT_NAME),
                text=_text(raw["text"], f"{item_path}.text", MAX_TEXT),
            )
        )
    return tuple(found)


# --- picking messages into a candidate ---------------------------------------------------------

OBSERVATION = "observation"
DIAGNOSIS = "diagnosis"
OUTCOME = "outcome"
MAX_COUNTER_ENTRIES = 3
COUNTER_USES = tuple(f"counter-{n}" for n in range(1, MAX_COUNTER_ENTRIES + 1))
USES = (OBSERVATION, DIAGNOSIS, *COUNTER_USES, OUTCOME)

EXCERPT_NOT_IN_SOURCE = "is not a part of the picked text"
EXCERPT_TOO_LONG = f"is longer than {MAX_EXCERPT} characters; select the part that matters"
UNKNOWN_UNIT = "names no message of this thread"
UNKNOWN_USE = "must be one of " + ", ".join(USES)
COUNTER_WITHOUT_HYPOTHESIS = "evidence is picked for this entry, so it needs a hypothesis"
COUNTER_INCOMPLETE = "is required: a refuted hypothesis says what refutes it and how far"


@dataclass(frozen=True)
class Unit:
    """One pickable text of a thread: a message's text or one attachment's extracted text."""

    key: str  # "m3" or "m3/attachment-1"
    source_id: str
    text: str


def thread_units(thread_id: str, messages: Iterable[Message]) -> list[Unit]:
    units = []
    for message in messages:
        if message.text:
            units.append(Unit(message.id, f"thread:{thread_id}#{message.id}", message.text))
        for n, attachment in enumerate(message.attachments, start=1):
            key = f"{message.id}/attachment-{n}"
            units.append(Unit(key, f"thread:{thread_id}#{key}", attachment.text))
    return units


def collapse_space(text: str) -> str:
    return " ".join(text.split())


def excerpt_of(unit: Unit, selected: str, *, field: str) -> str:
    """The excerpt cited for ``unit``: the selected part, or the whole text when none is."""
    excerpt = collapse_space(selected) if selected.strip() else collapse_space(unit.text)
    if selected.strip() and excerpt not in collapse_space(unit.text):
        raise ValidationFailure(field, EXCERPT_NOT_IN_SOURCE)
    if len(excerpt) > MAX_EXCERPT:
        raise ValidationFailure(field, EXCERPT_TOO_LONG)
    return excerpt


@dataclass(frozen=True)
class Pick:
    unit: str
    use: str
    excerpt: str = ""


@dataclass(frozen=True)
class CounterDraft:
    hypothesis: str = ""
    statement: str = ""
    refutes: str = ""


@dataclass(frozen=True)
class CandidateDraft:
    """What the operator typed: scope, incident, title and the statements. Nothing is inferred."""

    scope: Mapping[str, str]
    incident: str
    title: str
    summary: str
    valid_from: str
    valid_to: str
    diagnosis: str
    counterevidence: tuple[CounterDraft, ...]
    outcome: str


def require_thread_tenant(thread_tenant: str, scope: Mapping[str, str]) -> None:
    """A candidate built from a thread belongs to the thread's tenant: its evidence is that
    tenant's, so no one moves it into another tenant's memory (whatever tenants they may use)."""
    if str(scope.get("tenant", "")).strip() != thread_tenant:
        raise ValidationFailure("scope.tenant", OTHER_TENANT % thread_tenant)


def candidate_case(
    units: Sequence[Unit], picks: Iterable[Pick], draft: CandidateDraft
) -> dict[str, Any]:
    """The case, in the case import format (docs/contracts.md), that the operator's picks and statements make.

    Evidence keeps the thread's order within each section. Counterevidence entries with neither
    a hypothesis nor picked evidence are left out; the rest keep their number's order.
    """
    by_key = {unit.key: (position, unit) for position, unit in enumerate(units)}
    sections: dict[str, list[tuple[int, dict[str, str]]]] = defaultdict(list)
    for pick in picks:
        if pick.use not in USES:
            raise ValidationFailure(f"use[{pick.unit}]", UNKNOWN_USE)
        found = by_key.get(pick.unit)
        if found is None:
            raise ValidationFailure(f"use[{pick.unit}]", UNKNOWN_UNIT)
        position, unit = found
        excerpt = excerpt_of(unit, pick.excerpt, field=f"excerpt[{pick.unit}]")
        sections[pick.use].append((position, {"source_id": unit.source_id, "excerpt": excerpt}))

    def evidence(use: str) -> list[dict[str, str]]:
        return [item for _position, item in sorted(sections[use], key=lambda pair: pair[0])]

    counterevidence = []
    for number, entry in enumerate(draft.counterevidence[:MAX_COUNTER_ENTRIES], start=1):
        items = evidence(f"counter-{number}")
        if not (entry.hypothesis.strip() or entry.statement.strip() or items):
            continue
        if items and not entry.hypothesis.strip():
            raise ValidationFailure(f"counter-{number}-hypothesis", COUNTER_WITHOUT_HYPOTHESIS)
        for name in ("hypothesis", "statement", "refutes"):
            if not getattr(entry, name).strip():
                raise ValidationFailure(f"counter-{number}-{name}", COUNTER_INCOMPLETE)
        counterevidence.append(
            {
                "hypothesis": entry.hypothesis,
                "statement": entry.statement,
                "refutes": entry.refutes,
                "evidence": items,
            }
        )
    for number in range(len(draft.counterevidence) + 1, MAX_COUNTER_ENTRIES + 1):
        if evidence(f"counter-{number}"):
            raise ValidationFailure(f"counter-{number}-hypothesis", COUNTER_WITHOUT_HYPOTHESIS)
    case: dict[str, Any] = {
        "type": "case",
        "scope": dict(draft.scope),
        "incident": draft.incident,
        "title": draft.title,
        "observations": evidence(OBSERVATION),
        "diagnosis": {"statement": draft.diagnosis, "evidence": evidence(DIAGNOSIS)},
        "counterevidence": counterevidence,
        "outcome": {"statement": draft.outcome, "evidence": evidence(OUTCOME)},
        "valid_from": draft.valid_from,
        "valid_to": draft.valid_to,
    }
    if draft.summary.strip():
        case["summary"] = draft.summary
    return case
