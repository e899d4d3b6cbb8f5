"""Request and response bodies of the agent API, shared by HTTP and MCP.

The shapes are described in docs/contracts.md, HTTP API and Import formats.

Requests refuse unknown fields, naive datetimes, placeholder scopes, over-long text and text
that no database can store (NUL characters, lone surrogates); every refusal names its field.
Responses describe what the services return, so the OpenAPI schema is a contract.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
)

from agentapi.argument_docs import argument_docs
from experience.cases import schema as case_format
from experience.core import prompts
from experience.retrieval.context import MAX_BUDGET as CONTEXT_MAX_BUDGET
from experience.retrieval.context import MIN_BUDGET as CONTEXT_MIN_BUDGET
from experience.retrieval.context import TOKENIZER as CONTEXT_TOKENIZER
from investigations import domain as investigation_domain
from investigations import services as investigation_services
from knowledge.search import DEFAULT_LIMIT as SEARCH_DEFAULT_LIMIT
from knowledge.search import MAX_LIMIT as SEARCH_MAX_LIMIT
from knowledge.search import MAX_QUERY_LENGTH as SEARCH_MAX_QUERY
from reviewconsole import inputs, itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.reasons import MAX_REASON
from reviewconsole.runids import MAX_RUN_ID, RUN_ID_INVALID, run_id_valid
from reviewconsole.scopes import SCOPE_VALUE_PATTERN, validate_scope_value
from reviewconsole.timeparse import EARLIEST, LATEST, parse_aware_datetime, to_utc_iso

RETRIEVE_DEFAULT_LIMIT = 3
RETRIEVE_MAX_LIMIT = 20
RETRIEVE_MAX_QUERY = 2_000
MAX_FACTS = 32
MAX_FACT_TEXT = 200
# Integers that survive every JSON consumer unchanged (IEEE-754 doubles).
MAX_FACT_INT = inputs.MAX_JSON_INT

# The rule every door applies to text (command-line files, console uploads, this API).
NUL_TEXT = inputs.NUL_TEXT
BAD_UNICODE = inputs.BAD_UNICODE
NOT_ISO_TEXT = "must be an ISO 8601 string with a timezone offset"


def _storable(value: str) -> str:
    problem = inputs.text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _scope_value(value: str) -> str:
    try:
        return validate_scope_value(value, field="")
    except ValidationFailure as failure:
        raise ValueError(failure.message) from None


def _aware(value: object) -> datetime:
    if not isinstance(value, str | datetime):
        raise ValueError(NOT_ISO_TEXT)
    try:
        # The same instant in UTC (databases refuse some offsets Python accepts), within the
        # bound every datetime the product accepts shares.
        return parse_aware_datetime(value, field="")
    except ValidationFailure as failure:
        raise ValueError(failure.message) from None


def _whole_number(value: object) -> object:
    """JSON Schema's integer: 12.0 is the integer 12 (booleans and strings stay refused)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _run_id(value: str) -> str:
    if not run_id_valid(value):
        raise ValueError(RUN_ID_INVALID)
    return value


