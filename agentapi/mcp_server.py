"""An MCP server (official ``mcp`` SDK) exposing the agent operations as tools.

The tools are listed in docs/contracts.md, MCP.

Every call authenticates its agent token again, so revoking the token or deactivating its user
stops the next call: over stdio the token the server was started with, over Streamable HTTP
(``agentapi.mcp_http``) the bearer token of the HTTP request that carries the call. The tools
take the same request bodies as the HTTP API (same validation, same JSON schema), call the same
operations, count against the same per-account rate (``agentapi.limits``) and declare the API's
response models as their ``outputSchema``: a successful call's structured content is that
response.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.db import close_old_connections
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, METHOD_NOT_FOUND, CallToolResult, TextContent, ToolAnnotations
from ninja.responses import NinjaJSONEncoder
from pydantic import BaseModel, ValidationError

from agentapi import oauth, operations
from agentapi.api import field_path
from agentapi.auth import token_user
from agentapi.investigate import investigate
from agentapi.limits import TooBusy, account_rate_wait, live_run_held
from agentapi.operations import NotFound
from agentapi.schemas import (
    CaseProposal,
    CaseProposed,
    ExperienceContextRequest,
    ExperienceContextResult,
    ExperienceRetrieveRequest,
    ExperienceRetrieveResult,
    InvestigationRequest,
    InvestigationResult,
    KnowledgeSearchRequest,
    KnowledgeSearchResult,
    RunId,
    RunOutcomeRequest,
    RunOutcomeResult,
    SkillId,
    SkillRunRequest,
    SkillRunResult,
)
from agentapi.tool_schemas import lean
from reviewconsole.errors import AlreadyTaken, PermissionRefused, UnknownId, ValidationFailure
from reviewconsole.tenancy import UnknownTenant, forbidden_tenant_message

SERVER_NAME = "experience-review-console"
INSTRUCTIONS = (
    "Governed memory for investigating support tickets. Knowledge results and reused experience "
    "change the order of checks; they never confirm a root cause. Give the exact scope of the "
    "current ticket: a missing field is answered with needs_context/fallback, never widened."
)
UNAUTHORIZED = "the agent token is invalid, revoked, or its user is inactive"
RATE_LIMITED = (
    "this account has made more requests than CONSOLE_API_RATE allows; "
    "retry after {seconds} second(s)"
)


class SearchKnowledgeArguments(KnowledgeSearchRequest, ArgModelBase):
    pass


class RetrieveExperienceArguments(ExperienceRetrieveRequest, ArgModelBase):
    pass


class RunSkillArguments(SkillRunRequest, ArgModelBase):
    skill_id: SkillId


class ProposeCaseArguments(CaseProposal, ArgModelBase):
    pass


class InvestigateArguments(InvestigationRequest, ArgModelBase):
    pass


class ExperienceContextArguments(ExperienceContextRequest, ArgModelBase):
    pass


class RunOutcomeArguments(RunOutcomeRequest, ArgModelBase):
    run_id: RunId


# An operation answers a dict, or the response model itself where its service is typed.
Operation = Callable[[User, dict[str, Any]], dict[str, Any] | BaseModel]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    arguments: type[ArgModelBase]
    # The HTTP API's response model: the tool's outputSchema and its structured content.
    result: type[BaseModel]
    operation: Operation
    read_only: bool
    # As the API route's ``exclude_unset``: fields the operation did not set are left out
    # (a recipe skill's run answers without the prompt-form fields), not written as null.
    exclude_unset: bool = False


def _search(user: User, args: dict[str, Any]) -> dict[str, Any]:
    request = KnowledgeSearchRequest.model_validate(args)
    return operations.knowledge_search(user=user, request=request)


def _retrieve(user: User, args: dict[str, Any]) -> dict[str, Any]:
    request = ExperienceRetrieveRequest.model_validate(args)
    return operations.experience_retrieve(user=user, request=request)


def _run(user: User, args: dict[str, Any]) -> dict[str, Any]:
    skill_id = args.pop("skill_id")
    request = SkillRunRequest.model_validate(args)
    return operations.skill_run(user=user, skill_id=skill_id, request=request)


def _propose(user: User, args: dict[str, Any]) -> dict[str, Any]:
    proposal = CaseProposal.model_validate(args)
    return operations.case_propose(user=user, proposal=proposal)


def _investigate(user: User, args: dict[str, Any]) -> dict[str, Any]:
    request = InvestigationRequest.model_validate(args)
    if request.provider != "live":
        return investigate(user=user, request=request)
    # A live model holds this call (and a thread of the server) for up to the run's wall time.
    with live_run_held(user):
        return investigate(user=user, request=request)


def _context(user: User, args: dict[str, Any]) -> dict[str, Any]:
    request = ExperienceContextRequest.model_validate(args)
    return operations.experience_context(user=user, request=request)


def _outcome(user: User, args: dict[str, Any]) -> RunOutcomeResult:
    run_id = args.pop("run_id")
    request = RunOutcomeRequest.model_validate(args)
    return operations.run_outcome(user=user, run_id=run_id, request=request)


TOOLS = (
    ToolSpec(
        name="search_knowledge",
        title="Search the knowledge base",
        description=(
            "Search versioned business rules and confirmed historical cases for one ticket. "
            "Give tenant, brand, store, campaign, occurred_at and known_at (all needed for an "
            "answer) and the ticket's facts. status: retrieved (evidence found; each item's "
            "conditions say match, mismatch or unknown against your facts), needs_context "
            "(something is missing: the names in missing are scope fields or times you left "
            "out, or facts a rule's conditions need; ask for them and search again), "
            "conflicting_sources (documents of one rule disagree; none is picked: say so, do "
            "not choose), no_match (nothing answers the query). A full match only means the "
            "rules do not explain the failure."
        ),
        arguments=SearchKnowledgeArguments,
        result=KnowledgeSearchResult,
        operation=_search,
        read_only=True,
    ),
    ToolSpec(
        name="retrieve_experience",
        title="Retrieve reviewed experience",
        description=(
            "Approved cases, skills and lessons for exactly this scope (all five fields needed) "
            "valid now, best first. status: ok (items may be empty: nothing reviewed applies), "
            "fallback (a scope field is missing: missing names it; nothing is read). Cases are "
            "historical leads, never a confirmed cause; an item of type skill gives the "
            "skill_id for run_skill. Each returned item is recorded as read in run_id."
        ),
        arguments=RetrieveExperienceArguments,
        result=ExperienceRetrieveResult,
        operation=_retrieve,
        read_only=False,
    ),
    ToolSpec(
        name="run_skill",
        title="Run a reviewed skill",
        description=(
            "Run an approved skill (skill_id from retrieve_experience or experience_context) "
            "with the current scope and ticket context: a recipe skill's "
            "read-only checks, or a prompt-form skill's constrained sub-agent (pass its declared "
            "inputs; its answer is verified like an investigation's and its output matches the "
            "skill's declared shape). needs_review at best (current evidence plus cited cases as "
            "historical leads), fallback with a reason otherwise. The run is stored under run_id."
        ),
        arguments=RunSkillArguments,
        result=SkillRunResult,
        operation=_run,
        read_only=False,
        exclude_unset=True,
    ),
    ToolSpec(
        name="propose_case",
        title="Propose a candidate case",
        description=(
            "Submit an investigation as a candidate case for human review (import format: "
            "scope, incident, title, observations, diagnosis, counterevidence, outcome, "
            "valid_from, valid_to). You are its submitter; its evidence stays unchecked until a "
            "reviewer checks it. Nothing is reused before a reviewer approves it."
        ),
        arguments=ProposeCaseArguments,
        result=CaseProposed,
        operation=_propose,
        read_only=False,
    ),
    ToolSpec(
        name="investigate",
        title="Investigate a ticket",
        description=(
            "Use instead of search_knowledge/retrieve_experience when you want the console to "
            "investigate the whole ticket for you: its runner searches, retrieves and runs "
            "skills itself, and answers with a conclusion whose every citation was checked "
            "against this run's tool results. Give text, scope, occurred_at, known_at, facts. "
            "status: answered (verified), needs_context (missing names what to ask for), "
            "refused_answer (the model's answer failed verification: reason says why), "
            "budget_exhausted (max_calls reached), error. The run is stored under run_id."
        ),
        arguments=InvestigateArguments,
        result=InvestigationResult,
        operation=_investigate,
        read_only=False,
    ),
    ToolSpec(
        name="experience_context",
        title="Reviewed experience as a prompt block",
        description=(
            "A prompt-ready text block of the approved items of exactly this scope whose "
            "confidence is at least the server's threshold (CONTEXT_CONFIDENCE_THRESHOLD, "
            "default 0.3), best first, cut to budget tokens. status: ok (block empty when "
            "nothing qualifies), fallback (a scope field is missing, named in missing). (The answer "
            "names the tokenizer). Each line: id, type, confidence; cases and skills are "
            "historical leads, never a confirmed cause; CONFLICT marks a disputed lesson. Every "
            "item in the block is recorded as read in run_id."
        ),
        arguments=ExperienceContextArguments,
        result=ExperienceContextResult,
        operation=_context,
        read_only=False,
    ),
    ToolSpec(
        name="run_outcome",
        title="Report a run's outcome",
        description=(
            "After the ticket is settled, say what happened in run_id: resolved_by_lead, "
            "lead_was_wrong or unresolved, with a note. It is shown on every item the run read "
            "and counts toward their confidence once a reviewer reports the run (a "
            "lead_was_wrong asks reviewers to look again). Only a run under which you read "
            "memory."
        ),
        arguments=RunOutcomeArguments,
        result=RunOutcomeResult,
        operation=_outcome,
        read_only=False,
    ),
)


def _result(payload: dict[str, Any]) -> CallToolResult:
    """A successful call: the response as structured content (the tool's outputSchema) and as
    JSON text for clients that read only text."""
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))],
        structured_content=payload,
    )


def _refusal(detail: dict[str, Any]) -> CallToolResult:
    """A refused call: ``isError`` with the detail as JSON text only. The outputSchema describes
    a successful answer, and the specification asks structured content to conform to it; clients
    that check it on every result (the TypeScript SDK 1.x, the MCP Inspector) would otherwise
    throw a schema error and lose the message (docs/agents.md, MCP errors)."""
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(detail, ensure_ascii=False))],
        is_error=True,
    )


def _error(
    kind: str, message: str, *, field: str | None = None, retry_after: int | None = None
) -> CallToolResult:
    detail: dict[str, Any] = {"error": kind, "message": message}
    if field is not None:
        detail["loc"] = field_path(field)
    if retry_after is not None:
        detail["retry_after"] = retry_after
    return _refusal(detail)


# Where a call's token comes from: the server's own (stdio) or the call's HTTP request.
TokenOf = Callable[[Context[Any]], str | None]


@dataclass
class ToolRunner:
    """Runs one operation as the user of the call's token, on Django's side of the async
    boundary."""

    manage_connections: bool = True

    def __call__(
        self, spec: ToolSpec, arguments: dict[str, Any], token: str | None
    ) -> CallToolResult:
        if self.manage_connections:
            # A long-lived server outlives database connections, as a web worker does per request.
            close_old_connections()
        try:
            # An OAuth access token is good here only if it was issued for the MCP endpoint.
            user = token_user(token, resource=oauth.mcp_resource()) if token else None
            if user is None:
                return _error("unauthorized", UNAUTHORIZED)
            wait = account_rate_wait(user)
            if wait is not None:
                return _error("rate_limited", RATE_LIMITED.format(seconds=wait), retry_after=wait)
            try:
                checked = spec.arguments.model_validate(arguments)
            except ValidationError as refused:
                return _invalid_arguments(refused)
            return _result(_as_the_api_answers(spec, spec.operation(user, _plain(checked))))
        except UnknownTenant as unknown:
            # As for a tenant the caller may not use (see agentapi/api.py).
            return _error("forbidden", forbidden_tenant_message(unknown.tenant))
        except UnknownId as unknown:
            return _error("not_found", unknown.message, field=unknown.field)
        except AlreadyTaken as taken:
            return _error("conflict", taken.message, field=taken.field)
        except ValidationFailure as failure:
            return _error("invalid", failure.message, field=failure.field)
        except PermissionRefused as refusal:
            return _error("forbidden", refusal.message)
        except NotFound as missing:
            return _error("not_found", missing.message)
        except TooBusy as busy:
            return _error("rate_limited", busy.message, retry_after=busy.retry_after)
        finally:
            if self.manage_connections:
                close_old_connections()


def _as_the_api_answers(spec: ToolSpec, payload: dict[str, Any] | BaseModel) -> dict[str, Any]:
    """The operation's answer as the HTTP API writes it: read through the response model (every
    field of the outputSchema present, optional ones as null; nothing the model does not name)
    and encoded by the API's JSON encoder."""
    checked = spec.result.model_validate(payload).model_dump(exclude_unset=spec.exclude_unset)
    answered: dict[str, Any] = json.loads(json.dumps(checked, cls=NinjaJSONEncoder))
    return answered


