"""Intake and curation rules over plain values: threads, picks, similarity, incidents, staleness
and check patterns.

No Django imports: the clock, the merges and the stored facts are passed in, so every rule can be
tested without a database.

Definitions the rest of the app relies on:

- **Thread format** (``import_thread``, the console's import form): a JSON object
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
- **Similarity** is the Jaccard similarity of the shingle sets of title, summary, observation
  excerpts and diagnosis statement (the tokens of knowledge search: ASCII words and adjacent
  CJK pairs). MinHash signatures cut into LSH bands (shape chosen by ``datasketch`` for the
  threshold) find candidate pairs without comparing every case with every other; each candidate
  is then measured exactly.
- **Incident identity**: a merge maps an alias incident id to a canonical one inside one tenant
  and brand (``MERGE_SCOPE``); an incident's canonical id follows the merges to the end
  (``canonical_incident``). ``incident_merge`` stores every merge resolved to its root, so the
  end is one lookup away: the SQL form (``curation.selectors.canonical_incident_expression``)
  looks up that one row, and a test holds the two forms together. Support is the number of
  distinct canonical incidents, never the number of summaries.
- **A case cites a knowledge document** when one of its evidence items has the source id
  ``doc:KEY@VERSION`` (optionally followed by ``#…`` or ``/…`` naming a part of it). **A skill
  cites** the documents that the tool results of its stored runs cited.
- **Staleness**: an approved item is unused when neither its approval nor any read of it (a
  Reference) nor a reviewer's confirmation falls within the last N days; a cited document is
  outdated when an approved, unrevoked version with a higher number exists, and gone when the
  cited version is revoked.
- **Check patterns**: two approved cases share a pattern when they cite the same knowledge
  document key (any version) or refuted the same hypothesis (compared after Unicode NFKC,
  case folding and removal of whitespace and punctuation).
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from knowledge.domain import jaccard, sha256_hex, tokenize
from reviewconsole import itemids
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


# --- similarity: shingles, MinHash, LSH --------------------------------------------------------

NUM_PERM = 128
MINHASH_SEED = 1
DEFAULT_SIMILARITY_THRESHOLD = 0.4
# LSH only proposes candidate pairs, each then measured exactly; missing a pair costs more than
# measuring one too many, so the band shape is chosen with false negatives weighted up.
LSH_WEIGHTS = (0.1, 0.9)


def similarity_text(
    title: str, summary: str, observations: Iterable[str], diagnosis_statement: str
) -> str:
    return "\n".join(p for p in (title, summary, *observations, diagnosis_statement) if p)


def shingles(text: str) -> frozenset[str]:
    return tokenize(text)


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two shingle sets."""
    return float(jaccard(a, b))


def signature(shingle_set: Iterable[str]) -> tuple[int, ...]:
    """The MinHash signature (``NUM_PERM`` values); the same shingles give the same values."""
    # Imported here: datasketch loads scipy, about a second that every command and test process
    # would otherwise pay at startup although most never compare cases.
    from datasketch import MinHash

    minhash = MinHash(num_perm=NUM_PERM, seed=MINHASH_SEED)
    minhash.update_batch([s.encode("utf-8") for s in sorted(shingle_set)])
    return tuple(int(v) for v in minhash.hashvalues)


@functools.lru_cache(maxsize=16)
def lsh_shape(threshold: float) -> tuple[int, int]:
    """(bands, rows per band) that ``datasketch`` picks for this threshold and ``NUM_PERM``;
    cached, since datasketch integrates numerically to choose them (~40 ms a call)."""
    from datasketch import MinHashLSH  # see signature() for why here

    index = MinHashLSH(threshold=threshold, num_perm=NUM_PERM, weights=LSH_WEIGHTS)
    return int(index.b), int(index.r)


def band_keys(values: Sequence[int], *, bands: int, rows: int) -> list[str]:
    """One key per band; two signatures sharing any band key are a candidate pair."""
    keys = []
    for band in range(bands):
        chunk = ",".join(str(v) for v in values[band * rows : (band + 1) * rows])
        keys.append(
            hashlib.sha1(f"{band}:{chunk}".encode(), usedforsecurity=False).hexdigest()[:20]
        )
    return keys