Storable = AfterValidator(_storable)
# What the schema says of every text field: no NUL character (the validators refuse it).
NO_NUL = Field(json_schema_extra={"pattern": "^[^\\x00]*$"})
# Years the schema promises are accepted whatever the offset: a year inside the bound of
# ``reviewconsole.timeparse`` on each side, so an offset of up to a day never leaves it.
DATE_TIME_PATTERN = (
    r"^(?:19(?:0[1-9]|[1-9][0-9])|2(?:[0-8][0-9]{2}|9(?:[0-8][0-9]|9[0-8])))"  # 1901-2998
    r"-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"
    r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"
)
# Exactly the characters ``str.isspace`` matches (JSON Schema's ``\s`` is narrower).
_SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
WholeNumber = BeforeValidator(_whole_number)
SearchQuery = Annotated[
    str, StringConstraints(min_length=1, max_length=SEARCH_MAX_QUERY), Storable, NO_NUL
]
RetrieveQuery = Annotated[
    str, StringConstraints(min_length=1, max_length=RETRIEVE_MAX_QUERY), Storable, NO_NUL
]
FactText = Annotated[str, StringConstraints(max_length=MAX_FACT_TEXT), Storable, NO_NUL]
SourceId = Annotated[
    str, StringConstraints(min_length=1, max_length=case_format.MAX_SOURCE_ID), Storable, NO_NUL
]
Excerpt = Annotated[
    str, StringConstraints(min_length=1, max_length=case_format.MAX_EXCERPT), Storable, NO_NUL
]
Incident = Annotated[
    str, StringConstraints(min_length=1, max_length=case_format.MAX_INCIDENT), Storable, NO_NUL
]
Title = Annotated[
    str, StringConstraints(min_length=1, max_length=case_format.MAX_TITLE), Storable, NO_NUL
]
LongText = Annotated[str, StringConstraints(max_length=case_format.MAX_TEXT), Storable, NO_NUL]
RequiredLongText = Annotated[
    str, StringConstraints(min_length=1, max_length=case_format.MAX_TEXT), Storable, NO_NUL
]


# What a type's own schema says of its values. A request property's description leads with
# what the argument means and ends with its type's rule (``described_arguments``).
SCOPE_RULE = "an exact scope value; placeholders (any, all, *, n/a, …) are refused"
DATE_TIME_RULE = (
    "RFC 3339 with a timezone offset; naive datetimes are refused, and so are "
    f"instants outside {to_utc_iso(EARLIEST)} to {to_utc_iso(LATEST)} "
    "(the years 1901-2998 as written are always inside)"
)
RUN_ID_RULE = (
    f"1 to {MAX_RUN_ID} characters, no whitespace; the agent investigation this read belongs "
    "to: the caller's own, opened in this scope's tenant by its first read; the same id used by "
    "another account or in another tenant is another run"
)
TYPE_RULES = frozenset({SCOPE_RULE, DATE_TIME_RULE, RUN_ID_RULE})

ScopeValue = Annotated[
    str,
    Storable,
    AfterValidator(_scope_value),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": SCOPE_VALUE_PATTERN,
            "maxLength": 64,
            "description": SCOPE_RULE,
        }
    ),
]
AwareDateTime = Annotated[
    datetime,
    BeforeValidator(_aware),
    WithJsonSchema(
        {
            "type": "string",
            "format": "date-time",
            "pattern": DATE_TIME_PATTERN,
            "description": DATE_TIME_RULE,
        }
    ),
]
RunId = Annotated[
    str,
    Storable,
    AfterValidator(_run_id),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": rf"^[^{_SPACE}\x00]{{1,{MAX_RUN_ID}}}$",
            "description": RUN_ID_RULE,
        }
    ),
]
FACT_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
FactName = Annotated[str, StringConstraints(pattern=FACT_NAME_PATTERN)]
FactValue = (
    Annotated[int, Field(strict=True, ge=-MAX_FACT_INT, le=MAX_FACT_INT), WholeNumber]
    | FactText
    | None
)


def typed_map(schema: dict[str, Any]) -> None:
    """A map whose keys follow one pattern, written as client generators read it.

    Pydantic writes ``dict[Pattern, V]`` as ``patternProperties: {pattern: V}``; with
    ``additionalProperties: false`` beside it, generators (openapi-python-client among them)
    build a model with no properties and drop every entry. Written instead as the JSON Schema
    2020-12 of OpenAPI 3.1: ``additionalProperties: V`` (every entry's value) and
    ``propertyNames: {pattern}`` (every key), which says exactly the same. The server validates
    the keys either way (a bad name is refused on ``facts.<name>``)."""
    patterns = schema.pop("patternProperties", None)
    if not patterns:
        return
    ((pattern, values),) = patterns.items()
    schema["additionalProperties"] = values
    schema["propertyNames"] = {"pattern": pattern}


