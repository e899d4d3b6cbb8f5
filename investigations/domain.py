"""The investigation runner: one ticket through a model's tool calls to a verified answer.

Pure (no Django imports); the clock and every tool come in as arguments. ``run_ticket`` offers
the model the tools that are both declared for this run and bound to a handler, parses each
call's arguments against the tool's JSON schema, runs it, feeds the result back, and ends when
the model answers or the budget (tool calls, wall time, output size) runs out. The wall time
is checked before every model call, and the provider is told how much of it is left
(``Transcript.seconds_left``), so a model that never answers is cut when the budget ends. The model fills
only a tool's own arguments (``query``, ``skill_id``); the scope and the ticket's times are bound
by the caller inside each handler, and a call that tries to set them is refused and recorded.
Whatever the model does, the run ends in a recorded outcome, never an exception.

The final answer is checked by ``investigations.verification`` against this run's tool results.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from experience.cases.schema import TicketContext
from experience.core.prompts import shape_problems
from investigations.verification import (
    ANSWER_MALFORMED,
    OUTPUT_SHAPE_MISMATCH,
    Verification,
    parse_answer,
    verify,
    with_composed_conclusion,
)
from knowledge.conclusions import ASK_FOR_FACTS
from reviewconsole.scopes import SCOPE_FIELDS

# Arguments the runner binds itself. A model that sends one is refused: it may not choose where
# or when the tools look.
BOUND_ARGUMENTS = frozenset(
    {*SCOPE_FIELDS, "scope", "occurred_at", "known_at", "at", "now", "facts", "context", "run_id"}
)

# Run statuses.
ANSWERED = "answered"
REFUSED_ANSWER = "refused_answer"
BUDGET_EXHAUSTED = "budget_exhausted"
NEEDS_CONTEXT = "needs_context"
ERROR = "error"
STATUSES = (ANSWERED, REFUSED_ANSWER, BUDGET_EXHAUSTED, NEEDS_CONTEXT, ERROR)

# Step outcomes: only ``ok`` steps are evidence.
OK = "ok"
UNKNOWN_TOOL = "unknown_tool"
INVALID_ARGUMENTS = "invalid_arguments"
SCOPE_ARGUMENT_REFUSED = "scope_argument_refused"
TOOL_ERROR = "tool_error"

# Reason codes of a run that ended without a verified answer (the first word of ``reason``).
MISSING_CONTEXT = "missing_context"
CALLS_EXHAUSTED = "tool_calls"
TIME_EXHAUSTED = "wall_time"
OUTPUT_EXHAUSTED = "output_size"
PROVIDER_ERROR = "provider_error"
NO_ANSWER = "no_answer"

DEFAULT_MAX_CALLS = 6
MAX_CALLS_LIMIT = 20
DEFAULT_MAX_SECONDS = 60.0
DEFAULT_MAX_OUTPUT_CHARS = 16_000
# The token budget of the context block a run reads (in its instructions, or asked for in a
# replay): a few reviewed items, not a flood (the block is cut to it; experience.retrieval.block).
CONTEXT_BUDGET = 600

INSTRUCTIONS = """You investigate one customer support ticket for a chain of tea shops.
Use the tools to gather evidence; they already know the ticket's scope (tenant, brand, store,
campaign, release) and times: never pass those, only each tool's own arguments.
When you are done, reply with one JSON object and nothing else:
{"conclusion": "...", "conclusion_code": "...", "followups": ["..."],
 "citations": [{"id": "...", "quote": "..."}]}