def _invalid_arguments(refused: ValidationError) -> CallToolResult:
    """Arguments that fail the input schema, in the contract's shape: the first error's message
    and location (``loc``, as the HTTP API's without its ``body`` prefix), every error in
    ``errors``."""
    errors = [
        {"loc": list(error["loc"]), "msg": error["msg"], "type": error["type"]}
        for error in refused.errors(include_url=False, include_context=False, include_input=False)
    ]
    first = errors[0]
    detail = {"error": "invalid", "message": first["msg"], "loc": first["loc"], "errors": errors}
    return _refusal(detail)


def _plain(checked: ArgModelBase) -> dict[str, Any]:
    """The checked arguments as the operations read them (request bodies validate them again)."""
    return {
        name: value.model_dump() if isinstance(value, BaseModel) else value
        for name, value in checked.model_dump_one_level().items()
    }


class UncheckedArguments(FuncMetadata):
    """Hands the tool the caller's arguments as sent (JSON text pre-parsed as the SDK does), so
    the tool validates them and answers a refusal in the contract's shape; the SDK's own
    validation would answer plain text "Error executing tool …" with a pydantic URL.

    Numbers sent as text for an ``integer | null`` argument are read as numbers: a client that
    cannot tell which branch of the union a form field is (the MCP Inspector) sends ``"3"``."""

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        arguments = self.pre_parse_json(arguments_to_validate)
        for name, value in arguments.items():
            if name in _nullable_integers(self.arg_model) and isinstance(value, str):
                arguments[name] = _integer_text(value)
        return {"arguments": arguments}