Facts = Annotated[
    dict[FactName, FactValue],
    Field(
        max_length=MAX_FACTS,
        description="the ticket's facts, e.g. channel, product, basket_cents (integer cents); "
        f"names match {FACT_NAME_PATTERN}",
        json_schema_extra=typed_map,
    ),
]
Limit = Annotated[int, WholeNumber]
CaseId = Annotated[str, StringConstraints(pattern=case_format.CASE_ID.pattern)]
SKILL_ID_PATTERN = rf"^{itemids.SKILL.pattern}$"
CASE_ID_PATTERN = rf"^{case_format.CASE_ID.pattern}$"
SkillId = Annotated[str, StringConstraints(pattern=SKILL_ID_PATTERN)]


def _joined(text: str, more: str) -> str:
    return more if not text else text if more in text else f"{text}; {more}"


def described_arguments(schema: dict[str, Any], model: type) -> None:
    """Each property's description and example beside its type, at the property's top level.

    Pydantic writes an optional value's own text inside the first branch of ``anyOf``, which
    tool adapters strip (issue 41.6): it joins the argument's text here. A default is stated in
    words, not as ``default``: generators that read ``default`` as "always present" (openapi-
    typescript) would make the optional field required in the request's type (issue 41.5)."""
    for name, prop in schema.get("properties", {}).items():
        docs = argument_docs(model, name)
        rules = [
            branch.pop("description")
            for branch in prop.get("anyOf", ())
            if isinstance(branch, dict) and "description" in branch
        ]
        own = prop.get("description")
        if own in TYPE_RULES:
            rules.insert(0, own)
            own = None
        text = own or (docs[0] if docs else "")
        for rule in rules:
            text = _joined(text, rule)
        if prop.get("default") is not None:
            default = prop.pop("default")
            if "default:" not in text:
                text = _joined(text, f"default: {_spoken(default)}")
        if text:
            prop["description"] = text
        if "examples" not in prop and docs is not None:
            prop["examples"] = [docs[1]]


def _spoken(value: object) -> str:
    return {"{}": "none", "": "empty"}.get(str(value), str(value))


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=described_arguments)


# --- requests --------------------------------------------------------------------------------


class KnowledgeSearchRequest(RequestBody):
    """Mirrors ``research``: a missing scope field or time is an answer (needs_context)."""

    query: SearchQuery
    tenant: ScopeValue | None = None
    brand: ScopeValue | None = None
    store: ScopeValue | None = None
    campaign: ScopeValue | None = None
    occurred_at: AwareDateTime | None = None
    known_at: AwareDateTime | None = None
    facts: Facts = Field(default_factory=dict)
    limit: Limit = Field(default=SEARCH_DEFAULT_LIMIT, ge=1, le=SEARCH_MAX_LIMIT, strict=True)


class ExperienceScope(RequestBody):
    """Where the current ticket happens. A missing field is reported, never guessed or widened."""

    tenant: ScopeValue | None = None
    brand: ScopeValue | None = None
    store: ScopeValue | None = None
    campaign: ScopeValue | None = None
    deployment: ScopeValue | None = None

    def as_mapping(self) -> dict[str, str | None]:
        return self.model_dump()


class ExperienceRetrieveRequest(RequestBody):
    """Mirrors ``recall``."""

    query: RetrieveQuery
    scope: ExperienceScope
    run_id: RunId
    now: AwareDateTime | None = Field(default=None, description="check time; default: now")
    limit: Limit = Field(default=RETRIEVE_DEFAULT_LIMIT, ge=1, le=RETRIEVE_MAX_LIMIT, strict=True)


InputName = Annotated[str, StringConstraints(pattern=rf"^{prompts.PROPERTY_NAME.pattern}$")]
InputText = Annotated[str, StringConstraints(max_length=prompts.MAX_INPUT_STRING), Storable, NO_NUL]
InputValue = (
    Annotated[int, Field(strict=True, ge=-MAX_FACT_INT, le=MAX_FACT_INT), WholeNumber]
    | bool
    | InputText
    | None
)
Inputs = Annotated[
    dict[InputName, InputValue],
    Field(
        max_length=prompts.MAX_INPUTS,
        description="a prompt-form skill's declared inputs (e.g. the customer's own words); "
        "an input the skill does not declare, or of another type, is refused (422 on "
        "inputs.NAME), a required one missing is a fallback naming it; a recipe skill takes none",
        json_schema_extra=typed_map,
    ),
]