# --- incident identity -------------------------------------------------------------------------

MERGE_SAME = "these incident ids already name one incident"
# The columns a merge holds within: a case's incident is looked up among its tenant and brand's.
MERGE_SCOPE = ("tenant", "brand")


def canonical_incident(incident: str, merges: Mapping[str, str]) -> str:
    """Follow alias → canonical merges to the end (a cycle, which merges never make, stops)."""
    seen = {incident}
    current = incident
    while current in merges:
        current = merges[current]
        if current in seen:
            break
        seen.add(current)
    return current


def merge_plan(alias: str, into: str, merges: Mapping[str, str]) -> tuple[str, str]:
    """The (alias root, canonical root) a merge of ``alias`` into ``into`` records.

    Roots, not the ids typed, so every incident keeps exactly one canonical id however merges
    are chained.
    """
    alias_root = canonical_incident(alias, merges)
    into_root = canonical_incident(into, merges)
    if alias_root == into_root:
        raise ValidationFailure("alias", MERGE_SAME)
    return alias_root, into_root


# --- staleness ---------------------------------------------------------------------------------

UNUSED = "unused"
DOCUMENT_NEW_VERSION = "document_new_version"
DOCUMENT_REVOKED = "document_revoked"


def cited_documents(source_ids: Iterable[str]) -> set[tuple[str, int]]:
    """(key, version) of every knowledge document these evidence source ids cite."""
    found = set()
    for source_id in source_ids:
        try:
            cited, _part = itemids.parse_reference(source_id.strip())
        except ValidationFailure:
            continue
        if cited.kind is itemids.DOCUMENT:
            found.add(cited.key_version)
    return found


def document_id(key: str, version: int) -> str:
    return str(itemids.ItemId.document(key, version))


def unused(
    *,
    approved_at: datetime,
    last_read_at: datetime | None,
    last_confirmed_at: datetime | None,
    now: datetime,
    days: int,
) -> bool:
    """No approval, read or confirmation within the last ``days`` days."""
    latest = max(t for t in (approved_at, last_read_at, last_confirmed_at) if t is not None)
    return latest <= now - timedelta(days=days)


@dataclass(frozen=True)
class DocumentFinding:
    reason: str
    document_id: str
    detail: str = ""


def document_findings(
    cited: Iterable[tuple[str, int]],
    *,
    revoked: Iterable[tuple[str, int]],
    newest_approved: Mapping[str, int],
) -> list[DocumentFinding]:
    """Revoked cited versions, and cited versions that an approved newer version replaced."""
    revoked_set = set(revoked)
    findings = []
    for key, version in sorted(set(cited)):
        cited_id = document_id(key, version)
        if (key, version) in revoked_set:
            findings.append(DocumentFinding(DOCUMENT_REVOKED, cited_id))
        newest = newest_approved.get(key)
        if newest is not None and newest > version:
            findings.append(
                DocumentFinding(DOCUMENT_NEW_VERSION, cited_id, document_id(key, newest))
            )
    return findings


# --- check patterns and skill proposals --------------------------------------------------------

PATTERN_DOCUMENT = "document"
PATTERN_HYPOTHESIS = "hypothesis"
MIN_PROPOSAL_INCIDENTS = 2
MAX_QUERY = 200


def enough_support(incidents: int) -> bool:
    """Whether a shared pattern (or a proposal drafted from one) has the distinct incidents a
    skill proposal needs; the scan drafts by it and adoption refuses a proposal below it."""
    return incidents >= MIN_PROPOSAL_INCIDENTS


def normalize_hypothesis(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if not (ch.isspace() or unicodedata.category(ch)[0] == "P"))


@dataclass(frozen=True)
class Pattern:
    kind: str
    value: str


@dataclass(frozen=True)
class PatternCase:
    case_id: str
    scope: tuple[tuple[str, str], ...]
    incident: str  # canonical
    title: str
    documents: frozenset[str]  # document keys cited by evidence
    hypotheses: tuple[str, ...]  # refuted hypotheses as written