@functools.cache
def _nullable_integers(model: type[BaseModel]) -> frozenset[str]:
    properties = model.model_json_schema(by_alias=True).get("properties", {})
    return frozenset(
        name
        for name, schema in properties.items()
        if {branch.get("type") for branch in schema.get("anyOf", ())} == {"integer", "null"}
    )


def _integer_text(value: str) -> int | str:
    """``"12"`` → 12; any other text unchanged, for validation to refuse."""
    text = value.strip()
    return int(text) if re.fullmatch(r"-?[0-9]{1,16}", text) else value


def _metadata(spec: ToolSpec) -> UncheckedArguments:
    """The output model makes the SDK publish its schema as outputSchema and check every
    successful call's structured content against it; published lean, as the input schema."""
    metadata = UncheckedArguments(arg_model=spec.arguments, output_model=spec.result)
    if metadata.output_schema is not None:
        metadata.output_schema = lean(metadata.output_schema)
    return metadata


def _tool(spec: ToolSpec, runner: ToolRunner, token_of: TokenOf, *, thread_sensitive: bool) -> Tool:
    call = sync_to_async(runner, thread_sensitive=thread_sensitive)

    async def handler(arguments: dict[str, Any], ctx: Context[Any]) -> CallToolResult:
        return await call(spec, arguments, token_of(ctx))

    return Tool(
        fn=handler,
        name=spec.name,
        title=spec.title,
        description=spec.description,
        # Exactly what the request model accepts, written for LLM tool adapters (tool_schemas).
        parameters=lean(spec.arguments.model_json_schema(by_alias=True)),
        fn_metadata=_metadata(spec),
        is_async=True,
        context_kwarg="ctx",
        annotations=ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=False,
            idempotent_hint=spec.read_only,
            open_world_hint=False,
        ),
    )