class SkillRunRequest(RequestBody):
    """Mirrors ``run_skill``: the current scope and the caller's knowledge context, and for a
    prompt-form skill its inputs and the provider its sub-agent runs with."""

    scope: ExperienceScope
    occurred_at: AwareDateTime | None = None
    known_at: AwareDateTime | None = None
    facts: Facts = Field(default_factory=dict)
    run_id: RunId
    now: AwareDateTime | None = Field(default=None, description="check time; default: now")
    inputs: Inputs = Field(default_factory=dict)
    provider: Literal["scripted", "live"] | None = Field(
        default=None,
        description="a prompt-form skill's sub-agent (default scripted); live needs the "
        "server's CONSOLE_LLM_BASE_URL and CONSOLE_LLM_MODEL (422 on provider without them); "
        "a recipe skill has none",
    )


class CaseScope(RequestBody):
    tenant: ScopeValue
    brand: ScopeValue
    store: ScopeValue
    campaign: ScopeValue
    deployment: ScopeValue


class EvidenceIn(RequestBody):
    """One piece of evidence: where it comes from and the words quoted from it."""

    source_id: SourceId
    excerpt: Excerpt
    verified: bool | None = Field(
        default=None,
        description="accepted for compatibility with imports and ignored: "
        "evidence proposed by an agent is always unchecked",
    )


EvidenceList = Annotated[list[EvidenceIn], Field(max_length=case_format.MAX_EVIDENCE_ITEMS)]


class StatementIn(RequestBody):
    """A statement and the evidence for it."""

    statement: LongText | None = None
    evidence: EvidenceList | None = None


class CounterevidenceIn(RequestBody):
    """A hypothesis considered, and the evidence that refutes it."""

    hypothesis: RequiredLongText
    statement: RequiredLongText
    refutes: RequiredLongText
    evidence: EvidenceList | None = None


class CaseProposal(RequestBody):
    """A candidate case in the import format of cases (docs/contracts.md, Import formats)."""

    type: Literal["case"] = "case"
    scope: CaseScope
    incident: Incident
    title: Title
    summary: LongText | None = None
    observations: EvidenceList | None = None
    diagnosis: StatementIn | None = None
    counterevidence: (
        Annotated[list[CounterevidenceIn], Field(max_length=case_format.MAX_COUNTEREVIDENCE)] | None
    ) = None
    outcome: StatementIn | None = None
    valid_from: AwareDateTime
    valid_to: AwareDateTime = Field(
        description=f"{case_format.VALID_TO_ORDER} (a rule between two fields: 422 otherwise)"
    )
    supersedes: CaseId | None = Field(
        default=None,
        description="a stored case of the same tenant that this one replaces (422 otherwise)",
    )

    def as_import_item(self) -> dict[str, Any]:
        """The case import JSON object (docs/contracts.md), without ``verified`` flags: a proposal never checks evidence."""
        item = self.model_dump(mode="json", exclude_none=True)
        for evidence in case_format.evidence_objects(item):
            evidence.pop("verified", None)
        return item


# --- responses -------------------------------------------------------------------------------


class Message(BaseModel):
    detail: str


class ErrorItem(BaseModel):
    loc: list[str | int] = Field(description="JSON path of the field, e.g. body.scope.campaign")
    msg: str
    type: str


class ValidationErrors(BaseModel):
    detail: list[ErrorItem]


class Ping(BaseModel):
    ok: bool
    user: str