def case_patterns(case: PatternCase) -> set[Pattern]:
    patterns = {Pattern(PATTERN_DOCUMENT, key) for key in case.documents}
    for hypothesis in case.hypotheses:
        normalized = normalize_hypothesis(hypothesis)
        if normalized:
            patterns.add(Pattern(PATTERN_HYPOTHESIS, normalized))
    return patterns


@dataclass(frozen=True)
class ProposalDraft:
    scope: tuple[tuple[str, str], ...]
    pattern: Pattern
    case_ids: tuple[str, ...]
    incidents: tuple[str, ...]


def shared_patterns(cases: Iterable[PatternCase]) -> list[ProposalDraft]:
    """Scope and pattern shared by approved cases of at least two distinct incidents."""
    groups: dict[tuple[tuple[tuple[str, str], ...], Pattern], list[PatternCase]] = defaultdict(list)
    for case in cases:
        for pattern in case_patterns(case):
            groups[(case.scope, pattern)].append(case)
    drafts = []
    for (scope, pattern), members in groups.items():
        incidents = sorted({case.incident for case in members})
        if enough_support(len(incidents)):
            drafts.append(
                ProposalDraft(
                    scope=scope,
                    pattern=pattern,
                    case_ids=tuple(sorted(case.case_id for case in members)),
                    incidents=tuple(incidents),
                )
            )
    return sorted(drafts, key=lambda d: (d.scope, d.pattern.kind, d.pattern.value))


def hypothesis_as_written(pattern: Pattern, cases: Iterable[PatternCase]) -> str:
    for case in cases:
        for hypothesis in case.hypotheses:
            if normalize_hypothesis(hypothesis) == pattern.value:
                return hypothesis
    return pattern.value


def draft_query(pattern: Pattern, *, document_title: str = "", written: str = "") -> str:
    """The ``search_knowledge`` query a drafted recipe starts from; a person edits it."""
    if pattern.kind == PATTERN_DOCUMENT:
        query = document_title or pattern.value
    else:
        query = written or pattern.value
    return collapse_space(query)[:MAX_QUERY]


# --- proven patterns: a success pattern confirmed often enough becomes a skill proposal -----------
#
# The design's rule: what keeps being confirmed, by enough distinct incidents and with a high
# enough success rate, is worth a skill; what is rare or volatile stays a lesson for an agent to
# weigh at the time ("do not over-solidify"). Its record counts incidents, never reports:
#   successes = canonical incidents of the lesson's usable supporting cases, plus each run that
#               read it (or a version it replaced) whose latest outcome a reviewer reported as
#               resolved_by_lead, as the incident its after-action case names (``run:R``)
#   failures  = incidents of its usable contradicting cases, plus each run whose latest outcome
#               a reviewer reported as lead_was_wrong (an agent's counts in neither direction)
#   rate      = successes / (successes + failures)
# A run and its own after-action case are one incident (both ``run:R``).

PATTERN_LESSON = "lesson"
# Defaults of SKILL_PROPOSAL_MIN_INCIDENTS and SKILL_PROPOSAL_MIN_SUCCESS_RATE.
DEFAULT_MIN_PROVEN_INCIDENTS = 3
DEFAULT_MIN_SUCCESS_RATE = 0.8
RUN_INCIDENT = "run:{run_id}"


@dataclass(frozen=True)
class PatternRecord:
    successes: frozenset[str]
    failures: frozenset[str]

    @property
    def rate(self) -> float:
        total = len(self.successes) + len(self.failures)
        return len(self.successes) / total if total else 0.0


def pattern_record(
    *,
    supporting: Iterable[str],
    contradicting: Iterable[str],
    confirmed_runs: Iterable[str],
    refuted_runs: Iterable[str],
) -> PatternRecord:
    """The record of this section's comment from incidents of cases and ids of runs."""
    return PatternRecord(
        successes=frozenset(supporting)
        | {RUN_INCIDENT.format(run_id=run) for run in confirmed_runs},
        failures=frozenset(contradicting)
        | {RUN_INCIDENT.format(run_id=run) for run in refuted_runs},
    )