TOOL_NAMES = frozenset(spec.name for spec in TOOLS)


async def unknown_tool_refused(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """A call of a tool the server does not have is a protocol error, ``-32602`` "Unknown
    tool", as the specification's tools page lists it (the SDK answers it as a tool result)."""
    if ctx.method == "tools/call" and isinstance(ctx.params, Mapping):
        name = ctx.params.get("name")
        if isinstance(name, str) and name not in TOOL_NAMES:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name}")
    return await call_next(ctx)


# The SDK serves (empty) prompt and resource lists and names them in the capabilities; this
# server has tools only, and says so.
UNSERVED = ("prompts", "resources")
ADVERTISING = frozenset({"initialize", "server/discover"})


async def tools_only(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Advertise only what is served: ``initialize`` and ``server/discover`` name the tools
    capability alone, and the prompt and resource methods are "Method not found"."""
    if ctx.method.split("/")[0] in UNSERVED:
        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=ctx.method)
    result = await call_next(ctx)
    if ctx.method in ADVERTISING and isinstance(result, dict):
        capabilities = result.get("capabilities")
        if isinstance(capabilities, dict):
            served = {name: c for name, c in capabilities.items() if name not in UNSERVED}
            result = {**result, "capabilities": served}
    return result


def _server(token_of: TokenOf, *, manage_connections: bool, thread_sensitive: bool) -> MCPServer:
    runner = ToolRunner(manage_connections=manage_connections)
    server: MCPServer = MCPServer(
        name=SERVER_NAME,
        title="Experience review console",
        version=settings.PROJECT_VERSION,
        instructions=INSTRUCTIONS,
        tools=[_tool(spec, runner, token_of, thread_sensitive=thread_sensitive) for spec in TOOLS],
        # The tools never change while a server runs, and a stateless server behind a load
        # balancer holds no stream to notify on: no subscriptions/listen, so neither
        # server/discover nor initialize advertises listChanged or resources.subscribe.
        subscriptions=False,
    )
    server.middleware.extend([tools_only, unknown_tool_refused])
    return server


def build_server(token: str, *, manage_connections: bool = True) -> MCPServer:
    """The MCP server acting as the user of ``token`` (stdio: one agent per process)."""
    return _server(lambda ctx: token, manage_connections=manage_connections, thread_sensitive=True)


def request_token(ctx: Context[Any]) -> str | None:
    """The bearer token the HTTP request carrying this call was authenticated with (by the
    transport's ``BearerAuthBackend``), or None."""
    request = ctx.request_context.request
    scope = getattr(request, "scope", None) or {}
    user = scope.get("user")
    return user.access_token.token if isinstance(user, AuthenticatedUser) else None


def build_http_server() -> MCPServer:
    """The MCP server for Streamable HTTP: each call acts as the user of its request's bearer
    token. Calls run in the thread pool (each with its own database connection), so one slow
    call does not hold the others."""
    return _server(request_token, manage_connections=True, thread_sensitive=False)