# Which branches of a search found an item, and what its vector branch did (semantic.branch).
Branch = Literal["raw", "expanded", "vector"]
RELEVANCE = (
    "the estimated probability (0-1) that it answers the query, calibrated per embedding model "
    "from labelled questions; the larger of what its words and its meaning say "
    "(docs: Result shapes)"
)
SIMILARITY = (
    "its cosine similarity to the query, where the vector branch scored it; null or absent "
    "otherwise (docs: Result shapes)"
)
SemanticStatus = Literal["used", "partial", "not_indexed", "unavailable"]
SEMANTIC_DESCRIPTION = (
    "what the vector branch did: used; partial (some items not embedded yet, ranked by their "
    "words); not_indexed (no vector of the configured model yet); unavailable (the embedder "
    "failed or timed out: the answer is the lexical one); null while the branch is off"
)


class WithSemantic(BaseModel):
    """A search's answer that says what its vector branch did (``semantic``), a field left out
    while the branch is off: a lexical deployment's answers keep their shape exactly. Left out
    field by field (``exclude_if``), so the response schema still lists every property (a
    serializer of the whole model would publish an empty schema)."""

    semantic: SemanticStatus | None = Field(
        default=None, description=SEMANTIC_DESCRIPTION, exclude_if=lambda value: value is None
    )


class ConditionsOut(BaseModel):
    status: Literal["match", "mismatch", "unknown"]
    mismatches: list[str]
    unknown: list[str]


class KnowledgeEvidence(BaseModel):
    id: str
    source: str
    kind: str
    title: str
    version: int
    rule_key: str | None
    quote: str
    conditions: ConditionsOut
    conflict: bool
    text: str
    valid_from: str | None
    valid_to: str | None
    published_at: str | None
    content_hash: str
    found_by: list[Branch] = Field(
        default_factory=list, description="the branches that found it (docs: Result shapes)"
    )
    relevance: float | None = Field(default=None, ge=0, le=1, description=RELEVANCE)
    similarity: float | None = Field(default=None, ge=-1, le=1, description=SIMILARITY)


class KnowledgeSearchResult(WithSemantic):
    status: Literal["retrieved", "needs_context", "conflicting_sources", "no_match"]
    missing: list[str]
    truncated: bool
    evidence: list[KnowledgeEvidence]


class RetrievedItem(BaseModel):
    id: str
    type: Literal["case", "skill", "lesson"]
    title: str
    confidence: float | None = Field(
        default=None, description="computed from the cited evidence, 0-1 (docs: Lessons)"
    )
    why: str = Field(default="", description="the confidence's inputs, spelled out")
    conflict: bool = Field(
        default=False, description="in an unresolved conflict: a dispute, never a settled answer"
    )
    lesson_type: str | None = None
    conclusion: str | None = None
    found_by: list[Branch] = Field(
        default_factory=list, description="the branches that found it (docs: Result shapes)"
    )
    relevance: float | None = Field(default=None, ge=0, le=1, description=RELEVANCE)
    similarity: float | None = Field(default=None, ge=-1, le=1, description=SIMILARITY)


class ExperienceRetrieveResult(WithSemantic):
    status: Literal["ok", "fallback"]
    missing: list[str]
    items: list[RetrievedItem]


class RunStep(BaseModel):
    index: int
    tool: str
    arguments: dict[str, Any]
    status: str
    outcome: str | None = Field(
        default=None,
        description="a prompt-form skill's step only: the runner's outcome (ok, unknown_tool, "
        "invalid_arguments, scope_argument_refused, tool_error)",
    )


class ObservedEvidence(BaseModel):
    id: str | None
    kind: str | None
    title: str | None
    quote: str | None
    conditions: dict[str, Any] | None
    conflict: bool | None


class Observation(BaseModel):
    step: int
    tool: str
    status: str | None
    missing: list[str]
    evidence: list[ObservedEvidence]