def proven(record: PatternRecord, *, min_incidents: int, min_rate: float) -> bool:
    """Confirmed by at least ``min_incidents`` distinct incidents (never fewer than a skill's
    approval needs) with a success rate of at least ``min_rate``."""
    needed = max(min_incidents, MIN_PROPOSAL_INCIDENTS)
    return len(record.successes) >= needed and record.rate >= min_rate


def draft_recipe(query: str) -> list[dict[str, Any]]:
    """A one-step read-only recipe: search the knowledge base with ``query``."""
    return [{"tool": "search_knowledge", "arguments": {"query": query}}]


# --- two cases side by side ----------------------------------------------------------------------

COMPARED_SECTIONS = ("observations", "diagnosis", "counterevidence", "outcome")


# How a statement of one case stands against the other case's statements of the same section.
SAME = "same"  # the other case says it too (as ``normalize_hypothesis`` folds text)
SIMILAR = "similar"  # the other says something close (token Jaccard >= COMPARE_SIMILAR)
ONLY_HERE = "only_here"  # the other case says nothing like it
COMPARE_SIMILAR = Fraction(1, 2)


@dataclass(frozen=True)
class ComparedEntry:
    """One statement of a case's section, with what backs it, and how it stands against the
    other case of the comparison (``SAME``, ``SIMILAR`` or ``ONLY_HERE``)."""

    text: str
    detail: str
    evidence: tuple[str, ...]
    match: str

    @property
    def only_here(self) -> bool:
        return self.match == ONLY_HERE


@dataclass(frozen=True)
class ComparedRow:
    section: str
    left: tuple[ComparedEntry, ...]
    right: tuple[ComparedEntry, ...]

    @property
    def differs(self) -> bool:
        return any(entry.match != SAME for entry in (*self.left, *self.right))


def _excerpts(items: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(str(item.get("excerpt") or "") for item in items if item.get("excerpt"))


def section_statements(
    content: Mapping[str, Any], section: str
) -> list[tuple[str, str, tuple[str, ...]]]:
    """A case's section as (statement, detail, evidence excerpts): an observation is its
    excerpt and its source; a ruled-out hypothesis is "hypothesis: statement", its detail what
    it refutes."""
    if section == "observations":
        return [
            (str(item.get("excerpt") or ""), str(item.get("source_id") or ""), ())
            for item in content.get("observations") or []
        ]
    if section == "counterevidence":
        return [
            (
                f"{entry.get('hypothesis', '')}: {entry.get('statement', '')}",
                str(entry.get("refutes") or ""),
                _excerpts(entry.get("evidence") or []),
            )
            for entry in content.get("counterevidence") or []
        ]
    part = content.get(section) or {}
    statement = str(part.get("statement") or "")
    return [(statement, "", _excerpts(part.get("evidence") or []))] if statement else []


def statement_match(text: str, others: Sequence[str]) -> str:
    """``SAME`` when one of ``others`` says ``text``, ``SIMILAR`` when one is close to it,
    else ``ONLY_HERE``."""
    key = normalize_hypothesis(text)
    if any(normalize_hypothesis(other) == key for other in others):
        return SAME
    tokens = tokenize(text)
    if any(jaccard(tokens, tokenize(other)) >= COMPARE_SIMILAR for other in others):
        return SIMILAR
    return ONLY_HERE


def compare_cases(left: Mapping[str, Any], right: Mapping[str, Any]) -> list[ComparedRow]:
    """The four sections of two cases as aligned rows, each statement marked by how it stands
    against the other case's statements of that section."""
    rows = []
    for section in COMPARED_SECTIONS:
        mine, theirs = section_statements(left, section), section_statements(right, section)
        mine_texts, their_texts = [m[0] for m in mine], [t[0] for t in theirs]
        rows.append(
            ComparedRow(
                section,
                tuple(
                    ComparedEntry(text, detail, evidence, statement_match(text, their_texts))
                    for text, detail, evidence in mine
                ),
                tuple(
                    ComparedEntry(text, detail, evidence, statement_match(text, mine_texts))
                    for text, detail, evidence in theirs
                ),
            )
        )
    return rows