conclusion_code is one of: rules_exclude_purchase (a rule's conditions exclude this purchase),
rules_do_not_explain (the rules match; check the real configuration and requests),
ask_for_facts (conditions cannot be decided; ask for the missing facts),
check_campaign_configuration (sources conflict; check the live campaign),
knowledge_has_no_answer (nothing matched), lead_needs_review (a skill or historical case is a
lead only, never a confirmed cause).
Each citation names an id returned by a tool in this conversation and quotes that item's own
text exactly, character for character (for a knowledge item, its "quote" field). A historical
item (a knowledge case; a case, lesson or skill from retrieve_experience or run_skill) is a lead:
its quote starts with 历史案例，仅作排查线索 (a knowledge case's "quote" already does; for the
others write the prefix, "：", then the item's own text, e.g. its title or id). Quotes that are
not verbatim are refused. Your conclusion text is kept as your own words; the conclusion shown
to people is composed from the verified conclusion_code and citations."""

# What the instructions say before the context block of reviewed experience, when there is one.
CONTEXT_INTRODUCTION = (
    "Reviewed experience of this ticket's exact scope follows (the context block). Use it to "
    "choose what to check after what the current evidence already names (when the rules match "
    "or conflict, the live campaign comes first). Check its leads in order of their record: "
    "higher confidence first (confidence counts the distinct incidents behind an item and the "
    "outcomes reported for it in this scope), the block's order among equals. An item is a "
    "lead, never evidence: cite only what a tool returned in this conversation."
)


def instructions_with(block: str, instructions: str = INSTRUCTIONS) -> str:
    """The instructions with the context block appended; unchanged when the block is empty."""
    if not block.strip():
        return instructions
    return f"{instructions}\n\n{CONTEXT_INTRODUCTION}\n{block.strip()}"


@dataclass(frozen=True)
class Ticket:
    text: str
    scope: Mapping[str, str | None]
    context: TicketContext

    def missing(self) -> list[str]:
        """Scope fields and times the ticket does not give; nothing runs without them."""
        missing = [name for name in SCOPE_FIELDS if not (self.scope.get(name) or "").strip()]
        missing += [
            name for name in ("occurred_at", "known_at") if getattr(self.context, name) is None
        ]
        return missing


@dataclass(frozen=True)
class Budget:
    max_calls: int = DEFAULT_MAX_CALLS
    max_seconds: float = DEFAULT_MAX_SECONDS
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS

    def as_json(self) -> dict[str, Any]:
        return {
            "max_calls": self.max_calls,
            "max_seconds": self.max_seconds,
            "max_output_chars": self.max_output_chars,
        }


@dataclass(frozen=True)
class ToolDeclaration:
    """What the model is told about a tool: its name, purpose and argument schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def as_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True)
class ToolCall:
    """One call as the model wrote it: ``arguments`` is the raw JSON text, parsed by the runner."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Turn:
    """The model's move: tool calls, or a final answer (raw text), or (malformed) neither."""

    calls: tuple[ToolCall, ...] = ()
    answer: str | None = None
    text: str = ""


@dataclass(frozen=True)
class Exchange:
    call: ToolCall
    content: Mapping[str, Any]


@dataclass(frozen=True)
class Round:
    turn: Turn
    exchanges: tuple[Exchange, ...]


@dataclass(frozen=True)
class Transcript:
    """Everything the model has seen so far; a provider rebuilds its conversation from it."""

    instructions: str
    ticket: Ticket
    tools: tuple[ToolDeclaration, ...]
    rounds: tuple[Round, ...]
    # What is left of the run's wall-time budget: a provider waits no longer for the model.
    seconds_left: float | None = None
    # A prompt skill's declared output shape: the answer carries an ``output`` matching it.
    answer_shape: Mapping[str, Any] | None = None


class ProviderTimeout(Exception):
    """The provider stopped waiting for the model. ``budget_left`` is true when the wait was
    cut to what was left of the run's time budget (the run is out of time), false when the
    provider's own limit cut it first (the provider failed)."""

    def __init__(self, message: str, *, budget_left: bool) -> None:
        super().__init__(message)
        self.budget_left = budget_left


class Provider(Protocol):
    name: str

    def next_turn(self, transcript: Transcript) -> Turn: ...


Handler = Callable[[Mapping[str, str]], Mapping[str, Any]]


@dataclass
class Outcome:
    status: str
    reason: str
    steps: list[dict[str, Any]]
    answer: dict[str, Any] | None
    verification: Verification
    missing: list[str] = field(default_factory=list)
    raw_answer: str | None = None

    @property
    def tool_calls(self) -> int:
        return len(self.steps)

    def as_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "answer": self.answer,
            "verification": self.verification.as_json(),
            "tool_calls": self.tool_calls,
            "steps": self.steps,
            "missing": list(self.missing),
        }


# --- argument checks ---------------------------------------------------------------------------


def string_schema(properties: Mapping[str, tuple[int, int, str]]) -> dict[str, Any]:
    """A JSON schema of required string arguments ``name -> (min length, max length, about)``."""
    return {
        "type": "object",
        "properties": {
            name: {"type": "string", "minLength": low, "maxLength": high, "description": about}
            for name, (low, high, about) in properties.items()
        },
        "required": sorted(properties),
        "additionalProperties": False,
    }