class SkillRunResult(BaseModel):
    status: Literal["needs_review", "fallback"]
    reason: str
    run_id: str
    skill: str
    missing: list[str]
    tool_calls: int
    steps: list[RunStep]
    observations: list[Observation]
    cases: list[str] = Field(description="the cited cases: historical leads, not conclusions")
    # A prompt-form skill's run only; a recipe skill's answer has none of these fields.
    form: Literal["prompt"] | None = Field(
        default=None, description="present for a prompt-form skill's run only"
    )
    provider: str | None = Field(default=None, description="the sub-agent's provider")
    answer: dict[str, Any] | None = Field(
        default=None,
        description="the sub-agent's answer as the investigation runner verified it "
        "(conclusion composed by the console, model_text its own words, output)",
    )
    verification: dict[str, Any] | None = Field(
        default=None, description="{ok, reasons, details}, as for an investigation"
    )
    output: dict[str, Any] | None = Field(
        default=None,
        description="the declared output, only when the run ends needs_review",
    )


class CaseProposed(BaseModel):
    id: str
    type: Literal["case"]
    status: str
    created: bool = Field(description="false when identical content was already stored")


class StoredRun(BaseModel):
    skill: str
    scope: dict[str, str]
    context: dict[str, Any]
    status: str
    reason: str
    tool_calls: int
    steps: list[RunStep]
    observations: list[Observation]
    cases: list[str]
    started_at: str | None
    finished_at: str | None


class ReferenceOut(BaseModel):
    item_id: str
    item_type: str
    read_at: str | None


class RunRecord(BaseModel):
    run_id: str
    runs: list[StoredRun]
    references: list[ReferenceOut]


class EvidenceOut(BaseModel):
    source_id: str
    excerpt: str


class StatementOut(BaseModel):
    statement: str
    evidence: list[EvidenceOut]


class CounterevidenceOut(BaseModel):
    hypothesis: str
    statement: str
    refutes: str
    evidence: list[EvidenceOut]


class ApprovedCase(BaseModel):
    id: str
    type: Literal["case"]
    status: Literal["approved"]
    scope: dict[str, str]
    incident: str
    title: str
    summary: str
    observations: list[EvidenceOut]
    diagnosis: StatementOut
    counterevidence: list[CounterevidenceOut]
    outcome: StatementOut
    valid_from: str | None
    valid_to: str | None
    supersedes: str | None
    approved_at: str | None


class RecipeStepOut(BaseModel):
    tool: str
    arguments: dict[str, Any]


class ApprovedSkill(BaseModel):
    id: str
    type: Literal["skill"]
    status: Literal["approved"]
    scope: dict[str, str]
    title: str
    when: str
    recipe: list[RecipeStepOut]
    cases: list[str]
    valid_from: str | None
    valid_to: str | None
    approved_at: str | None
    available: bool = Field(description="approved, valid now, and every cited case still usable")
    unavailable_reason: str | None
    form: Literal["prompt"] | None = Field(
        default=None, description="present for a prompt-form skill only (its recipe is empty)"
    )
    prompt: dict[str, Any] | None = Field(
        default=None,
        description="a prompt-form skill's body: instructions, inputs (the declared input "
        "fields), output (the declared shape), tools, max_calls",
    )


# --- investigations ----------------------------------------------------------------------------

INVESTIGATION_MAX_TEXT = investigation_services.MAX_TEXT
INVESTIGATION_MAX_CALLS = investigation_domain.MAX_CALLS_LIMIT
MaxCalls = Annotated[int, Field(strict=True, ge=1, le=INVESTIGATION_MAX_CALLS), WholeNumber]
InvestigationText = Annotated[
    str, StringConstraints(min_length=1, max_length=INVESTIGATION_MAX_TEXT), Storable, NO_NUL
]