def check_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` break ``schema`` (naming the argument), or None.

    Only what tool declarations here use: an object of strings with length bounds, required
    names and no others; an argument may itself be an object of such strings (``run_skill``'s
    ``inputs``), with at most ``maxProperties`` names.
    """
    properties: Mapping[str, Mapping[str, Any]] = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in arguments:
            return f"{name}: required"
    for name, value in arguments.items():
        spec = properties.get(name)
        if spec is None:
            return f"{name}: not an argument of this tool"
        if spec.get("type") == "object":
            if not isinstance(value, Mapping):
                return f"{name}: must be an object"
            if len(value) > spec.get("maxProperties", len(value)):
                return f"{name}: must have at most {spec['maxProperties']} entries"
            inner = spec.get("additionalProperties") or {}
            for key, item in value.items():
                if not isinstance(item, str):
                    return f"{name}.{key}: must be a string"
                if len(item) > inner.get("maxLength", len(item)):
                    return f"{name}.{key}: must be at most {inner['maxLength']} characters"
            continue
        if spec.get("type") == "string":
            if not isinstance(value, str):
                return f"{name}: must be a string"
            if len(value.strip()) < spec.get("minLength", 0):
                return f"{name}: must not be empty"
            if len(value) > spec.get("maxLength", len(value)):
                return f"{name}: must be at most {spec['maxLength']} characters"
    return None


def _parse_arguments(text: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        parsed = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError):
        return None, "arguments are not valid JSON"
    if not isinstance(parsed, dict):
        return None, "arguments must be a JSON object"
    return parsed, None


def _refusal(code: str, message: str) -> dict[str, Any]:
    return {"error": code, "message": message}


def _execute(
    index: int,
    call: ToolCall,
    offered: Mapping[str, ToolDeclaration],
    handlers: Mapping[str, Handler],
) -> tuple[dict[str, Any], Mapping[str, Any]]:
    """Run one call; return its step record and what is fed back to the model."""
    step: dict[str, Any] = {
        "index": index,
        "call_id": call.id,
        "tool": call.name,
        "arguments": call.arguments,
        "result": None,
        "outcome": OK,
        "error": None,
        "refused_arguments": [],
    }

    def refuse(code: str, message: str, **extra: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        step.update(outcome=code, error=message, **extra)
        return step, _refusal(code, message)

    declaration = offered.get(call.name)
    if declaration is None:
        return refuse(UNKNOWN_TOOL, f"{call.name!r} is not a tool of this run")
    arguments, problem = _parse_arguments(call.arguments)
    if arguments is None:
        return refuse(INVALID_ARGUMENTS, problem or "invalid arguments")
    step["arguments"] = arguments
    bound = sorted(name for name in arguments if name in BOUND_ARGUMENTS)
    if bound:
        return refuse(
            SCOPE_ARGUMENT_REFUSED,
            f"{', '.join(bound)}: the runner binds the scope and times; pass only the tool's "
            "own arguments",
            refused_arguments=bound,
        )
    problem = check_arguments(declaration.parameters, arguments)
    if problem:
        return refuse(INVALID_ARGUMENTS, problem)
    try:
        result = handlers[call.name](arguments)
    except Exception as exc:  # a failing tool is a recorded step, whatever it raised
        return refuse(TOOL_ERROR, f"{type(exc).__name__}: {exc}")
    if not isinstance(result, Mapping):
        return refuse(TOOL_ERROR, "the tool returned no result object")
    step["result"] = dict(result)
    return step, result


# --- the loop ----------------------------------------------------------------------------------


def run_ticket(
    ticket: Ticket,
    provider: Provider,
    *,
    tools: Sequence[ToolDeclaration],
    handlers: Mapping[str, Handler],
    budget: Budget | None = None,
    instructions: str = INSTRUCTIONS,
    monotonic: Callable[[], float] = time.monotonic,
    revoked: Callable[[Collection[str]], Collection[str]] | None = None,
    on_step: Callable[[dict[str, Any]], object] | None = None,
    answer_shape: Mapping[str, Any] | None = None,
) -> Outcome:
    """Run ``ticket`` through ``provider`` with the tools declared *and* bound; never raises.

    ``revoked`` answers which of the cited ids are no longer usable now (a revocation during
    the run); such an answer is refused. ``on_step`` is given each step as soon as it is
    recorded (the console stores it so the page shows the run as it happens); it is the
    caller's own code, so what it raises is not caught. ``answer_shape`` (a prompt skill's
    declared output) asks the answer for an ``output`` matching it; one that does not is refused
    (``output_shape_mismatch``) like any other unverified answer.
    """
    budget = budget or Budget()
    steps: list[dict[str, Any]] = []

    def ended(status: str, reason: str, codes: Sequence[str]) -> Outcome:
        return Outcome(status, reason, steps, None, Verification(False, list(codes)))

    missing = ticket.missing()
    if missing:
        outcome = ended(
            NEEDS_CONTEXT, f"{MISSING_CONTEXT}: {', '.join(missing)}", [MISSING_CONTEXT]
        )
        outcome.missing = missing
        return outcome

    offered = {tool.name: tool for tool in tools if tool.name in handlers}
    started = monotonic()
    rounds: list[Round] = []
    output_chars = 0
    while True:
        seconds_left = budget.max_seconds - (monotonic() - started)
        if seconds_left <= 0:
            return ended(
                BUDGET_EXHAUSTED, f"{TIME_EXHAUSTED}: over {budget.max_seconds:g}s", [NO_ANSWER]
            )
        transcript = Transcript(
            instructions,
            ticket,
            tuple(offered.values()),
            tuple(rounds),
            seconds_left,
            answer_shape,
        )
        try:
            turn = provider.next_turn(transcript)
        except ProviderTimeout as exc:
            if exc.budget_left:
                return ended(
                    BUDGET_EXHAUSTED,
                    f"{TIME_EXHAUSTED}: over {budget.max_seconds:g}s ({exc})",
                    [NO_ANSWER],
                )
            return ended(ERROR, f"{PROVIDER_ERROR}: timeout: {exc}", [NO_ANSWER])
        except Exception as exc:  # the provider's failure ends the run, recorded
            return ended(ERROR, f"{PROVIDER_ERROR}: {type(exc).__name__}: {exc}", [NO_ANSWER])
        output_chars += len(turn.answer or "") + len(turn.text)
        output_chars += sum(len(call.arguments) + len(call.name) for call in turn.calls)
        if output_chars > budget.max_output_chars:
            return ended(
                BUDGET_EXHAUSTED,
                f"{OUTPUT_EXHAUSTED}: the model wrote over {budget.max_output_chars} characters",
                [NO_ANSWER],
            )
        if not turn.calls:
            return _answered(turn, steps, revoked, answer_shape)
        exchanges = []
        for call in turn.calls:
            if len(steps) >= budget.max_calls:
                return ended(
                    BUDGET_EXHAUSTED,
                    f"{CALLS_EXHAUSTED}: the model asked for more than {budget.max_calls} tool calls",
                    [NO_ANSWER],
                )
            step, content = _execute(len(steps), call, offered, handlers)
            steps.append(step)
            if on_step is not None:
                on_step(step)
            exchanges.append(Exchange(call, content))
        rounds.append(Round(turn, tuple(exchanges)))


def _answered(
    turn: Turn,
    steps: list[dict[str, Any]],
    revoked: Callable[[Collection[str]], Collection[str]] | None,
    answer_shape: Mapping[str, Any] | None = None,
) -> Outcome:
    raw = turn.answer if turn.answer is not None else turn.text
    answer, problem = parse_answer(strip_fences(raw))
    if answer is None:
        outcome = Outcome(
            REFUSED_ANSWER,
            f"{ANSWER_MALFORMED}: {problem}",
            steps,
            None,
            Verification(False, [ANSWER_MALFORMED]),
            raw_answer=raw,
        )
        return outcome
    cited = [citation["id"] for citation in answer["citations"]]
    gone = set(revoked(cited)) if revoked and cited else set()
    verification = verify(answer, steps, revoked=gone)
    if answer_shape is not None:
        output = _output_of(raw)
        problems = shape_problems(answer_shape, output)
        if problems:
            verification.ok = False
            verification.reasons.append(OUTPUT_SHAPE_MISMATCH)
            verification.details += [
                {"reason": OUTPUT_SHAPE_MISMATCH, "problem": problem} for problem in problems
            ]
        answer["output"] = output if isinstance(output, dict) else None
    answer = with_composed_conclusion(answer, steps, verification)
    if not verification.ok:
        status = REFUSED_ANSWER
        reason = "refused: " + ", ".join(verification.reasons)
    elif answer["conclusion_code"] == ASK_FOR_FACTS:
        status, reason = NEEDS_CONTEXT, "answered: the facts named in the follow-ups are needed"
    else:
        status, reason = ANSWERED, "answered: every citation checked against this run"
    return Outcome(status, reason, steps, answer, verification, raw_answer=raw)


def _output_of(raw: str) -> object:
    """The ``output`` field of the answer's JSON object (None when there is none)."""
    try:
        data = json.loads(strip_fences(raw))
    except (ValueError, RecursionError):
        return None
    return data.get("output") if isinstance(data, dict) else None


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def strip_fences(text: str) -> str:
    """Models often wrap JSON in a Markdown code fence; the content is what counts."""
    match = _FENCE.match(text)
    return match.group(1) if match else text