class InvestigationRequest(RequestBody):
    """Mirrors ``investigate``: the ticket, where and when it happened, and its facts. The model
    never sets the scope or the times; a missing scope field is answered with needs_context."""

    text: InvestigationText
    scope: ExperienceScope
    occurred_at: AwareDateTime | None = None
    known_at: AwareDateTime | None = None
    facts: Facts = Field(default_factory=dict)
    provider: Literal["scripted", "live"] = Field(
        default="scripted",
        description="live needs the server's CONSOLE_LLM_BASE_URL and CONSOLE_LLM_MODEL; "
        "without them it is refused (422 on provider)",
    )
    run_id: RunId | None = Field(
        default=None,
        description="default: a new id; an id of one of your runs that already has an "
        "investigation is refused (409); another account's or tenant's run of the "
        "same id is another run",
    )
    max_calls: MaxCalls | None = Field(default=None, description="default: 6")


class CitationOut(BaseModel):
    id: str
    quote: str


class InvestigationAnswer(BaseModel):
    conclusion: str = Field(
        description="composed from the verified conclusion_code and citations, never the "
        "model's words; for a refused answer, that nothing is concluded"
    )
    conclusion_code: Literal[
        "rules_exclude_purchase",
        "rules_do_not_explain",
        "ask_for_facts",
        "check_campaign_configuration",
        "knowledge_has_no_answer",
        "lead_needs_review",
    ]
    followups: list[str]
    citations: list[CitationOut]
    model_text: str | None = Field(
        default=None, description="the model's own conclusion text, as written: unverified"
    )


class VerificationOut(BaseModel):
    ok: bool
    reasons: list[str]
    details: list[dict[str, Any]]


class InvestigationStep(BaseModel):
    index: int
    call_id: str
    tool: str
    arguments: dict[str, Any] | str = Field(description="as parsed, or the raw text when not JSON")
    result: dict[str, Any] | None = Field(description="the tool's full result, as returned")
    outcome: str
    error: str | None
    refused_arguments: list[str]


class InvestigationResult(BaseModel):
    run_id: str
    status: Literal["answered", "refused_answer", "budget_exhausted", "needs_context", "error"]
    reason: str
    answer: InvestigationAnswer | None
    verification: VerificationOut
    tool_calls: int
    steps: list[InvestigationStep]
    missing: list[str]
    provider: str
    scope: dict[str, str]
    context: dict[str, Any]


class InvestigationPending(BaseModel):
    """A live investigation handed to the worker: poll ``poll`` until it answers 200."""

    run_id: str
    state: Literal["queued", "running"]
    steps: int = Field(description="steps stored so far")
    poll: str = Field(description="the address to GET for the run")


# --- context block and run outcomes (docs/contracts.md, Context block and outcomes) -----------


class ExperienceContextRequest(RequestBody):
    """Mirrors ``recall --format context``."""

    query: RetrieveQuery
    scope: ExperienceScope
    run_id: RunId
    budget: Annotated[int, WholeNumber] = Field(
        ge=CONTEXT_MIN_BUDGET,
        le=CONTEXT_MAX_BUDGET,
        strict=True,
        description=f"tokens the block may use, counted by the {CONTEXT_TOKENIZER} counter",
    )
    now: AwareDateTime | None = Field(default=None, description="check time; default: now")


class ContextItem(BaseModel):
    id: str
    type: Literal["case", "skill", "lesson"]
    confidence: float | None


class ExperienceContextResult(WithSemantic):
    status: Literal["ok", "fallback"]
    missing: list[str]
    block: str = Field(description="prompt-ready text; empty when nothing qualifies")
    items: list[ContextItem]
    tokens: int
    budget: int
    tokenizer: str


class RunOutcomeRequest(RequestBody):
    outcome: Literal["resolved_by_lead", "lead_was_wrong", "unresolved"]
    note: Annotated[str, StringConstraints(max_length=MAX_REASON), Storable, NO_NUL] = ""


class RunOutcomeItem(BaseModel):
    id: str
    type: str


class RunOutcomeResult(BaseModel):
    run_id: str
    outcome: str
    note: str
    reported_by: str
    reported_at: str
    previous: str | None
    counts: bool = Field(
        description="whether this report can move confidence: a confirmation or a refutation "
        "only from a reviewer (an agent's waits for one, a refutation in the re-review queue), "
        "unresolved never"
    )
    items: list[RunOutcomeItem]
